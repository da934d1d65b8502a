#pragma once
// The file-system calls of this process, counted and cut short: the crash-state explorer's
// interposer (crash_states_test.cpp). Compiled into the test program, whose definitions of
// open, write, fsync, rename, unlink, mkdir and the like come before libc's for every library
// the program loads (dcpp's, libstdc++'s std::filesystem); each forwards to libc's.
//
// Counted: the calls that change a file or directory under the watched root (an open that may
// write, a write, an fsync, a rename, a removal, a directory made, a size set). With a crash
// point armed, the call of that number is not made: the process dies there (SIGKILL), as a
// killed rank would. In the power-loss mode it first drops what was not made durable, as a host
// losing power would: every file written since its last fsync is cut back to the size it had
// then (0 when it was never fsynced). Directory entries are kept as they are (renames and
// removals are taken as durable once made), a weaker model than ALICE's (Pillai et al., OSDI
// 2014), which may also reorder them; docs/reliability.md says so.

#include <filesystem>
#include <string>
#include <vector>

namespace dcpp::test::crash_states {

enum class CrashMode { kProcessKilled, kPowerLost };

/// Starts counting the calls under `root` (forgetting earlier ones); nothing is cut short.
void watch(const std::filesystem::path& root);

/// watch(root), and the process dies at the `call`-th counted call (1 is the first), in `mode`.
void crash_at(const std::filesystem::path& root, long call, CrashMode mode);

/// Stops counting; the calls go straight to libc again.
void stop();

/// The counted calls since watch(), one line each ("rename a -> b"), paths relative to the root.
std::vector<std::string> calls();

}  // namespace dcpp::test::crash_states
