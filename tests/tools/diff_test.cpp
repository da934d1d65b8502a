#include "dcpp_test.h"
#include "tools_test_util.h"

#include "diff_command.h"

#include <dcpp/checkpoint/checkpointer.h>

#include <nlohmann/json.hpp>

#include <cmath>

using dcpp::test::run_cli;
using nlohmann::json;

namespace {

dcpp::StateDict base_state() {
  dcpp::StateDict state;
  dcpp::StateDict model;
  model.insert("w", at::arange(12, at::kFloat).view({3, 4}));
  model.insert("b", at::ones({4}, at::kDouble));
  model.insert("shape", at::zeros({2, 3}));
  model.insert("ints", at::arange(5, at::kLong));
  state.insert("model", model);
  state.insert("step", 7);
  state.insert("gone", at::zeros({1}));
  return state;
}

}  // namespace

TEST_CASE("diff finds planted differences and names them") {
  dcpp::test::TempDir dir;
  dcpp::StateDict a = base_state();
  dcpp::save(a, dir / "a");
  dcpp::save(a, dir / "same");
  dcpp::StateDict b = base_state();
  b.erase("gone");
  b.insert("new", at::zeros({1}));
  b.insert("step", 8);
  dcpp::StateDict& model = b.at("model").dict();
  at::Tensor w = at::arange(12, at::kFloat).view({3, 4});
  w[1][2] = 6.5f;  // was 6: abs 0.5, rel 0.5/6.5
  model.insert("w", w);
  model.insert("b", at::ones({4}, at::kFloat));
  model.insert("shape", at::zeros({3, 2}));
  model.insert("ints", at::arange(5, at::kLong));
  dcpp::save(b, dir / "b");

  const json diff = dcpp::tools::diff_checkpoints(dir / "a", dir / "b");
  INFO(diff.dump(1));
  REQUIRE(diff["equal"] == false);
  REQUIRE(diff["only_in_a"] == json::array({"gone"}));
  REQUIRE(diff["only_in_b"] == json::array({"new"}));
  REQUIRE(diff["same"] == 1);  // model.ints
  const json& changed = diff["changed"];
  REQUIRE(changed.size() == 4);
  REQUIRE(changed["step"] == json({{"change", "value"}, {"a", 7}, {"b", 8}}));
  REQUIRE(changed["model.shape"]["change"] == "shape");
  REQUIRE(changed["model.shape"]["b"]["shape"] == json::array({3, 2}));
  REQUIRE(changed["model.b"]["change"] == "dtype");
  REQUIRE(changed["model.b"]["max_abs_diff"] == 0.0);
  REQUIRE(changed["model.w"]["change"] == "values");
  REQUIRE(changed["model.w"]["max_abs_diff"] == 0.5);
  REQUIRE(changed["model.w"]["max_rel_diff"].get<double>() == Approx(0.5 / 6.5));
  REQUIRE(changed["model.w"]["differing_elements"] == 1);

  const auto cli = run_cli("diff " + (dir / "a").string() + " " + (dir / "b").string());
  REQUIRE(cli.exit_code == 1);
  REQUIRE_THAT(cli.output, Catch::Contains("only in A: gone"));
  REQUIRE_THAT(cli.output, Catch::Contains("only in B: new"));
  REQUIRE_THAT(cli.output,
               Catch::Contains("values: model.w  Float [3,4] -> Float [3,4], max abs diff 0.5"));
  REQUIRE_THAT(cli.output, Catch::Contains("value: step  7 -> 8"));
  REQUIRE_THAT(cli.output,
               Catch::Contains("different: 1 entries equal, 4 changed, 1 only in A, 1 only in B"));

  const auto equal = run_cli("diff --json " + (dir / "a").string() + " " + (dir / "same").string());
  REQUIRE(equal.exit_code == 0);
  REQUIRE(json::parse(equal.output)["equal"] == true);
}

TEST_CASE("tensor differences treat NaN, infinity and complex values sensibly") {
  const auto d = dcpp::tools::compare_tensors(at::tensor({1.0f, 2.0f, NAN, INFINITY, 0.0f}),
                                              at::tensor({1.0f, 2.5f, NAN, INFINITY, 0.0f}));
  REQUIRE(d.max_abs == 0.5);
  REQUIRE(d.max_rel == Approx(0.2));
  REQUIRE(d.differing == 1);
  REQUIRE(d.nan_mismatches == 0);
  const auto nan = dcpp::tools::compare_tensors(at::tensor({1.0, NAN}), at::tensor({1.0, 3.0}));
  REQUIRE(nan.nan_mismatches == 1);
  REQUIRE(nan.differing == 1);
  REQUIRE(nan.max_abs == 0.0);
  const auto inf = dcpp::tools::compare_tensors(at::tensor({INFINITY}), at::tensor({1.0}));
  REQUIRE(std::isinf(inf.max_abs));
  REQUIRE(inf.max_rel == 1.0);
  const auto complex =
      dcpp::tools::compare_tensors(at::complex(at::tensor({3.0}), at::tensor({0.0})),
                                   at::complex(at::tensor({0.0}), at::tensor({4.0})));
  REQUIRE(complex.max_abs == 5.0);
  const auto ints = dcpp::tools::compare_tensors(at::arange(3, at::kLong), at::arange(3, at::kInt));
  REQUIRE(ints.differing == 0);
}

TEST_CASE("diff compares checkpoints across formats") {
  dcpp::test::TempDir dir;
  const auto src = dcpp::test::fixture("single_rank_mixed");
  REQUIRE(run_cli("convert " + src.string() + " " + (dir / "m.safetensors").string() +
                  " --to safetensors")
              .exit_code == 0);
  const json diff = dcpp::tools::diff_checkpoints(src, dir / "m.safetensors");
  // safetensors holds tensors only: the values are on one side, every tensor is equal.
  REQUIRE(diff["changed"].empty());
  REQUIRE(diff["only_in_b"].empty());
  REQUIRE_FALSE(diff["only_in_a"].empty());
  std::size_t values = 0;
  for (const auto& [key, stored] : dcpp::read_metadata(src).state_dict_metadata) {
    values += std::holds_alternative<dcpp::BytesStorageMetadata>(stored) ? 1 : 0;
  }
  REQUIRE(diff["only_in_a"].size() == values);
  REQUIRE(diff["same"].get<std::size_t>() + values ==
          dcpp::read_metadata(src).state_dict_metadata.size());
}

TEST_CASE("diff compares empty tensors as equal without touching their data") {
  // An empty tensor's data pointer is null; memcmp must not be handed it (UBSan found this).
  dcpp::test::TempDir dir;
  dcpp::StateDict state;
  state.insert("empty", at::empty({0, 3}, at::kFloat));
  dcpp::save(state, dir / "a");
  dcpp::save(state, dir / "b");
  const json diff = dcpp::tools::diff_checkpoints(dir / "a", dir / "b");
  INFO(diff.dump(1));
  REQUIRE(diff["equal"] == true);
  REQUIRE(diff["same"] == 1);
}
