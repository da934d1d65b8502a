// A rank for the distributed tests, started by dcpp-launch: makes Gloo process groups from the
// torchrun variables, runs an allreduce and an allgather on each and checks the results.
//
//   pg_worker [--timeout-ms T] [--startup-ms S] [--exit-rank R --exit-code C] [--die-rank R]
//             [--absent-rank R] [--hang-rank R] [--ignore-sigterm] [--from-env] [--print-and-abort]
//
// By default each rank makes two groups ("default" and "checkpoint") from one store; --from-env
// makes one with make_gloo_process_group_from_env().
// --startup-ms: the store is reached, and every rank waits for the others to start, within S ms
// before the groups are made with T: a test of what a short collective timeout does is then not
// at the mercy of how far apart the ranks start (seconds apart under a sanitizer on busy cores).
// --exit-rank: rank R exits with C once the groups are made (the others block in the collective).
// --die-rank: rank R SIGKILLs itself once the groups are made (the others' collective fails).
// --absent-rank: rank R exits 0 without joining (the others' rendezvous times out).
// --hang-rank: rank R sleeps instead of joining the collectives (the others' time out).
// --ignore-sigterm: the launcher's SIGTERM does not stop this rank (so its own error shows).
// --print-and-abort: prints one line through stdio without flushing, then aborts (what a crash
// leaves of a rank's output).
// --print-pid-and-wait: prints "rank R: pid P" and blocks until killed, making no group (a test of
// what becomes of the ranks when their launcher dies).
// --thread-before-fork (first, alone): starts a thread before dcpp::become_launched_rank(), which
// must refuse to fork (dcpp-launch --fork).
// Prints "rank R: ..." lines; exits 0 when every check passes, 1 on a wrong result, 4 when a
// collective or the group creation throws ("rank R: failed after T ms: <message>" on stderr, T
// counted from the start of main()).

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/dist/launched_rank.h>
#include <dcpp/dist/process_group.h>

#include <ATen/ATen.h>

#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Arguments {
  long timeout_ms = 30000;
  long startup_ms = 0;  // 0: no start-up meeting; the store's timeout is timeout_ms
  int exit_rank = -1;
  int exit_code = 0;
  int die_rank = -1;
  int absent_rank = -1;
  int hang_rank = -1;
  bool ignore_sigterm = false;
  bool from_env = false;
  bool print_and_abort = false;
  bool print_pid_and_wait = false;
};

Arguments parse(int argc, char** argv) {
  Arguments arguments;
  for (int i = 1; i < argc; ++i) {
    const std::string name = argv[i];
    const auto value = [&] {
      if (i + 1 >= argc) {
        std::cerr << "pg_worker: " << name << " needs a value\n";
        std::exit(2);
      }
      return std::atol(argv[++i]);
    };
    if (name == "--timeout-ms") {
      arguments.timeout_ms = value();
    } else if (name == "--startup-ms") {
      arguments.startup_ms = value();
    } else if (name == "--exit-rank") {
      arguments.exit_rank = static_cast<int>(value());
    } else if (name == "--exit-code") {
      arguments.exit_code = static_cast<int>(value());
    } else if (name == "--die-rank") {
      arguments.die_rank = static_cast<int>(value());
    } else if (name == "--hang-rank") {
      arguments.hang_rank = static_cast<int>(value());
    } else if (name == "--absent-rank") {
      arguments.absent_rank = static_cast<int>(value());
    } else if (name == "--from-env") {
      arguments.from_env = true;
    } else if (name == "--print-pid-and-wait") {
      arguments.print_pid_and_wait = true;
    } else if (name == "--print-and-abort") {
      arguments.print_and_abort = true;
    } else if (name == "--ignore-sigterm") {
      arguments.ignore_sigterm = true;
    } else {
      std::cerr << "pg_worker: unknown argument " << name << "\n";
      std::exit(2);
    }
  }
  return arguments;
}

// Returns once every one of `world` ranks has called it on `store`: the last to arrive sets the
// key the others wait for (at most `timeout`).
void wait_for_every_rank(c10d::Store& store, int world, std::chrono::milliseconds timeout) {
  if (store.add("pg_worker/started", 1) == world)
    store.set("pg_worker/all-started", std::vector<uint8_t>{1});
  store.wait({"pg_worker/all-started"}, timeout);
}

at::Tensor wait_for(const c10::intrusive_ptr<c10d::Work>& work, const at::Tensor& result) {
  work->wait();
  return result;
}

