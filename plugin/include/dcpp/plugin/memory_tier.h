#pragma once
// The CheckpointManager's memory tier (docs/plugin.md, "Memory tier"): each rank's newest steps
// kept in two POSIX shared-memory regions of its own, `/dcpp.<job>.<rank>.<0|1>` (files in
// /dev/shm), which outlive the rank's process. A rank killed (SIGKILL, a crash, the OOM killer)
// and restarted on its host resumes from there: restore() prefers the newest step every rank holds
// in memory over the disk and remote tiers. With `replicas`, each memory step is also kept by
// that many ranks on other hosts (NVIDIA's "cliques": rank n, n+J, n+2J..., J ranks a host), sent
// in the background over a group of the checkpoint traffic: a job whose host was lost resumes from
// its peers' copies, on as many ranks or resharded onto fewer. Host memory: a rank's state x 2
// slots x (1 + replicas), per rank.

#include <dcpp/core/export.h>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <cstdint>
#include <string>

namespace dcpp {

struct DCPP_API MemoryTierOptions {
  /// Keep every N-th step in memory (1: every step); 0: no memory tier.
  int64_t every_steps = 0;
  /// The job's part of the regions' names: 1 to 128 letters, digits, '-' or '_'. Empty: derived
  /// from the manager's root (its absolute path, hashed), so that a job restarted on the same
  /// root finds its regions and two jobs on two roots never share them.
  std::string job;
  /// The most bytes a rank's step may take in its slot (its tensors' bytes, plus its values and
  /// metadata); 0: no cap. With a cap the manager checks, when made, that /dev/shm has room for
  /// two slots of it for each rank of the host (LOCAL_WORLD_SIZE ranks, else 1), counting what
  /// this job's regions hold already, and fails on every rank, naming the sizes, when it does
  /// not; a step larger than the cap is refused. Without one, a step that does not fit in
  /// /dev/shm fails when written (the pages are reserved first), never with SIGBUS.
  int64_t max_bytes_per_rank = 0;
  /// Threads that copy a step into its slot: a TBB task arena's, the thread that copies
  /// included (the training thread, or the background one with copy_while_training).
  int copy_threads = 2;
  /// Copy each memory step while training goes on: save_to_memory() resolves the Stateful
  /// objects and returns; the planning and the copy into the slot run on the memory tier's
  /// background thread, while the next step's forward and backward run. The loop must not change
  /// the state's tensors until CheckpointManager::wait_for_memory_copy() returns: it calls
  /// CheckpointCallback::on_before_optimizer_step() before each optimizer step (and before the
  /// forward when that changes the state, as BatchNorm's running statistics do). A rank killed
  /// before the copy ended resumes from the step before (its other slot). Default: off, the copy
  /// blocks the training thread.
  bool copy_while_training = false;
  /// How many ranks on other hosts keep a copy of each rank's memory steps (0: none). Ranks form
  /// cliques of 1 + replicas ranks, ranks_per_host apart (rank n with n + J, n + 2J...; hosts in
  /// blocks of 1 + replicas), whose members send each other every memory step after it is
  /// written, on a background thread; a memory save waits only while the step before the last is
  /// still being sent. Needs `replication_group`. A job on fewer hosts than 1 + replicas keeps no
  /// replicas (logged).
  int replicas = 0;
  /// The process group the replicas travel over: every rank of the job, used by the memory tier's
  /// background thread alone (make it beside the training group from the job's store, e.g.
  /// make_gloo_process_group(store, rank, world, ProcessGroupOptions().with_group_name(
  /// "memory-replicas"))). Its timeout bounds how long a rank waits for a peer that stopped.
  c10::intrusive_ptr<c10d::ProcessGroup> replication_group;
  /// The ranks of a host (J above); 0: LOCAL_WORLD_SIZE (dcpp-launch and torchrun set it), else
  /// 1. Ranks are taken as placed on hosts in order (ranks 0..J-1 on the first); the launcher's
  /// node rank (GROUP_RANK), where set, must agree: a clique with two ranks on one host is refused.
  int ranks_per_host = 0;

  MemoryTierOptions& with_every_steps(int64_t value) {
    every_steps = value;
    return *this;
  }
  MemoryTierOptions& with_job(std::string value) {
    job = std::move(value);
    return *this;
  }
  MemoryTierOptions& with_max_bytes_per_rank(int64_t value) {
    max_bytes_per_rank = value;
    return *this;
  }
  MemoryTierOptions& with_copy_threads(int value) {
    copy_threads = value;
    return *this;
  }
  MemoryTierOptions& with_copy_while_training(bool value) {
    copy_while_training = value;
    return *this;
  }
  MemoryTierOptions& with_replicas(int count, c10::intrusive_ptr<c10d::ProcessGroup> group) {
    replicas = count;
    replication_group = std::move(group);
    return *this;
  }
  MemoryTierOptions& with_ranks_per_host(int value) {
    ranks_per_host = value;
    return *this;
  }
};

}  // namespace dcpp
