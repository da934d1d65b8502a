// LD_PRELOAD'ed: appends the path of every descriptor passed to fsync or fdatasync, one per line,
// to the file named by DCPP_FSYNC_LOG, then does the real call.

#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

void record(int fd) {
  const char* log = std::getenv("DCPP_FSYNC_LOG");
  if (log == nullptr) return;
  char link[64];
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  char line[4097];
  const ssize_t n = readlink(link, line, sizeof line - 1);
  if (n <= 0) return;
  line[n] = '\n';
  const int out = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (out < 0) return;
  (void)!write(out, line, static_cast<size_t>(n) + 1);  // one write: lines never interleave
  close(out);
}

template <typename Function>
Function real(const char* name) {
  return reinterpret_cast<Function>(dlsym(RTLD_NEXT, name));
}

}  // namespace

extern "C" int fsync(int fd) {
  record(fd);
  static const auto next = real<int (*)(int)>("fsync");
  return next(fd);
}

extern "C" int fdatasync(int fd) {
  record(fd);
  static const auto next = real<int (*)(int)>("fdatasync");
  return next(fd);
}
