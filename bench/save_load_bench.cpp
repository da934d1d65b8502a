// Save and load throughput of dcpp against the baselines a user would otherwise have, measured in
// one run on the same bytes: raw write()/read() of the tensors' memory, and torch::save/load.
//
//   save_load_bench [--gib N] [--tensors N] [--repeat N] [--sync] [--dir PATH] [--ranks N]
//
// --sync makes every contender fsync what it wrote (dcpp's default); without it all stop at the
// page cache. Each figure is the best of --repeat runs. Reads run with a warm page cache.
// --ranks N (N > 1) also saves the state replicated on N ranks (threads of this process, a Gloo
// group each, as data-parallel ranks hold it) with SaveOptions::replica_check on and off,
// alternately, and prints what the check costs.

#include <dcpp/dcpp.h>
#include <dcpp/dist.h>

#include "bench_common.h"

#include <torch/serialize.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace fs = std::filesystem;

namespace {

struct Options {
  double gib = 1.0;
  int tensors = 64;
  int repeat = 5;
  bool sync = false;
  fs::path dir = fs::temp_directory_path() / "dcpp-bench";
  int ranks = 1;
};

Options parse(int argc, char** argv) {
  Options options;
  CLI::App app("Save and load throughput against raw write()/read() and torch::save",
               "save_load_bench");
  app.add_option("--gib", options.gib, "size of the state, GiB");
  app.add_option("--tensors", options.tensors, "tensors the state is split into");
  app.add_option("--repeat", options.repeat, "runs of each timing; the best counts");
  app.add_flag("--sync", options.sync, "fsync what is written (dcpp's default)");
  app.add_option("--dir", options.dir, "scratch directory");
  app.add_option("--ranks", options.ranks,
                 "also save the state replicated on this many ranks, replica check on and off")
      ->check(CLI::Range(1, 64));
  bench::parse_or_exit(app, argc, argv);
  return options;
}

void check(bool ok, const char* what) {
  if (!ok) {
    std::perror(what);
    std::exit(1);
  }
}

void raw_write(const fs::path& path, const std::vector<at::Tensor>& tensors, bool sync) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  check(fd >= 0, "open");
  for (const at::Tensor& t : tensors) {
    const char* p = static_cast<const char*>(t.data_ptr());
    std::size_t left = t.nbytes();
    while (left > 0) {
      const ssize_t n = ::write(fd, p, left);
      check(n > 0, "write");
      p += n;
      left -= static_cast<std::size_t>(n);
    }
  }
  if (sync) check(::fsync(fd) == 0, "fsync");
  ::close(fd);
}

void raw_read(const fs::path& path, std::vector<at::Tensor>& tensors) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  check(fd >= 0, "open");
  for (at::Tensor& t : tensors) {
    char* p = static_cast<char*>(t.data_ptr());
    std::size_t left = t.nbytes();
    while (left > 0) {
      const ssize_t n = ::read(fd, p, left);
      check(n > 0, "read");
      p += n;
      left -= static_cast<std::size_t>(n);
    }
  }
  ::close(fd);
}

void fsync_path(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY);
  check(fd >= 0, "open");
  check(::fsync(fd) == 0, "fsync");
  ::close(fd);
}

