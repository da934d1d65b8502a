// The coordinator's second save of the same structure (SavePlanCache) against its first, at scale.
// One process runs rank 0 of R, the coordinator, alone: a Collectives of its own hands it the
// messages the other R - 1 ranks send (made before each step from the simulated job's plans, as
// those ranks make them) and counts the bytes each rank sends and receives. Between the messages,
// the coordinator runs save()'s own code: plan_save and final_plan
// (checkpoint/cached_save_planning.h), then commit_save (checkpoint/save_commit.h) with the file
// system writer's finish (no fsync). The second save goes to a new directory, as a manager's next
// step does, with the same cache.
//
//   build/bench/plan_cache_bench [--ranks 1024,10000] [--tensors 1000]
//                                [--layout fsdp|tpdp|hsdp] [--group 8] [--dir D]
//
// What it measures: the coordinator's time and peak memory in each step of either save, and each
// other rank's traffic. What it does not: the collectives' own time (a gather of R messages over
// Gloo), what the other ranks do, and the data itself (the write results say where items would
// land; nothing but the .metadata and the checksum file is written).

#include <dcpp/extend.h>

#include "bench_common.h"
#include "checkpoint/cached_save_planning.h"
#include "checkpoint/replicated_items.h"
#include "checkpoint/save_commit.h"
#include "dist/spmd_step.h"
#include "planner/plan_codec.h"
#include "simulated_job.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace fs = std::filesystem;

namespace {

/// Rank 0 of `size`, alone. A gather returns the coordinator's own message and the other ranks':
/// `from_others` (moved), else copies of `copy_from[1..]`, else, when both are empty, what the
/// coordinator sent (as every rank offers the same token on a second save). A scatter hands each
/// message to `on_scatter`, for the bench to make the rank's next one from. The time this class
/// spends there and copying is `own_seconds`, to be left out of the coordinator's.
class CoordinatorAlone final : public dcpp::detail::Collectives {
 public:
  explicit CoordinatorAlone(int size) : size_(size) {}
  int rank() const override { return 0; }
  int size() const override { return size_; }
  std::vector<std::string> all_gather(const std::string&) override {
    throw std::logic_error("a step failed (only failures all-gather)");
  }
  std::string broadcast(const std::string& bytes, int) override {
    received_ += bytes.size() * others();
    return bytes;
  }
  std::vector<std::string> gather(const std::string& bytes, int) override {
    const auto start = bench::Clock::now();
    std::vector<std::string> all;
    all.reserve(static_cast<std::size_t>(size_));
    all.push_back(bytes);
    if (from_others.empty() && copy_from != nullptr) {
      all.insert(all.end(), copy_from->begin() + 1, copy_from->end());
    } else if (from_others.empty()) {
      all.resize(static_cast<std::size_t>(size_), bytes);
    }
    for (std::string& message : from_others) all.push_back(std::move(message));
    from_others.clear();
    for (std::size_t r = 1; r < all.size(); ++r) sent_ += all[r].size();
    own_seconds += bench::seconds_since(start);
    return all;
  }
  std::string scatter(const std::vector<std::string>& per_rank, int) override {
    const auto start = bench::Clock::now();
    for (std::size_t r = 0; r < per_rank.size(); ++r) {
      if (r > 0) received_ += per_rank[r].size();
      on_scatter(static_cast<int>(r), per_rank[r]);
    }
    own_seconds += bench::seconds_since(start);
    return per_rank.front();
  }
  std::vector<int64_t> max_over_ranks(std::vector<int64_t> values) override {
    sent_ += 8 * values.size() * others();
    received_ += 8 * values.size() * others();
    return values;
  }
  void send(const std::string&, int) override { throw std::logic_error("no point to point"); }
  std::string receive(int) override { throw std::logic_error("no point to point"); }

  /// Bytes one rank other than the coordinator sent and received, on average, since the last call.
  std::pair<double, double> take_traffic_per_rank() {
    const auto per_rank = [&](uint64_t& bytes) {
      const double value = static_cast<double>(bytes) / static_cast<double>(others());
      bytes = 0;
      return value;
    };
    const double sent = per_rank(sent_);
    return {sent, per_rank(received_)};
  }

