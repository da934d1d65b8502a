#pragma once
// The CheckpointManager's remote tier: an object store that committed step checkpoints drain to.
//
// A save commits under the local root first (all a preemption save waits for); the coordinator's
// drain thread then copies each committed step to `<url>/step-00001200/`: every file but
// `.metadata`, each read back and its CRC-32 compared (`verify`), then `.metadata` last, whose
// presence makes the remote copy complete. The drain applies `retention` to the remote steps, and
// deletes a local step the local policy does not keep only once the remote holds it (or the remote
// policy would not keep it either). Resuming takes the newest complete step of either tier,
// the local copy when both have it; a job whose local disk was lost resumes from the remote.

#include <dcpp/core/export.h>
#include <dcpp/plugin/retention_policy.h>
#include <dcpp/storage/s3_options.h>

#include <string>
#include <utility>

namespace dcpp {

struct DCPP_API RemoteTierOptions {
  /// "s3://bucket/prefix" holding the remote step checkpoints; empty: no remote tier.
  std::string url;
  /// The store, the credentials, retries, part size and requests in flight.
  S3Options s3;
  /// Which remote steps to keep (e.g. keep_latest 10); default: every step.
  RetentionPolicy retention;
  /// Read every uploaded object back and compare its CRC-32 with the local file's before the
  /// commit (twice the traffic); else trust the store's answer to each upload.
  bool verify = true;

  bool enabled() const { return !url.empty(); }

  RemoteTierOptions& with_url(std::string value) {
    url = std::move(value);
    return *this;
  }
  RemoteTierOptions& with_s3(S3Options value) {
    s3 = std::move(value);
    return *this;
  }
  RemoteTierOptions& with_retention(RetentionPolicy value) {
    retention = std::move(value);
    return *this;
  }
  RemoteTierOptions& with_verify(bool value) {
    verify = value;
    return *this;
  }
};

}  // namespace dcpp
