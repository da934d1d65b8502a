#pragma once
// S3's URI encoding, as AWS Signature Version 4 canonicalizes it: what the client sends is already
// canonical, so the signature libcurl computes over it is the one S3 computes.

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dcpp::detail {

/// Every byte but the unreserved A-Z a-z 0-9 - _ . ~ percent-encoded (uppercase hex); '/' kept
/// as is unless `encode_slash` (object keys keep it, query parameters do not).
std::string s3_uri_encode(std::string_view text, bool encode_slash);

/// The canonical query string of `params`: each name and value encoded, sorted by encoded name
/// (then value), joined as "a=1&b=&c=3". A parameter without a value is "name=".
std::string s3_canonical_query(std::vector<std::pair<std::string, std::string>> params);

}  // namespace dcpp::detail