  std::vector<std::string> from_others;  // ranks 1..R-1's messages in the next gather
  const std::vector<std::string>* copy_from = nullptr;  // or these, by rank, copied
  std::function<void(int rank, const std::string& message)> on_scatter;
  double own_seconds = 0;

 private:
  std::size_t others() const { return static_cast<std::size_t>(size_ - 1); }
  int size_;
  uint64_t sent_ = 0, received_ = 0;
};

struct Step {
  double wall = 0, peak_mib = 0, start_mib = 0;
  double sent = 0, received = 0;  // per rank other than the coordinator
};

template <typename Run>
Step timed(CoordinatorAlone& ranks, Run&& run) {
  bench::reset_peak_memory();
  Step step;
  step.start_mib = bench::resident_memory().now_mib;
  ranks.own_seconds = 0;
  const auto start = bench::Clock::now();
  run();
  step.wall = bench::seconds_since(start) - ranks.own_seconds;
  step.peak_mib = bench::resident_memory().peak_mib;
  std::tie(step.sent, step.received) = ranks.take_traffic_per_rank();
  return step;
}

struct Job {
  int ranks;
  int64_t tensors;
  bench::Layout layout;
  int group;
};

struct SaveFigures {
  Step planning, commit;
  bool reused = false;
  uintmax_t metadata_bytes = 0;
};

/// One save on the coordinator. `written` holds, by rank, each rank's message of the writing step
/// in the last save (kept for a rank told its final plan is the same) and is updated.
SaveFigures coordinator_save(CoordinatorAlone& ranks, dcpp::SavePlanCache& cache, const Job& job,
                             const fs::path& dir, std::vector<std::string>& written) {
  SaveFigures f;
  fs::remove_all(dir);
  dcpp::DefaultSavePlanner planner;
  dcpp::FileSystemWriter writer(dir, dcpp::FileSystemWriterOptions().with_sync_files(false));
  const bool find_replicas = job.layout != bench::Layout::kFsdp && job.group < job.ranks;
  dcpp::detail::SavePlanningSteps steps;
  steps.local = [&] {
    writer.set_up(0, true);
    return writer.prepare_local_plan(
        bench::local_plan(job.ranks, job.tensors, job.layout, job.group, 0));
  };
  steps.global = [&](std::vector<dcpp::SavePlan> plans) {
    return planner.create_global_plan(std::move(plans));
  };
  steps.prepare_global = [&](std::vector<dcpp::SavePlan> plans) {
    return writer.prepare_global_plan(std::move(plans));
  };
  steps.find_replicas = find_replicas;
  const std::string context = std::to_string(job.ranks) + " ranks, the bench's planner and writer";

  // The other ranks' offers: their plans in full, unless the cache holds a committed save (then
  // every rank's plan is as before and each offers the coordinator's token).
  const bool cached = cache.reused_plans() + cache.full_plans() > 0;
  if (!cached) {
    for (int r = 1; r < job.ranks; ++r) {
      ranks.from_others.push_back(dcpp::detail::encode_full_plan_offer(
          dcpp::detail::encode_save_plan(writer.prepare_local_plan(
              bench::local_plan(job.ranks, job.tensors, job.layout, job.group, r)))));
    }
  }
  // Each rank writes its final plan's items (as a reply of "plan" or "same" gives it) and sends
  // where they landed, with zeros for the checksums of its replicated items (all replicas equal).
  written.resize(static_cast<std::size_t>(job.ranks));
  ranks.on_scatter = [&](int r, const std::string& message) {
    // A step's message (spmd_step.cpp): the failure's kind, its message, and the reply.
    const std::vector<std::string> reply =
        dcpp::detail::decode_strings(dcpp::detail::decode_strings(message).at(2));
    std::string& rank_written = written[static_cast<std::size_t>(r)];
    if (reply.at(3).empty() && !rank_written.empty()) return;  // the same plan: as it wrote before
    const dcpp::SavePlan plan = dcpp::detail::decode_save_plan(reply.at(3));
    const auto replicated =  // positions in the rank's local plan, of one item per tensor
        dcpp::detail::decode_marks(reply.at(4), static_cast<std::size_t>(job.tensors));
    rank_written = dcpp::detail::encode_written_items(bench::write_results(plan),
                                                      std::vector<uint32_t>(replicated.size(), 0));
  };
  dcpp::detail::SavePlanning planning;
  dcpp::SavePlan final_plan;
  f.planning = timed(ranks, [&] {
    planning = dcpp::detail::plan_save(ranks, 0, &cache, context, steps);
    final_plan = dcpp::detail::final_plan(planning, &cache, context);
  });
  ranks.copy_from = &written;
  const std::vector<std::string> results = dcpp::detail::gather_at_coordinator(
      ranks, 0, "checkpoint save", "writing", [&] { return written.front(); });
  ranks.copy_from = nullptr;
  const auto [writing_sent, writing_received] = ranks.take_traffic_per_rank();

  f.commit = timed(ranks, [&] {
    dcpp::detail::from_coordinator(ranks, 0, "checkpoint save", "committing", [&] {
      const dcpp::Metadata committed =
          dcpp::detail::commit_save(writer, std::move(planning.metadata), results,
                                    planning.replicated.get(), dcpp::ReplicaCheck::kFail);
      return std::string();
    });
    dcpp::detail::keep_save_plans(&cache);
  });
  f.commit.sent += writing_sent;  // the write results count in the commit's traffic
  f.commit.received += writing_received;
  f.reused = cache.reused_plans() > 0;
  f.metadata_bytes = fs::file_size(dir / ".metadata");
  fs::remove_all(dir);
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  bench::JobOptions options;
  options.world_sizes = {1024};
  options.dir = fs::temp_directory_path() / "dcpp-plan-cache-bench";
  CLI::App app("The coordinator's second save of the same structure against its first",
               "plan_cache_bench");
  bench::add_job_options(app, options, 2);
  bench::parse_or_exit(app, argc, argv);
  const std::vector<int>& world_sizes = options.world_sizes;
  const int64_t tensors = options.tensors;
  const fs::path& dir = options.dir;

  std::printf("%lld tensors, %s; the coordinator alone, fed the other ranks' messages\n",
              static_cast<long long>(tensors), options.layout_name.c_str());
  std::printf("%6s %7s %10s %9s %9s %9s %10s %12s %12s %8s\n", "ranks", "save", "planning s",
              "commit s", "total s", "peak MiB", ".metadata", "rank sends", "rank gets", "/first");
  for (const int ranks : world_sizes) {
    const Job job{ranks, tensors, options.layout(), options.group};
    CoordinatorAlone collectives(ranks);
    dcpp::SavePlanCache cache;
    std::vector<std::string> written;
    const SaveFigures first = coordinator_save(collectives, cache, job, dir / "step-1", written);
    const SaveFigures second = coordinator_save(collectives, cache, job, dir / "step-2", written);
    if (first.reused || !second.reused) {
      std::fprintf(stderr, "the cache planned the %s save %s\n", first.reused ? "first" : "second",
                   first.reused ? "from a reused plan" : "in full");
      return 1;
    }
    const double first_total = first.planning.wall + first.commit.wall;
    for (const auto* save : {&first, &second}) {
      const double total = save->planning.wall + save->commit.wall;
      std::printf("%6d %7s %10.3f %9.3f %9.3f %9.0f %8.1fMB %10.0f B %10.0f B %7.1f%%\n", ranks,
                  save == &first ? "first" : "reused", save->planning.wall, save->commit.wall,
                  total, std::max(save->planning.peak_mib, save->commit.peak_mib),
                  static_cast<double>(save->metadata_bytes) / 1e6,
                  save->planning.sent + save->commit.sent,
                  save->planning.received + save->commit.received, 100 * total / first_total);
    }
  }
  std::printf(
      "planning: plan_save and the coordinator's final_plan; commit: commit_save (the write "
      "results decoded, the writer's finish: .metadata and the checksum file) and the cache "
      "kept\nrank sends, gets: bytes one rank other than the coordinator sends and receives in "
      "both steps (its local plan or token, its final plan or token, its write results, the "
      "flags of each step)\n/first: the save's total over the first's (target for the second: "
      "at most 5%%); the bench fails unless the second save reused the first's global plan\n");
  return 0;
}
