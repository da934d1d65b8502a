#pragma once
// The XML of S3's answers that the client reads, and the one body it sends.

#include "s3/protocol/s3_client.h"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dcpp::detail {

/// An `<Error>` body: S3's error code ("NoSuchKey", "SlowDown") and message.
struct S3ErrorBody {
  std::string code;
  std::string message;
};

/// The error `body` holds when it is an `<Error>` document, else nullopt (an empty body, HTML
/// from a proxy, anything else).
std::optional<S3ErrorBody> parse_s3_error(std::string_view body);

/// The UploadId of an `<InitiateMultipartUploadResult>`, or nullopt when it has none.
std::optional<std::string> parse_upload_id(std::string_view body);

/// One page of a ListObjectsV2 answer.
struct S3ListPage {
  std::vector<S3ObjectInfo> objects;         // Contents: Key, Size
  std::vector<std::string> common_prefixes;  // CommonPrefixes: Prefix
  bool truncated = false;                    // IsTruncated
  std::string next_continuation_token;       // NextContinuationToken
};

/// Parses a `<ListBucketResult>`, or nullopt when `body` is not one (or a Size is not a number).
std::optional<S3ListPage> parse_list_page(std::string_view body);

/// One page of a ListMultipartUploads answer.
struct S3UploadsPage {
  std::vector<S3UploadInfo> uploads;  // Upload: Key, UploadId
  bool truncated = false;             // IsTruncated
  std::string next_key_marker;        // NextKeyMarker
  std::string next_upload_id_marker;  // NextUploadIdMarker
};

/// A `<ListMultipartUploadsResult>` page, or nullopt when the body is not one.
std::optional<S3UploadsPage> parse_uploads_page(std::string_view body);

/// The `<CompleteMultipartUpload>` body listing `parts` in the order given.
std::string complete_multipart_body(const std::vector<S3UploadedPart>& parts);

}  // namespace dcpp::detail
