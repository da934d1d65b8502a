#pragma once
// Where and how the S3 storage driver reaches an object store.

#include <dcpp/core/export.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

namespace dcpp {

/// An S3 or S3-compatible object store. Every field left empty is taken as the AWS SDKs take it
/// (docs/storage.md): from the environment (`AWS_ENDPOINT_URL_S3`, `AWS_ENDPOINT_URL`,
/// `AWS_REGION`, `AWS_DEFAULT_REGION`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
/// `AWS_SESSION_TOKEN`, `AWS_PROFILE`), else from the profile in `~/.aws/credentials` and
/// `~/.aws/config` (`AWS_SHARED_CREDENTIALS_FILE`, `AWS_CONFIG_FILE` move them). Never from a
/// checkpoint.
struct DCPP_API S3Options {
  /// "https://s3.us-east-1.amazonaws.com" when empty and none is configured; for other stores
  /// their URL, such as "http://127.0.0.1:9000".
  std::string endpoint_url;
  /// "us-east-1" when empty and none is configured.
  std::string region;
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;
  /// The profile of `~/.aws/credentials` and `~/.aws/config`: `AWS_PROFILE`, else "default".
  std::string profile;
  /// Path-style addressing (`endpoint/bucket/key`) rather than virtual-hosted
  /// (`bucket.endpoint/key`). Unset: path-style for a configured endpoint (what S3-compatible
  /// stores serve), virtual-hosted for AWS.
  std::optional<bool> path_style;
  /// Tries of a request that failed in a way a retry may mend (HTTP 5xx or 429, a refused, reset
  /// or timed-out connection), with exponential backoff from `initial_backoff`, doubling up to
  /// `max_backoff`, with jitter.
  int max_attempts = 5;
  std::chrono::milliseconds initial_backoff{100};
  std::chrono::milliseconds max_backoff{5000};
  /// A store that throttles (HTTP 503 or 429, or the code SlowDown) is asked again for this long
  /// after the first try, however many tries that takes, waiting at least what its Retry-After
  /// header says: throttling passes, and a save should outlast it.
  std::chrono::seconds throttle_budget{30};
  /// The S3 requests of this process in flight at once (all clients together: every rank thread,
  /// reader, writer and drain): a request of a client waits while this many are. Throttling is per
  /// prefix and per host, so many ranks of one host should not all ask at once.
  int process_requests_in_flight = 64;
  /// A request that moves less than 1 byte/s for this long is dropped (and retried).
  std::chrono::seconds stall_timeout{60};
  std::chrono::seconds connect_timeout{10};
  /// Multipart uploads: the size of each part (5 MiB to 5 GiB, S3's limits), and the requests
  /// in flight per rank (part uploads and ranged GETs).
  uint64_t part_size = 16ull << 20;
  int concurrency = 8;
  /// Send an upload's MD5 (Content-MD5) where the store does not check its CRC-32C (`crc32c`,
  /// below): the store checks the bytes it received and refuses changed ones (400 BadDigest,
  /// retried), so no byte changed on the way is stored. Costs one MD5 pass over what is uploaded.
  bool content_md5 = true;
  /// Send each upload's CRC-32C (x-amz-checksum-crc32c, S3's flexible checksums; a multipart
  /// upload is created with that algorithm and lists each part's). A store that checks it says so
  /// in its answer (it returns the checksum); once one did, uploads carry the CRC-32C alone,
  /// which costs a fraction of the MD5 pass. A store that does not (s3rver, older S3-compatible
  /// stores) keeps getting the Content-MD5 alone after its first answer.
  bool crc32c = true;

  /// The keys, as a pair (and the session token of temporary ones); empty: as above.
  S3Options& with_credentials(std::string key_id, std::string secret, std::string token = {}) {
    access_key_id = std::move(key_id);
    secret_access_key = std::move(secret);
    session_token = std::move(token);
    return *this;
  }
  S3Options& with_endpoint_url(std::string value) {
    endpoint_url = std::move(value);
    return *this;
  }
  S3Options& with_region(std::string value) {
    region = std::move(value);
    return *this;
  }
  S3Options& with_profile(std::string value) {
    profile = std::move(value);
    return *this;
  }
  S3Options& with_path_style(bool value) {
    path_style = value;
    return *this;
  }
  S3Options& with_max_attempts(int value) {
    max_attempts = value;
    return *this;
  }
  S3Options& with_initial_backoff(std::chrono::milliseconds value) {
    initial_backoff = value;
    return *this;
  }
  S3Options& with_max_backoff(std::chrono::milliseconds value) {
    max_backoff = value;
    return *this;
  }
  S3Options& with_throttle_budget(std::chrono::seconds value) {
    throttle_budget = value;
    return *this;
  }
  S3Options& with_process_requests_in_flight(int value) {
    process_requests_in_flight = value;
    return *this;
  }
  S3Options& with_stall_timeout(std::chrono::seconds value) {
    stall_timeout = value;
    return *this;
  }
  S3Options& with_connect_timeout(std::chrono::seconds value) {
    connect_timeout = value;
    return *this;
  }
  S3Options& with_part_size(uint64_t value) {
    part_size = value;
    return *this;
  }
  S3Options& with_concurrency(int value) {
    concurrency = value;
    return *this;
  }
  S3Options& with_content_md5(bool value) {
    content_md5 = value;
    return *this;
  }
  S3Options& with_crc32c(bool value) {
    crc32c = value;
    return *this;
  }
};

}  // namespace dcpp
