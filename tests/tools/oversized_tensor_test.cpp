// A `.metadata` whose tensor claims more bytes than its item holds (a [2^40, 8] float tensor over a
// 512-byte item): corrupt, said before anything is allocated, by the readers and the commands.

#include "dcpp_test.h"
#include "tools_test_util.h"

#include "format/metadata_pickle.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/core/checkpoint_error.h>

using dcpp::test::run_cli;

namespace {

namespace fs = std::filesystem;

// A checkpoint whose tensor "w" ([16, 8] saved) its `.metadata` claims is [2^40, 8].
fs::path oversized_checkpoint(const fs::path& dir) {
  dcpp::StateDict state;
  state.insert("w", at::ones({16, 8}));
  state.insert("step", 3);
  dcpp::save(state, dir);
  fs::remove(dir / ".checksums");  // as a checkpoint PyTorch wrote: .metadata alone says
  dcpp::Metadata metadata = dcpp::detail::decode_metadata(dcpp::test::read_file(dir / ".metadata"),
                                                          (dir / ".metadata").string());
  for (auto& [key, stored] : metadata.state_dict_metadata) {
    if (auto* tensor = std::get_if<dcpp::TensorStorageMetadata>(&stored)) {
      tensor->size = {int64_t{1} << 40, 8};
      tensor->chunks.at(0).sizes = {int64_t{1} << 40, 8};
    }
  }
  dcpp::test::write_file(dir / ".metadata", dcpp::detail::encode_metadata(metadata));
  return dir;
}

}  // namespace

TEST_CASE("a .metadata claiming a tensor larger than its item is corrupt, naming key and file") {
  dcpp::test::TempDir dir;
  const fs::path checkpoint = oversized_checkpoint(dir / "ckpt");
  dcpp::StateDict state;
  state.insert("w", at::zeros({16, 8}));
  for (const auto& read : std::vector<std::function<void()>>{
           [&] { dcpp::read_metadata(checkpoint); }, [&] { dcpp::load(state, checkpoint); },
           [&] { dcpp::load_from_keys(checkpoint, {"w"}); }}) {
    const dcpp::CheckpointError error = dcpp::test::error_of(read);
    INFO(error.what());
    CHECK(error.kind() == dcpp::ErrorKind::kCorrupt);
    CHECK_THAT(error.what(), Catch::Contains("'w'"));
    CHECK_THAT(error.what(), Catch::Contains(".metadata"));
    CHECK_THAT(error.what(), Catch::Contains("__0_0.distcp"));
  }
  for (const std::string command : {"inspect ", "verify ", "convert "}) {
    const auto cli =
        run_cli(command + checkpoint.string() +
                (command == "convert " ? " " + (dir / "out").string() + " --to dcp" : ""));
    INFO(cli.output);
    CHECK(cli.exit_code == 1);
    CHECK_THAT(cli.output, Catch::Contains("'w'"));
  }
}
