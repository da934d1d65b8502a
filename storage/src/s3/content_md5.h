#pragma once
// The Content-MD5 header of an upload (RFC 1864): the store computes the digest of the bytes it
// received and refuses the request (400 BadDigest) when they differ, so no byte changed on the way
// is ever stored. OpenSSL's MD5.

#include <string>
#include <string_view>

namespace dcpp::detail {

/// Base64 of the MD5 digest of `body`.
std::string content_md5(std::string_view body);

}  // namespace dcpp::detail
