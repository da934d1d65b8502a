// The memory tier's blocking time (issue 40, docs/performance.md): writing a rank's step into its
// shared-memory slot against a plain memcpy of the same bytes, in one run.
//
//   memory_tier_bench [--gib N] [--pieces N] [--repeat N]
//
// The state: --gib GiB (default 1) in --pieces pieces (default 64), as a staged state dict's
// tensors are. Baseline: one memcpy per piece into a warm buffer of the same size. Measured: a
// write of that step into its slot, the slots warm (each written once before: the steady state of
// a loop that saves every step), with 1 thread and with 2 (the copy and the CRC-32 the slot's
// header carries). Each timing is the best of --repeat runs; target: at most 1.2x the memcpy.

#include "bench_common.h"

#include <dcpp/storage/memory_slots.h>

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  double gib = 1.0;
  int pieces = 64;
  int repeat = 5;
  CLI::App app("The memory tier's blocking time against memcpy", "memory_tier_bench");
  app.add_option("--gib", gib, "size of the step, GiB");
  app.add_option("--pieces", pieces, "pieces (tensors) the step is made of");
  app.add_option("--repeat", repeat, "runs of each timing; the best counts");
  bench::parse_or_exit(app, argc, argv);

  const std::size_t piece_bytes = static_cast<std::size_t>(gib * (1ULL << 30)) / pieces;
  std::vector<std::vector<char>> state(pieces, std::vector<char>(piece_bytes));
  for (std::size_t i = 0; i < state.size(); ++i) std::memset(state[i].data(), int(i), piece_bytes);
  std::vector<dcpp::BytePiece> step;
  for (const auto& piece : state) step.push_back({piece.data(), piece.size()});

  std::vector<char> warm(piece_bytes * pieces, 1);
  const double memcpy_seconds = bench::best_seconds(
      repeat, [] {},
      [&] {
        for (std::size_t i = 0; i < state.size(); ++i) {
          std::memcpy(warm.data() + i * piece_bytes, state[i].data(), piece_bytes);
        }
      });
  std::printf("state %.2f GiB in %d pieces; memcpy into a warm buffer: %.1f ms (%.2f GiB/s)\n", gib,
              pieces, memcpy_seconds * 1e3, gib / memcpy_seconds);
  for (const int threads : {1, 2}) {
    dcpp::MemorySlots slots("memory-tier-bench-" + std::to_string(::getpid()), 0,
                            static_cast<int64_t>(piece_bytes * pieces), threads);
    int64_t next = 0;
    slots.write(next++, "warm", step);
    slots.write(next++, "warm", step);
    const double seconds = bench::best_seconds(
        repeat, [] {}, [&] { slots.write(next++, "bench", step); });
    std::printf(
        "slot write, %d thread(s): %.1f ms (%.2f GiB/s), %.2fx the memcpy (target <= 1.2x)\n",
        threads, seconds * 1e3, gib / seconds, seconds / memcpy_seconds);
    slots.release();
  }
  return 0;
}
