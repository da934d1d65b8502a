// Resume on another layout, proved by training: a model trained K steps in layout A, saved (model
// and Adam) and restored in layout B, trained M more steps, must match an uninterrupted run: to
// the bit when A = B (against the uninterrupted run in that layout), within 1e-6 relative of the
// uninterrupted single-process run otherwise. Real processes over Gloo, started by dcpp-launch.

#include "dcpp_test.h"

#include <dcpp/checkpoint/checkpointer.h>

#include <string>
#include <vector>

namespace {

constexpr int kStepsBefore = 3;  // K
constexpr int kStepsAfter = 3;   // M
constexpr double kRelativeTolerance = 1e-6;

struct Layout {
  const char* name;
  int ranks;
  std::string str() const { return std::string(name) + " on " + std::to_string(ranks); }
};
const Layout kSingle{"single", 1}, kDdp2{"ddp", 2}, kFsdp2{"fsdp", 2}, kFsdp3{"fsdp", 3},
    kPipeline2{"pipeline", 2};

void launch(const Layout& layout, const std::string& arguments) {
  const std::string command = std::string(DCPP_LAUNCH) + " -n " + std::to_string(layout.ranks) +
                              " -- " + DCPP_TRAIN_WORKER + " " + arguments;
  const dcpp::test::CommandResult result = dcpp::test::run_command(command);
  INFO(command << "\n" << result.output);
  REQUIRE(result.exit_code == 0);
}

struct Result {
  at::Tensor losses;
  dcpp::StateDict params;
};

Result read_result(const std::filesystem::path& directory) {
  dcpp::StateDict loaded = dcpp::load_from_keys(directory);
  return {loaded.at("losses").tensor(), loaded.at("params").dict()};
}

// An uninterrupted run of K + M steps in `layout`.
Result uninterrupted(const std::string& model, const Layout& layout,
                     const dcpp::test::TempDir& dir) {
  const auto result = dir / ("run-" + std::string(layout.name) + std::to_string(layout.ranks));
  launch(layout, model + " " + layout.name + " run " +
                     std::to_string(kStepsBefore + kStepsAfter) + " " + result.string());
  return read_result(result);
}

// K steps in `first`, saved, restored in `second`, M more steps: the losses of all K + M steps
// and the final parameters.
Result resumed(const std::string& model, const Layout& first, const Layout& second,
               const dcpp::test::TempDir& dir) {
  const std::string tag = std::string(first.name) + std::to_string(first.ranks) + "-" +
                          second.name + std::to_string(second.ranks);
  const auto checkpoint = dir / ("ckpt-" + tag);
  const auto before = dir / ("before-" + tag), after = dir / ("after-" + tag);
  launch(first, model + " " + first.name + " save " + std::to_string(kStepsBefore) + " " +
                    checkpoint.string() + " " + before.string());
  launch(second, model + " " + second.name + " resume " + std::to_string(kStepsBefore) + " " +
                     std::to_string(kStepsAfter) + " " + checkpoint.string() + " " +
                     after.string());
  Result head = read_result(before), tail = read_result(after);
  return {at::cat({head.losses, tail.losses}), std::move(tail.params)};
}

double relative_difference(const at::Tensor& actual, const at::Tensor& expected) {
  const double scale = expected.abs().max().item<double>();
  return actual.sub(expected).abs().max().item<double>() / (scale > 0 ? scale : 1.0);
}

void check_bitwise(const Result& actual, const Result& expected) {
  CHECK(dcpp::test::bitwise_equal(actual.losses, expected.losses));
  REQUIRE(actual.params.size() == expected.params.size());
  for (const auto& item : expected.params) {
    INFO(item.key);
    REQUIRE(actual.params.contains(item.key));
    CHECK(dcpp::test::bitwise_equal(actual.params.at(item.key).tensor(), item.value.tensor()));
  }
}

void check_close(const Result& actual, const Result& expected) {
  REQUIRE(actual.losses.numel() == expected.losses.numel());
  for (int64_t step = 0; step < expected.losses.numel(); ++step) {
    INFO("step " << step << ": " << actual.losses[step].item<double>() << " vs "
                 << expected.losses[step].item<double>());
    CHECK(relative_difference(actual.losses[step], expected.losses[step]) <= kRelativeTolerance);
  }
  REQUIRE(actual.params.size() == expected.params.size());
  for (const auto& item : expected.params) {
    INFO(item.key);
    REQUIRE(actual.params.contains(item.key));
    const at::Tensor& got = actual.params.at(item.key).tensor();
    REQUIRE(got.sizes() == item.value.tensor().sizes());
    const double difference = relative_difference(got, item.value.tensor());
    INFO("relative difference " << difference);
    CHECK(difference <= kRelativeTolerance);
  }
}

void resume_on_the_same_layout(const std::string& model) {
  dcpp::test::TempDir dir;
  for (const Layout& layout : {kSingle, kDdp2, kFsdp2, kFsdp3, kPipeline2}) {
    INFO(model << ": " << layout.str() << " saved after " << kStepsBefore << " steps, resumed");
    check_bitwise(resumed(model, layout, layout, dir), uninterrupted(model, layout, dir));
  }
}

void resume_on_another_layout(const std::string& model) {
  dcpp::test::TempDir dir;
  const Result reference = uninterrupted(model, kSingle, dir);
  const std::pair<Layout, Layout> pairs[] = {{kFsdp3, kDdp2},     {kFsdp2, kSingle},
                                             {kPipeline2, kFsdp3}, {kSingle, kFsdp2},
                                             {kDdp2, kPipeline2},  {kFsdp2, kFsdp3}};
  for (const auto& [first, second] : pairs) {
    INFO(model << ": " << first.str() << " -> " << second.str());
    check_close(resumed(model, first, second, dir), reference);
  }
}

}  // namespace

TEST_CASE("an MLP resumed on the same layout trains to the bit as an uninterrupted run") {
  resume_on_the_same_layout("mlp");
}
TEST_CASE("an MLP resumed on another layout trains as the single-process run") {
  resume_on_another_layout("mlp");
}
TEST_CASE("a transformer block resumed on the same layout trains to the bit as an uninterrupted run") {
  resume_on_the_same_layout("transformer");
}
TEST_CASE("a transformer block resumed on another layout trains as the single-process run") {
  resume_on_another_layout("transformer");
}
