#pragma once
// Which job drains a remote prefix: a lease object, `.dcpp-drain-lease` under the prefix. Two
// jobs given one prefix (a copy of a config, a zombie of a restarted job) would delete each
// other's steps by their retention and lineage; with the lease, the second one's drain fails
// naming the first until the first releases the lease (its manager ends) or lets it expire.
//
// Every write of the lease is a compare-and-swap on the store: created with If-None-Match: *,
// renewed, taken over and released with If-Match on the entity tag it was read with, so that of
// two jobs that read one lease, one alone wins. Once held, a heartbeat thread renews it every
// third of `ttl`, drain passes or not: it lapses only when the job is gone (or cannot reach the
// store for `ttl`). A job of the same identity as the holder (RemoteTierOptions::job_id: a
// restarted job after a crash or a preemption) takes it over at once, unless it held the lease
// before (a predecessor that lost it to its successor never takes it back); any other waits for
// it to expire.

#include <dcpp/storage/s3_prefix.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace dcpp::detail {

/// hold() on the drain thread; the heartbeat on a thread of its own; release() at the end.
class DrainLease {
 public:
  static constexpr const char* kObjectName = ".dcpp-drain-lease";

  /// `job_id`: this job's identity, the same across its restarts ("" for none: a predecessor's
  /// lease is then waited out like another job's).
  DrainLease(S3Prefix& prefix, std::chrono::seconds ttl, std::string job_id);
  /// Releases the lease (release()).
  ~DrainLease();
  DrainLease(const DrainLease&) = delete;
  DrainLease& operator=(const DrainLease&) = delete;

  /// Before a drain pass: takes the lease (none there, an expired one, or one of this job's
  /// identity), or renews this job's, and starts the heartbeat. Throws CheckpointError (kUsage)
  /// naming the holder, its host, pid and expiry, when another job holds an unexpired lease;
  /// what the store throws when it fails.
  void hold();
  /// Stops the heartbeat and marks the lease expired when this job holds it. Never throws (a
  /// failure is logged; the lease then expires).
  void release() noexcept;

 private:
  // The longest a renewal or the release may wait for the store.
  static constexpr std::chrono::seconds kLongestRenewal{30};

  std::string lease_json(double expires_at) const;
  // Renews the lease when this job still holds it (If-Match); false when another took it over.
  bool renew();
  void heartbeat();

  S3Prefix& prefix_;
  const std::chrono::seconds ttl_;
  const std::string job_id_;
  const std::string owner_;  // random, this process's
  const std::string host_;
  std::mutex mutex_;  // guards etag_, held_ and stopping_; serialises the lease's writes
  std::condition_variable wake_;
  std::string etag_;  // the entity tag of the lease as this job last wrote it
  bool held_ = false;
  bool ever_held_ = false;  // this process held the lease once (it then takes over no successor)
  bool stopping_ = false;
  std::thread heartbeat_;
};

}  // namespace dcpp::detail
