// The coordinator's global step at scale, in one process: DCP's default save planner and the file
// system writer given the local plans of a job of R ranks (FSDP, TP x DP or HSDP: --layout), as
// the coordinator receives them.
//
//   build/bench/global_plan_bench [--ranks 128,256,512,1024] [--tensors 1000] [--dir D]
//                                 [--layout fsdp|tpdp|hsdp] [--group 8]
//
// A model of `tensors` tensors, each split by rows over all R ranks: R x tensors chunks (about a
// million at 1,024 ranks). Timed, on one thread: create_global_plan (dedup, validation, Metadata),
// the writer's prepare_global_plan, and its finish (encoding `.metadata` and the checksum file,
// written without fsync) given every rank's write results. Baselines in the same run: a deep copy
// of the local plans (touching every chunk once) and a raw write() of as many bytes as `.metadata`.
// Also timed: finding the items several ranks list (the replica check's part of the global step,
// SaveOptions::replica_check), before the planner's step, as save() runs it.
// Each phase's own peak of resident memory (the high-water mark reset before it), its minor page
// faults, and their cost at this machine's price of one, measured first (seconds_per_fault: on a
// paravirtualized VM a fault costs 11 to 16 us, and the step's time is mostly fresh pages). The
// world sizes run smallest first in one process: a later one reuses the memory the one before
// freed, so run a size alone (--ranks 1024) for what a coordinator's first save costs.

#include <dcpp/extend.h>
#include <dcpp/format/metadata_selection.h>

#include "bench_common.h"
#include "checkpoint/replicated_items.h"
#include "simulated_job.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace fs = std::filesystem;

