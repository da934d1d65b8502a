#include "core/thread_priority.h"

#include "core/logging.h"

#include <cerrno>
#include <cstring>

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace dcpp::detail {

namespace {
pid_t thread_id() { return static_cast<pid_t>(syscall(SYS_gettid)); }
}  // namespace

int current_thread_nice() {
  errno = 0;
  return getpriority(PRIO_PROCESS, static_cast<id_t>(thread_id()));
}

bool lower_current_thread_priority(int nice) {
  if (nice <= 0) {
    return true;
  }
  if (current_thread_nice() >= nice) {
    return true;
  }
  if (setpriority(PRIO_PROCESS, static_cast<id_t>(thread_id()), nice) != 0) {
    logger().warn("could not lower the priority of a background checkpoint thread to nice {}: {}",
                  nice, std::strerror(errno));
    return false;
  }
  return true;
}

}  // namespace dcpp::detail
