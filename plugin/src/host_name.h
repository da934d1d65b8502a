#pragma once
// This machine's host name, as the plugin's messages and markers name a host.

#include <string>

#include <unistd.h>

namespace dcpp::detail {

/// gethostname(2), or "?" when it fails.
inline std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "?";
  return name;
}

}  // namespace dcpp::detail
