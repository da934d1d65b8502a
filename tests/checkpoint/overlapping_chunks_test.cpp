// A `.metadata` whose saved chunks of a tensor overlap (issue 58): the load planner counts the
// elements the chunks give each local chunk, so two chunks over the same rows could hide rows that
// no chunk holds, which a load then left as they were (or, into memory it allocated itself, such
// as load_from_keys' and Megatron's load_plain_tensors', uninitialized). Every load path refuses
// it, naming the key, both chunks and the files.

#include "dcpp_test.h"
#include "rank_threads.h"

#include "format/metadata_pickle.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/checkpoint/megatron.h>
#include <dcpp/core/checkpoint_error.h>
#include <dcpp/state_dict/sharded_tensor.h>

#include <algorithm>
#include <filesystem>
#include <vector>

namespace fs = std::filesystem;
using dcpp::StateDict;

namespace {

const at::Tensor& rows16x8() {
  static const at::Tensor rows = at::arange(128, at::kFloat).reshape({16, 8});
  return rows;
}

// Moves chunk `position` of `key` in dir's `.metadata` to `offsets`, leaving its sizes as they
// were, and its item with it (so that the reader still finds it) unless another item is at those
// offsets: then the chunk's is dropped (an index twice is refused as it is read).
void move_chunk(const fs::path& dir, const std::string& key, std::size_t position,
                const std::vector<int64_t>& offsets) {
  dcpp::Metadata metadata = dcpp::read_metadata(dir);
  for (auto& [name, stored] : metadata.state_dict_metadata) {
    if (name != key) continue;
    auto& chunks = std::get<dcpp::TensorStorageMetadata>(stored).chunks;
    REQUIRE(position < chunks.size());
    const std::vector<int64_t> was = chunks[position].offsets;
    chunks[position].offsets = offsets;
    auto& items = metadata.storage_data;
    const auto at = [&](const std::vector<int64_t>& where) {
      return std::find_if(items.begin(), items.end(), [&](const auto& item) {
        return item.first.fqn == key && item.first.offset == where;
      });
    };
    const auto moved = at(was);
    REQUIRE(moved != items.end());
    if (at(offsets) != items.end()) {
      items.erase(moved);
    } else {
      moved->first.offset = offsets;
    }
  }
  dcpp::test::write_file(dir / ".metadata", dcpp::detail::encode_metadata(metadata));
}

// "w", a [16, 8] tensor saved as two chunks, rows [0, 8) and [8, 16), and "b", a plain tensor;
// then chunk 1 of "w" moved to `offsets`. With [4, 0], rows 4 to 7 are in both chunks and rows 12
// to 15 in none, and the chunks still hold 128 elements, as many as the tensor.
fs::path save_overlapping(const fs::path& dir, const std::vector<int64_t>& offsets = {4, 0}) {
  StateDict state;
  state.insert("w", dcpp::ShardedTensor({16, 8}, {{rows16x8().narrow(0, 0, 8), {0, 0}},
                                                  {rows16x8().narrow(0, 8, 8), {8, 0}}}));
  state.insert("b", at::arange(4, at::kFloat));
  dcpp::SaveOptions options;
  options.file_system.sync_files = false;
  options.file_system.checksum_file = false;  // .metadata is rewritten below
  dcpp::save(state, dir, options);
  move_chunk(dir, "w", 1, offsets);
  return dir;
}

// The refusal every load path gives: kCorrupt, naming the key, both chunks, the files and what
// to do.
void require_overlap_refusal(const dcpp::CheckpointError& error,
                             const std::string& second = "offsets [4, 0] of sizes [8, 8]") {
  const std::string message = error.what_without_backtrace();
  INFO(message);
  CHECK(error.kind() == dcpp::ErrorKind::kCorrupt);
  CHECK_THAT(message, Catch::Contains("key 'w'"));
  CHECK_THAT(message, Catch::Contains("offsets [0, 0] of sizes [8, 8] (chunk 0, in __0_0.distcp)"));
  CHECK_THAT(message, Catch::Contains(second));
  CHECK_THAT(message, Catch::Contains("overlaps"));
  CHECK_THAT(message, Catch::Contains(".metadata"));
  CHECK_THAT(message, Catch::Contains("dcpp verify"));
}

}  // namespace

TEST_CASE("a load refuses a .metadata whose chunks of a tensor overlap, changing nothing") {
  dcpp::test::TempDir dir;
  save_overlapping(dir.path());
  // A plain tensor: before, rows 12 to 15 kept the -1s.
  StateDict plain;
  plain.insert("w", at::full({16, 8}, -1.0f));
  plain.insert("b", at::zeros({4}));
  require_overlap_refusal(dcpp::test::error_of([&] { dcpp::load(plain, dir.path()); }));
  CHECK(plain.at("w").tensor().eq(-1).all().item<bool>());
  // Rows 12 to 15 alone, which only the gap would have given: refused as well.
  StateDict last_rows;
  last_rows.insert("w", dcpp::ShardedTensor({16, 8}, {{at::full({4, 8}, -1.0f), {12, 0}}}));
  require_overlap_refusal(dcpp::test::error_of([&] { dcpp::load(last_rows, dir.path()); }));
  // A load that does not touch the key does not check it.
  StateDict other;
  other.insert("b", at::zeros({4}));
  dcpp::load(other, dir.path(), dcpp::LoadOptions().with_allow_partial_load(true));
  CHECK(dcpp::test::bitwise_equal(other.at("b").tensor(), at::arange(4, at::kFloat)));
}

