#pragma once
// A small S3 client over libcurl: the requests the S3 storage driver needs, signed with libcurl's
// own AWS Signature Version 4 (CURLOPT_AWS_SIGV4), retried with backoff where S3 says a retry may
// succeed. Thread-safe: any number of threads may issue requests at once; connections are reused.

#include "s3/config/s3_config.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dcpp::detail {

/// One object of a listing.
struct S3ObjectInfo {
  std::string key;
  uint64_t size = 0;
  std::string etag;  // as the listing gives it, quotes included; "" when it gives none
};

/// A multipart upload in progress (begun, neither completed nor aborted).
struct S3UploadInfo {
  std::string key;
  std::string upload_id;
};

/// One part of a multipart upload, as complete_multipart_upload needs it.
struct S3UploadedPart {
  int part_number = 0;          // 1 to 10,000
  std::string etag;             // as upload_part returned it, quotes included
  std::string checksum_crc32c;  // its x-amz-checksum-crc32c, when its upload has that algorithm
};

/// A multipart upload begun by create_multipart_upload.
struct S3NewUpload {
  std::string upload_id;
  bool crc32c = false;  // created with the CRC-32C algorithm: each part carries its CRC-32C
};

/// Every method throws CheckpointError on failure, with a message naming the bucket and key, the
/// request, the HTTP status and S3's error code and message, and what to do:
///   - kNotFound: 404 NoSuchKey (or a HEAD's 404) where a method says so, NoSuchBucket;
///   - kIo: the server or the network failed after `max_attempts` tries (5xx, 429, SlowDown,
///     timeouts, refused or dropped connections), or any other HTTP error;
///   - kUsage: bad credentials or permissions (403: InvalidAccessKeyId, SignatureDoesNotMatch,
///     AccessDenied, ...), naming where the credentials came from.
/// Requests that fail with 5xx, 429 or a transport error are retried with exponential backoff
/// (S3Config::max_attempts, initial_backoff, max_backoff) before they throw, throttled ones (503,
/// 429, SlowDown) for throttle_budget at least, honouring Retry-After; 4xx errors are not
/// retried. Every request holds one of the process's request slots (process_request_limit.h).
class S3Client {
 public:
  explicit S3Client(S3Config config);
  ~S3Client();
  S3Client(const S3Client&) = delete;
  S3Client& operator=(const S3Client&) = delete;

  const S3Config& config() const;

  /// The bucket exists and these credentials may list it (a HEAD of the bucket). Throws the
  /// errors above: a missing bucket is kNotFound naming the bucket and the endpoint.
  void check_bucket();

  void put_object(const std::string& key, std::string_view body);
  /// The whole object. A missing object is kNotFound.
  std::string get_object(const std::string& key);
  /// The whole object, or nullopt when it does not exist.
  std::optional<std::string> get_object_if_exists(const std::string& key);
  /// The whole object and the ETag it was read with, or nullopt when it does not exist.
  std::optional<std::pair<std::string, std::string>> get_object_and_etag(const std::string& key);
  /// Exactly `n` bytes at `offset` of the object (a ranged GET, `Range: bytes=offset-(offset+n-1)`)
  /// into `dst`. Fewer bytes (the object is shorter) is kCorrupt, naming the object; a missing
  /// object is kNotFound. n == 0 reads nothing.
  void get_range(const std::string& key, uint64_t offset, void* dst, std::size_t n);
  /// The object's size (HEAD), or nullopt when it does not exist.
  std::optional<uint64_t> head_object(const std::string& key);
  /// A PUT with If-None-Match: * : true when it created the object, false when one was there
  /// (412) or another such PUT won (409).
  bool put_object_if_absent(const std::string& key, std::string_view body);
  /// A PUT with If-Match: `etag`: true when it replaced the object, false when the object has
  /// another ETag now or is gone (412, 404) or another such PUT won (409).
  bool put_object_if_match(const std::string& key, std::string_view body, const std::string& etag);
  /// The object's size and ETag (HEAD), or nullopt when there is none.
  std::optional<S3ObjectInfo> stat_object(const std::string& key);
  /// Every object whose key starts with `prefix`, in key order (ListObjectsV2, all pages).
  std::vector<S3ObjectInfo> list_objects(const std::string& prefix);
  /// The distinct "directories" directly below `prefix`: the common prefixes of ListObjectsV2
  /// with delimiter "/", each ending in "/" (all pages).
  std::vector<std::string> list_common_prefixes(const std::string& prefix);
  /// Deletes the object; deleting a missing object succeeds (as S3 does).
  void delete_object(const std::string& key);

  /// Multipart uploads. Parts but the last must be at least 5 MiB (S3's rule).
  /// Asks for the CRC-32C algorithm (S3Options::crc32c) unless the store does not check it.
  S3NewUpload create_multipart_upload(const std::string& key);
  /// The part as complete_multipart_upload lists it: its ETag and checksum. The body carries its
  /// CRC-32C when the upload has that algorithm, else its MD5 (S3Options::content_md5).
  S3UploadedPart upload_part(const std::string& key, const S3NewUpload& upload, int part_number,
                             std::string_view body);
  /// A retry that finds the upload gone (NoSuchUpload: an earlier try's answer was lost) takes
  /// the object at `key` as this upload's only when its ETag is the one these parts give it
  /// (content_md5.h); an older object of the key is kIo.
  void complete_multipart_upload(const std::string& key, const std::string& upload_id,
                                 const std::vector<S3UploadedPart>& parts);
  /// The multipart uploads in progress whose keys start with `prefix` (ListMultipartUploads, every
  /// page).
  std::vector<S3UploadInfo> list_multipart_uploads(const std::string& prefix);
  /// Discards the upload and its parts. Never throws: a failure is logged (S3's lifecycle rules
  /// clean up what an abort could not).
  void abort_multipart_upload(const std::string& key, const std::string& upload_id) noexcept;

  /// "s3://bucket/key", for messages.
  std::string url_of(const std::string& key) const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dcpp::detail
