// Checkpoints Megatron-LM's own code wrote (tests/fixtures/megatron-core/, made by
// make_megatron_lm_fixtures.py beside them): what dcpp reads from each equals, value for value,
// what Megatron's own loaders returned for it (the manifest's "megatron_load", in the generator's
// canonical JSON): the common state with every kind of Python value Megatron-LM puts there, the
// distributed optimizer's ShardedObjects (`per_bucket_numel`, keyed by tuples of dtypes), every
// tensor.

#include "dcpp_test.h"
#include "python_canonical.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/checkpoint/megatron.h>
#include <dcpp/format/python_values.h>

#include <nlohmann/json.hpp>

#include <fstream>

using nlohmann::json;

namespace {

namespace fs = std::filesystem;

// The value at `path` of canonical JSON `root` (the generator's "kinds_path_rule": a dict by key,
// a list or tuple by index, a Namespace by attribute); null JSON when there is none.
json at_path(json value, const json& path) {
  for (const json& step : path) {
    if (value.is_object() && value.contains("new") && value.contains("state")) {
      value = value["state"];  // a Namespace: its attributes
    }
    if (value.is_object() && value.contains("dict")) {
      json found;
      for (const json& pair : value["dict"]) {
        if (pair[0] == step) found = pair[1];
      }
      value = found;
    } else if (value.is_object() && value.contains("tuple")) {
      value = value["tuple"].at(step.get<std::size_t>());
    } else if (value.is_array()) {
      value = value.at(step.get<std::size_t>());
    } else {
      return json();
    }
  }
  return value;
}

}  // namespace

TEST_CASE("a real Megatron-LM common state reads as Megatron loads it, every kind of value") {
  const std::string name = "mlm_args_common";
  const json manifest = dcpp::test::megatron_fixture_manifest(name);
  const fs::path checkpoint = dcpp::test::megatron_fixture(name);
  const json& megatron = manifest["megatron_load"];

  const json common = dcpp::test::sorted_sets(
      dcpp::test::canonical(dcpp::megatron::load_common_state_dict(checkpoint)));
  // Kind by kind first, so that a difference names the kind.
  for (const json& kind : manifest["kinds"]) {
    INFO(kind["kind"].get<std::string>() << " at " << kind["path"].dump());
    CHECK(at_path(common, kind["path"]).dump() ==
          dcpp::test::sorted_sets(kind["canonical"]).dump());
  }
  CHECK(common.dump() == dcpp::test::sorted_sets(megatron["load_common_state_dict"]).dump());
  CHECK(dcpp::test::canonical(dcpp::megatron::load_content_metadata(checkpoint)).dump() ==
        megatron["load_content_metadata"].dump());

  // Megatron-LM's args through the typed accessors.
  const dcpp::StateDict state = dcpp::megatron::load_common_state_dict(checkpoint);
  const auto args = dcpp::python_attributes_of(state.at("args").value());
  REQUIRE(args.has_value());
  std::map<std::string, c10::IValue> by_name(args->begin(), args->end());
  CHECK(dcpp::torch_dtype_of(by_name.at("params_dtype")) == at::kBFloat16);
  CHECK(dcpp::python_enum_value_of(by_name.at("attention_backend"))->toInt() == 5);
}

TEST_CASE(
    "the distributed optimizer's ShardedObjects and every tensor read as Megatron loads them") {
  // mlm_args_common: head's dp_reshardable on 2 ranks, with Megatron-LM's common state;
  // mcore_dp_reshardable: the same on 4 ranks (several buckets, padding chunks, per_bucket_numel
  // keyed by (param_dtype, grad_dtype)); mcore_v014_fully_sharded_model_space: v0.14's
  // flattened_range layout, its common state in common.pt.
  for (const std::string name :
       {"mlm_args_common", "mcore_dp_reshardable", "mcore_v014_fully_sharded_model_space"}) {
    INFO(name);
    const json manifest = dcpp::test::megatron_fixture_manifest(name);
    const fs::path checkpoint = dcpp::test::megatron_fixture(name);
    const json& megatron = manifest["megatron_load"];

    CHECK(dcpp::test::sorted_sets(
              dcpp::test::canonical(dcpp::megatron::load_common_state_dict(checkpoint)))
              .dump() == dcpp::test::sorted_sets(megatron["load_common_state_dict"]).dump());
    CHECK(dcpp::test::canonical(dcpp::megatron::load_content_metadata(checkpoint)).dump() ==
          megatron["load_content_metadata"].dump());

    const dcpp::megatron::ShardedMetadata metadata =
        dcpp::megatron::load_sharded_metadata(checkpoint);
    std::vector<std::string> objects;
    for (const auto& [key, object] : metadata.objects) objects.push_back(key);
    std::vector<std::string> expected_objects;
    for (const auto& [key, object] : megatron["load_sharded_metadata_objects"].items()) {
      expected_objects.push_back(key);
    }
    CHECK(objects == expected_objects);

    // Each ShardedObject's data: what Megatron's load gives for it.
    for (const auto& [key, data] : megatron["loaded_sharded_objects"].items()) {
      INFO(key);
      const dcpp::StateDict loaded = dcpp::load_from_keys(checkpoint, {key});
      const json ours = dcpp::test::canonical(loaded.at(key));
      REQUIRE(ours.is_array());
      REQUIRE(ours.size() == 1);  // torch.save([data])
      CHECK(dcpp::test::sorted_sets(ours[0]).dump() == dcpp::test::sorted_sets(data).dump());
    }

    // Global shapes as Megatron gives them: v0.14's flattened_range tensors in their original
    // shape (mcore_data's nd_reformulated_orig_global_shape), not their [1, 1, n] on disk.
    const auto tensors_metadata = dcpp::megatron::load_tensors_metadata(checkpoint);
    CHECK(tensors_metadata.size() == megatron["load_tensors_metadata"].size());
    for (const auto& [key, tensor] : megatron["load_tensors_metadata"].items()) {
      INFO(key);
      CHECK(tensors_metadata.at(key).global_shape ==
            tensor["global_shape"].get<std::vector<int64_t>>());
    }

    const dcpp::StateDict tensors = dcpp::megatron::load_plain_tensors(checkpoint);
    for (const auto& [key, tensor] : megatron["load_plain_tensors"].items()) {
      INFO(key);
      CHECK(dcpp::test::canonical(c10::IValue(tensors.at(key).tensor()))["tensor"].dump() ==
            tensor.dump());
    }
    CHECK(tensors.size() == megatron["load_plain_tensors"].size());
  }
}
