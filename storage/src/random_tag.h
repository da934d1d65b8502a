#pragma once
// Random names for what one save writes beside another's (data files of an overwrite, a save's id).

#include <string>

namespace dcpp::detail {

/// `digits` random lowercase hex digits, seeded afresh each call from std::random_device and the
/// clock: unlikely to repeat across saves, processes and machines. Not for secrets.
std::string random_tag(int digits);

}  // namespace dcpp::detail
