#pragma once
// A deadline for the S3 requests of one thread: what bounds a restart's reads of an object store
// that accepts connections and never answers.

#include <dcpp/core/export.h>

#include <chrono>
#include <optional>
#include <string>

namespace dcpp {

/// While it lives, every S3 request the thread that made it sends (through S3Prefix, the S3
/// storage driver's reads on that thread, a load's `.metadata`) ends by the deadline: each try
/// is given what is left of it, no retry waits past it, and a request still unanswered then fails
/// with CheckpointError (kIo) naming `what`. Deadlines nest: the earlier one holds. Requests of
/// other threads (a save's parallel uploads) are not bounded by it.
class DCPP_API S3Deadline {
 public:
  using Clock = std::chrono::steady_clock;

  /// Ends `budget` from now; `what` names it in errors ("RemoteTierOptions::restart_timeout").
  S3Deadline(Clock::duration budget, std::string what);
  ~S3Deadline();
  S3Deadline(const S3Deadline&) = delete;
  S3Deadline& operator=(const S3Deadline&) = delete;

  /// The deadline in force on this thread, if any.
  static std::optional<Clock::time_point> current();
  /// What it is ("RemoteTierOptions::restart_timeout, 60 s"), or "".
  static std::string current_what();

 private:
  std::optional<Clock::time_point> previous_;
  std::string previous_what_;
};

}  // namespace dcpp
