// A rank of a job whose CheckpointManager holds a root, for tests/plugin/job_lock_test.cpp:
//
//   dcpp-launch --fork -n N -- job_lock_worker ROOT hold|once [MEMORY_JOB]
//
// Each rank makes a synchronous CheckpointManager on ROOT (the torchrun variables give the ranks;
// without them, one process), with a memory tier named MEMORY_JOB when given, and prints
// "rank R: holding ROOT, pid P". With `hold` it then waits to be killed; with `once` it ends the
// manager and exits 0. A manager refused prints "rank R: refused (KIND): MESSAGE" and exits 3.
// SIGTERM is ignored, so that the launcher's stops every other rank after the first refusal do
// not cut off that rank's own line.

#include <dcpp/dcpp.h>
#include <dcpp/dist.h>

#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <iostream>
#include <string>

int main(int argc, char** argv) {
  dcpp::become_launched_rank();  // first: dcpp-launch --fork forks the ranks here
  if (argc < 3 || (std::string(argv[2]) != "hold" && std::string(argv[2]) != "once")) {
    std::cerr << "usage: " << argv[0] << " ROOT hold|once [MEMORY_JOB]\n";
    return 2;
  }
  std::signal(SIGTERM, SIG_IGN);
  const std::string root = argv[1];
  const bool hold = std::string(argv[2]) == "hold";
  int rank = 0;
  try {
    dcpp::CheckpointManagerOptions options;
    options.with_root(root).with_async(false);
    if (argc > 3) {
      options.memory.every_steps = 1;
      options.memory.job = argv[3];
    }
    c10::intrusive_ptr<c10d::Store> store;
    if (std::getenv("WORLD_SIZE") != nullptr) {
      const auto env = dcpp::LaunchEnvironment::from_env();
      rank = env.rank;
      store = dcpp::make_tcp_store(env);
      options.with_store(store, env.rank, env.world_size);
    }
    dcpp::CheckpointManager manager(options);
    std::cout << "rank " << rank << ": holding " << root << ", pid " << ::getpid() << std::endl;
    if (hold) {
      for (;;) ::pause();
    }
    return 0;
  } catch (const dcpp::CheckpointError& error) {
    std::cout << "rank " << rank << ": refused (" << dcpp::to_string(error.kind())
              << "): " << error.what() << std::endl;
    return 3;
  }
}