// The best wall time of a save of `state` replicated on `ranks` rank threads, with the replica
// check on and off (alternating runs, so both meet the same machine): {on, off}.
std::pair<double, double> replicated_save_seconds(const dcpp::StateDict& state, int ranks,
                                                  int repeat, const dcpp::SaveOptions& base,
                                                  const fs::path& dir) {
  c10::intrusive_ptr<c10d::Store> store = c10::make_intrusive<c10d::HashStore>();
  double best[2] = {1e300, 1e300};
  std::vector<std::thread> threads;
  for (int rank = 0; rank < ranks; ++rank) {
    threads.emplace_back([&, rank] {
      auto group = dcpp::make_gloo_process_group(
          store, rank, ranks,
          dcpp::ProcessGroupOptions().with_group_name("bench").with_gloo_hostname("127.0.0.1"));
      for (int run = 0; run < 2 * repeat; ++run) {
        const bool check = run % 2 == 0;
        if (rank == 0) fs::remove_all(dir);
        group->barrier()->wait();
        const auto start = bench::Clock::now();
        dcpp::SaveOptions options = base;
        options.ranks.process_group = group;
        options.replica_check = check ? dcpp::ReplicaCheck::kFail : dcpp::ReplicaCheck::kOff;
        dcpp::save(state, dir, options);
        group->barrier()->wait();
        if (rank == 0)
          best[check ? 0 : 1] = std::min(best[check ? 0 : 1], bench::seconds_since(start));
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  return {best[0], best[1]};
}

}  // namespace

int main(int argc, char** argv) {
  const Options options = parse(argc, argv);
  fs::remove_all(options.dir);
  fs::create_directories(options.dir);
  const int64_t numel =
      static_cast<int64_t>(options.gib * (1ull << 30) / sizeof(float) / options.tensors);
  const double bytes = static_cast<double>(numel) * sizeof(float) * options.tensors;

  std::vector<at::Tensor> tensors;
  dcpp::StateDict state;
  for (int i = 0; i < options.tensors; ++i) {
    tensors.push_back(at::randn({numel}));
    state.insert("layer" + std::to_string(i) + ".weight", tensors.back());
  }
  std::vector<at::Tensor> targets;
  dcpp::StateDict target;
  for (int i = 0; i < options.tensors; ++i) {
    targets.push_back(at::empty({numel}));
    targets.back().zero_();  // fault the pages in: a training job loads into live tensors
    target.insert("layer" + std::to_string(i) + ".weight", targets.back());
  }

  const fs::path raw = options.dir / "raw.bin";
  const fs::path pt = options.dir / "torch.pt";
  const fs::path ckpt = options.dir / "dcpp";
  dcpp::SaveOptions save_options;
  save_options.file_system.sync_files = options.sync;
  save_options.file_system.overwrite = true;

  const double raw_write_s = bench::best_seconds(
      options.repeat, [&] { fs::remove(raw); }, [&] { raw_write(raw, tensors, options.sync); });
  const double torch_save_s = bench::best_seconds(
      options.repeat, [&] { fs::remove(pt); },
      [&] {
        torch::save(tensors, pt.string());
        if (options.sync) fsync_path(pt);
      });
  const double dcpp_save_s = bench::best_seconds(
      options.repeat, [&] { fs::remove_all(ckpt); },
      [&] { dcpp::save(state, ckpt, save_options); });

  const double raw_read_s = bench::best_seconds(
      options.repeat, [] {}, [&] { raw_read(raw, targets); });
  std::vector<at::Tensor> loaded;
  const double torch_load_s = bench::best_seconds(
      options.repeat, [&] { loaded.clear(); }, [&] { torch::load(loaded, pt.string()); });
  const double dcpp_load_s = bench::best_seconds(
      options.repeat, [] {}, [&] { dcpp::load(target, ckpt); });
  dcpp::LoadOptions unchecked;
  unchecked.file_system.verify_checksums = false;
  const double dcpp_load_nocrc_s = bench::best_seconds(
      options.repeat, [] {}, [&] { dcpp::load(target, ckpt, unchecked); });

  for (int i = 0; i < options.tensors; ++i) {
    if (!targets[i].equal(tensors[i])) {
      std::fprintf(stderr, "dcpp load returned different values for tensor %d\n", i);
      return 1;
    }
  }

  auto gbps = [&](double s) { return bytes / s / 1e9; };
  std::printf("state: %d float32 tensors, %.3f GiB; %s; best of %d\n", options.tensors,
              bytes / (1ull << 30), options.sync ? "fsync on" : "no fsync (page cache)",
              options.repeat);
  std::printf("%-28s %8s %8s\n", "", "GB/s", "seconds");
  std::printf("%-28s %8.2f %8.3f\n", "raw write()", gbps(raw_write_s), raw_write_s);
  std::printf("%-28s %8.2f %8.3f\n", "torch::save", gbps(torch_save_s), torch_save_s);
  std::printf("%-28s %8.2f %8.3f\n", "dcpp::save", gbps(dcpp_save_s), dcpp_save_s);
  std::printf("%-28s %8.2f %8.3f\n", "raw read()", gbps(raw_read_s), raw_read_s);
  std::printf("%-28s %8.2f %8.3f\n", "torch::load", gbps(torch_load_s), torch_load_s);
  std::printf("%-28s %8.2f %8.3f\n", "dcpp::load (CRC checked)", gbps(dcpp_load_s), dcpp_load_s);
  std::printf("%-28s %8.2f %8.3f\n", "dcpp::load (no CRC)", gbps(dcpp_load_nocrc_s),
              dcpp_load_nocrc_s);
  std::printf(
      "ratios: save/raw write %.2fx (target >= 0.9)   save/torch::save %.2fx (target >= 1.5)\n",
      raw_write_s / dcpp_save_s, torch_save_s / dcpp_save_s);
  std::printf(
      "        load/raw read  %.2fx (target >= 0.9)   load no CRC/raw read %.2fx   "
      "load/torch::load %.2fx\n",
      raw_read_s / dcpp_load_s, raw_read_s / dcpp_load_nocrc_s, torch_load_s / dcpp_load_s);
  if (options.ranks > 1) {
    const auto [on_s, off_s] = replicated_save_seconds(state, options.ranks, options.repeat,
                                                       save_options, options.dir / "replicated");
    std::printf("replicated on %d ranks (each writes 1/%d, checksums all):\n", options.ranks,
                options.ranks);
    std::printf("%-28s %8.2f %8.3f\n", "dcpp::save, replica check", gbps(on_s), on_s);
    std::printf("%-28s %8.2f %8.3f\n", "dcpp::save, no check", gbps(off_s), off_s);
    std::printf("ratio: check on/off %.3fx (target <= 1.05)\n", on_s / off_s);
  }
  fs::remove_all(options.dir);
  return 0;
}
