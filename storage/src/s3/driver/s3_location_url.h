#pragma once
// "s3://bucket/prefix" URLs.

#include <string>
#include <string_view>

namespace dcpp::detail {

struct S3Url {
  std::string bucket;
  /// The keys' common prefix: empty (the bucket's root) or ending in "/".
  std::string prefix;
  /// "s3://bucket/prefix", without a trailing "/".
  std::string text() const;
};

/// Parses "s3://bucket[/prefix[/]]". Throws CheckpointError (kUsage) naming the URL when it is
/// not one, the bucket name is empty or not a valid S3 bucket name (3 to 63 of a-z 0-9 . -), or
/// the prefix has empty, "." or ".." parts.
S3Url parse_s3_url(std::string_view url);

}  // namespace dcpp::detail
