// The coordinator's dedup (DefaultSavePlanner::create_global_plan, as DCP's dedup_save_plans): an
// item that several ranks plan is written by one, the holder with the fewest bytes planned so far,
// the items visited in the order they were first planned; items held once stay where they are.

#include "dcpp_test.h"

#include <dcpp/planner/save_planner.h>

#include <algorithm>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace {

// A whole tensor `key` of `numel` floats (a replicated value: every holder plans the same item).
dcpp::WriteItem whole(const std::string& key, int64_t numel) {
  dcpp::WriteItem item;
  item.index = dcpp::MetadataIndex{key, std::vector<int64_t>{0}, std::nullopt};
  item.type = dcpp::WriteItemType::kTensor;
  dcpp::TensorWriteData data;
  data.chunk = dcpp::ChunkStorageMetadata{{0}, {numel}};
  data.size = {numel};
  item.tensor_data = data;
  return item;
}

std::vector<std::vector<std::string>> keys_by_rank(const std::vector<dcpp::SavePlan>& plans) {
  std::vector<std::vector<std::string>> keys;
  for (const dcpp::SavePlan& plan : plans) {
    keys.emplace_back();
    for (const dcpp::WriteItem& item : plan.items) keys.back().push_back(item.index.fqn);
  }
  return keys;
}

}  // namespace

TEST_CASE("a replicated item goes to the holder with the fewest bytes so far, in plan order") {
  // rank 0: a (100 floats, also on 1 and 2), b (10, also on 1), own0 (1000)
  // rank 1: a, b, own1 (5)
  // rank 2: own2 (3), a
  std::vector<dcpp::SavePlan> plans(3);
  plans[0].items = {whole("a", 100), whole("b", 10), whole("own0", 1000)};
  plans[1].items = {whole("a", 100), whole("b", 10), whole("own1", 5)};
  plans[2].items = {whole("own2", 3), whole("a", 100)};
  // In plan order: a (first on rank 0; all at 0 bytes: rank 0 takes it, 400), b (ranks 0 and 1:
  // rank 1 has 0, takes it: 40), own0 (rank 0: 4400), own1 (rank 1: 60), own2 (rank 2: 12).
  dcpp::DefaultSavePlanner planner;
  const auto [global, metadata] = planner.create_global_plan(plans);
  CHECK(keys_by_rank(global) ==
        std::vector<std::vector<std::string>>{{"a", "own0"}, {"b", "own1"}, {"own2"}});
  CHECK(metadata.state_dict_metadata.size() == 5);
}

TEST_CASE("items every rank holds (data parallel) are spread over the ranks") {
  constexpr int kRanks = 4;
  constexpr int kKeys = 8;
  std::vector<dcpp::SavePlan> plans(kRanks);
  for (dcpp::SavePlan& plan : plans) {
    for (int k = 0; k < kKeys; ++k) plan.items.push_back(whole("w" + std::to_string(k), 16));
  }
  dcpp::DefaultSavePlanner planner;
  const auto [global, metadata] = planner.create_global_plan(plans);
  // Equal sizes: each key to the rank with the fewest bytes, the first such on a tie.
  CHECK(keys_by_rank(global) == std::vector<std::vector<std::string>>{
                                    {"w0", "w4"}, {"w1", "w5"}, {"w2", "w6"}, {"w3", "w7"}});
}

TEST_CASE("shards held once (fully sharded) all stay, in their plans' order") {
  std::vector<dcpp::SavePlan> plans(2);
  for (int rank = 0; rank < 2; ++rank) {
    for (int k = 0; k < 3; ++k) {
      dcpp::WriteItem item = whole("w" + std::to_string(k), 4);
      item.type = dcpp::WriteItemType::kShard;
      item.index.offset = std::vector<int64_t>{rank * 4};
      item.tensor_data->chunk.offsets = {rank * 4};
      item.tensor_data->size = {8};
      plans[rank].items.push_back(item);
    }
  }
  dcpp::DefaultSavePlanner planner;
  const auto [global, metadata] = planner.create_global_plan(plans);
  CHECK(keys_by_rank(global) ==
        std::vector<std::vector<std::string>>{{"w0", "w1", "w2"}, {"w0", "w1", "w2"}});
  CHECK(global[1].items[2].index.offset == std::vector<int64_t>{4});
}

