#pragma once
// The test workers' list arguments: "a,b,c" -> {"a", "b", "c"}; "a" -> {"a"}.

#include <string>
#include <vector>

namespace dcpp::test {

inline std::vector<std::string> split_at_commas(const std::string& list) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (std::size_t comma; (comma = list.find(',', start)) != std::string::npos; start = comma + 1) {
    parts.push_back(list.substr(start, comma - start));
  }
  parts.push_back(list.substr(start));
  return parts;
}

}  // namespace dcpp::test
