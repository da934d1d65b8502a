// Faults from outside dcpp: a full disk during a multi-rank save, a directory that cannot be
// written, a data file that is missing or cannot be read on load. (A rank killed during a save:
// tests/reshard/reshard_test.cpp.)

#include "dcpp_test.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/core/checkpoint_error.h>

#include <unistd.h>

namespace fs = std::filesystem;

TEST_CASE(
    "a full disk fails the save on every rank, naming the file, and keeps the last checkpoint") {
  dcpp::test::TempDir dir;
  const fs::path disk = dir / "disk";
  fs::create_directories(disk);
  // A 3 MiB tmpfs, mounted in a mount namespace of the test's own (nothing visible outside): the
  // two ranks run inside it. Without privileges, in a user namespace too; root needs none, and
  // could not make one inside a chroot (the libtorch reference roots, `make test-libtorch`).
  const std::string namespaces = geteuid() == 0 ? "--mount" : "--user --map-root-user --mount";
  const std::string command = "unshare " + namespaces +
                              " sh -c 'mount -t tmpfs -o size=3m dcpp-disk-full " + disk.string() +
                              " && exec " + DCPP_LAUNCH + " --fork -n 2 -- " + DCPP_FAULT_WORKER +
                              " disk-full " + disk.string() + "' 2>&1";
  const dcpp::test::CommandResult result = dcpp::test::run_command(command);
  INFO(command << "\n" << result.output);
  REQUIRE(result.exit_code == 0);
  for (const char* rank : {"[rank 0]", "[rank 1]"}) {
    const std::size_t line = result.output.find(std::string(rank) + " failed as expected");
    REQUIRE(line != std::string::npos);
    const std::string text = result.output.substr(line, result.output.find('\n', line) - line);
    CHECK(text.find("No space left on device") != std::string::npos);
    CHECK(text.find(".distcp") != std::string::npos);
    CHECK(text.find("free some space or save elsewhere") != std::string::npos);
    CHECK(result.output.find(std::string(rank) + " step 1 intact") != std::string::npos);
    CHECK(result.output.find(std::string(rank) + " step 3 saved after the failure") !=
          std::string::npos);
  }
}

TEST_CASE("saving into a directory that cannot be written fails with kIo") {
  dcpp::test::TempDir dir;
  const fs::path target = dir / "unwritable";
  fs::create_directories(target);
  // Root ignores permissions: for root the directory is a read-only bind mount, in a mount
  // namespace of the worker's own; for anyone else its permissions forbid writing.
  std::string command;
  if (geteuid() == 0) {
    command = "unshare --mount sh -c 'mount --bind " + target.string() + " " + target.string() +
              " && mount -o remount,bind,ro " + target.string() + " && exec " + DCPP_FAULT_WORKER +
              " save " + target.string() + "' 2>&1";
  } else {
    fs::permissions(target, fs::perms::owner_read | fs::perms::owner_exec,
                    fs::perm_options::replace);
    command = std::string(DCPP_FAULT_WORKER) + " save " + target.string() + " 2>&1";
  }
  const dcpp::test::CommandResult result = dcpp::test::run_command(command);
  fs::permissions(target, fs::perms::owner_all, fs::perm_options::replace);  // to clean up
  INFO(command << "\n" << result.output);
  REQUIRE(result.exit_code == 0);
  CHECK(result.output.find("failed (I/O): ") != std::string::npos);
  CHECK(result.output.find(target.string()) != std::string::npos);
}

namespace {

// A checkpoint of two tensors in one data file, and the state dict to load it into.
fs::path save_two_tensors(const fs::path& dir) {
  dcpp::StateDict sd;
  sd.insert("a", at::arange(8, at::kFloat));
  sd.insert("b", at::arange(4, at::kLong));
  dcpp::save(sd, dir);
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() == ".distcp") return entry.path();
  }
  FAIL("no data file in " << dir);
  return {};
}

dcpp::StateDict load_target() {
  dcpp::StateDict sd;
  sd.insert("a", at::zeros({8}, at::kFloat));
  sd.insert("b", at::zeros({4}, at::kLong));
  return sd;
}

}  // namespace

TEST_CASE("a missing data file names the file on load") {
  dcpp::test::TempDir dir;
  const fs::path data = save_two_tensors(dir.path());
  fs::remove(data);
  dcpp::StateDict target = load_target();
  REQUIRE_THROWS_WITH(dcpp::load(target, dir.path()),
                      Catch::Contains(data.string()) && Catch::Contains("No such file"));
  try {
    dcpp::load(target, dir.path());
  } catch (const dcpp::CheckpointError& error) {
    CHECK(error.kind() == dcpp::ErrorKind::kNotFound);
  }
}

TEST_CASE("an unreadable data file names the file on load") {
  dcpp::test::TempDir dir;
  const fs::path data = save_two_tensors(dir.path());
  // A directory where the file was: opening it works, reading it fails (EISDIR), even for root,
  // whom file permissions do not stop.
  fs::remove(data);
  fs::create_directory(data);
  dcpp::StateDict target = load_target();
  REQUIRE_THROWS_WITH(dcpp::load(target, dir.path()), Catch::Contains(data.string()));
}
