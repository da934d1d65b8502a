#pragma once
// What a save does when ranks that hold the same item (a whole tensor or value listed by several
// ranks, or the same shard) hold different bytes: a checkpoint keeps one copy, so the others'
// values would be lost without a word.

namespace dcpp {

/// SaveOptions::replica_check. With kFail or kWarn, each rank computes a CRC-32 of every item it
/// shares with another rank while it writes (about 14 GB/s per core; docs/performance.md), and
/// the coordinator compares them before it commits `.metadata`.
enum class ReplicaCheck {
  /// The save fails on every rank, before anything is committed, with a CheckpointError (kUsage)
  /// naming the keys and the ranks that disagree. The default.
  kFail,
  /// The coordinator logs the same message as a warning and commits (one rank's copy is kept).
  kWarn,
  /// Nothing is computed or compared (DCP's behaviour).
  kOff,
};

}  // namespace dcpp
