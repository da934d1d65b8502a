#pragma once
// The MD5 digests S3 speaks in: the Content-MD5 header of an upload (RFC 1864), whose digest the
// store checks against the bytes it received (400 BadDigest when they differ, so no byte changed
// on the way is ever stored), and the ETag of a multipart upload's object. OpenSSL's MD5.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dcpp::detail {

/// Base64 of the MD5 digest of `body`.
std::string content_md5(std::string_view body);

/// The ETag S3 gives the object of a multipart upload of parts with `part_etags` (in part order,
/// each the quoted hex MD5 of its part): the quoted hex MD5 of the parts' digests joined, then
/// "-" and the number of parts. nullopt when a part's ETag is not such a digest.
std::optional<std::string> multipart_etag(const std::vector<std::string>& part_etags);

}  // namespace dcpp::detail
