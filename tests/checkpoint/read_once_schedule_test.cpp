// The coordinator's read-once schedule: every box that several ranks read alike is read by one of
// them, the reads spread evenly, and every other needing rank receives it, in one global order.

#include "dcpp_test.h"

#include "planner/plan_codec.h"
#include "read_once_schedule.h"

#include <dcpp/core/checkpoint_error.h>

#include <algorithm>
#include <map>

namespace {

using dcpp::detail::ReadOnceSchedule;
using dcpp::detail::ReadOnceTransfer;

dcpp::StorageInfo stored(int64_t length) {
  dcpp::StorageInfo info;
  info.relative_path = "__0_0.distcp";
  info.length = length;
  return info;
}

// A checkpoint of float tensors "t0".."t<n-1>", each of `rows` x 4 in one chunk, and a value
// "step".
dcpp::Metadata metadata_of(int tensors, int64_t rows) {
  dcpp::Metadata metadata;
  for (int t = 0; t < tensors; ++t) {
    const std::string key = "t" + std::to_string(t);
    dcpp::TensorStorageMetadata tensor;
    tensor.size = {rows, 4};
    tensor.chunks.push_back({{0, 0}, {rows, 4}});
    metadata.state_dict_metadata.emplace_back(key, tensor);
    metadata.storage_data.emplace_back(dcpp::MetadataIndex{key, std::vector<int64_t>{0, 0}, 0},
                                       stored(rows * 16 + 1000));
  }
  metadata.state_dict_metadata.emplace_back("step", dcpp::BytesStorageMetadata{});
  metadata.storage_data.emplace_back(dcpp::MetadataIndex{"step", std::nullopt, std::nullopt},
                                     stored(700));
  return metadata;
}

// The read of rows [begin, begin + rows) of tensor `t`'s one chunk, into offset `dest_row`.
dcpp::ReadItem rows_of(int t, int64_t begin, int64_t rows, int64_t dest_row = 0) {
  dcpp::ReadItem item;
  item.type = dcpp::LoadItemType::kTensor;
  item.storage_index = {"t" + std::to_string(t), std::vector<int64_t>{0, 0}, 0};
  item.dest_index = {"t" + std::to_string(t), std::vector<int64_t>{dest_row, 0}, std::nullopt};
  item.storage_offsets = {begin, 0};
  item.dest_offsets = {0, 0};
  item.lengths = {rows, 4};
  return item;
}

dcpp::ReadItem step_value() {
  dcpp::ReadItem item;
  item.storage_index = {"step", std::nullopt, std::nullopt};
  item.dest_index = item.storage_index;
  return item;
}

std::multiset<std::string> keys_of(const std::vector<dcpp::ReadItem>& items) {
  std::multiset<std::string> keys;
  for (const dcpp::ReadItem& item : items) keys.insert(dcpp::detail::saved_box_key(item));
  return keys;
}

}  // namespace

TEST_CASE("every box several ranks read alike is read by one rank and received by the others") {
  const dcpp::Metadata metadata = metadata_of(4, 8);
  std::vector<dcpp::LoadPlan> plans(3);
  for (dcpp::LoadPlan& plan : plans) {  // a data-parallel resume: every rank reads everything
    for (int t = 0; t < 3; ++t) plan.items.push_back(rows_of(t, 0, 8));
    plan.items.push_back(step_value());
  }
  plans[0].items.push_back(rows_of(3, 0, 5));  // overlapping, not alike: each rank reads its own
  plans[2].items.push_back(rows_of(3, 3, 5, 3));
  const std::vector<dcpp::LoadPlan> before = plans;

  const std::vector<ReadOnceSchedule> schedules = dcpp::detail::schedule_read_once(plans, metadata);
  REQUIRE(schedules.size() == 3);

  // Each rank reads what its plan keeps and receives the rest: together, what it asked for.
  std::map<std::string, int> readers;  // shared box -> how many ranks read it
  for (int rank = 0; rank < 3; ++rank) {
    std::multiset<std::string> got = keys_of(plans[static_cast<std::size_t>(rank)].items);
    for (const ReadOnceTransfer& transfer : schedules[static_cast<std::size_t>(rank)].transfers) {
      CHECK((transfer.from == rank || transfer.to == rank));
      CHECK(transfer.from != transfer.to);
      if (transfer.to == rank) {
        const std::multiset<std::string> received = keys_of(transfer.items);
        got.insert(received.begin(), received.end());
        // The sender reads each box it sends.
        const std::multiset<std::string> sender_reads =
            keys_of(plans[static_cast<std::size_t>(transfer.from)].items);
        for (const std::string& key : received) CHECK(sender_reads.count(key) == 1);
      }
    }
    CHECK(got == keys_of(before[static_cast<std::size_t>(rank)].items));
    for (const dcpp::ReadItem& item : plans[static_cast<std::size_t>(rank)].items) {
      ++readers[dcpp::detail::saved_box_key(item)];
    }
  }
  for (int t = 0; t < 3; ++t) CHECK(readers[dcpp::detail::saved_box_key(rows_of(t, 0, 8))] == 1);
  CHECK(readers[dcpp::detail::saved_box_key(step_value())] == 1);
  CHECK(readers[dcpp::detail::saved_box_key(rows_of(3, 0, 5))] == 1);
  CHECK(readers[dcpp::detail::saved_box_key(rows_of(3, 3, 5))] == 1);

  // A received item keeps its receiver's destination.
  for (const ReadOnceTransfer& transfer : schedules[2].transfers) {
    for (const dcpp::ReadItem& item : transfer.items) {
      CHECK(item.dest_index.fqn == item.storage_index.fqn);
    }
  }

  // One global order, by sender then receiver, that each rank's schedule follows.
  for (const ReadOnceSchedule& schedule : schedules) {
    CHECK(std::is_sorted(schedule.transfers.begin(), schedule.transfers.end(),
                         [](const ReadOnceTransfer& a, const ReadOnceTransfer& b) {
                           return std::pair(a.from, a.to) < std::pair(b.from, b.to);
                         }));
  }
}

