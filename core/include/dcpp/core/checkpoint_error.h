#pragma once
// The one exception type dcpp throws for anything wrong with a checkpoint, its input or its
// storage, and the kinds of failure it tells apart.

#include <dcpp/core/export.h>
#include <dcpp/core/torch_compat.h>

#include <c10/util/Exception.h>

#include <cstddef>
#include <iterator>
#include <string>

namespace dcpp {

/// What went wrong, for a program that reacts to a failure rather than only reporting it (start
/// fresh, fall back to an older checkpoint, retry, restart the job). On N ranks every rank throws
/// the same kind (see CheckpointError).
enum class ErrorKind {
  /// No checkpoint, key or file where one was asked for (a missing checkpoint directory, a
  /// `.metadata` or data file that is not there, a key the checkpoint lacks when one is read by
  /// name).
  kNotFound,
  /// Bytes that fail a check: a CRC or checksum mismatch, a truncated file, malformed or hostile
  /// input (a bad pickle, a path that escapes the checkpoint, an impossible size).
  kCorrupt,
  /// A valid checkpoint that does not fit the target: a dtype or shape mismatch, keys of the state
  /// dict missing from the checkpoint, an unsupported format version.
  kIncompatible,
  /// Another rank failed or died, or a collective timed out.
  kRankFailed,
  /// The operating system refused: an open, write, fsync or rename error, a full disk.
  kIo,
  /// The caller broke a precondition: bad options or arguments, a duplicate key, a call out of
  /// order; also an exception of the caller's own code (a Stateful, a planner, a storage driver)
  /// that is not a CheckpointError.
  kUsage,
};

/// "not found", "corrupt", "incompatible", "rank failed", "I/O", "usage": for messages and logs.
inline const char* to_string(ErrorKind kind) {
  static constexpr const char* kNames[] = {"not found",   "corrupt", "incompatible",
                                           "rank failed", "I/O",     "usage"};
  const auto index = static_cast<std::size_t>(kind);
  return index < std::size(kNames) ? kNames[index] : "unknown";
}

/// Thrown by every dcpp operation that fails: bad input, a malformed or hostile checkpoint, an I/O
/// error, a failed rank; kind() says which. Derives from `c10::Error` so code that already catches
/// libtorch errors catches dcpp's too. `what()` is the message alone, with no C++ backtrace and
/// without the kind: messages name the key, file or rank involved and say what to do. DCPP_API
/// although header-only: its typeinfo must be one in the process, or a program's catch would not
/// match what a library throws.
class DCPP_API CheckpointError : public c10::Error {
 public:
  CheckpointError(ErrorKind kind, std::string message)
      : c10::Error(std::move(message), compat::no_backtrace()), kind_(kind) {}

  ErrorKind kind() const noexcept { return kind_; }

 private:
  ErrorKind kind_;
};

}  // namespace dcpp
