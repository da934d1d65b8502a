#pragma once
// Which job drains a remote prefix: a lease object, `.dcpp-drain-lease` under the prefix, created
// with a conditional PUT (If-None-Match: *) and renewed by every drain pass of the job that holds
// it. Two jobs given one prefix (a copy of a config, a zombie of a restarted job) would delete
// each other's steps by their retention and lineage; with the lease, the second one's drain fails
// naming the first, until the first releases the lease (its manager ends) or lets it expire (no
// pass for `ttl`), when the second takes it over.

#include <dcpp/storage/s3_prefix.h>

#include <chrono>
#include <string>

namespace dcpp::detail {

/// Used by the drain thread alone (release() also at the end, once the drain is done).
class DrainLease {
 public:
  static constexpr const char* kObjectName = ".dcpp-drain-lease";

  DrainLease(S3Prefix& prefix, std::chrono::seconds ttl);

  /// Before a drain pass: takes the lease (none there, or an expired one), or renews this job's.
  /// Throws CheckpointError (kUsage) naming the holder, its host, pid and expiry, when another
  /// job holds an unexpired lease; what the store throws when it fails.
  void hold();
  /// Deletes the lease when this job holds it. Never throws (a failure is logged; the lease then
  /// expires).
  void release() noexcept;

 private:
  std::string lease_json() const;

  S3Prefix& prefix_;
  std::chrono::seconds ttl_;
  std::string owner_;  // random, this job's
  std::string host_;
  bool held_ = false;
};

}  // namespace dcpp::detail
