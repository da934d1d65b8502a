// The plugin's examples on several real ranks (dcpp-launch, Gloo on loopback): preemption saves
// the same step on every rank and the job resumes from it; data-parallel training with async
// checkpoints keeps what the retention policy says.

#include "dcpp_test.h"

#include <dcpp/plugin/checkpoint_callback.h>
#include <dcpp/plugin/checkpoint_info.h>
#include <dcpp/storage/memory_slots.h>

#include <unistd.h>

#include <fstream>

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

namespace {

// The lines "step S loss L" of a run of memory_tier_resume, from step `first` to `last`.
std::vector<std::string> losses_of(const std::string& output, int first, int last = 1 << 30) {
  std::vector<std::string> lines;
  for (const std::string& line : matches(output, "step [0-9]+ loss [-0-9a-fx.p+]+")) {
    const int step = std::stoi(line.substr(5));
    if (step >= first && step <= last) lines.push_back(line);
  }
  return lines;
}

// memory_tier_resume on 2 ranks with its memory tier named `job` (SLURM_JOB_ID).
std::string memory_tier_job(const std::string& job, const std::string& args) {
  return "SLURM_JOB_ID=" + job + " " + launch(2, DCPP_MEMORY_TIER_EXAMPLE, args);
}

// A job name of this test process's own, its regions removed when the test ends.
struct MemoryJob {
  explicit MemoryJob(const std::string& what)
      : id(what + "-" + std::to_string(::getpid())), name("slurm-" + id) {
    release();
  }
  ~MemoryJob() { release(); }
  void release() const {
    for (int r = 0; r < 2; ++r) dcpp::MemorySlots(name, r, 1).release();
  }
  bool holds_regions() const {
    for (const auto& entry : fs::directory_iterator("/dev/shm")) {
      if (entry.path().filename().string().rfind("dcpp." + name + ".", 0) == 0) return true;
    }
    return false;
  }
  std::string id, name;
};

}  // namespace

TEST_CASE("a rank SIGKILLed mid-step: the job resumes from the memory tier, bit for bit") {
  // Copied on the training thread, or while the next step's forward and backward run.
  const bool copy_while_training = GENERATE(false, true);
  const std::string copying = copy_while_training ? " 0 1" : " 0 0";  // REPLICAS, COPY_...
  INFO("copy_while_training " << copy_while_training);
  TempDir dir;
  MemoryJob job("killed"), whole_job("whole");
  const std::string root = (dir / "killed").string();
  auto whole = run_command(memory_tier_job(whole_job.id, (dir / "whole").string() + " 10"));
  INFO(whole.output);
  REQUIRE(whole.exit_code == 0);
  REQUIRE(losses_of(whole.output, 1).size() == 10);

  // Rank 1 dies in the middle of step 7, after its copy of step 6 ended (on_before_optimizer_step
  // waits for it): every rank holds steps 5 and 6 in memory, the disk 4.
  auto killed = run_command(memory_tier_job(job.id, root + " 10 6 1" + copying));
  INFO(killed.output);
  REQUIRE(killed.exit_code != 0);
  REQUIRE(killed.output.find("rank 1: SIGKILL in the middle of step 7") != std::string::npos);
  CHECK(losses_of(killed.output, 1) == losses_of(whole.output, 1, 6));
  REQUIRE(job.holds_regions());
  auto resumed = run_command(memory_tier_job(job.id, root + " 10 -1 1" + copying));
  INFO(resumed.output);
  REQUIRE(resumed.exit_code == 0);
  CHECK(matches(resumed.output,
                "rank [01] resumed from '/dev/shm/dcpp\\." + job.name + "\\.[01]\\.[01]' at step 6")
            .size() == 2);
  CHECK(losses_of(resumed.output, 7) == losses_of(whole.output, 7));
  // The job ended well: its last step is on disk and its memory regions are gone.
  CHECK(dcpp::latest_checkpoint(root)->step == 10);
  CHECK_FALSE(job.holds_regions());
}

