#pragma once
// Read-once loads: which rank reads the saved bytes that several ranks need
// (docs/distributed.md, "Read-once loads").

namespace dcpp {

/// Who reads the saved bytes that several ranks need (LoadOptions::read_once).
enum class ReadOnce {
  /// kAlways when the coordinator's storage reader is on shared storage
  /// (StorageReader::is_shared_storage: a network file system, an object store), else kNever.
  kAuto,
  /// A saved box that several ranks read alike (the same box of the same saved chunk: every
  /// rank of a data-parallel resume reading a tensor whole, a replicated value) is read from
  /// storage by one of them and sent to the others over the process group; the coordinator
  /// spreads these reads evenly over the ranks.
  kAlways,
  /// Every rank reads all it needs from storage itself.
  kNever,
};

}  // namespace dcpp