TEST_CASE(
    "the global Metadata lists keys, chunks and planner_data in first-planned order, "
    "whatever order each rank plans them in") {
  // Rows of "a" and "b" split over 3 ranks, of "c" over ranks 1 and 2, listed in different
  // orders; a value "v" on ranks 0 and 2; planner_data the same on ranks 0 and 1, other on rank 2.
  // rows(): rows [2 * part, 2 * part + 2) of a tensor of `parts` x 2 elements.
  const auto rows = [](const std::string& key, int64_t part, int64_t parts = 3) {
    dcpp::WriteItem item = whole(key, 2 * parts);
    item.type = dcpp::WriteItemType::kShard;
    item.index.offset = std::vector<int64_t>{2 * part};
    item.tensor_data->chunk = dcpp::ChunkStorageMetadata{{2 * part}, {2}};
    return item;
  };
  const auto value = [](const std::string& key) {
    dcpp::WriteItem item;
    item.index = dcpp::MetadataIndex{key, std::nullopt, std::nullopt};
    item.type = dcpp::WriteItemType::kBytes;
    return item;
  };
  std::vector<dcpp::SavePlan> plans(3);
  plans[0].items = {rows("a", 0), rows("b", 0), value("v")};
  plans[1].items = {rows("b", 1), rows("a", 1), rows("c", 0, 2)};
  plans[2].items = {rows("a", 2), rows("c", 1, 2), rows("b", 2), value("v")};
  const dcpp::ObjectPath path_a{std::string("a")}, path_v{std::string("v")};
  plans[0].planner_data = {{"a", path_a}, {"v", path_v}};
  plans[1].planner_data = plans[0].planner_data;
  plans[2].planner_data = {{"c", dcpp::ObjectPath{std::string("c")}}, {"a", path_a}};

  dcpp::DefaultSavePlanner planner;
  auto planned = planner.create_global_plan(plans);
  const std::vector<dcpp::SavePlan>& global = planned.first;
  const dcpp::Metadata& metadata = planned.second;
  std::vector<std::string> keys;
  for (const auto& [key, stored] : metadata.state_dict_metadata) keys.push_back(key);
  // "v" written by rank 2 (the dedup's choice: fewest bytes), so first planned there.
  CHECK(keys == std::vector<std::string>{"a", "b", "c", "v"});
  // Each key's chunks in rank order, and each item's index its chunk's position.
  const auto chunk_rows = [&](std::size_t k) {
    std::vector<int64_t> offsets;
    for (const auto& chunk :
         std::get<dcpp::TensorStorageMetadata>(metadata.state_dict_metadata[k].second).chunks) {
      offsets.push_back(chunk.offsets[0]);
    }
    return offsets;
  };
  CHECK(chunk_rows(0) == std::vector<int64_t>{0, 2, 4});
  CHECK(chunk_rows(1) == std::vector<int64_t>{0, 2, 4});
  CHECK(chunk_rows(2) == std::vector<int64_t>{0, 2});
  CHECK(std::holds_alternative<dcpp::BytesStorageMetadata>(metadata.state_dict_metadata[3].second));
  for (std::size_t rank = 0; rank < global.size(); ++rank) {
    for (const dcpp::WriteItem& item : global[rank].items) {
      if (!item.is_tensor()) continue;
      INFO("rank " << rank << " key " << item.index.fqn);
      const std::size_t k = static_cast<std::size_t>(
          std::find(keys.begin(), keys.end(), item.index.fqn) - keys.begin());
      REQUIRE(item.index.index.has_value());
      CHECK(std::get<dcpp::TensorStorageMetadata>(metadata.state_dict_metadata[k].second)
                .chunks.at(static_cast<std::size_t>(*item.index.index))
                .offsets == *item.index.offset);
    }
  }
  std::vector<std::string> planner_keys;
  for (const auto& [key, path] : metadata.planner_data) planner_keys.push_back(key);
  CHECK(planner_keys == std::vector<std::string>{"a", "v", "c"});
}