TEST_CASE("the reads of shared boxes spread evenly over the ranks that need them") {
  const dcpp::Metadata metadata = metadata_of(7, 100);
  std::vector<dcpp::LoadPlan> plans(3);
  for (dcpp::LoadPlan& plan : plans) {
    for (int t = 0; t < 6; ++t) plan.items.push_back(rows_of(t, 0, 100));
  }
  plans[1].items.push_back(rows_of(6, 0, 100));  // rank 1 reads this alone, whatever happens
  dcpp::detail::schedule_read_once(plans, metadata);
  // 7 equal boxes, one of them rank 1's own: 3, 2 and 2 boxes, rank 1 reading its own and 1 more.
  CHECK(plans[0].items.size() == 3);
  CHECK(plans[1].items.size() == 2);
  CHECK(plans[2].items.size() == 2);
}

TEST_CASE("a rank alone, or ranks reading different boxes, get no transfers") {
  const dcpp::Metadata metadata = metadata_of(2, 8);
  std::vector<dcpp::LoadPlan> plans(2);
  plans[0].items = {rows_of(0, 0, 4), rows_of(1, 0, 8), rows_of(1, 0, 8, 8)};  // tied: its own
  plans[1].items = {rows_of(0, 4, 4, 4)};
  const std::vector<dcpp::LoadPlan> before = plans;
  for (const ReadOnceSchedule& schedule : dcpp::detail::schedule_read_once(plans, metadata)) {
    CHECK(schedule.transfers.empty());
  }
  CHECK(keys_of(plans[0].items) == keys_of(before[0].items));
  CHECK(keys_of(plans[1].items) == keys_of(before[1].items));
}

TEST_CASE("a read-once schedule travels intact, and a schedule not for this rank is refused") {
  ReadOnceSchedule schedule;
  schedule.transfers.push_back({0, 2, {rows_of(0, 0, 8), step_value()}});
  schedule.transfers.push_back({2, 1, {rows_of(1, 2, 3)}});
  const std::string bytes = dcpp::detail::encode_read_once_schedule(schedule);
  const ReadOnceSchedule decoded = dcpp::detail::decode_read_once_schedule(bytes, 2, 3);
  REQUIRE(decoded.transfers.size() == 2);
  CHECK(decoded.transfers[0].from == 0);
  CHECK(decoded.transfers[0].to == 2);
  CHECK(keys_of(decoded.transfers[0].items) == keys_of(schedule.transfers[0].items));
  CHECK(decoded.transfers[1].from == 2);
  CHECK(decoded.transfers[1].to == 1);
  CHECK(keys_of(decoded.transfers[1].items) == keys_of(schedule.transfers[1].items));

  const auto refused = [](const std::string& message, int rank, int size) {
    try {
      dcpp::detail::decode_read_once_schedule(message, rank, size);
    } catch (const dcpp::CheckpointError& error) {
      return error.kind() == dcpp::ErrorKind::kCorrupt;
    }
    return false;
  };
  CHECK(refused(bytes, 1, 3));  // transfer 0 -> 2 is none of rank 1's business
  CHECK(refused(bytes, 2, 2));  // rank 2 of 2 ranks does not exist
  ReadOnceSchedule to_itself;
  to_itself.transfers.push_back({1, 1, {step_value()}});
  CHECK(refused(dcpp::detail::encode_read_once_schedule(to_itself), 1, 3));
  CHECK(refused(bytes.substr(0, bytes.size() - 3), 2, 3));
  CHECK(
      refused(dcpp::detail::encode_strings({dcpp::detail::encode_strings({"-1", "2", ""})}), 2, 3));
}

TEST_CASE("a hostile checkpoint's huge sizes schedule without overflow") {
  // Under UBSan (make test-asan) an overflowing size would fail the test.
  const int64_t huge = int64_t{1} << 40;
  dcpp::Metadata metadata = metadata_of(1, huge);
  std::vector<dcpp::LoadPlan> plans(2);
  for (dcpp::LoadPlan& plan : plans) {
    plan.items = {rows_of(0, 0, huge), rows_of(0, 0, huge, 0)};
    plan.items[1].lengths = {huge, huge};
  }
  const std::vector<ReadOnceSchedule> schedules = dcpp::detail::schedule_read_once(plans, metadata);
  // Each box read by one rank, one each (the saturated load still balances), and sent across.
  CHECK(plans[0].items.size() == 1);
  CHECK(plans[1].items.size() == 1);
  CHECK(schedules[0].transfers.size() == 2);  // 0 -> 1 and 1 -> 0
  CHECK(schedules[1].transfers.size() == 2);
}
