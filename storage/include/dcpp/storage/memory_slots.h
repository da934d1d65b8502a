#pragma once
// The memory tier's storage (docs/storage.md, "Shared-memory slots"): a rank's newest checkpoints
// kept in two POSIX shared-memory regions that outlive its process, so that a rank killed and
// restarted on the same host resumes from memory. Each region holds one step: a header page, then
// the step's bytes.
//
// Two slots, so that the newest complete step is never the one being overwritten: a write goes to
// the other slot (or to the older of two complete ones). A write first marks its slot's header
// "being written", fills the bytes, then writes the header "complete" with the step, the save's
// identity, the size and the CRC-32 of the bytes. A reader takes the newest slot whose header is
// complete and whose bytes match the CRC: a process killed mid-write, a torn region or a flipped
// byte leaves that slot out and the other one in use.

#include <dcpp/core/export.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dcpp {

/// One piece of the bytes of a step, copied in order.
struct DCPP_API BytePiece {
  const void* data;
  std::size_t size;
};

/// A complete step read back: its header's fields and its bytes, in a read-only mapping of its
/// region that `mapping` keeps alive. The bytes stay valid until this process writes that slot
/// again (a write may resize the region under the mapping).
struct DCPP_API MemoryStep {
  int64_t step = -1;
  std::string save_id;
  int slot = -1;
  std::string region;  // its name, for messages
  std::string_view bytes;
  std::shared_ptr<const void> mapping;
  uint32_t crc32 = 0;  // of `bytes`, as its header records it
};

/// Regions of a job found on this host: a rank's own slots (holder -1) or a replica of its steps
/// that rank `holder` keeps.
struct DCPP_API HeldSlots {
  int rank = -1;
  int holder = -1;
};

/// A rank's two slots, named "/dcpp.<job>.<rank>.<slot>" (files in /dev/shm on Linux), or, for a
/// replica of rank's steps kept by rank `holder` (memory_replication in the plugin),
/// "/dcpp.<job>.<rank>.at<holder>.<slot>". `job`: letters, digits, '-' and '_' (anything else is
/// refused). Writes and reads from one process at a time (the rank's); a restarted rank opens the
/// regions its predecessor left. A slot written stays mapped, and a step that fits in it (regions
/// are sized a 16th above their first step) and takes more than half of it is written into the same
/// pages (no resizing, no page faults): the steady state of a training loop. The first write reads
/// which slot holds what; later writes know it (the rank's process is their only writer).
class DCPP_API MemorySlots {
 public:
  /// `max_bytes`: the largest step this rank may keep (each slot holds one); a write of more is
  /// refused before anything is touched. `threads`: how many threads copy a step (a TBB task
  /// arena's, the caller's included; made by the first write of several threads). `holder`: -1
  /// for the rank's own slots, else the rank that keeps these replicas of its steps. Throws
  /// CheckpointError (kUsage) for a bad job name, rank or holder.
  MemorySlots(std::string job, int rank, int64_t max_bytes, int threads = 2, int holder = -1);
  ~MemorySlots();
  MemorySlots(const MemorySlots&) = delete;
  MemorySlots& operator=(const MemorySlots&) = delete;

  /// The bytes a region made for a step of `step_bytes` takes in /dev/shm: its header, the step
  /// and a 16th more (so the next steps, a few bytes apart, fit), in whole 64 KiB.
  static int64_t region_bytes(int64_t step_bytes);

  /// The name of `slot` (0 or 1) as shm_open takes it.
  std::string region_name(int slot) const;

  /// Writes `pieces` (in order) as `step` into the slot that does not hold the newest complete
  /// step; returns that slot. The region is sized and its pages reserved first, so a /dev/shm
  /// without room for it fails here, with a CheckpointError (kIo) naming the region, the bytes
  /// asked for and what is free, before the slot's previous step is touched; the other slot is
  /// never touched. Throws CheckpointError (kUsage) for more than max_bytes or a save_id longer
  /// than 64 bytes.
  int write(int64_t step, const std::string& save_id, const std::vector<BytePiece>& pieces);

  /// The next write leaves alone the slot holding `step` of the save `save_id`, whatever the
  /// steps' numbers say: the step a restarted rank resumed from, which must stay whole until a
  /// newer step is complete on every rank (its other slot may hold a step of the killed run that
  /// is newer by number, and complete on this rank only). Without it the first write of this
  /// object takes the slot of the older step; every later one the slot it did not write last.
  void keep(int64_t step, const std::string& save_id);

  /// write(), for bytes that arrive rather than lie in memory (a replica from its rank): `fill`
  /// writes the `bytes` bytes at the pointer it is given (the slot's); the header then records
  /// `crc32_of_bytes`, the CRC-32 they were sent with, unchecked here: a reader checks it as for
  /// any slot (complete_steps), so bytes damaged on the way are left out there. An exception from
  /// `fill` leaves the slot incomplete, and passes through.
  int write_filled(int64_t step, const std::string& save_id, uint64_t bytes,
                   const std::function<void(char*)>& fill, uint32_t crc32_of_bytes);

  /// The step this object wrote last into `slot`, read through the writer's own mapping without
  /// checking its CRC (its header's, as written); none when this object has not written that
  /// slot. Valid until this object writes that slot again or is destroyed.
  std::optional<MemoryStep> written(int slot) const;

  /// The regions of `job` in this host's /dev/shm, each (rank, holder) once, in name order.
  static std::vector<HeldSlots> on_this_host(const std::string& job);

  /// The complete steps whose bytes match their CRC, newest first (none, one or two). Each slot
  /// left out for a reason other than being empty (torn, being written, corrupted) is described
  /// in `problems`, naming the region, when given.
  std::vector<MemoryStep> complete_steps(std::vector<std::string>* problems = nullptr) const;
  /// complete_steps() without reading the bytes: the steps whose headers say complete and whose
  /// regions hold them whole, newest first, their CRC not checked (crc_matches() does, for the
  /// step that is to be used: a restore reads one of the two slots).
  std::vector<MemoryStep> complete_steps_unchecked(
      std::vector<std::string>* problems = nullptr) const;
  /// Whether `step`'s bytes match the CRC-32 its header records.
  static bool crc_matches(const MemoryStep& step);

  /// The first of complete_steps(problems), or none.
  std::optional<MemoryStep> newest(std::vector<std::string>* problems = nullptr) const;

  /// Removes both regions (a step written to disk, the job done). Missing regions are fine.
  void release();

 private:
  struct Mapping;
  struct CopyArena;

  std::vector<MemoryStep> steps(std::vector<std::string>* problems, bool check_crc) const;
  // The slot to write and its mapping, sized and marked "being written"; throws as write().
  char* begin_write(int64_t step, const std::string& save_id, uint64_t bytes, int* slot);
  // Marks `slot`, whose bytes are in place, complete.
  void end_write(int slot, int64_t step, const std::string& save_id, uint64_t bytes, uint32_t crc);

  std::string job_;
  int rank_;
  int holder_;
  int64_t max_bytes_;
  int threads_;
  std::unique_ptr<CopyArena> copy_arena_;  // made by the first write of several threads
  std::unique_ptr<Mapping> mapped_[2];     // the slots this object wrote, kept mapped
  // Each slot's complete step (int64 min: none), once read from the regions by the first write.
  bool slots_known_ = false;
  int64_t complete_step_[2] = {};
  bool written_[2] = {};   // a slot this object wrote completely, mapped in mapped_
  int last_written_ = -1;  // the slot this object completed last, never the next one written
  std::optional<std::pair<int64_t, std::string>> kept_;  // keep()'s step and save, until a write
};

}  // namespace dcpp
