// The plugin's examples on several real ranks (dcpp-launch, Gloo on loopback): preemption saves
// the same step on every rank and the job resumes from it; data-parallel training with async
// checkpoints keeps what the retention policy says.

#include "dcpp_test.h"

#include <dcpp/plugin/checkpoint_callback.h>
#include <dcpp/plugin/checkpoint_info.h>

#include <regex>

namespace fs = std::filesystem;
using dcpp::test::run_command;
using dcpp::test::TempDir;

namespace {

std::string launch(int ranks, const std::string& program, const std::string& args) {
  return std::string(DCPP_LAUNCH) + " --fork -n " + std::to_string(ranks) + " -- " + program + " " +
         args + " 2>&1";
}

std::vector<std::string> matches(const std::string& text, const std::string& pattern) {
  std::vector<std::string> found;
  const std::regex re(pattern);
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator();
       ++it) {
    found.push_back((*it)[0]);
  }
  return found;
}

}  // namespace

TEST_CASE("preemption on one rank saves the same step on every rank and the job resumes") {
  TempDir dir;
  const std::string root = (dir / "ckpt").string();
  // Rank 1 gets SIGTERM at step 3.
  auto first = run_command(launch(2, DCPP_PREEMPTION_DEMO, root + " 6 3 1"));
  INFO(first.output);
  REQUIRE(first.exit_code == dcpp::CheckpointCallback::kPreemptedExitCode);
  CHECK(matches(first.output, "rank [01] preempted at step 3 samples 6").size() == 2);
  // The coordinator says where it started: there was nothing to resume from.
  CHECK(first.output.find("no checkpoint under '" + root + "', starting fresh") !=
        std::string::npos);
  REQUIRE(dcpp::latest_checkpoint(root));
  CHECK(dcpp::latest_checkpoint(root)->step == 3);
  CHECK(dcpp::latest_checkpoint(root)->world_size == 2);

  auto second = run_command(launch(2, DCPP_PREEMPTION_DEMO, root + " 6"));
  INFO(second.output);
  REQUIRE(second.exit_code == 0);
  CHECK(matches(second.output, "rank [01] resumed at step 3").size() == 2);
  CHECK(second.output.find("resumed from '" + root + "/step-00000003' (step 3)") !=
        std::string::npos);
  CHECK(matches(second.output, "rank [01] finished at step 6 samples 12").size() == 2);

  // The same job never interrupted ends with the same parameters.
  auto whole = run_command(launch(2, DCPP_PREEMPTION_DEMO, (dir / "whole").string() + " 6"));
  REQUIRE(whole.exit_code == 0);
  const auto resumed_sums = matches(second.output, "rank 0 checksum [-0-9.]+");
  const auto whole_sums = matches(whole.output, "rank 0 checksum [-0-9.]+");
  REQUIRE(resumed_sums.size() == 1);
  CHECK(resumed_sums == whole_sums);
}

TEST_CASE("data-parallel training with async checkpoints keeps the latest two") {
  TempDir dir;
  const std::string root = (dir / "ckpt").string();
  auto run = run_command(launch(2, DCPP_DDP_EXAMPLE, root + " 8 3"));
  INFO(run.output);
  REQUIRE(run.exit_code == 0);
  std::vector<int64_t> steps;
  for (const auto& c : dcpp::list_checkpoints(root)) steps.push_back(c.step);
  CHECK(steps == std::vector<int64_t>{6, 8});
  for (const auto& entry : fs::directory_iterator(root)) {
    CHECK(entry.path().filename().string().find('.') == std::string::npos);
  }
  // Run again with more steps: it resumes from step 8.
  auto more = run_command(launch(2, DCPP_DDP_EXAMPLE, root + " 10 3"));
  INFO(more.output);
  REQUIRE(more.exit_code == 0);
  CHECK(more.output.find("resumed from " + root + "/step-00000008 at step 8") != std::string::npos);
  CHECK(dcpp::latest_checkpoint(root)->step == 10);
}

TEST_CASE("the plugin recipes of docs/plugin.md hold on one rank and on two") {
  for (int ranks : {1, 2}) {
    TempDir dir;
    auto run = run_command(launch(ranks, DCPP_PLUGIN_RECIPES, dir.path().string()));
    INFO(run.output);
    REQUIRE(run.exit_code == 0);
    for (const char* recipe :
         {"retention", "resume_from_step", "restore_request", "missing_step", "require_resume"}) {
      CHECK(matches(run.output, std::string("recipe ") + recipe + ": ok").size() ==
            static_cast<size_t>(ranks));
    }
  }
}
