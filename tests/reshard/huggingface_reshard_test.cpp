// Hugging Face directories across ranks: dcpp's writer on N ranks (each rank writing its chunks
// straight into the consolidated files), loaded on M ranks in another sharding; PyTorch 2.14's
// consolidated fixture loaded sharded on 2 and 3 ranks. Real processes over Gloo.

#include "dcpp_test.h"
#include "reshard_launch.h"

#include <dcpp/storage/huggingface_storage.h>

#include <nlohmann/json.hpp>

#include <map>

using dcpp::test::launch;

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
  // The ranks start once per world size: every save on N ranks in one launch, then every load.
  dcpp::test::TempDir dir;
  const auto path = [&](std::size_t n) { return dir / ("hf" + std::to_string(n)); };
  std::map<int, std::pair<std::string, std::string>> saves, loads;  // ranks -> (dirs, layouts)
  const auto add = [](std::pair<std::string, std::string>& list, const std::string& directory,
                      const std::string& layout) {
    list.first += (list.first.empty() ? "" : ",") + directory;
    list.second += (list.second.empty() ? "" : ",") + layout;
  };
  for (std::size_t n = 0; n < std::size(cases); ++n) {
    add(saves[cases[n].save_ranks], path(n).string(), cases[n].saved_as);
    add(loads[cases[n].load_ranks], path(n).string(), cases[n].loaded_as);
  }
  for (const auto& [ranks, list] : saves) {
    REQUIRE(launch(ranks, "hf-save " + list.first + " " + list.second) == 0);
  }
  for (std::size_t n = 0; n < std::size(cases); ++n) {
    INFO(cases[n].save_ranks << " ranks " << cases[n].saved_as << " -> " << cases[n].load_ranks
                             << " ranks " << cases[n].loaded_as);
    // Consolidated: one file set and its index, nothing staged left over.
    REQUIRE(std::filesystem::exists(path(n) / dcpp::kHuggingFaceIndexFile));
    const auto index =
        nlohmann::json::parse(dcpp::test::read_file(path(n) / dcpp::kHuggingFaceIndexFile));
    CHECK(index["weight_map"].size() == 5);
    for (const auto& entry : std::filesystem::directory_iterator(path(n))) {
      CHECK(entry.path().filename().string().front() != '.');
    }
  }
  for (const auto& [ranks, list] : loads) {
    REQUIRE(launch(ranks, "hf-load " + list.first + " " + list.second) == 0);
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