TEST_CASE("load_from_keys refuses overlapping chunks instead of returning memory nobody wrote") {
  dcpp::test::TempDir dir;
  save_overlapping(dir.path());
  require_overlap_refusal(dcpp::test::error_of([&] { dcpp::load_from_keys(dir.path(), {"w"}); }));
  require_overlap_refusal(dcpp::test::error_of([&] { dcpp::load_from_keys(dir.path()); }));
  const StateDict b = dcpp::load_from_keys(dir.path(), {"b"});
  CHECK(dcpp::test::bitwise_equal(b.at("b").tensor(), at::arange(4, at::kFloat)));
}

TEST_CASE("equal chunks listed twice, and chunks at one offset of different sizes, are refused") {
  // Equal chunks, one item: DCP's save writes a replica once, and its global plan validation
  // refuses two equal chunks, so a .metadata never lists one twice; counted twice, the chunk hid
  // rows 8-15, which a load left as they were.
  dcpp::test::TempDir equal;
  save_overlapping(equal.path(), {0, 0});
  StateDict target;
  target.insert("w", at::zeros({16, 8}));
  require_overlap_refusal(dcpp::test::error_of([&] { dcpp::load(target, equal.path()); }),
                          "offsets [0, 0] of sizes [8, 8] (chunk 1, in __0_0.distcp)");
  // One chunk of rows [0, 16), one of rows [0, 8) at the same offsets.
  dcpp::test::TempDir same_offsets;
  save_overlapping(same_offsets.path(), {8, 0});
  dcpp::Metadata metadata = dcpp::read_metadata(same_offsets.path());
  REQUIRE(metadata.state_dict_metadata.at(0).first == "w");
  std::get<dcpp::TensorStorageMetadata>(metadata.state_dict_metadata.at(0).second)
      .chunks.at(0)
      .sizes = {16, 8};
  dcpp::test::write_file(same_offsets / ".metadata", dcpp::detail::encode_metadata(metadata));
  const dcpp::CheckpointError error =
      dcpp::test::error_of([&] { dcpp::load(target, same_offsets.path()); });
  CHECK(error.kind() == dcpp::ErrorKind::kCorrupt);
  CHECK_THAT(error.what(), Catch::Contains("key 'w'") &&
                               Catch::Contains("offsets [0, 0] of sizes [16, 8]") &&
                               Catch::Contains("offsets [8, 0] of sizes [8, 8]"));
}

TEST_CASE("a read-once load on 2 ranks refuses overlapping chunks on both") {
  dcpp::test::TempDir dir;
  save_overlapping(dir.path());
  std::vector<dcpp::ErrorKind> kinds(2, dcpp::ErrorKind::kUsage);
  std::vector<std::string> messages(2);
  dcpp::test::on_ranks(2, "overlap-read-once", [&](int rank, const auto& group) {
    StateDict state;
    state.insert("w", at::zeros({16, 8}));  // a replica on each rank: read once, then sent
    try {
      dcpp::load(
          state, dir.path(),
          dcpp::LoadOptions().with_process_group(group).with_read_once(dcpp::ReadOnce::kAlways));
    } catch (const dcpp::CheckpointError& error) {
      kinds[static_cast<std::size_t>(rank)] = error.kind();
      messages[static_cast<std::size_t>(rank)] = error.what_without_backtrace();
    }
  });
  for (int rank = 0; rank < 2; ++rank) {
    INFO("rank " << rank);
    CHECK(kinds[static_cast<std::size_t>(rank)] == dcpp::ErrorKind::kCorrupt);
    CHECK_THAT(messages[static_cast<std::size_t>(rank)],
               Catch::Contains("key 'w'") && Catch::Contains("overlaps"));
  }
}

TEST_CASE("Megatron's load_plain_tensors refuses overlapping chunks") {
  // The fixture's embedding, [16, 8], saved by Megatron-Core in two halves of rows, one per file;
  // the second moved up to rows [4, 12).
  dcpp::test::TempDir dir;
  const fs::path copy = dir / "mcore_tp2";
  fs::copy(dcpp::test::megatron_fixture("mcore_tp2"), copy);
  const std::string key = "embedding.word_embeddings.weight";
  const dcpp::Metadata metadata = dcpp::read_metadata(copy);
  std::size_t second = 0;
  for (const auto& [name, stored] : metadata.state_dict_metadata) {
    if (name != key) continue;
    const auto& chunks = std::get<dcpp::TensorStorageMetadata>(stored).chunks;
    REQUIRE(chunks.size() == 2);
    second = chunks[0].offsets[0] == 0 ? 1 : 0;
    REQUIRE(chunks[second].offsets == std::vector<int64_t>{8, 0});
  }
  move_chunk(copy, key, second, {4, 0});
  const dcpp::CheckpointError error =
      dcpp::test::error_of([&] { dcpp::megatron::load_plain_tensors(copy); });
  CHECK(error.kind() == dcpp::ErrorKind::kCorrupt);
  CHECK_THAT(error.what(), Catch::Contains("key '" + key + "'") &&
                               Catch::Contains("offsets [4, 0] of sizes [8, 8]") &&
                               Catch::Contains("overlaps"));
}