TEST_CASE("a corrupted memory slot is passed over for the other; without memory, the disk") {
  TempDir dir;
  MemoryJob job("corrupted"), whole_job("whole-2");
  const std::string root = (dir / "ckpt").string();
  auto whole = run_command(memory_tier_job(whole_job.id, (dir / "whole").string() + " 10"));
  REQUIRE(whole.exit_code == 0);

  auto killed = run_command(memory_tier_job(job.id, root + " 10 6 0"));
  INFO(killed.output);
  REQUIRE(killed.exit_code != 0);
  // Rank 1's copy of step 6 damaged: the ranks agree on step 5, which each holds intact.
  bool flipped = false;
  for (const dcpp::MemoryStep& held : dcpp::MemorySlots(job.name, 1, 1).complete_steps()) {
    if (held.step != 6) continue;
    // Inside the step's bytes (the region holds some room after them), past its 4 KiB header.
    const std::streamoff at = 4096 + static_cast<std::streamoff>(held.bytes.size()) - 5;
    std::fstream file("/dev/shm" + held.region, std::ios::in | std::ios::out | std::ios::binary);
    file.seekg(at);
    const char byte = static_cast<char>(file.get());
    file.seekp(at);
    file.put(static_cast<char>(byte ^ 0x40));
    flipped = static_cast<bool>(file);
  }
  REQUIRE(flipped);
  auto resumed = run_command(memory_tier_job(job.id, root + " 10 8 0"));  // killed in step 9
  INFO(resumed.output);
  REQUIRE(resumed.exit_code != 0);
  CHECK(resumed.output.find("corrupted (step 6") != std::string::npos);
  CHECK(matches(resumed.output, "rank [01] resumed from '/dev/shm/[^']+' at step 5").size() == 2);
  CHECK(losses_of(resumed.output, 6) == losses_of(whole.output, 6, 8));

  // The host lost its memory (a reboot; here the regions removed): the disk's step 8 serves.
  job.release();
  auto from_disk = run_command(memory_tier_job(job.id, root + " 10"));
  INFO(from_disk.output);
  REQUIRE(from_disk.exit_code == 0);
  CHECK(
      matches(from_disk.output, "rank [01] resumed from '[^']+/step-00000008' at step 8").size() ==
      2);
  CHECK(losses_of(from_disk.output, 9) == losses_of(whole.output, 9));
}

TEST_CASE("dcpp-launch --memory-root writes a dead job's newest memory step to disk") {
  TempDir dir;
  MemoryJob job("flushed"), whole_job("whole-3");
  const std::string root = (dir / "ckpt").string();
  auto whole = run_command(memory_tier_job(whole_job.id, (dir / "whole").string() + " 10"));
  REQUIRE(whole.exit_code == 0);

  // Rank 1 dies in the middle of step 7; the launcher, once every rank has exited, commits step 6
  // from memory (the disk held step 4) and removes the regions.
  const std::string flushing = std::string(DCPP_LAUNCH) + " --fork -n 2 --memory-root " + root +
                               " --memory-job " + job.name + " -- " + DCPP_MEMORY_TIER_EXAMPLE +
                               " " + root + " 10 6 1 2>&1";
  auto killed = run_command("SLURM_JOB_ID=" + job.id + " " + flushing);
  INFO(killed.output);
  REQUIRE(killed.exit_code != 0);  // the job's failure, whatever the flush did
  CHECK(killed.output.find("step 6 of 2 ranks written to '" + root + "/step-00000006'") !=
        std::string::npos);
  REQUIRE(dcpp::latest_checkpoint(root));
  CHECK(dcpp::latest_checkpoint(root)->step == 6);
  CHECK_FALSE(job.holds_regions());

  // Started again from scratch (no memory left), it resumes from that step, from disk.
  auto resumed = run_command(memory_tier_job(job.id, root + " 10"));
  INFO(resumed.output);
  REQUIRE(resumed.exit_code == 0);
  CHECK(matches(resumed.output, "rank [01] resumed from '[^']+/step-00000006' at step 6").size() ==
        2);
  CHECK(losses_of(resumed.output, 7) == losses_of(whole.output, 7));
}
