// One rank of the fault tests (tests/reliability/faults/faults_test.cpp), started by dcpp-launch:
//
//   fault_worker disk-full ROOT   a CheckpointManager under ROOT (a small tmpfs) saves step 1,
//   which
//                                 fits, then step 2, which does not; prints "failed as expected: "
//                                 and the error, then "step 1 intact" once step 1 is still the
//                                 latest checkpoint and loads back bit for bit, then "step 3
//                                 saved after the failure" once the failed save's directory is
//                                 gone and a save that fits went through.
//   fault_worker save DIR         one process (no launcher) saves a small state dict into DIR;
//                                 prints "saved", or "failed (<ErrorKind>): " and the error.

#include <dcpp/dcpp.h>
#include <dcpp/dist.h>
#include <dcpp/dist/launched_rank.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>

namespace fs = std::filesystem;

namespace {

// Each rank's own shard of a 1-D tensor of `elements_per_rank` elements per rank, with values that
// depend on the step, so a load of the wrong step is seen.
dcpp::StateDict state(int64_t step, int64_t elements_per_rank, int rank, int ranks) {
  const at::Tensor mine = at::arange(elements_per_rank, at::kFloat).add(step * 1000 + rank);
  dcpp::StateDict sd;
  sd.insert("weight",
            dcpp::ShardedTensor({ranks * elements_per_rank}, {{mine, {rank * elements_per_rank}}}));
  sd.insert("step", step);
  return sd;
}

bool equal(const dcpp::StateDict& a, const dcpp::StateDict& b) {
  const auto& x = a.at("weight").sharded_tensor().local_shards().at(0).tensor;
  const auto& y = b.at("weight").sharded_tensor().local_shards().at(0).tensor;
  return x.equal(y) && a.at("step").value().toInt() == b.at("step").value().toInt();
}

// `fault_worker save DIR`: exit 0 once it has printed what happened.
int save_alone(const char* directory) {
  dcpp::StateDict sd;
  sd.insert("weight", at::arange(16, at::kFloat));
  try {
    dcpp::save(sd, directory);
    std::printf("saved\n");
  } catch (const dcpp::CheckpointError& error) {
    std::printf("failed (%s): %s\n", dcpp::to_string(error.kind()), error.what_without_backtrace());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  dcpp::become_launched_rank();  // dcpp-launch --fork: the ranks fork from here
  if (argc == 3 && std::string(argv[1]) == "save") {
    return save_alone(argv[2]);
  }
  if (argc != 3 || std::string(argv[1]) != "disk-full") {
    std::fprintf(stderr, "usage: %s disk-full ROOT | save DIR\n", argv[0]);
    return 2;
  }
  auto group = dcpp::make_gloo_process_group_from_env();
  const int rank = group->getRank(), ranks = group->getSize();
  dcpp::CheckpointManagerOptions options;
  options.root = argv[2];
  options.async = false;
  options.ranks.process_group = group;
  dcpp::CheckpointManager manager(options);

  constexpr int64_t kFits = 16 * 1024;          // 64 KiB per rank
  constexpr int64_t kTooBig = 4 * 1024 * 1024;  // 16 MiB per rank
  dcpp::SaveRequest first;
  first.step = 1;
  manager.save(state(1, kFits, rank, ranks), first);
  dcpp::SaveRequest second;
  second.step = 2;
  try {
    manager.save(state(2, kTooBig, rank, ranks), second);
    std::fprintf(stderr, "rank %d: the save of step 2 succeeded on a full disk\n", rank);
    return 1;
  } catch (const dcpp::CheckpointError& error) {
    std::printf("failed as expected: %s\n", error.what_without_backtrace());
  }
  const auto latest = manager.latest();
  if (!latest || latest->step != 1) {
    std::fprintf(stderr, "rank %d: the latest checkpoint is not step 1\n", rank);
    return 1;
  }
  dcpp::StateDict loaded = state(0, kFits, rank, ranks);
  manager.restore(loaded);
  if (!equal(loaded, state(1, kFits, rank, ranks))) {
    std::cerr << "rank " << rank << ": step 1 does not load back as saved: step "
              << loaded.at("step").value() << ", weight "
              << loaded.at("weight").sharded_tensor().local_shards().at(0).tensor.slice(0, 0, 3)
              << "\n";
    return 1;
  }
  std::printf("step 1 intact\n");
  // The failed save's files are gone: a save that fits goes through.
  if (fs::exists(fs::path(argv[2]) / "step-00000002.incomplete")) {
    std::fprintf(stderr, "rank %d: the failed save's directory is still there\n", rank);
    return 1;
  }
  dcpp::SaveRequest third;
  third.step = 3;
  manager.save(state(3, kFits, rank, ranks), third);
  std::printf("step 3 saved after the failure\n");
  return 0;
}
