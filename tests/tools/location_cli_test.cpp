// The `dcpp` commands resolve a checkpoint's location through the registries (location_driver.h,
// checkpoint_layout.h), as the library's entry points do: a driver a program registers serves
// inspect, verify and diff with no change to them.

#include "dcpp_test.h"
#include "storage/alias_driver.h"

#include "diff/diff_command.h"
#include "inspect/inspect_command.h"
#include "verify/verify_command.h"

#include <dcpp/checkpoint/checkpointer.h>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

TEST_CASE("inspect, verify and diff read a registered driver's location from its URL alone") {
  dcpp::test::TempDir tmp;
  dcpp::test::AliasDriver& driver = dcpp::test::alias_driver();
  driver.default_root = tmp.path();
  dcpp::StateDict state;
  state.insert("w", at::arange(12, at::kFloat).reshape({3, 4}));
  state.insert("step", c10::IValue(int64_t{3}));
  dcpp::save(state, "alias://ckpt");
  REQUIRE(std::filesystem::exists(tmp / "ckpt" / ".metadata"));

  const nlohmann::json inspection = dcpp::tools::inspect_checkpoint("alias://ckpt", true);
  CHECK(inspection["format"] == "pytorch-dcp");
  CHECK(inspection["entries"].size() == 2);
  CHECK(inspection["entries"]["w"]["shape"] == nlohmann::json::array({3, 4}));

  const nlohmann::json report = dcpp::tools::verify_checkpoint("alias://ckpt");
  CHECK(report["ok"] == true);
  CHECK(report["entries"] == 2);

  const nlohmann::json diff = dcpp::tools::diff_checkpoints("alias://ckpt", tmp / "ckpt");
  CHECK(diff["equal"] == true);
  CHECK(diff["a_format"] == "dcp");
  driver.default_root.clear();
}
