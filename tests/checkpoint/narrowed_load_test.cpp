// A load on several ranks lets each rank other than the coordinator decode only the chunks its own
// tensors overlap (issue 62: every rank of a 10,000-rank job decoded all ten million chunks). The
// values it loads are the same, bit for bit; the coordinator, a load with a planner of the
// caller's and a read-once load still read the whole Metadata.

#include "dcpp_test.h"
#include "rank_threads.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/storage/filesystem_reader.h>
#include <dcpp/storage/filesystem_writer.h>

#include <ATen/ATen.h>

#include <vector>

namespace {

/// A file system reader that records what load() asked of it.
class RecordingReader : public dcpp::FileSystemReader {
 public:
  using dcpp::FileSystemReader::FileSystemReader;
  void narrow_metadata(const dcpp::MetadataSelection& selection) override {
    narrowed = true;
    dcpp::FileSystemReader::narrow_metadata(selection);
  }
  dcpp::Metadata read_metadata() override {
    dcpp::Metadata metadata = dcpp::FileSystemReader::read_metadata();
    for (const auto& [key, value] : metadata.state_dict_metadata) {
      if (const auto* tensor = std::get_if<dcpp::TensorStorageMetadata>(&value)) {
        chunks_read += tensor->chunks.size();
      }
    }
    storage_entries_read = metadata.storage_data.size();
    return metadata;
  }
  bool narrowed = false;
  std::size_t chunks_read = 0;
  std::size_t storage_entries_read = 0;
};

/// Rows [4r, 4r + 4) of a [16, 8] tensor with distinct values.
at::Tensor rows_of(int rank) {
  return at::arange(128, at::kFloat).reshape({16, 8}).narrow(0, 4 * rank, 4).clone();
}

/// "w" and "v" split by rows over 4 ranks, and a value "step".
void save_on_four_ranks(const std::filesystem::path& dir) {
  dcpp::test::on_ranks(4, "narrowed-save", [&](int rank, const auto& group) {
    dcpp::StateDict state;
    state.insert("w", dcpp::ShardedTensor({16, 8}, {{rows_of(rank), {4 * rank, 0}}}));
    state.insert("v", dcpp::ShardedTensor({16, 8}, {{rows_of(rank) * 2, {4 * rank, 0}}}));
    state.insert("step", c10::IValue(int64_t{7}));
    dcpp::save(state, dir, dcpp::SaveOptions().with_process_group(group));
  });
}

}  // namespace

TEST_CASE("ranks other than the coordinator decode only the chunks their tensors overlap") {
  dcpp::test::TempDir dir;
  save_on_four_ranks(dir.path());

  // Loaded on 2 ranks, 8 rows each: rank 1 needs the chunks of saving ranks 2 and 3.
  std::vector<dcpp::StateDict> loaded(2);
  std::vector<int> narrowed(2, -1);  // not vector<bool>: ranks write it at once
  std::vector<std::size_t> chunks_read(2);
  std::vector<std::size_t> storage_entries_read(2);
  dcpp::test::on_ranks(2, "narrowed-load", [&](int rank, const auto& group) {
    RecordingReader reader(dir.path());
    dcpp::StateDict state;
    state.insert("w", dcpp::ShardedTensor({16, 8}, {{at::zeros({8, 8}), {8 * rank, 0}}}));
    state.insert("v", dcpp::ShardedTensor({16, 8}, {{at::zeros({8, 8}), {8 * rank, 0}}}));
    state.insert("step", c10::IValue(int64_t{0}));
    dcpp::load(state, reader, dcpp::LoadOptions().with_process_group(group));
    const auto r = static_cast<std::size_t>(rank);
    loaded[r] = state;
    narrowed[r] = reader.narrowed ? 1 : 0;
    chunks_read[r] = reader.chunks_read;
    storage_entries_read[r] = reader.storage_entries_read;
  });
  CHECK(narrowed == std::vector<int>{0, 1});
  CHECK(chunks_read == std::vector<std::size_t>{8, 4});  // rank 1: 2 of "w", 2 of "v"
  CHECK(storage_entries_read == std::vector<std::size_t>{9, 5});  // and the value's
  const at::Tensor whole = at::arange(128, at::kFloat).reshape({16, 8});
  for (int rank = 0; rank < 2; ++rank) {
    INFO("rank " << rank);
    const auto& state = loaded[static_cast<std::size_t>(rank)];
    const at::Tensor w = state.at("w").sharded_tensor().local_shards()[0].tensor;
    const at::Tensor v = state.at("v").sharded_tensor().local_shards()[0].tensor;
    CHECK(at::equal(w, whole.narrow(0, 8 * rank, 8)));
    CHECK(at::equal(v, whole.narrow(0, 8 * rank, 8) * 2));
    CHECK(state.at("step").value().toInt() == 7);
  }
}

