// Save with N ranks in one sharding, load with M ranks in another: real processes over Gloo,
// started by dcpp-launch; every element must come back equal.

#include "dcpp_test.h"
#include "reshard_launch.h"

#include <dcpp/checkpoint/checkpointer.h>

#include <sys/wait.h>
#include <array>
#include <cstdio>

using dcpp::test::count;
using dcpp::test::launch;

namespace {

const char* const kLayouts[] = {"row", "col", "uneven", "replicated", "block"};

}  // namespace

// Saved by N ranks as kLayouts[N % 5], loaded by M ranks as kLayouts[(N + M) % 5]. Each world size
// starts once: one launch saves on N ranks, one loads all four checkpoints on M ranks (a process
// takes most of a second of libtorch's start-up; the worker runs a list in order and fails with
// the first failure, naming it).
TEST_CASE("checkpoints saved by 1 to 4 ranks load on 1 to 4 ranks in another sharding") {
  dcpp::test::TempDir dir;
  const auto checkpoint = [&](int saving_ranks) {
    return (dir / ("saved-by-" + std::to_string(saving_ranks))).string();
  };
  for (int saving_ranks = 1; saving_ranks <= 4; ++saving_ranks) {
    INFO("save on " << saving_ranks << " ranks as " << kLayouts[saving_ranks % 5]);
    REQUIRE(launch(saving_ranks,
                   "save " + checkpoint(saving_ranks) + " " + kLayouts[saving_ranks % 5]) == 0);
  }
  for (int loading_ranks = 1; loading_ranks <= 4; ++loading_ranks) {
    std::string checkpoints, layouts;
    for (int saving_ranks = 1; saving_ranks <= 4; ++saving_ranks) {
      const char* separator = saving_ranks == 1 ? "" : ",";
      checkpoints += separator + checkpoint(saving_ranks);
      layouts += separator + std::string(kLayouts[(saving_ranks + loading_ranks) % 5]);
    }
    INFO("load " << checkpoints << " on " << loading_ranks << " ranks as " << layouts);
    REQUIRE(launch(loading_ranks, "load " + checkpoints + " " + layouts) == 0);
  }
}

namespace {

// What each rank received during a save of the replicated layout on `ranks` ranks: by default,
// and with SaveOptions::metadata_on_every_rank ("everywhere"). Every rank checks what save
// returned it: the whole committed Metadata, or its own part.
struct SaveTraffic {
  std::string output;
  long long received(int rank, bool everywhere = false) const {
    const std::string prefix = "rank " + std::to_string(rank) +
                               (everywhere ? " (metadata everywhere)" : "") + " received ";
    const std::size_t at = output.find(prefix);
    REQUIRE(at != std::string::npos);
    return std::stoll(output.substr(at + prefix.size()));
  }
};
SaveTraffic save_traffic(int ranks) {
  dcpp::test::TempDir dir;
  SaveTraffic traffic;
  REQUIRE(launch(ranks, "traffic " + (dir / "ckpt").string() + " replicated", &traffic.output) ==
          0);
  CHECK(count(traffic.output, "returned Metadata as expected") == static_cast<std::size_t>(ranks));
  return traffic;
}

}  // namespace

TEST_CASE("a rank other than the coordinator receives as much on 4 ranks as on 2") {
  // Every rank plans every tensor (data parallel): the coordinator receives every rank's plan, the
  // others only their own final plan and the status, and the Metadata only when they ask for it.
  // Were plans all-gathered, rank 1 would receive the three other ranks' plans on 4 ranks and one
  // on 2.
  const SaveTraffic on_two = save_traffic(2), on_four = save_traffic(4);
  const long long identities = 2 * 300;  // two more process identities (host names vary)
  CHECK(on_four.received(1) <= on_two.received(1) + identities);
  CHECK(on_four.received(0) > on_two.received(0));  // the coordinator receives every plan
  // Asked for, the whole Metadata is what the coordinator sends every rank more.
  CHECK(on_four.received(1, true) > on_four.received(1));
  CHECK(on_four.received(3, true) > on_four.received(3));
}

TEST_CASE("periodic saves through a plan cache reuse the global plan until the structure changes") {
  // The worker checks on every rank which of its six saves reused the global plan (a tensor added
  // on one rank, a rank's cache lost, the coordinator's lost) and that tokens cost less traffic
  // than plans; every save must then load back resharded.
  dcpp::test::TempDir dir;
  std::string output;
  REQUIRE(launch(3, "plan-cache " + dir.path().string() + " row", &output) == 0);
  CHECK(count(output, "plan cache: as expected") == 3);
  std::string saves;
  for (int n = 1; n <= 6; ++n) {
    saves += (saves.empty() ? "" : ",") + (dir / std::to_string(n)).string();
  }
  REQUIRE(launch(2, "load " + saves + " col") == 0);
}

