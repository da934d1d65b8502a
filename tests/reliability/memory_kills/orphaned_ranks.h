#pragma once
// The ranks of a launcher that was SIGKILLed: whether they died with it. The driver is a child
// subreaper (become_subreaper()), so a rank left behind becomes its child, which it can wait for,
// kill and reap without racing with the reuse of its pid.

#include <sys/types.h>

#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace memory_kills {

/// Makes this process the child subreaper of its descendants (prctl); throws when it cannot.
void become_subreaper();

/// How one rank ended after its launcher was killed.
struct RankEnd {
  int rank = -1;
  pid_t pid = -1;
  /// It outlived its launcher: still alive at the deadline (then SIGKILLed by OrphanWatch), or
  /// ended otherwise than by SIGKILL or SIGTERM (what a parent-death signal sends), so it ran on
  /// after its launcher died: it exited (finished, or failed on its peers' end) or died of SIGPIPE
  /// (its output went to the dead launcher). A rank reaped by another process (it had ended before
  /// the kill, or was not reparented here), and one already exiting when the watch began (the
  /// kernel's PF_EXITING: a job that finished as its launcher was killed), do not count.
  bool outlived_launcher = false;
  std::string how;  // "SIGKILL after 3 ms", "exit 1 after 40 ms", "alive after 5000 ms"
};

/// Watches ranks (rank, pid) (found before their launcher was killed; a pidfd is opened for each,
/// and whether it is already exiting read, at once: construct it right before the kill) until each
/// has exited or `deadline` has passed since the call; kills the survivors and reaps every one of
/// them that became this process's child.
class OrphanWatch {
 public:
  explicit OrphanWatch(const std::vector<std::pair<int, pid_t>>& ranks);
  ~OrphanWatch();
  OrphanWatch(const OrphanWatch&) = delete;
  OrphanWatch& operator=(const OrphanWatch&) = delete;

  /// Call right after the launcher's kill.
  std::vector<RankEnd> wait(std::chrono::milliseconds deadline);

 private:
  struct Watched {
    int rank;
    pid_t pid;
    int pidfd;
    bool exiting;  // at construction
  };
  std::vector<Watched> ranks_;
};

/// Reaps every exited child (orphans the subreaper inherited), without blocking. Call only while no
/// child of this process is waited for elsewhere (no LaunchedJob alive).
void reap_orphans();

}  // namespace memory_kills
