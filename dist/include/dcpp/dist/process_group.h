#pragma once
// Gloo process groups from the torchrun variables: the rendezvous a job of ranks started by
// `dcpp-launch` (or torchrun) needs before it can save or load a checkpoint together; and NCCL
// groups beside them for training on GPUs, where libtorch has NCCL.

#include <dcpp/core/export.h>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <string>

namespace dcpp {

/// How a process group is made and how long its operations may take.
struct DCPP_API ProcessGroupOptions {
  /// How long any collective of the group may take before it fails on this rank, and how long the
  /// rendezvous (connecting to the store, waiting for every rank to arrive) may take. A rank that
  /// dies or stops answering makes the others' collectives fail within this time.
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
  /// The store keys of this group live under "dcpp/<group_name>/": groups made from one store
  /// need different names (e.g. "default" for training, "checkpoint" for checkpoint collectives).
  std::string group_name = "default";
  /// Gloo's worker threads for the group's collectives.
  int threads = 2;
  /// The address the Gloo transport binds to and advertises to its peers. Empty, from the
  /// torchrun variables: 127.0.0.1 when MASTER_ADDR is a loopback address, else this host's
  /// address on the route to MASTER_ADDR (on a host of several networks, the one the master is
  /// reached through); without them, or when no route is found, the address this host's name
  /// resolves to (Gloo's default device).
  std::string gloo_hostname;

  ProcessGroupOptions& with_timeout(std::chrono::milliseconds value) {
    timeout = value;
    return *this;
  }
  ProcessGroupOptions& with_group_name(std::string value) {
    group_name = std::move(value);
    return *this;
  }
  ProcessGroupOptions& with_threads(int value) {
    threads = value;
    return *this;
  }
  ProcessGroupOptions& with_gloo_hostname(std::string value) {
    gloo_hostname = std::move(value);
    return *this;
  }
};

/// The torchrun variables of one rank: RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT.
struct DCPP_API LaunchEnvironment {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;

  /// Reads the variables from the environment. RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT are
  /// required; LOCAL_RANK defaults to RANK. Throws CheckpointError naming the variable that is
  /// missing or invalid (not an integer, rank outside [0, WORLD_SIZE), port outside [1, 65535]).
  /// Reads the environment only: thread-safe as long as nobody calls setenv meanwhile.
  static LaunchEnvironment from_env();

  /// Throws CheckpointError when the fields are inconsistent (the checks of from_env()).
  void validate() const;
};

/// Connects to the job's c10d::TCPStore at `env.master_addr:env.master_port` (rank 0 starts it
/// there) and makes a Gloo process group of all `env.world_size` ranks from it.
///
/// Collective: every rank of the job must call it, with the same options.group_name. Blocks until
/// every rank has arrived and the Gloo connections are made; throws CheckpointError naming the
/// rank, the store address and the cause when that does not happen within options.timeout (a rank
/// that never starts, a port already in use on rank 0). The group keeps the store alive (rank 0's
/// store serves the others). No rank returns before every rank has made the group, and rank 0
/// returns last, once no other rank needs the store for it: a rank 0 that exits as soon as it has
/// the group fails nobody (a rank 0 that exits while others still make other groups from its
/// store does).
/// The group is CPU-capable (Gloo); its collectives honour options.timeout and, like every c10d
/// group, must be called in the same order on every rank and are not thread-safe.
///
/// SIGPIPE: Gloo and the TCPStore write to sockets without MSG_NOSIGNAL, so a peer that dies would
/// end this rank with SIGPIPE, silently, instead of failing the collective with an error naming
/// the peer. This function and make_tcp_store therefore set SIGPIPE to ignored, as Python does,
/// when the program left it at its default; a handler of the program's own stays. A write to a
/// closed pipe or socket then fails with EPIPE instead.
DCPP_API c10::intrusive_ptr<c10d::ProcessGroup> make_gloo_process_group(
    const LaunchEnvironment& env, const ProcessGroupOptions& options = {});

/// LaunchEnvironment::from_env() then make_gloo_process_group(): the one line a rank started by
/// `dcpp-launch` or torchrun needs.
DCPP_API c10::intrusive_ptr<c10d::ProcessGroup> make_gloo_process_group_from_env(
    const ProcessGroupOptions& options = {});

/// The store of the job, as make_gloo_process_group(env, ...) makes it: rank 0 starts the
/// TCPStore server, the others connect to it (retrying until options.timeout). Keep it to make
/// more than one group from it (different options.group_name each). Blocking; throws
/// CheckpointError.
DCPP_API c10::intrusive_ptr<c10d::Store> make_tcp_store(const LaunchEnvironment& env,
                                                        const ProcessGroupOptions& options = {});

/// The address make_gloo_process_group(env, ...) gives Gloo when options.gloo_hostname is empty:
/// 127.0.0.1 when env.master_addr is a loopback address, else this host's address on the route to
/// it; "" when none is found (Gloo then binds to the address this host's name resolves to). For
/// groups made over the job's store: make_gloo_process_group(store, ...,
/// options.with_gloo_hostname(...)).
DCPP_API std::string gloo_hostname_for(const LaunchEnvironment& env);

/// A Gloo group of `size` ranks over an existing store, its keys under
/// "dcpp/<options.group_name>/" (so a job can make a second group, e.g. for checkpoint
/// collectives, that never interleaves with the training loop's). Collective and blocking as
/// above; throws CheckpointError.
DCPP_API c10::intrusive_ptr<c10d::ProcessGroup> make_gloo_process_group(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
    const ProcessGroupOptions& options = {});

/// Whether this build of dcpp can make NCCL groups: its libtorch has CUDA and c10d's
/// ProcessGroupNCCL (docs/gpu.md). A device need not be present.
DCPP_API bool nccl_available();

/// An NCCL group of `size` ranks over an existing store, its keys under
/// "dcpp/<options.group_name>/", for the training loop's collectives on CUDA tensors. It carries
/// CUDA tensors only: checkpoint traffic (dcpp's collectives, the Checkpointer's group) goes over
/// a Gloo group beside it. NCCL's communicator is made at the group's first collective, on the
/// device current then (one device per rank: set it with c10::cuda::set_device first); the
/// group's collectives time out after options.timeout (options.threads and gloo_hostname do not
/// apply). Throws CheckpointError (kUsage) where nccl_available() is false or no CUDA device is
/// visible, and as make_gloo_process_group for a bad rank, size or name.
DCPP_API c10::intrusive_ptr<c10d::ProcessGroup> make_nccl_process_group(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
    const ProcessGroupOptions& options = {});

}  // namespace dcpp
