#pragma once
// What one run of examples/memory_tier_resume printed, as dcpp-launch forwards it ("[rank R] ..."):
// each step's loss (rank 0, after the step's all-reduce: every rank had finished that step's
// update), where each rank resumed from and the step it trains from, the parameters' hash and the
// step it finished at.

#include <chrono>
#include <map>
#include <optional>
#include <string>

namespace memory_kills {

class JobOutput {
 public:
  using Clock = std::chrono::steady_clock;

  /// Takes one forwarded line; lines of no interest are ignored. `when`: when it arrived.
  void take(const std::string& line, Clock::time_point when = Clock::now());

  /// Step -> its loss as printed (a hexadecimal float, compared as text: bit for bit).
  const std::map<long long, std::string>& losses() const { return losses_; }
  /// The newest step whose loss line arrived; nullopt before the first.
  std::optional<long long> newest_step() const;
  /// When the loss line of `step` arrived; nullopt when it did not.
  std::optional<Clock::time_point> step_at(long long step) const;

  /// Rank -> the step it trains from (0: a fresh start).
  const std::map<int, long long>& trains_from() const { return trains_from_; }
  /// Rank -> where it resumed from (a /dev/shm region or a step directory); absent: fresh start.
  const std::map<int, std::string>& resumed_from() const { return resumed_from_; }
  /// When the last of `ranks` said which step it trains from (training began); nullopt before.
  std::optional<Clock::time_point> training_since(int ranks) const;

  std::optional<std::string> parameters_hash() const { return parameters_hash_; }
  std::optional<long long> finished_at() const { return finished_at_; }

 private:
  std::map<long long, std::string> losses_;
  std::map<long long, Clock::time_point> step_at_;
  std::map<int, long long> trains_from_;
  std::map<int, std::string> resumed_from_;
  Clock::time_point last_trains_from_at_{};
  std::optional<std::string> parameters_hash_;
  std::optional<long long> finished_at_;
};

}  // namespace memory_kills