// Sum of (rank + 1) over the ranks, and every rank's {10 r, 10 r + 1}.
bool check_group(const c10::intrusive_ptr<c10d::ProcessGroup>& group, const std::string& name) {
  const int rank = group->getRank();
  const int size = group->getSize();
  std::vector<at::Tensor> reduce{at::full({4}, rank + 1, at::kLong)};
  wait_for(group->allreduce(reduce), reduce[0]);
  const int64_t expected_sum = static_cast<int64_t>(size) * (size + 1) / 2;
  if (!reduce[0].eq(expected_sum).all().item<bool>()) {
    std::cerr << "rank " << rank << ": " << name << " allreduce gave " << reduce[0] << "\n";
    return false;
  }
  std::cout << "rank " << rank << ": " << name << " allreduce ok " << expected_sum << std::endl;

  std::vector<at::Tensor> mine{at::tensor({10 * rank, 10 * rank + 1}, at::kInt)};
  std::vector<std::vector<at::Tensor>> all(1);
  for (int r = 0; r < size; ++r) all[0].push_back(at::empty({2}, at::kInt));
  group->allgather(all, mine)->wait();
  for (int r = 0; r < size; ++r) {
    if (!all[0][r].equal(at::tensor({10 * r, 10 * r + 1}, at::kInt))) {
      std::cerr << "rank " << rank << ": " << name << " allgather slot " << r << " holds "
                << all[0][r] << "\n";
      return false;
    }
  }
  std::cout << "rank " << rank << ": " << name << " allgather ok" << std::endl;
  return true;
}

std::string message_of(const std::exception& error) {
  if (const auto* c10_error = dynamic_cast<const c10::Error*>(&error)) {
    return c10_error->what_without_backtrace();
  }
  return error.what();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--thread-before-fork") == 0) {
    std::thread([] {
      for (;;) ::pause();
    }).detach();
  }
  dcpp::become_launched_rank();  // dcpp-launch --fork: the ranks fork from here
  // A failure says how long after main() began it came, so tests bound the time a timeout takes
  // without the process start-up (seconds under ThreadSanitizer on a loaded machine).
  const auto start = std::chrono::steady_clock::now();
  const Arguments arguments = parse(argc, argv);
  if (arguments.ignore_sigterm) std::signal(SIGTERM, SIG_IGN);
  if (arguments.print_pid_and_wait) {
    std::cout << "rank " << std::getenv("RANK") << ": pid " << ::getpid() << std::endl;
    for (;;) ::pause();
  }
  if (arguments.print_and_abort) {
    std::printf("rank %s: printed before a crash\n", std::getenv("RANK"));
    std::abort();  // stdio's buffer is not flushed
  }
  int rank = -1;
  try {
    const auto env = dcpp::LaunchEnvironment::from_env();
    rank = env.rank;
    if (rank == arguments.absent_rank) {
      std::cout << "rank " << rank << ": not joining" << std::endl;
      return 0;
    }
    dcpp::ProcessGroupOptions options;
    options.timeout = std::chrono::milliseconds(arguments.timeout_ms);
    c10::intrusive_ptr<c10d::ProcessGroup> group;
    c10::intrusive_ptr<c10d::ProcessGroup> checkpoint_group;
    if (arguments.from_env) {
      group = dcpp::make_gloo_process_group_from_env(options);
    } else {
      // Two groups from one store: the training loop's and the checkpoint's.
      const std::chrono::milliseconds startup(arguments.startup_ms);
      const auto store = dcpp::make_tcp_store(
          env, arguments.startup_ms > 0 ? dcpp::ProcessGroupOptions(options).with_timeout(startup)
                                        : options);
      if (arguments.startup_ms > 0) wait_for_every_rank(*store, env.world_size, startup);
      auto local = dcpp::ProcessGroupOptions(options).with_gloo_hostname("127.0.0.1");
      group = dcpp::make_gloo_process_group(store, env.rank, env.world_size,
                                            local.with_group_name("default"));
      checkpoint_group = dcpp::make_gloo_process_group(store, env.rank, env.world_size,
                                                       local.with_group_name("checkpoint"));
    }
    std::cout << "rank " << rank << ": groups ready, world size " << group->getSize() << std::endl;
    if (rank == arguments.exit_rank) {
      // At once, as a crash would: no destructors closing the Gloo connections first (the
      // peers would fail before this rank has exited, and the launcher might see them first).
      std::cout << "rank " << rank << ": exiting with " << arguments.exit_code << std::endl;
      std::_Exit(arguments.exit_code);
    }
    if (rank == arguments.die_rank) {
      std::cout << "rank " << rank << ": killing myself" << std::endl;
      std::raise(SIGKILL);
    }
    if (rank == arguments.hang_rank) {
      std::cout << "rank " << rank << ": hanging" << std::endl;
      std::this_thread::sleep_for(std::chrono::minutes(5));
    }
    if (!check_group(group, "default")) return 1;
    if (checkpoint_group && !check_group(checkpoint_group, "checkpoint")) return 1;
    // A barrier-like exchange last, so no rank leaves (taking the store with it) while another
    // still needs it.
    std::vector<at::Tensor> done{at::ones({1})};
    group->allreduce(done)->wait();
    std::cout << "rank " << rank << ": done" << std::endl;
    return 0;
  } catch (const std::exception& error) {
    const auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::steady_clock::now() - start);
    std::cerr << "rank " << rank << ": failed after " << elapsed.count()
              << " ms: " << message_of(error) << std::endl;
    return 4;
  }
}
