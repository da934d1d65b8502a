// Hugging Face directories across ranks: dcpp's writer on N ranks (each rank writing its chunks
// straight into the consolidated files), loaded on M ranks in another sharding; PyTorch 2.14's
// consolidated fixture loaded sharded on 2 and 3 ranks. Real processes over Gloo.

#include "dcpp_test.h"

#include <dcpp/storage/huggingface_storage.h>

#include <nlohmann/json.hpp>

namespace {

int launch(int ranks, const std::string& arguments) {
  const std::string command = std::string(DCPP_LAUNCH) + " -n " + std::to_string(ranks) + " -- " +
                              DCPP_RESHARD_WORKER + " " + arguments;
  const dcpp::test::CommandResult result = dcpp::test::run_command(command);
  UNSCOPED_INFO(command << "\n" << result.output);
  return result.exit_code;
}

}  // namespace

TEST_CASE("a Hugging Face directory written by N ranks loads on M ranks in another sharding") {
  struct Case {
    int save_ranks;
    const char* saved_as;
    int load_ranks;
    const char* loaded_as;
  };
  const Case cases[] = {
      {3, "row", 2, "col"},      {2, "col", 3, "row"},        {4, "block", 3, "uneven"},
      {3, "uneven", 2, "block"}, {2, "replicated", 3, "col"}, {3, "col", 1, "row"},
  };
  for (const Case& c : cases) {
    INFO(c.save_ranks << " ranks " << c.saved_as << " -> " << c.load_ranks << " ranks "
                      << c.loaded_as);
    dcpp::test::TempDir dir;
    const std::string path = (dir / "hf").string();
    REQUIRE(launch(c.save_ranks, "hf-save " + path + " " + c.saved_as) == 0);
    // Consolidated: one file set and its index, nothing staged left over.
    REQUIRE(std::filesystem::exists(dir / "hf" / dcpp::kHuggingFaceIndexFile));
    const auto index =
        nlohmann::json::parse(dcpp::test::read_file(dir / "hf" / dcpp::kHuggingFaceIndexFile));
    CHECK(index["weight_map"].size() == 5);
    for (const auto& entry : std::filesystem::directory_iterator(dir / "hf")) {
      CHECK(entry.path().filename().string().front() != '.');
    }
    REQUIRE(launch(c.load_ranks, "hf-load " + path + " " + c.loaded_as) == 0);
  }
}

TEST_CASE("PyTorch 2.14's consolidated Hugging Face fixture loads sharded on 2 and 3 ranks") {
  const std::string fixture =
      (std::filesystem::path(DCPP_TEST_FIXTURES) / "pytorch-2.14" / "hf_consolidated").string();
  for (const char* layout : {"row", "col"}) {
    CHECK(launch(2, "whole " + fixture + " " + layout) == 0);
    CHECK(launch(3, "whole " + fixture + " " + layout) == 0);
  }
}
