// Read-once loads against every rank reading for itself: a data-parallel resume, every rank loading
// a whole checkpoint. Run it under dcpp-launch, on the demo's checkpoint for example:
//
//   build/tools/dcpp-launch -n 3 -- build/bench/read_once_bench DIR [--repeat R]
//                                    [--shared-bandwidth MBPS] [--write-mb M]
//
// With --write-mb, rank 0 first saves a checkpoint of M MB into DIR (replacing it): 40 float
// tensors of M / 40 MB each and a value, as one process saves them.
//
// Every rank loads DIR whole (load_from_keys's planner: every tensor at its full shape, every
// value), with LoadOptions::read_once kNever, then kAlways, from three kinds of storage:
//   warm    a local disk whose page cache holds the files (a resume right after a save);
//   cold    a local disk, the files dropped from the page cache before each load
//           (posix_fadvise DONTNEED; every rank of this host shares one page cache, so reading
//           every byte on every rank costs the disk once and memory copies after that);
//   shared  emulated shared storage of MBPS megabytes a second (default 200) for the whole job:
//           the ranks read at once, each at its share, so a rank's reads take at least
//           bytes x ranks / MBPS; its reader sleeps out the rest (a benchmark's emulation, not
//           a measurement of a real network file system).
// Rank 0 prints, for each, the best of R loads (default 5): the slowest rank's wall time, the
// bytes read from storage (all ranks together and the most on one rank), the bytes the busiest
// rank received over the process group, and the time ratio of reading once to not.

#include <dcpp/dcpp.h>
#include <dcpp/dist.h>
#include <dcpp/dist/process_group.h>
#include <dcpp/extend.h>

#include "bench_common.h"

#include <ATen/ATen.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <string>
#include <thread>

namespace fs = std::filesystem;

namespace {

// A FileSystemReader whose read_data takes at least its bytes x ranks / bandwidth.
class SharedStorageReader final : public dcpp::FileSystemReader {
 public:
  SharedStorageReader(const fs::path& dir, double bytes_per_second)
      : FileSystemReader(dir), bytes_per_second_(bytes_per_second) {}
  void read_data(const dcpp::LoadPlan& plan, dcpp::LoadPlanner& planner) override {
    const auto start = std::chrono::steady_clock::now();
    const uint64_t before = bytes_read();
    FileSystemReader::read_data(plan, planner);
    if (bytes_per_second_ > 0) {
      const double least = static_cast<double>(bytes_read() - before) / bytes_per_second_;
      std::this_thread::sleep_until(start + std::chrono::duration<double>(least));
    }
  }
  bool is_shared_storage() const override { return bytes_per_second_ > 0; }

 private:
  double bytes_per_second_;
};

void drop_from_page_cache(const fs::path& dir) {
  for (const auto& entry : fs::directory_iterator(dir)) {
    const int fd = ::open(entry.path().c_str(), O_RDONLY);
    if (fd >= 0) {
      ::fdatasync(fd);
      ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
      ::close(fd);
    }
  }
}

// The maximum (or the sum) of `value` over the ranks.
double over_ranks(c10d::ProcessGroup& group, double value, c10d::ReduceOp op) {
  std::vector<at::Tensor> tensors{at::full({1}, value, at::kDouble)};
  c10d::AllreduceOptions options;
  options.reduceOp = op;
  group.allreduce(tensors, options)->wait();
  return tensors[0].item<double>();
}

struct Figures {
  double seconds = std::numeric_limits<double>::infinity();  // best, slowest rank
  double read_total = 0;
  double read_most = 0;
  double received_most = 0;
};

}  // namespace

