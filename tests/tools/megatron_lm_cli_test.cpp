// The command line on checkpoints Megatron-LM's own code wrote (tests/fixtures/megatron-core/,
// make_megatron_lm_fixtures.py): inspect shows every value, verify passes, convert to DCP's and
// Megatron-Core's layouts keeps every value, and what the converted checkpoints hold is, value
// for value, what Megatron's own loaders returned for the original (the manifest's
// "megatron_load"): the common state round-trips.

#include "dcpp_test.h"
#include "python_canonical.h"
#include "tools_test_util.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/checkpoint/megatron.h>

#include <nlohmann/json.hpp>

#include <fstream>

using dcpp::test::run_cli;
using nlohmann::json;

namespace {

namespace fs = std::filesystem;

// The JSON a command printed, without the log lines (stderr) captured with it.
json printed_json(const std::string& output) {
  // The printed object opens and closes at the start of a line; log lines do not.
  const std::size_t begin = output.front() == '{' ? 0 : output.find("\n{") + 1;
  const std::size_t end = output.find("\n}", begin);
  REQUIRE(end != std::string::npos);
  return json::parse(output.substr(begin, end + 2 - begin));
}

}  // namespace

TEST_CASE(
    "Megatron-LM's checkpoints inspect, verify, convert and diff; the common state round-trips") {
  for (const std::string name :
       {"mlm_args_common", "mcore_dp_reshardable", "mcore_v014_fully_sharded_model_space"}) {
    INFO(name);
    dcpp::test::TempDir dir;
    const fs::path original = dcpp::test::megatron_fixture(name);
    const json megatron = dcpp::test::megatron_fixture_manifest(name)["megatron_load"];

    const auto inspected = run_cli("inspect --json " + original.string());
    REQUIRE(inspected.exit_code == 0);
    const json inspection = printed_json(inspected.output);
    CHECK(inspection["format"] == "megatron-core");
    if (name == "mlm_args_common") {
      CHECK_THAT(inspected.output, Catch::Contains(R"("__global__": "torch.bfloat16")"));
    }

    CHECK(run_cli("verify " + original.string()).exit_code == 0);
    CHECK(run_cli("diff " + original.string() + " " + original.string()).exit_code == 0);

    for (const std::string to : {"dcp", "megatron"}) {
      INFO("--to " << to);
      const fs::path converted = dir / to;
      REQUIRE(run_cli("convert " + original.string() + " " + converted.string() + " --to " + to)
                  .exit_code == 0);
      CHECK(run_cli("verify " + converted.string()).exit_code == 0);
      const auto diff = run_cli("diff --json " + original.string() + " " + converted.string());
      INFO(diff.output);
      CHECK(diff.exit_code == 0);
      CHECK(printed_json(diff.output)["equal"] == true);
    }
    // What Megatron's load_common_state_dict gave for the original, dcpp's gives for the copy.
    CHECK(dcpp::test::sorted_sets(
              dcpp::test::canonical(dcpp::megatron::load_common_state_dict(dir / "megatron")))
              .dump() == dcpp::test::sorted_sets(megatron["load_common_state_dict"]).dump());
    for (const auto& [key, data] : megatron["loaded_sharded_objects"].items()) {
      INFO(key);
      const json ours =
          dcpp::test::canonical(dcpp::load_from_keys(dir / "megatron", {key}).at(key));
      CHECK(dcpp::test::sorted_sets(ours.at(0)).dump() == dcpp::test::sorted_sets(data).dump());
    }
  }
}