TEST_CASE("every layout saved by 4 ranks loads as every other layout on 2") {
  dcpp::test::TempDir dir;
  std::string saved_dirs, saved_layouts, load_dirs, load_layouts;
  for (const char* saved_as : kLayouts) {
    const std::string ckpt = (dir / saved_as).string();
    saved_dirs += (saved_dirs.empty() ? "" : ",") + ckpt;
    saved_layouts += (saved_layouts.empty() ? "" : ",") + std::string(saved_as);
    for (const char* loaded_as : kLayouts) {
      if (std::string(saved_as) != loaded_as) {
        load_dirs += (load_dirs.empty() ? "" : ",") + ckpt;
        load_layouts += (load_layouts.empty() ? "" : ",") + std::string(loaded_as);
      }
    }
  }
  REQUIRE(launch(4, "save " + saved_dirs + " " + saved_layouts) == 0);
  REQUIRE(launch(2, "load " + load_dirs + " " + load_layouts) == 0);
}

TEST_CASE("a rank failing during a save fails it on every rank, naming the rank") {
  for (const char* mode : {"fail", "fail-write"}) {
    dcpp::test::TempDir dir;
    std::string output;
    REQUIRE(launch(3, std::string(mode) + " " + (dir / "ckpt").string() + " 1", &output) == 0);
    for (const char* rank : {"[rank 0]", "[rank 1]", "[rank 2]"}) {
      CHECK(output.find(std::string(rank) + " failed as expected") != std::string::npos);
    }
  }
}

TEST_CASE("a rank failing while reading fails the load on every rank, naming the rank") {
  std::string output;
  REQUIRE(launch(3, "fail-read " + dcpp::test::shared_row_checkpoint() + " 2", &output) == 0);
  for (const char* rank : {"[rank 0]", "[rank 1]", "[rank 2]"}) {
    // The failed rank's own kind (its storage threw kIo), on every rank.
    CHECK(output.find(std::string(rank) + " failed as expected (I/O)") != std::string::npos);
  }
}

namespace {

// Flips a byte in the middle of each of `rank`'s own chunks of the model (row layout: no other
// rank reads them) in the checkpoint `dir`.
void corrupt_chunks_of(const std::filesystem::path& dir, int rank) {
  const std::string file = "__" + std::to_string(rank) + "_0.distcp";
  std::string bytes = dcpp::test::read_file(dir / file);
  int flipped = 0;
  for (const auto& [index, info] : dcpp::read_metadata(dir).storage_data) {
    if (info.relative_path == file && index.fqn.rfind("model.", 0) == 0) {
      bytes.at(static_cast<std::size_t>(info.offset + info.length / 2)) ^= 0x10;
      ++flipped;
    }
  }
  REQUIRE(flipped > 0);
  dcpp::test::write_file(dir / file, bytes);
}

}  // namespace

TEST_CASE("one rank reading corrupt bytes fails the load with kCorrupt on every rank") {
  // With "io0" rank 0's storage fails too: ranks that fail with different kinds are kRankFailed.
  dcpp::test::TempDir dir;
  std::filesystem::copy(dcpp::test::shared_row_checkpoint(), dir / "ckpt");
  corrupt_chunks_of(dir / "ckpt", 2);
  for (const auto& [argument, kind] :
       {std::pair<std::string, std::string>{"2", "corrupt"},
        std::pair<std::string, std::string>{"2io0", "rank failed"}}) {
    std::string output;
    REQUIRE(launch(3, "corrupt-read " + (dir / "ckpt").string() + " " + argument, &output) == 0);
    for (const char* rank : {"[rank 0]", "[rank 1]", "[rank 2]"}) {
      CHECK(output.find(std::string(rank) + " failed as expected (" + kind + ")") !=
            std::string::npos);
    }
  }
}

TEST_CASE("a Stateful's load_state_dict() throwing on one rank fails the load on every rank") {
  std::string output;
  REQUIRE(launch(3, "fail-apply " + dcpp::test::shared_row_checkpoint() + " 1", &output) == 0);
  for (const char* rank : {"[rank 0]", "[rank 1]", "[rank 2]"}) {
    CHECK(output.find(std::string(rank) + " failed as expected") != std::string::npos);
  }
}

TEST_CASE("an all-or-nothing load that fails on one rank changes no rank's state") {
  std::string output;
  REQUIRE(launch(3, "atomic-read " + dcpp::test::shared_row_checkpoint() + " 2", &output) == 0);
  for (const char* rank : {"[rank 0]", "[rank 1]", "[rank 2]"}) {
    CHECK(output.find(std::string(rank) + " targets unchanged") != std::string::npos);
  }
}