namespace {

using bench::Chunk;
using bench::chunk_of;
using bench::kColumns;
using bench::kRowsPerRank;
using bench::Layout;
using bench::tensor_key;

// Where each rank's items landed.
std::vector<std::vector<dcpp::WriteResult>> write_results(
    const std::vector<dcpp::SavePlan>& plans) {
  std::vector<std::vector<dcpp::WriteResult>> results;
  results.reserve(plans.size());
  for (const dcpp::SavePlan& plan : plans) results.push_back(bench::write_results(plan));
  return results;
}

// The baseline: write() of `bytes` bytes to a new file, no fsync.
double raw_write_seconds(const fs::path& path, std::size_t bytes) {
  const std::string buffer(bytes, 'x');
  const auto start = bench::Clock::now();
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::size_t done = 0;
  while (fd >= 0 && done < bytes) {
    const ssize_t n = ::write(fd, buffer.data() + done, bytes - done);
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  if (fd >= 0) ::close(fd);
  const double seconds = bench::seconds_since(start);
  fs::remove(path);
  return seconds;
}

// One phase of the coordinator's step: wall and this thread's CPU time, the minor page faults the
// process took in it and its own peak of resident memory.
struct Phase {
  const char* name = "";
  double wall = 0, cpu = 0;
  long faults = 0;
  double start_mib = 0, peak_mib = 0;  // resident memory when it began, and its peak
};

template <typename Run>
Phase run_phase(const char* name, Run&& run) {
  bench::reset_peak_memory();
  const double start_mib = bench::resident_memory().now_mib;
  const long faults_before = bench::minor_faults();
  const double cpu_before = bench::thread_cpu_seconds();
  const auto start = bench::Clock::now();
  run();
  Phase phase;
  phase.name = name;
  phase.wall = bench::seconds_since(start);
  phase.cpu = bench::thread_cpu_seconds() - cpu_before;
  phase.faults = bench::minor_faults() - faults_before;
  phase.start_mib = start_mib;
  phase.peak_mib = bench::resident_memory().peak_mib;
  return phase;
}

struct Figures {
  std::vector<Phase> phases;       // replicas, plan, prepare, finish: the coordinator's save step
  std::vector<Phase> load_phases;  // one rank's load: read_metadata, its load plan
  std::size_t read_items = 0;
  std::size_t selected_items = 0;  // chunks' storage_data entries the selection kept
  double copy = 0, raw_write = 0;
  std::size_t chunks = 0;
  uintmax_t metadata_bytes = 0;
  double peak_mib = 0;
  double total(double Phase::*field) const {
    double sum = 0;
    for (const Phase& phase : phases) sum += phase.*field;
    return sum;
  }
};

Figures measure(int ranks, int64_t tensors, Layout layout, int group, const fs::path& dir,
                bool whole_read) {
  Figures f;
  bench::reset_peak_memory();
  std::vector<dcpp::SavePlan> plans = bench::local_plans(ranks, tensors, layout, group);
  {
    const auto start = bench::Clock::now();
    const std::vector<dcpp::SavePlan> copy = plans;
    f.copy = bench::seconds_since(start);
  }
  fs::remove_all(dir);
  dcpp::DefaultSavePlanner planner;
  dcpp::FileSystemWriter writer(dir, dcpp::FileSystemWriterOptions().with_sync_files(false));
  writer.set_up(0, true);

  f.phases.push_back(run_phase("replicas", [&] {
    const dcpp::detail::ReplicatedItems replicated = dcpp::detail::find_replicated_items(plans);
    const std::size_t expected =
        layout == Layout::kFsdp || group >= ranks ? 0 : static_cast<std::size_t>(group * tensors);
    if (replicated.items.size() != expected) {
      std::fprintf(stderr, "%zu replicated items found where the layout has %zu\n",
                   replicated.items.size(), expected);
      std::exit(1);
    }
  }));
  std::vector<dcpp::SavePlan> global_plans;
  dcpp::Metadata metadata;
  f.phases.push_back(run_phase("plan", [&] {
    std::tie(global_plans, metadata) = planner.create_global_plan(std::move(plans));
  }));
  f.phases.push_back(run_phase(
      "prepare", [&] { global_plans = writer.prepare_global_plan(std::move(global_plans)); }));
  const auto results = write_results(global_plans);  // what the ranks send back: not timed
  f.phases.push_back(run_phase("finish", [&] { writer.finish(std::move(metadata), results); }));

  for (const auto& rank_results : results) f.chunks += rank_results.size();
  f.metadata_bytes = fs::file_size(dir / ".metadata");

  // One rank's load of its own share (the middle rank's; 1 / ranks of the state in an FSDP job):
  // what every rank pays for the whole `.metadata`, and what it pays for its part.
  const int loading_rank = ranks / 2;
  dcpp::StateDict share;
  for (int64_t t = 0; t < tensors; ++t) {
    const Chunk chunk = chunk_of(layout, ranks, group, loading_rank, t);
    share.insert(
        tensor_key(t),
        dcpp::ShardedTensor(chunk.global, {dcpp::Shard{at::empty(chunk.sizes), chunk.offsets}}));
  }
  // First, `.metadata` read keeping only the chunks that overlap the rank's share (the reader
  // narrowed to it, as load() does on ranks other than the coordinator; every key kept), and the
  // rank's load plan from that.
  dcpp::MetadataSelection selection;
  for (int64_t t = 0; t < tensors; ++t) {
    const Chunk chunk = chunk_of(layout, ranks, group, loading_rank, t);
    selection.add_box(tensor_key(t), chunk.offsets, chunk.sizes);
  }
  dcpp::Metadata selected;
  f.load_phases.push_back(run_phase("read, narrowed", [&] {
    dcpp::FileSystemReader narrowed_reader(dir);
    narrowed_reader.narrow_metadata(selection);  // as load() does on a rank not the coordinator
    selected = narrowed_reader.read_metadata();
  }));
  for (const auto& entry : selected.storage_data) f.selected_items += entry.first.offset ? 1 : 0;
  std::size_t selected_read_items = 0;
  dcpp::DefaultLoadPlanner selected_planner;
  f.load_phases.push_back(run_phase("narrowed plan", [&] {
    selected_planner.set_up(share, selected, false);
    selected_read_items = selected_planner.create_local_plan().items.size();
  }));
  selected = dcpp::Metadata();
  f.read_items = selected_read_items;
  if (!whole_read) {
    f.raw_write = raw_write_seconds(dir / "raw-write", static_cast<std::size_t>(f.metadata_bytes));
    for (const Phase& phase : f.phases) f.peak_mib = std::max(f.peak_mib, phase.peak_mib);
    fs::remove_all(dir);
    return f;
  }
  dcpp::FileSystemReader reader(dir);
  dcpp::Metadata loaded;
  f.load_phases.push_back(run_phase("read .metadata", [&] { loaded = reader.read_metadata(); }));
  dcpp::DefaultLoadPlanner load_planner;
  f.load_phases.push_back(run_phase("load plan", [&] {
    load_planner.set_up(share, loaded, false);
    f.read_items = load_planner.create_local_plan().items.size();
  }));
  if (selected_read_items != f.read_items) {
    std::fprintf(stderr, "the selected metadata plans %zu reads, the whole one %zu\n",
                 selected_read_items, f.read_items);
    std::exit(1);
  }
  f.raw_write = raw_write_seconds(dir / "raw-write", static_cast<std::size_t>(f.metadata_bytes));
  for (const Phase& phase : f.phases) f.peak_mib = std::max(f.peak_mib, phase.peak_mib);
  fs::remove_all(dir);
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  bench::JobOptions options;
  options.world_sizes = {128, 256, 512, 1024};
  options.dir = fs::temp_directory_path() / "dcpp-global-plan-bench";
  CLI::App app("The coordinator's global step of an FSDP job at scale, in one process",
               "global_plan_bench");
  bench::add_job_options(app, options, 1);
  bool whole_read = true;
  app.add_flag("!--no-whole-read", whole_read,
               "leave out the whole read_metadata and its plan (at 10,000 ranks a minute or more)");
  bench::parse_or_exit(app, argc, argv);
  const std::vector<int>& world_sizes = options.world_sizes;
  const int64_t tensors = options.tensors;
  const fs::path& dir = options.dir;
  const Layout layout = options.layout();
  const std::string& layout_name = options.layout_name;
  const int group = options.group;

  const double fault_seconds = bench::seconds_per_fault();
  if (layout == Layout::kFsdp) {
    std::printf(
        "%lld tensors of [ranks x %lld, %lld] float32, each split by rows over every rank\n",
        static_cast<long long>(tensors), static_cast<long long>(kRowsPerRank),
        static_cast<long long>(kColumns));
  } else {
    std::printf(
        "%lld tensors, %s: each split in %d chunks of [%lld, %lld] float32 over %d "
        "neighbouring ranks, replicated ranks / %d times\n",
        static_cast<long long>(tensors), layout_name.c_str(), group,
        static_cast<long long>(kRowsPerRank), static_cast<long long>(kColumns), group, group);
  }
  std::printf("a minor page fault on this machine: %.2f us (256 MiB of fresh pages touched)\n",
              fault_seconds * 1e6);
  std::printf("%6s %9s %10s %9s %9s %9s %9s %9s %10s %9s %9s %9s\n", "ranks", "chunks",
              "replicas s", "plan s", "prepare s", "finish s", "total s", "CPU s", ".metadata",
              "peak MiB", "/copy", "/write");
  std::vector<std::pair<int, Figures>> all;
  for (const int ranks : world_sizes) {
    const Figures f = measure(ranks, tensors, layout, group, dir, whole_read);
    const double total = f.total(&Phase::wall);
    std::printf("%6d %9zu %10.3f %9.3f %9.3f %9.3f %9.3f %9.3f %8.1fMB %9.0f %8.1fx %8.1fx\n",
                ranks, f.chunks, f.phases[0].wall, f.phases[1].wall, f.phases[2].wall,
                f.phases[3].wall, total, f.total(&Phase::cpu),
                static_cast<double>(f.metadata_bytes) / 1e6, f.peak_mib, total / f.copy,
                total / f.raw_write);
    all.emplace_back(ranks, f);
  }
  std::printf(
      "replicas: finding replicated items (the replica check's step)\ntotal: the four timed "
      "steps, wall; CPU: the same on this thread (target at 1,024 "
      "ranks: < 10 s on one core, < 4096 MiB peak)\n/copy, /write: total over a deep copy "
      "of the local plans and over a raw write() of .metadata's bytes\n\n");
  std::printf(
      "per phase: its own peak of resident memory, and its minor faults times the cost "
      "of one measured above\n");
  std::printf("%6s %15s %9s %9s %11s %10s %9s %9s\n", "ranks", "phase", "wall s", "CPU s", "faults",
              "faults s", "peak MiB", "+MiB");
  for (const auto& [ranks, f] : all) {
    std::vector<Phase> phases = f.phases;
    phases.insert(phases.end(), f.load_phases.begin(), f.load_phases.end());
    for (const Phase& phase : phases) {
      std::printf("%6d %15s %9.3f %9.3f %11ld %10.3f %9.0f %9.0f\n", ranks, phase.name, phase.wall,
                  phase.cpu, phase.faults, static_cast<double>(phase.faults) * fault_seconds,
                  phase.peak_mib, phase.peak_mib - phase.start_mib);
    }
  }
  std::printf(
      "+MiB: the phase's peak over the resident memory it began with. The last four: one "
      "rank's load of its own share (rank ranks / 2; its read items:");
  for (const auto& [ranks, f] : all) std::printf(" %zu at %d ranks", f.read_items, ranks);
  std::printf(
      "), first with the reader narrowed to the chunks that overlap the share (as load() does "
      "on ranks other than the coordinator; storage_data entries kept:");
  for (const auto& [ranks, f] : all) std::printf(" %zu at %d ranks", f.selected_items, ranks);
  std::printf("), then decoded whole as read_metadata does\n");
  return 0;
}
