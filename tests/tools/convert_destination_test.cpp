// `dcpp convert` never replaces anything, whatever the format: an existing destination file, or a
// destination directory that is not empty, is refused before anything is written, and what was
// there is left exactly as it was.

#include "dcpp_test.h"
#include "tools_test_util.h"

#include <map>

using dcpp::test::run_cli;
namespace fs = std::filesystem;

namespace {

// Every file under `root` with its bytes.
std::map<std::string, std::string> snapshot(const fs::path& root) {
  std::map<std::string, std::string> files;
  if (fs::is_regular_file(root)) {
    files[root.filename().string()] = dcpp::test::read_file(root);
    return files;
  }
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    if (entry.is_regular_file()) {
      files[fs::relative(entry.path(), root).string()] = dcpp::test::read_file(entry.path());
    }
  }
  return files;
}

}  // namespace

TEST_CASE("convert refuses an existing destination for every format and leaves it untouched") {
  dcpp::test::TempDir dir;
  const std::string src = dcpp::test::fixture("single_rank_mixed").string();
  struct Case {
    std::string to;
    std::string destination;
    std::string extra;
    std::string existing;  // what is there already, relative to dir
    std::string named;     // what the error names
  };
  const Case cases[] = {
      {"torch-save", "out.pt", "", "out.pt", "out.pt"},
      {"safetensors", "out.safetensors", "", "out.safetensors", "out.safetensors"},
      // Sharded: any of the files it would write.
      {"safetensors", "sh.safetensors", "--max-shard-size 256", "sh.safetensors.index.json",
       "sh.safetensors.index.json"},
      {"dcp", "dcp_out", "", "dcp_out/notes.txt", "dcp_out"},
      {"hf", "hf_out", "", "hf_out/notes.txt", "hf_out"},
  };
  for (const Case& c : cases) {
    INFO(c.to << " " << c.extra << " over " << c.existing);
    const fs::path existing = dir / c.existing;
    fs::create_directories(existing.parent_path());
    dcpp::test::write_file(existing, "precious");
    const fs::path destination = dir / c.destination;
    const auto before = snapshot(destination.parent_path());
    const auto cli =
        run_cli("convert " + src + " " + destination.string() + " --to " + c.to + " " + c.extra);
    INFO(cli.output);
    REQUIRE(cli.exit_code == 1);
    REQUIRE_THAT(cli.output, Catch::Contains((dir / c.named).string() + " exists"));
    REQUIRE(std::count(cli.output.begin(), cli.output.end(), '\n') == 1);
    REQUIRE(snapshot(destination.parent_path()) == before);
  }

  // A fresh destination (an empty directory too) is written.
  for (const Case& c : cases) {
    fs::remove_all(dir / c.existing);
  }
  fs::create_directories(dir / "dcp_out");
  for (const Case& c : cases) {
    INFO(c.to << " " << c.extra);
    const auto cli = run_cli("convert " + src + " " + (dir / c.destination).string() + " --to " +
                             c.to + " " + c.extra);
    INFO(cli.output);
    REQUIRE(cli.exit_code == 0);
  }
  // Converting again is refused: the outputs exist now.
  for (const Case& c : cases) {
    INFO(c.to << " " << c.extra);
    REQUIRE(run_cli("convert " + src + " " + (dir / c.destination).string() + " --to " + c.to +
                    " " + c.extra)
                .exit_code == 1);
  }
}