int main(int argc, char** argv) {
  fs::path dir;
  int repeat = 5;
  double megabytes_per_second = 200;
  CLI::App app("Read-once loads against every rank reading: a data-parallel resume",
               "read_once_bench");
  app.add_option("dir", dir, "a checkpoint")->required();
  app.add_option("--repeat", repeat, "loads of each kind; the best counts")
      ->check(CLI::PositiveNumber);
  app.add_option("--shared-bandwidth", megabytes_per_second,
                 "the emulated shared storage's MB/s, for all ranks together")
      ->check(CLI::PositiveNumber);
  int64_t write_mb = 0;
  app.add_option("--write-mb", write_mb, "first save a checkpoint of this many MB into DIR")
      ->check(CLI::PositiveNumber);
  bench::parse_or_exit(app, argc, argv);
  auto group = dcpp::make_gloo_process_group_from_env();
  const int rank = group->getRank(), ranks = group->getSize();
  if (write_mb > 0 && rank == 0) {
    fs::remove_all(dir);
    dcpp::StateDict state;
    for (int t = 0; t < 40; ++t) {
      state.insert("layers." + std::to_string(t) + ".weight",
                   at::randn({write_mb * 1000 * 1000 / 4 / 40}));
    }
    state.insert("step", 1000);
    dcpp::save(state, dir,
               dcpp::SaveOptions().with_file_system(
                   dcpp::FileSystemWriterOptions().with_sync_files(false)));
  }
  group->barrier()->wait();
  if (!fs::is_directory(dir)) {
    std::fprintf(stderr, "%s is not a checkpoint directory; give one, or --write-mb to write one\n",
                 dir.c_str());
    return 2;
  }

  const auto measure = [&](const std::string& storage, dcpp::ReadOnce mode) {
    Figures figures;
    for (int run = 0; run < repeat; ++run) {
      if (storage == "cold" && rank == 0) {
        drop_from_page_cache(dir);
      }
      SharedStorageReader reader(dir,
                                 storage == "shared" ? megabytes_per_second * 1e6 / ranks : 0.0);
      dcpp::LoadOptions options;
      options.ranks.process_group = group;
      options.read_once = mode;
      options.planner = dcpp::make_empty_state_dict_load_planner();
      dcpp::StateDict state;
      group->barrier()->wait();
      const dcpp::CheckpointTraffic before = dcpp::checkpoint_traffic();
      const auto start = std::chrono::steady_clock::now();
      dcpp::load(state, reader, options);
      const double seconds = bench::seconds_since(start);
      const double received =
          static_cast<double>(dcpp::checkpoint_traffic().bytes_received - before.bytes_received);
      const double read = static_cast<double>(reader.bytes_read());
      figures.seconds = std::min(figures.seconds, over_ranks(*group, seconds, c10d::ReduceOp::MAX));
      figures.read_total = over_ranks(*group, read, c10d::ReduceOp::SUM);
      figures.read_most = over_ranks(*group, read, c10d::ReduceOp::MAX);
      figures.received_most = over_ranks(*group, received, c10d::ReduceOp::MAX);
    }
    return figures;
  };

  if (rank == 0) {
    std::printf("%s loaded whole on %d ranks, best of %d; shared storage: %.0f MB/s in all\n",
                dir.c_str(), ranks, repeat, megabytes_per_second);
    std::printf("%-8s %-6s %10s %14s %14s %14s %8s\n", "storage", "reads", "wall s", "read, all MB",
                "read, most MB", "received MB", "ratio");
  }
  for (const std::string storage : {"warm", "cold", "shared"}) {
    const Figures never = measure(storage, dcpp::ReadOnce::kNever);
    const Figures once = measure(storage, dcpp::ReadOnce::kAlways);
    if (rank == 0) {
      for (const auto& [name, figures] : {std::pair{"every", never}, std::pair{"once", once}}) {
        std::printf("%-8s %-6s %10.4f %14.3f %14.3f %14.3f %8.2f\n", storage.c_str(), name,
                    figures.seconds, figures.read_total / 1e6, figures.read_most / 1e6,
                    figures.received_most / 1e6, figures.seconds / never.seconds);
      }
    }
  }
  return 0;
}
