// A program linked against dcpp's shared libraries (dcpp::dcpp), as a user's is: errors and
// interfaces that cross a library's boundary keep one type identity (docs/design.md, "Exported
// symbols"). With a type's typeinfo hidden in a library, a program's catch would not match what
// the library throws.

#include "dcpp_test.h"

#include <dcpp/dcpp.h>
#include <dcpp/extend.h>
#include <dcpp/version.h>

#include <c10/util/Exception.h>

#include <fstream>
#include <memory>
#include <stdexcept>
#include <string>

namespace {

/// Whether /proc/self/maps lists a file named `library`: the program runs against it.
bool mapped(const std::string& library) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (line.find("/" + library) != std::string::npos) {
      return true;
    }
  }
  return false;
}

/// A user's error type, derived from dcpp's.
class UserError : public dcpp::CheckpointError {
 public:
  UserError() : dcpp::CheckpointError(dcpp::ErrorKind::kUsage, "the user's state is not ready") {}
};

/// A user's Stateful whose state_dict() throws: the library calls it and the error crosses it.
class FailingStateful : public dcpp::Stateful {
 public:
  dcpp::StateDict state_dict() override { throw UserError(); }
  void load_state_dict(const dcpp::StateDict& /*state_dict*/) override {}
};

}  // namespace

TEST_CASE("this program runs against dcpp's shared libraries") {
  // One call into each library, so that each is needed whatever the linker's --as-needed says.
  dcpp::StateDict state;
  state.insert("x", at::ones({2}));
  CHECK(dcpp::dim0_split(10, 0, 2).size == 5);
  CHECK(dcpp::make_blocking_stager() != nullptr);
  CHECK(dcpp::step_directory_name(7).find('7') != std::string::npos);
  CHECK(std::make_shared<dcpp::DefaultSavePlanner>() != nullptr);
  for (const char* library : {"libdcpp_state_dict.so", "libdcpp_parallel.so",
                              "libdcpp_checkpoint.so", "libdcpp_async.so", "libdcpp_plugin.so"}) {
    INFO(library);
    // The file behind the SONAME (libdcpp_checkpoint.so.0.2): this version's, by name.
    CHECK(mapped(std::string(library) + "." + DCPP_VERSION));
  }
}

TEST_CASE("a CheckpointError thrown in a library is caught as one by the program") {
  dcpp::test::TempDir dir;
  CHECK_THROWS_AS(dcpp::read_metadata(dir / "missing"), dcpp::CheckpointError);
  // Caught as libtorch's error, it is still dcpp's underneath.
  bool caught = false;
  try {
    dcpp::read_metadata(dir / "missing");
  } catch (const c10::Error& error) {
    caught = true;
    CHECK(dynamic_cast<const dcpp::CheckpointError*>(&error) != nullptr);
  }
  CHECK(caught);
}

TEST_CASE("a CheckpointError of background work rethrows from its future in the program") {
  dcpp::test::TempDir dir;
  dcpp::test::write_file(dir / "file", "not a directory");
  dcpp::AsyncCheckpointer checkpointer;
  dcpp::StateDict state;
  state.insert("x", at::ones({4}));
  // The directory cannot be made under a file: the upload fails on the background thread.
  dcpp::AsyncSaveResponse response = checkpointer.async_save(state, dir / "file" / "checkpoint");
  CHECK_THROWS_AS(response.committed.wait(), dcpp::CheckpointError);
}

TEST_CASE("a user's error thrown through a library keeps its type") {
  dcpp::test::TempDir dir;
  dcpp::StateDict state;
  state.insert("app", std::make_shared<FailingStateful>());
  CHECK_THROWS_AS(dcpp::save(state, dir / "checkpoint"), UserError);
}
