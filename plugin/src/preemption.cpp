// The preemption flag: set by a signal handler (async-signal-safe: one lock-free atomic store),
// read by the training loop at step boundaries.

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/plugin/preemption.h>

#include <atomic>
#include <csignal>
#include <cstring>
#include <string>

namespace dcpp {
namespace {

std::atomic<bool> g_preempted{false};
static_assert(std::atomic<bool>::is_always_lock_free, "the signal handler needs a lock-free flag");

// The handlers install_preemption_handler replaced, by signal number (main thread only).
struct sigaction g_previous[NSIG];
bool g_replaced[NSIG] = {};

extern "C" void on_preemption_signal(int) { g_preempted.store(true, std::memory_order_relaxed); }

}  // namespace

void install_preemption_handler(const std::vector<int>& signals) {
  for (int signal : signals) {
    if (signal <= 0 || signal >= NSIG) {
      throw CheckpointError(ErrorKind::kUsage,
                            "installing the preemption handler: " + std::to_string(signal) +
                                " is not a signal number; pass signals such as SIGTERM or SIGUSR1");
    }
    struct sigaction action {};
    action.sa_handler = on_preemption_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    struct sigaction previous {};
    if (::sigaction(signal, &action, &previous) != 0) {
      throw CheckpointError(ErrorKind::kIo, "installing the preemption handler for signal " +
                                                std::to_string(signal) +
                                                " failed: " + std::strerror(errno));
    }
    if (!g_replaced[signal]) {  // installed twice: the first previous handler is the one to keep
      g_previous[signal] = previous;
      g_replaced[signal] = true;
    }
  }
}

void uninstall_preemption_handler(const std::vector<int>& signals) {
  for (int signal : signals) {
    if (signal > 0 && signal < NSIG && g_replaced[signal]) {
      ::sigaction(signal, &g_previous[signal], nullptr);
      g_replaced[signal] = false;
    }
  }
}

bool preemption_requested() { return g_preempted.load(std::memory_order_relaxed); }
void request_preemption() { g_preempted.store(true, std::memory_order_relaxed); }
void clear_preemption_request() { g_preempted.store(false, std::memory_order_relaxed); }

}  // namespace dcpp
