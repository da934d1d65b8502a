#pragma once
// The CheckpointManager's remote tier: an object store that committed step checkpoints drain to.
//
// A save commits under the local root first (all a preemption save waits for); the coordinator's
// drain thread then copies each committed step to `<url>/step-00001200/`: every file but
// `.metadata`, several at once, each with its Content-MD5 for the store to check (and read back
// and its CRC-32 compared with `verify`), then `.metadata` last, whose presence makes the remote
// copy complete. The drain applies `retention` to the remote steps, and
// deletes a local step the local policy does not keep only once the remote holds it (or the remote
// policy would not keep it either). Resuming takes the newest complete step of either tier,
// the local copy when both have it; a job whose local disk was lost resumes from the remote.

#include <dcpp/core/export.h>
#include <dcpp/plugin/retention_policy.h>
#include <dcpp/storage/s3_options.h>

#include <chrono>
#include <cstddef>
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
  /// commit (twice the traffic). Off by default: each upload carries its Content-MD5
  /// (S3Options::content_md5), which the store checks against the bytes it received.
  bool verify = false;
  /// The files of a step uploaded at once (each a multipart upload of up to `s3.concurrency`
  /// parts in flight; S3Options::process_requests_in_flight bounds them all).
  int files_at_once = 4;
  /// How long this job's hold on the prefix lasts once it stops renewing it (a lease object,
  /// `.dcpp-drain-lease`, taken by the first drain pass, renewed every third of this by a
  /// heartbeat while the manager lives, released when it ends; every write of it is a
  /// conditional PUT): another job's drain of the same prefix fails meanwhile, naming this one,
  /// and takes over once it expires. 0: no lease (for a store without conditional PUTs; one job
  /// per prefix is then yours to keep).
  std::chrono::seconds drain_lease{600};
  /// This job's identity, the same across its restarts: a job whose predecessor (of the same
  /// identity) died holding the lease takes it over at once instead of waiting for it to expire.
  /// Empty: the environment's DCPP_JOB_ID, else SLURM_JOB_ID, else TORCHELASTIC_RUN_ID, else
  /// none (a predecessor's lease is then waited out like another job's).
  std::string job_id;
  /// How long a restart may wait for the store: the reads of the remote steps when the manager
  /// starts, restore() chooses a checkpoint, or latest() answers, each ending by then (an
  /// S3Deadline). A store that does not answer in time counts as unreachable: restore() resumes
  /// from the local root's newest step (forking, as the store may hold newer ones) or, with none,
  /// fails on every rank naming the store. 0: no bound beyond S3Options' retries and stall timeout.
  std::chrono::seconds restart_timeout{60};
  /// How the drain lists the remote steps: while the last listing found at most this many
  /// objects, one listing of all of them (a request per 1,000); beyond, the step directories (a
  /// listing with the delimiter "/"), then of each step its commit objects (`.metadata`, the
  /// manifest: two small requests), and all its objects only while it is not known complete: a
  /// pass then costs about two requests per step, whatever the number of ranks' files.
  std::size_t listing_objects = 4000;

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
  RemoteTierOptions& with_listing_objects(std::size_t value) {
    listing_objects = value;
    return *this;
  }
  RemoteTierOptions& with_drain_lease(std::chrono::seconds value) {
    drain_lease = value;
    return *this;
  }
  RemoteTierOptions& with_restart_timeout(std::chrono::seconds value) {
    restart_timeout = value;
    return *this;
  }
  RemoteTierOptions& with_job_id(std::string value) {
    job_id = std::move(value);
    return *this;
  }
  RemoteTierOptions& with_files_at_once(int value) {
    files_at_once = value;
    return *this;
  }
};

}  // namespace dcpp
