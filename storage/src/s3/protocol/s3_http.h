#pragma once
// One try of one HTTP request to S3 over libcurl, signed with AWS Signature Version 4 by libcurl
// (CURLOPT_AWS_SIGV4), on an easy handle from a pool that keeps connections open between requests.

#include "s3/config/s3_config.h"

#include <curl/curl.h>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dcpp::detail {

/// curl_global_init, once per process, before the first handle. Throws std::runtime_error.
void init_curl_once();

struct HttpRequest {
  const char* method = "GET";        // GET, PUT, POST, DELETE or HEAD
  std::string url;                   // path URI-encoded, query canonical (s3_uri.h)
  std::vector<std::string> headers;  // more "Name: value" lines (Range, Content-Type)
  /// The body of a PUT or POST, sent from the caller's memory without a copy; it must outlive
  /// perform(). Sent whole by every try.
  std::string_view body;
  /// When set, a 2xx answer's body goes here (at most dst_size bytes: more ends the transfer
  /// with HttpResponse::dst_overflow), and any other answer's body to HttpResponse::body.
  char* dst = nullptr;
  std::size_t dst_size = 0;
  /// The whole exchange's limit in milliseconds (an S3Deadline's); 0: none.
  long timeout_ms = 0;
};

struct HttpResponse {
  CURLcode transport = CURLE_OK;  // not CURLE_OK: no complete answer (status may be set)
  std::string transport_error;    // libcurl's words for `transport`
  long status = 0;
  std::string body;
  std::size_t dst_bytes = 0;  // bytes written to HttpRequest::dst
  bool dst_overflow = false;
  std::optional<uint64_t> content_length;      // the Content-Length header, when there was one
  std::string etag;                            // the ETag header, quotes included
  std::string bucket_region;                   // the x-amz-bucket-region header
  std::optional<int64_t> retry_after_seconds;  // the Retry-After header, in seconds
  std::string checksum_crc32c;     // x-amz-checksum-crc32c: the store checked the body's CRC-32C
  std::string checksum_algorithm;  // x-amz-checksum-algorithm (CreateMultipartUpload's answer)
};

/// Thread-safe: perform() may run on any number of threads at once, each on its own handle.
class S3Transport {
 public:
  explicit S3Transport(const S3Config& config);
  ~S3Transport();
  S3Transport(const S3Transport&) = delete;
  S3Transport& operator=(const S3Transport&) = delete;

  /// One try of `request`, signed with `credentials`. Never throws for what the network or the
  /// server did: the response says. Throws std::bad_alloc, and std::runtime_error when libcurl
  /// cannot make a handle.
  HttpResponse perform(const HttpRequest& request, const S3Credentials& credentials);

 private:
  CURL* acquire();
  void release(CURL* handle) noexcept;
  /// The options every request sets, after curl_easy_reset.
  void set_common_options(CURL* handle) const;

  std::string sigv4_;                        // "aws:amz:REGION:s3"
  std::vector<std::string> signed_headers_;  // x-amz-content-sha256
  long connect_timeout_ms_;
  long stall_timeout_s_;

  std::mutex mutex_;
  std::vector<CURL*> idle_;  // reset handles, each with its open connections
};

}  // namespace dcpp::detail
