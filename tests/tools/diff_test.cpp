#include "dcpp_test.h"
#include "tools_test_util.h"

#include "common/json_value.h"
#include "convert/checkpoint_source.h"
#include "diff/diff_command.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/format/python_values.h>
#include <dcpp/state_dict/python_object.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <map>

using dcpp::test::run_cli;
using dcpp::tools::to_json;
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
  b.insert_or_assign("step", 8);
  dcpp::StateDict& model = b.at("model").dict();
  at::Tensor w = at::arange(12, at::kFloat).view({3, 4});
  w[1][2] = 6.5f;  // was 6: abs 0.5, rel 0.5/6.5
  model.insert_or_assign("w", w);
  model.insert_or_assign("b", at::ones({4}, at::kFloat));
  model.insert_or_assign("shape", at::zeros({3, 2}));
  model.insert_or_assign("ints", at::arange(5, at::kLong));
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
  REQUIRE_THAT(cli.output, Catch::Contains("(1 of 12 elements differ"));  // numel of A's [3,4]
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

TEST_CASE("a checkpoint and its safetensors conversion diff equal, values included") {
  // safetensors holds tensors only: convert stores the values in __metadata__ as JSON text, and
  // the safetensors source reads them back, so a lossless conversion compares equal.
  dcpp::test::TempDir dir;
  const auto src = dcpp::test::fixture("single_rank_mixed");
  const std::size_t entries = dcpp::read_metadata(src).state_dict_metadata.size();
  REQUIRE(run_cli("convert " + src.string() + " " + (dir / "m.safetensors").string() +
                  " --to safetensors")
              .exit_code == 0);
  const json diff = dcpp::tools::diff_checkpoints(src, dir / "m.safetensors");
  INFO(diff.dump(1));
  REQUIRE(diff["equal"] == true);
  REQUIRE(diff["same"].get<std::size_t>() == entries);
  const auto cli = run_cli("diff " + src.string() + " " + (dir / "m.safetensors").string());
  REQUIRE(cli.exit_code == 0);
  REQUIRE_THAT(cli.output, Catch::Contains("equal: " + std::to_string(entries) + " entries equal"));

  // Sharded: every shard carries the values; they are read once.
  REQUIRE(run_cli("convert " + src.string() + " " + (dir / "s.safetensors").string() +
                  " --to safetensors --max-shard-size 256")
              .exit_code == 0);
  const json sharded = dcpp::tools::diff_checkpoints(src, dir / "s.safetensors.index.json");
  INFO(sharded.dump(1));
  REQUIRE(sharded["equal"] == true);
  REQUIRE(sharded["same"].get<std::size_t>() == entries);

  // A value that differs is found as one.
  dcpp::test::TempDir other;
  dcpp::StateDict state = base_state();
  dcpp::save(state, other / "a");
  state.insert_or_assign("step", 8);
  dcpp::save(state, other / "b");
  REQUIRE(run_cli("convert " + (other / "b").string() + " " + (other / "b.safetensors").string() +
                  " --to safetensors")
              .exit_code == 0);
  const json changed = dcpp::tools::diff_checkpoints(other / "a", other / "b.safetensors");
  INFO(changed.dump(1));
  REQUIRE(changed["only_in_a"].empty());
  REQUIRE(changed["only_in_b"].empty());
  REQUIRE(changed["changed"] == json({{"step", {{"change", "value"}, {"a", 7}, {"b", 8}}}}));
}

TEST_CASE("safetensors metadata other tools wrote reads as string values") {
  // __metadata__ of another writer: strings that are not JSON stay strings; "format" is the
  // safetensors convention, not a value.
  dcpp::test::TempDir dir;
  const std::string header =
      R"({"__metadata__":{"format":"pt","note":"trained on data v2","layers":"12"},)"
      R"("w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  std::string padded = header + std::string((8 - header.size() % 8) % 8, ' ');
  std::string bytes(8, '\0');
  const uint64_t n = padded.size();
  std::memcpy(bytes.data(), &n, 8);
  bytes += padded + std::string(8, '\0');
  dcpp::test::write_file(dir / "x.safetensors", bytes);
  auto source = dcpp::tools::open_checkpoint_source(dir / "x.safetensors");
  std::map<std::string, std::string> values;
  for (const auto& entry : source->entries()) {
    if (!entry.is_tensor) values[entry.key] = to_json(source->read_value(entry)).dump();
  }
  REQUIRE(values ==
          std::map<std::string, std::string>{{"layers", "12"}, {"note", "\"trained on data v2\""}});
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

TEST_CASE(
    "diff compares values exactly: tensors and arrays inside them by bytes, NaN apart from inf") {
  // Before, values were compared as their JSON: a tensor inside one was a placeholder string and
  // NaN and inf both null, so these checkpoints diffed equal.
  dcpp::test::TempDir dir;
  const auto state = [](int64_t rng_last, double x, int32_t array_last) {
    dcpp::StateDict s;
    s.insert("rng",
             c10::IValue(c10::ivalue::Tuple::create(
                 {c10::IValue(at::tensor({int64_t{1}, rng_last})), c10::IValue(int64_t{3})})));
    s.insert("x", x);
    s.insert("nan", std::nan(""));
    s.insert("np", dcpp::numpy_array_value(at::tensor({int32_t{5}, array_last}), "<i4"));
    s.insert("dtype", dcpp::torch_dtype_value(at::kBFloat16));
    return s;
  };
  dcpp::save(state(2, std::nan(""), 6), dir / "a");
  dcpp::save(state(2, std::nan(""), 6), dir / "a2");
  dcpp::save(state(9, INFINITY, 7), dir / "b");

  const json same = dcpp::tools::diff_checkpoints(dir / "a", dir / "a2");
  INFO(same.dump(1));
  CHECK(same["equal"] == true);
  CHECK(same["same"] == 5);

  const json diff = dcpp::tools::diff_checkpoints(dir / "a", dir / "b");
  INFO(diff.dump(1));
  CHECK(diff["equal"] == false);
  CHECK(diff["same"] == 2);  // nan, dtype
  CHECK(diff["changed"].contains("rng"));
  CHECK(diff["changed"].contains("np"));
  CHECK(diff["changed"]["x"]["a"] == json{{"__float__", "nan"}});
  CHECK(diff["changed"]["x"]["b"] == json{{"__float__", "inf"}});
}
