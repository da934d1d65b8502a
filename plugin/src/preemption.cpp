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

extern "C" void on_preemption_signal(int) { g_preempted.store(true, std::memory_order_relaxed); }

}  // namespace

void install_preemption_handler(const std::vector<int>& signals) {
  for (int signal : signals) {
    struct sigaction action {};
    action.sa_handler = on_preemption_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    if (::sigaction(signal, &action, nullptr) != 0) {
      throw CheckpointError("dcpp: installing the preemption handler for signal " +
                            std::to_string(signal) + " failed: " + std::strerror(errno));
    }
  }
}

void uninstall_preemption_handler(const std::vector<int>& signals) {
  for (int signal : signals) ::signal(signal, SIG_DFL);
}

bool preemption_requested() { return g_preempted.load(std::memory_order_relaxed); }
void request_preemption() { g_preempted.store(true, std::memory_order_relaxed); }
void clear_preemption_request() { g_preempted.store(false, std::memory_order_relaxed); }

}  // namespace dcpp
