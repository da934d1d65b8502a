#pragma once
// Ranks forked from one started program (`dcpp-launch --fork`): the program's libraries are loaded
// and initialised once per host instead of once per rank. Loading libtorch costs every process most
// of a second of CPU before main() (several seconds under a sanitizer); a host's ranks forked after
// it share that work.

#include <dcpp/core/export.h>

namespace dcpp {

/// The variable through which `dcpp-launch --fork` asks the program it starts to fork the host's
/// ranks: "<local ranks> <first rank> <first descriptor> <report descriptor> <launcher pid>".
/// Local rank i's stdout and stderr are the descriptors first + 2i and first + 2i + 1; each forked
/// rank's "<local rank> <pid>\n" goes to the report descriptor. Private to dcpp-launch and
/// become_launched_rank().
inline constexpr char kForkedRanksVariable[] = "DCPP_LAUNCH_FORK";

/// Call first in main(), before anything starts a thread. Started by `dcpp-launch --fork`, forks
/// this host's ranks and returns in each as one of them: RANK and LOCAL_RANK set in its
/// environment (the other torchrun variables are the launcher's), its stdout and stderr the
/// launcher's for that rank, its own process group; the started process itself exits without
/// returning, once it has reported every rank to the launcher (which then reaps them as its own
/// children). Each rank returns once that process has exited, set to die with the launcher
/// (SIGKILL when it dies, PR_SET_PDEATHSIG; a rank whose launcher is already gone exits at once).
/// Anywhere else (no such variable: a plain `dcpp-launch`, torchrun, no launcher)
/// returns at once and changes nothing.
///
/// Exits the process with code 2, naming the cause on stderr, when the variable is malformed or
/// the process already runs a second thread (a forked rank would hold only the calling thread,
/// and any lock another thread held would stay locked for ever).
DCPP_API void become_launched_rank();

}  // namespace dcpp