TEST_CASE(
    "a rank killed while saving makes the others fail within the timeout naming it, committing "
    "nothing") {
  dcpp::test::TempDir dir;
  std::string output;
  // dcpp-launch reports the killed rank (128 + SIGKILL); the survivors ignore its SIGTERM, so the
  // lines below come from their own failures.
  REQUIRE(launch(3, "die-save " + (dir / "ckpt").string() + " 1", &output) == 128 + 9);
  CHECK(output.find("rank 1 was killed by signal 9") != std::string::npos);
  for (const char* rank : {"[rank 0]", "[rank 2]"}) {
    const std::size_t line = output.find(std::string(rank) + " failed as expected");
    REQUIRE(line != std::string::npos);
    const std::string text = output.substr(line, output.find('\n', line) - line);
    INFO(text);
    CHECK(text.find("(rank failed)") != std::string::npos);
    CHECK(text.find("rank 1 (pid ") != std::string::npos);
    CHECK(text.find(") has exited") != std::string::npos);
  }
  CHECK_FALSE(std::filesystem::exists(dir / "ckpt" / ".metadata"));
}

TEST_CASE("PyTorch's two-rank fixture loads on 1, 2 and 3 ranks in every layout") {
  const std::string fixture = dcpp::test::fixture("two_rank_sharded").string();
  std::string layouts;
  for (const char* layout : kLayouts) {
    layouts += (layouts.empty() ? "" : ",") + std::string(layout);
  }
  for (int ranks = 1; ranks <= 3; ++ranks) {
    std::string output;
    REQUIRE(launch(ranks, "fixture " + fixture + " " + layouts, &output) == 0);
    CHECK(count(output, ": equal") == std::size(kLayouts) * ranks);
  }
}

TEST_CASE("a checkpoint saved without collectives by 3 ranks loads resharded on 1, 2 and 4 ranks") {
  dcpp::test::TempDir dir;
  const std::string ckpt = (dir / "ckpt").string();
  REQUIRE(launch(3, "save-local " + ckpt + " uneven") == 0);
  REQUIRE_FALSE(std::filesystem::exists(dir / "ckpt" / ".metadata"));
  REQUIRE(std::filesystem::exists(dir / "ckpt" / "__2.metadata"));
  REQUIRE(launch(2, "load " + ckpt + " row") == 0);
  REQUIRE(launch(1, "load " + ckpt + " col") == 0);
  REQUIRE(launch(4, "load " + ckpt + " block") == 0);
  REQUIRE(launch(3, "load " + ckpt + " replicated") == 0);
}

TEST_CASE("a save without collectives needs no other rank") {
  // Ranks 0 and 2 exit as soon as the group exists; rank 1 saves alone. A collective would fail
  // (the peers are gone), so this passes only if the save issues none.
  dcpp::test::TempDir dir;
  std::string output;
  REQUIRE(launch(3, "save-alone " + (dir / "ckpt").string() + " 1", &output) == 0);
  REQUIRE(output.find("rank 1 saved alone") != std::string::npos);
  REQUIRE(std::filesystem::exists(dir / "ckpt" / "__1.metadata"));
  REQUIRE_FALSE(std::filesystem::exists(dir / "ckpt" / "__0.metadata"));
  REQUIRE_FALSE(std::filesystem::exists(dir / "ckpt" / ".metadata"));
}

TEST_CASE("PyTorch 2.14's use_collectives=False checkpoint loads resharded on 1, 2 and 4 ranks") {
  const std::string fixture =
      (std::filesystem::path(DCPP_TEST_FIXTURES) / "pytorch-2.14" / "no_collectives_3").string();
  for (int ranks : {1, 2, 4}) {
    INFO(ranks << " ranks");
    std::string output;
    REQUIRE(launch(ranks, "fixture " + fixture + " row,col", &output) == 0);
    CHECK(count(output, ": equal") == 2 * static_cast<std::size_t>(ranks));
  }
}

TEST_CASE("every PyTorch 2.14 fixture loads sharded on 2 and 3 ranks, equal to it loaded whole") {
  std::string fixtures, layouts;
  std::size_t loads = 0;
  for (const char* name : {"default_2x", "two_rank_sharded", "model_optim_adam", "zstd_single",
                           "safetensors_format", "no_collectives_3", "hf_consolidated"}) {
    for (const char* layout : {"row", "col"}) {
      fixtures += (fixtures.empty() ? "" : ",") + dcpp::test::fixture(name, "2.14").string();
      layouts += (layouts.empty() ? "" : ",") + std::string(layout);
      ++loads;
    }
  }
  for (int ranks : {2, 3}) {
    INFO("on " << ranks << " ranks");
    std::string output;
    CHECK(launch(ranks, "whole " + fixtures + " " + layouts, &output) == 0);
    CHECK(count(output, ": equal") == loads * ranks);
  }
}
