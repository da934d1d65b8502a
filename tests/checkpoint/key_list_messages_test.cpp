// Errors that list keys name ten of each kind and count the rest (issue 58): a strict load of a
// state dict whose keys all differ from the checkpoint's printed every key twice, 11 KB and 18 KB
// for a 9-parameter model with its optimizer state, on every rank.

#include "dcpp_test.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/checkpoint/megatron.h>
#include <dcpp/checkpoint/megatron_load.h>
#include <dcpp/core/checkpoint_error.h>

#include <filesystem>

namespace fs = std::filesystem;
using dcpp::StateDict;

namespace {

// `count` tensors "<prefix>.layers.<i>.mlp.linear_fc1.weight".
StateDict fc1_weights(const std::string& prefix, int count) {
  StateDict state;
  for (int i = 0; i < count; ++i) {
    state.insert(prefix + ".layers." + std::to_string(i) + ".mlp.linear_fc1.weight",
                 at::zeros({2}));
  }
  return state;
}

}  // namespace

TEST_CASE("a strict load names ten missing and ten unexpected keys and counts the rest") {
  dcpp::test::TempDir dir;
  dcpp::SaveOptions options;
  options.file_system.sync_files = false;
  dcpp::save(fc1_weights("saved", 35), dir.path(), options);
  StateDict target = fc1_weights("model", 45);
  const dcpp::CheckpointError error = dcpp::test::error_of([&] { dcpp::load(target, dir.path()); });
  const std::string message = error.what_without_backtrace();
  INFO(message);
  CHECK(error.kind() == dcpp::ErrorKind::kIncompatible);
  CHECK_THAT(message, Catch::Contains("the checkpoint lacks 45 key(s) of the state dict being "
                                      "loaded: 'model.layers.0.mlp.linear_fc1.weight', "));
  CHECK_THAT(message, Catch::Contains("'model.layers.9.mlp.linear_fc1.weight', ... and 35 more; "
                                      "it has 35 key(s) that were not asked for: "
                                      "'saved.layers.0.mlp.linear_fc1.weight', "));
  CHECK_THAT(message, Catch::Contains("'saved.layers.9.mlp.linear_fc1.weight', ... and 25 more. "
                                      "Load with allow_partial_load"));
  CHECK_THAT(message, !Catch::Contains("model.layers.10.") && !Catch::Contains("saved.layers.10."));
  CHECK(message.size() < 1200);  // 20 keys of 37 characters and the text; every key: 3 KB
  // Ten keys or fewer: all of them, no count.
  StateDict few = fc1_weights("model", 10);
  CHECK_THAT(dcpp::test::error_of([&] { dcpp::load(few, dir.path()); }).what(),
             Catch::Contains("'model.layers.9.mlp.linear_fc1.weight'; it has 35") &&
                 !Catch::Contains("... and 0 more"));
}

TEST_CASE("Megatron's strict handling names ten unexpected keys and counts the rest") {
  StateDict state = fc1_weights("bogus", 25);
  state.insert("embedding.word_embeddings.weight", at::zeros({16, 8}));
  const dcpp::CheckpointError error = dcpp::test::error_of([&] {
    dcpp::megatron::load(state, dcpp::test::megatron_fixture("mcore_tp2"),
                         dcpp::megatron::StrictHandling::kRaiseUnexpected);
  });
  const std::string message = error.what_without_backtrace();
  INFO(message);
  CHECK(error.kind() == dcpp::ErrorKind::kNotFound);
  CHECK_THAT(message, Catch::Contains("25 key(s) this rank's state dict requests that the "
                                      "checkpoint lacks (unexpected): 'bogus.layers.0."));
  CHECK_THAT(message, Catch::Contains(", ... and 15 more"));
  CHECK(message.size() < 1200);
}