TEST_CASE("a read-once load and a load with the caller's planner read the whole Metadata") {
  dcpp::test::TempDir dir;
  save_on_four_ranks(dir.path());
  for (const bool read_once : {true, false}) {
    DYNAMIC_SECTION((read_once ? "read once" : "the caller's planner")) {
      std::vector<int> narrowed(2, -1);
      std::vector<std::size_t> chunks_read(2);
      dcpp::test::on_ranks(2, read_once ? "whole-read-once" : "whole-planner",
                           [&](int rank, const auto& group) {
        RecordingReader reader(dir.path());
        dcpp::StateDict state;
        state.insert("w", dcpp::ShardedTensor({16, 8}, {{at::zeros({8, 8}), {8 * rank, 0}}}));
        dcpp::LoadOptions options = dcpp::LoadOptions().with_process_group(group);
        if (read_once) {
          options = options.with_read_once(dcpp::ReadOnce::kAlways);
        } else {
          options.planner = std::make_shared<dcpp::DefaultLoadPlanner>(true);
        }
        options.allow_partial_load = true;
        dcpp::load(state, reader, options);
        narrowed[static_cast<std::size_t>(rank)] = reader.narrowed ? 1 : 0;
        chunks_read[static_cast<std::size_t>(rank)] = reader.chunks_read;
      });
      CHECK(narrowed == std::vector<int>{0, 0});
      CHECK(chunks_read == std::vector<std::size_t>{8, 8});
    }
  }
}

TEST_CASE("a narrowed rank still checks the items it reads against the checksum file") {
  dcpp::test::TempDir dir;
  save_on_four_ranks(dir.path());
  // Damage the middle byte of "w"'s rows [12, 16), which only rank 1 of 2 reads.
  const dcpp::Metadata metadata = dcpp::read_metadata(dir.path());
  const dcpp::StorageInfo* info = nullptr;
  for (const auto& [index, where] : metadata.storage_data) {
    if (index.fqn == "w" && index.offset == std::vector<int64_t>{12, 0}) info = &where;
  }
  REQUIRE(info != nullptr);
  const std::filesystem::path file = dir.path() / info->relative_path;
  std::string bytes = dcpp::test::read_file(file);
  bytes[static_cast<std::size_t>(info->offset + info->length / 2)] ^= 0x20;
  dcpp::test::write_file(file, bytes);

  std::vector<std::string> messages(2);
  std::vector<int> narrowed(2, -1);  // not vector<bool>: ranks write it at once
  dcpp::test::on_ranks(2, "narrowed-corrupt", [&](int rank, const auto& group) {
    RecordingReader reader(dir.path());
    dcpp::StateDict state;
    state.insert("w", dcpp::ShardedTensor({16, 8}, {{at::zeros({8, 8}), {8 * rank, 0}}}));
    try {
      dcpp::load(state, reader,
                 dcpp::LoadOptions().with_process_group(group).with_allow_partial_load(true));
    } catch (const dcpp::CheckpointError& error) {
      messages[static_cast<std::size_t>(rank)] = error.what_without_backtrace();
    }
    narrowed[static_cast<std::size_t>(rank)] = reader.narrowed ? 1 : 0;
  });
  CHECK(narrowed == std::vector<int>{0, 1});
  INFO(messages[1]);
  CHECK_THAT(messages[1], Catch::Contains(info->relative_path) &&
                              Catch::Contains("the checksum file records"));
  CHECK_FALSE(messages[0].empty());  // the failure reaches every rank
}
