// The interposer of file_system_calls.h. Each hook asks whether its call is under the watched root
// (a path, or a descriptor opened there), counts it, dies at the armed call, and otherwise makes
// the call through libc's own definition (dlsym RTLD_NEXT). Nothing here calls a hooked function:
// the bookkeeping uses fstat, readlink, getcwd, truncate and directory iteration, none hooked.

#include "file_system_calls.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <functional>
#include <map>
#include <mutex>
#include <optional>

namespace dcpp::test::crash_states {
namespace fs = std::filesystem;

namespace {

// What a power loss keeps of a file: the size it had at its last fsync, unless nothing was
// written since.
struct Durability {
  off_t synced_size = 0;
  bool dirty = false;
};

struct Watch {
  std::recursive_mutex mutex;  // recursive: the crash itself lists the root (openat)
  bool active = false;
  std::string root;   // absolute, without a trailing "/"
  long crash_at = 0;  // 0: never
  CrashMode mode = CrashMode::kProcessKilled;
  long counted = 0;
  std::vector<std::string> calls;
  std::map<int, std::string> open_files;  // descriptors opened under the root, by number
  std::map<ino_t, Durability> inodes;     // files opened for writing under the root
};

Watch& watch_state() {
  static Watch* state = new Watch;  // never destroyed: hooks may run during exit
  return *state;
}

template <typename Function>
Function libc(const char* name) {
  return reinterpret_cast<Function>(dlsym(RTLD_NEXT, name));
}

std::string absolute(int directory_fd, const char* path) {
  if (path == nullptr) return {};
  if (path[0] == '/') return path;
  std::string base;
  if (directory_fd == AT_FDCWD) {
    char cwd[4096];
    if (getcwd(cwd, sizeof cwd) == nullptr) return path;
    base = cwd;
  } else {
    char link[64], target[4096];
    std::snprintf(link, sizeof link, "/proc/self/fd/%d", directory_fd);
    const ssize_t n = readlink(link, target, sizeof target - 1);
    if (n <= 0) return path;
    base.assign(target, static_cast<size_t>(n));
  }
  return base + "/" + path;
}

// The path relative to the root, or nullopt when it is not under it. Caller holds the mutex.
std::optional<std::string> under_root(const Watch& w, const std::string& path) {
  if (!w.active) return std::nullopt;
  if (path == w.root) return std::string(".");
  if (path.size() > w.root.size() && path.compare(0, w.root.size(), w.root) == 0 &&
      path[w.root.size()] == '/') {
    return path.substr(w.root.size() + 1);
  }
  return std::nullopt;
}

// What a power loss does: every file written since its last fsync cut back to its synced size.
// Caller holds the mutex; the calls made here pass through the hooks uncounted.
void drop_unsynced_data(Watch& w) {
  w.active = false;
  std::error_code error;
  for (auto it = fs::recursive_directory_iterator(w.root, error);
       !error && it != fs::recursive_directory_iterator(); it.increment(error)) {
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    const auto found = w.inodes.find(st.st_ino);
    if (found == w.inodes.end() || !found->second.dirty) continue;
    if (st.st_size > found->second.synced_size) {
      (void)!::truncate(it->path().c_str(), found->second.synced_size);
    }
  }
}

// Counts a call described by `what`; dies instead when it is the armed one. Caller holds the mutex.
void count(Watch& w, std::string what) {
  ++w.counted;
  if (w.crash_at != 0 && w.counted == w.crash_at) {
    if (w.mode == CrashMode::kPowerLost) drop_unsynced_data(w);
    ::kill(::getpid(), SIGKILL);
    for (;;) ::pause();
  }
  w.calls.push_back(std::move(what));
}

// Before a call through descriptor `fd`: counts it when `fd` was opened under the root;
// `changes_data` marks its file unsynced.
void on_descriptor(int fd, const char* verb, bool changes_data) {
  Watch& w = watch_state();
  const std::lock_guard<std::recursive_mutex> lock(w.mutex);
  if (!w.active) return;
  const auto file = w.open_files.find(fd);
  if (file == w.open_files.end()) return;
  count(w, std::string(verb) + " " + file->second);
  struct stat st {};
  if (changes_data && ::fstat(fd, &st) == 0) w.inodes[st.st_ino].dirty = true;
}

// After an fsync of `fd` succeeded: its file's size now is what a power loss keeps.
void after_sync(int fd) {
  Watch& w = watch_state();
  const std::lock_guard<std::recursive_mutex> lock(w.mutex);
  struct stat st {};
  if (!w.active || w.open_files.count(fd) == 0 || ::fstat(fd, &st) != 0) return;
  w.inodes[st.st_ino] = Durability{st.st_size, false};
}

// After a path call: counts it when `path` (made absolute against `directory_fd`) is under the
// root; with `to`, a rename's destination, when either is.
void on_path(const char* verb, int directory_fd, const char* path, int to_directory_fd = AT_FDCWD,
             const char* to = nullptr) {
  Watch& w = watch_state();
  const std::lock_guard<std::recursive_mutex> lock(w.mutex);
  if (!w.active) return;
  const std::optional<std::string> from = under_root(w, absolute(directory_fd, path));
  const std::optional<std::string> target =
      to ? under_root(w, absolute(to_directory_fd, to)) : std::nullopt;
  if (!from && !target) return;
  std::string what = std::string(verb) + " " + (from ? *from : std::string("<outside>"));
  if (to) what += " -> " + (target ? *target : std::string("<outside>"));
  count(w, std::move(what));
}

bool may_write(int flags) { return (flags & (O_WRONLY | O_RDWR | O_CREAT | O_TRUNC)) != 0; }

// An open that may write under the root is counted before it is made; once made, its descriptor
// is followed and its file's durability recorded.
int hooked_open(int directory_fd, const char* path, int flags, const std::function<int()>& real) {
  Watch& w = watch_state();
  std::optional<std::string> relative;
  bool existed = true;
  {
    const std::lock_guard<std::recursive_mutex> lock(w.mutex);
    if (w.active && may_write(flags)) relative = under_root(w, absolute(directory_fd, path));
    if (relative) {
      struct stat st {};
      existed = ::fstatat(directory_fd, path, &st, 0) == 0;
      count(w, std::string(existed ? "open " : "create ") + *relative);
    }
  }
  const int fd = real();
  if (fd < 0 || !relative) return fd;
  const std::lock_guard<std::recursive_mutex> lock(w.mutex);
  w.open_files[fd] = *relative;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    // A file found there is durable as found; one this open created or emptied holds nothing
    // durable until an fsync.
    const auto it = w.inodes.try_emplace(st.st_ino, Durability{st.st_size, false}).first;
    if (!existed || (flags & O_TRUNC) != 0) it->second = Durability{0, true};
  }
  return fd;
}

mode_t mode_argument(int flags, va_list& arguments) {
  if ((flags & O_CREAT) != 0 || (flags & O_TMPFILE) == O_TMPFILE) {
    return static_cast<mode_t>(va_arg(arguments, int));
  }
  return 0;
}

}  // namespace

