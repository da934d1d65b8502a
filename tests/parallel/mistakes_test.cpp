// The natural mistakes of N-D layouts, each made on 4 real processes (dcpp-launch, Gloo on
// loopback, tests/parallel/worker/mistake_worker.cpp): each must be refused on every rank with a
// CheckpointError (kUsage) naming the layer or group and the fix, before a step trains on a wrong
// model, where the constructor can tell. docs/parallel.md, "Mistakes", lists them with what dcpp
// says.

#include "dcpp_test.h"

#include <dcpp/checkpoint/checkpointer.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

constexpr int kRanks = 4;

// Every rank's line: "accepted", or "refused <kind>: <message>".
std::vector<std::string> make_mistake(const std::string& mistake,
                                      const std::string& checkpoint = "") {
  const dcpp::test::TempDir out;
  const std::string command = std::string(DCPP_LAUNCH) + " --fork -n " + std::to_string(kRanks) +
                              " -- " + DCPP_MISTAKE_WORKER + " " + mistake + " " +
                              out.path().string() + (checkpoint.empty() ? "" : " " + checkpoint);
  const dcpp::test::CommandResult result = dcpp::test::run_command(command);
  INFO(command << "\n" << result.output);
  REQUIRE(result.exit_code == 0);
  std::vector<std::string> lines;
  for (int rank = 0; rank < kRanks; ++rank) {
    std::ifstream file(out / ("rank" + std::to_string(rank) + ".txt"));
    std::ostringstream text;
    text << file.rdbuf();
    lines.push_back(text.str());
  }
  return lines;
}

void require_refused_everywhere(const std::vector<std::string>& lines,
                                const std::vector<std::string>& phrases) {
  for (std::size_t rank = 0; rank < lines.size(); ++rank) {
    INFO("rank " << rank << ": " << lines[rank]);
    CHECK(lines[rank].rfind("refused usage: ", 0) == 0);
    for (const std::string& phrase : phrases) CHECK_THAT(lines[rank], Catch::Contains(phrase));
  }
}

}  // namespace

TEST_CASE("the right tensor-parallel layout trains and saves: the control of the mistakes") {
  const dcpp::test::TempDir dir;
  for (const std::string& line : make_mistake("none", (dir / "ckpt").string())) {
    CHECK(line == "accepted\n");
  }
  const dcpp::StateDict saved = dcpp::load_from_keys(dir / "ckpt");
  CHECK(saved.at("0.weight").tensor().sizes() == at::IntArrayRef({8, 4}));  // the unsplit shapes
  CHECK(saved.at("2.weight").tensor().sizes() == at::IntArrayRef({4, 8}));
}

TEST_CASE("tensor-parallel layers built over the data-parallel group are refused") {
  require_refused_everywhere(
      make_mistake("layers-over-dp"),
      {"layer '0' (ColumnParallelLinear) is split over a group", "(global rank ",
       "of the tensor group is rank ", "built over another group than the tensor group",
       "TensorParallel(model, mesh.group(\"tp\"), mesh.group(\"dp\"))"});
}

TEST_CASE("TensorParallel given the tensor and data groups swapped is refused") {
  require_refused_everywhere(make_mistake("swapped-groups"),
                             {"layer '0' (ColumnParallelLinear)", "the groups swapped"});
}

TEST_CASE("TensorParallel given one group as both tensor and data group is refused") {
  require_refused_everywhere(
      make_mistake("same-group-twice"),
      {"of the data-parallel group is rank 1 of 2 in its tensor-parallel group, rank 0 (global "
       "rank ",
       "is rank 0 of 2: the members of the data-parallel group must hold "
       "the same piece",
       "not the same group twice nor swapped"});
}

TEST_CASE("HSDP given one group as both shard and replicate group is refused") {
  require_refused_everywhere(make_mistake("hsdp-same-group-twice"),
                             {"FullyShardedDataParallel on rank", "of its replicate group",
                              "the same shard rank", "not the same group twice nor swapped"});
}

TEST_CASE("DataParallel over a tensor-parallel model is refused, over the world or over dp") {
  for (const char* mistake : {"ddp-over-world", "ddp-over-dp"}) {
    INFO(mistake);
    require_refused_everywhere(make_mistake(mistake),
                               {"DataParallel: layer '0' (ColumnParallelLinear) and 1 other "
                                "layer(s) are split over a tensor-parallel group",
                                "Describe such a model with TensorParallel"});
  }
}

TEST_CASE("FullyShardedDataParallel over a tensor-parallel model is refused") {
  require_refused_everywhere(make_mistake("fsdp-over-dp"),
                             {"FullyShardedDataParallel: layer '0' (ColumnParallelLinear)"});
}

TEST_CASE("a pipeline stage of tensor-parallel layers without TensorParallel within is refused") {
  require_refused_everywhere(make_mistake("pipeline-without-within"),
                             {"PipelineStage without a layout within: layer",
                              "PipelineStage(stage_modules, first, mesh.group(\"pp\"), that "
                              "TensorParallel)"});
}

TEST_CASE(
    "the tensor-parallel group as the checkpoint group: one replica commits, the other is "
    "refused") {
  // Each data-parallel replica's tensor group saves the whole model into one directory. Whichever
  // comes second finds the directory locked, or (when the first already committed) holding a
  // checkpoint: refused on both of its ranks, never a mix of the two saves' files.
  const dcpp::test::TempDir dir;
  const std::vector<std::string> lines =
      make_mistake("tp-group-as-checkpoint-group", (dir / "ckpt").string());
  int accepted = 0;
  for (std::size_t rank = 0; rank < lines.size(); ++rank) {
    INFO("rank " << rank << ": " << lines[rank]);
    CHECK(lines[rank] == lines[rank ^ 1]);  // the tensor-parallel pair: one outcome
    if (lines[rank] == "accepted\n") {
      ++accepted;
      continue;
    }
    CHECK(lines[rank].rfind("refused usage: ", 0) == 0);
    const bool locked = lines[rank].find("another save is writing there") != std::string::npos;
    const bool committed = lines[rank].find("already holds a checkpoint") != std::string::npos;
    CHECK((locked || committed));
  }
  CHECK(accepted == 2);
  const dcpp::StateDict saved = dcpp::load_from_keys(dir / "ckpt");
  CHECK(saved.at("0.weight").tensor().sizes() == at::IntArrayRef({8, 4}));
}