void watch(const fs::path& root) { crash_at(root, 0, CrashMode::kProcessKilled); }

void crash_at(const fs::path& root, long call, CrashMode mode) {
  Watch& w = watch_state();
  const std::lock_guard<std::recursive_mutex> lock(w.mutex);
  std::string path = fs::absolute(root).lexically_normal().string();
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  w.root = path;
  w.crash_at = call;
  w.mode = mode;
  w.counted = 0;
  w.calls.clear();
  w.open_files.clear();
  w.inodes.clear();
  w.active = true;
}

void stop() {
  Watch& w = watch_state();
  const std::lock_guard<std::recursive_mutex> lock(w.mutex);
  w.active = false;
  w.open_files.clear();
}

std::vector<std::string> calls() {
  Watch& w = watch_state();
  const std::lock_guard<std::recursive_mutex> lock(w.mutex);
  return w.calls;
}

}  // namespace dcpp::test::crash_states

using dcpp::test::crash_states::after_sync;
using dcpp::test::crash_states::hooked_open;
using dcpp::test::crash_states::libc;
using dcpp::test::crash_states::mode_argument;
using dcpp::test::crash_states::on_descriptor;
using dcpp::test::crash_states::on_path;
using dcpp::test::crash_states::watch_state;

extern "C" {

int open(const char* path, int flags, ...) {
  va_list arguments;
  va_start(arguments, flags);
  const mode_t mode = mode_argument(flags, arguments);
  va_end(arguments);
  static const auto real = libc<int (*)(const char*, int, ...)>("open");
  return hooked_open(AT_FDCWD, path, flags, [&] { return real(path, flags, mode); });
}

int open64(const char* path, int flags, ...) {
  va_list arguments;
  va_start(arguments, flags);
  const mode_t mode = mode_argument(flags, arguments);
  va_end(arguments);
  static const auto real = libc<int (*)(const char*, int, ...)>("open64");
  return hooked_open(AT_FDCWD, path, flags, [&] { return real(path, flags, mode); });
}

int openat(int directory_fd, const char* path, int flags, ...) {
  va_list arguments;
  va_start(arguments, flags);
  const mode_t mode = mode_argument(flags, arguments);
  va_end(arguments);
  static const auto real = libc<int (*)(int, const char*, int, ...)>("openat");
  return hooked_open(directory_fd, path, flags,
                     [&] { return real(directory_fd, path, flags, mode); });
}

int openat64(int directory_fd, const char* path, int flags, ...) {
  va_list arguments;
  va_start(arguments, flags);
  const mode_t mode = mode_argument(flags, arguments);
  va_end(arguments);
  static const auto real = libc<int (*)(int, const char*, int, ...)>("openat64");
  return hooked_open(directory_fd, path, flags,
                     [&] { return real(directory_fd, path, flags, mode); });
}

int close(int fd) {
  {
    auto& w = watch_state();
    const std::lock_guard<std::recursive_mutex> lock(w.mutex);
    w.open_files.erase(fd);
  }
  static const auto real = libc<int (*)(int)>("close");
  return real(fd);
}

ssize_t write(int fd, const void* data, size_t size) {
  on_descriptor(fd, "write", true);
  static const auto real = libc<ssize_t (*)(int, const void*, size_t)>("write");
  return real(fd, data, size);
}

ssize_t pwrite(int fd, const void* data, size_t size, off_t offset) {
  on_descriptor(fd, "pwrite", true);
  static const auto real = libc<ssize_t (*)(int, const void*, size_t, off_t)>("pwrite");
  return real(fd, data, size, offset);
}

ssize_t pwrite64(int fd, const void* data, size_t size, off_t offset) {
  on_descriptor(fd, "pwrite", true);
  static const auto real = libc<ssize_t (*)(int, const void*, size_t, off_t)>("pwrite64");
  return real(fd, data, size, offset);
}

ssize_t writev(int fd, const struct iovec* vectors, int count) {
  on_descriptor(fd, "writev", true);
  static const auto real = libc<ssize_t (*)(int, const struct iovec*, int)>("writev");
  return real(fd, vectors, count);
}

int fsync(int fd) {
  static const auto real = libc<int (*)(int)>("fsync");
  on_descriptor(fd, "fsync", false);
  const int result = real(fd);
  if (result == 0) after_sync(fd);
  return result;
}

int fdatasync(int fd) {
  static const auto real = libc<int (*)(int)>("fdatasync");
  on_descriptor(fd, "fdatasync", false);
  const int result = real(fd);
  if (result == 0) after_sync(fd);
  return result;
}

int ftruncate(int fd, off_t size) {
  on_descriptor(fd, "ftruncate", true);
  static const auto real = libc<int (*)(int, off_t)>("ftruncate");
  return real(fd, size);
}

int ftruncate64(int fd, off_t size) {
  on_descriptor(fd, "ftruncate", true);
  static const auto real = libc<int (*)(int, off_t)>("ftruncate64");
  return real(fd, size);
}

int posix_fallocate(int fd, off_t offset, off_t size) {
  on_descriptor(fd, "fallocate", true);
  static const auto real = libc<int (*)(int, off_t, off_t)>("posix_fallocate");
  return real(fd, offset, size);
}

int posix_fallocate64(int fd, off_t offset, off_t size) {
  on_descriptor(fd, "fallocate", true);
  static const auto real = libc<int (*)(int, off_t, off_t)>("posix_fallocate64");
  return real(fd, offset, size);
}

int rename(const char* from, const char* to) {
  on_path("rename", AT_FDCWD, from, AT_FDCWD, to);
  static const auto real = libc<int (*)(const char*, const char*)>("rename");
  return real(from, to);
}

int renameat(int from_fd, const char* from, int to_fd, const char* to) {
  on_path("rename", from_fd, from, to_fd, to);
  static const auto real = libc<int (*)(int, const char*, int, const char*)>("renameat");
  return real(from_fd, from, to_fd, to);
}

int renameat2(int from_fd, const char* from, int to_fd, const char* to, unsigned flags) {
  on_path("rename", from_fd, from, to_fd, to);
  static const auto real = libc<int (*)(int, const char*, int, const char*, unsigned)>("renameat2");
  return real(from_fd, from, to_fd, to, flags);
}

int unlink(const char* path) {
  on_path("unlink", AT_FDCWD, path);
  static const auto real = libc<int (*)(const char*)>("unlink");
  return real(path);
}

int unlinkat(int directory_fd, const char* path, int flags) {
  on_path((flags & AT_REMOVEDIR) != 0 ? "rmdir" : "unlink", directory_fd, path);
  static const auto real = libc<int (*)(int, const char*, int)>("unlinkat");
  return real(directory_fd, path, flags);
}

int rmdir(const char* path) {
  on_path("rmdir", AT_FDCWD, path);
  static const auto real = libc<int (*)(const char*)>("rmdir");
  return real(path);
}

int remove(const char* path) {
  on_path("remove", AT_FDCWD, path);
  static const auto real = libc<int (*)(const char*)>("remove");
  return real(path);
}

int mkdir(const char* path, mode_t mode) {
  on_path("mkdir", AT_FDCWD, path);
  static const auto real = libc<int (*)(const char*, mode_t)>("mkdir");
  return real(path, mode);
}

int mkdirat(int directory_fd, const char* path, mode_t mode) {
  on_path("mkdir", directory_fd, path);
  static const auto real = libc<int (*)(int, const char*, mode_t)>("mkdirat");
  return real(directory_fd, path, mode);
}

}  // extern "C"
