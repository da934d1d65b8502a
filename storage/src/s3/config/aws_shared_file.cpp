#include "s3/config/aws_shared_file.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>

namespace dcpp::detail {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f'; }

std::string trim(const std::string& s) {
  std::size_t begin = 0;
  std::size_t end = s.size();
  while (begin < end && is_space(s[begin])) ++begin;
  while (end > begin && is_space(s[end - 1])) --end;
  return s.substr(begin, end - begin);
}

std::string lowercase(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

}  // namespace

std::optional<std::string> AwsSharedFile::get(const std::string& section,
                                              const std::string& key) const {
  const auto found_section = sections.find(section);
  if (found_section == sections.end()) return std::nullopt;
  const auto found = found_section->second.find(key);
  if (found == found_section->second.end() || found->second.empty()) return std::nullopt;
  return found->second;
}

bool AwsSharedFile::has_section(const std::string& section) const {
  return sections.count(section) != 0;
}

AwsSharedFile parse_aws_shared_file(const std::string& text) {
  AwsSharedFile file;
  std::map<std::string, std::string>* current = nullptr;
  std::istringstream lines(text);
  std::string raw;
  while (std::getline(lines, raw)) {
    const std::string line = trim(raw);
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line.front() == '[') {
      const std::size_t close = line.find(']');
      current =
          close == std::string::npos ? nullptr : &file.sections[trim(line.substr(1, close - 1))];
      continue;
    }
    if (current == nullptr || is_space(raw[0])) continue;  // outside a section, or nested
    const std::size_t equals = line.find('=');
    if (equals == std::string::npos) continue;
    (*current)[lowercase(trim(line.substr(0, equals)))] = trim(line.substr(equals + 1));
  }
  return file;
}

std::optional<AwsSharedFile> read_aws_shared_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return parse_aws_shared_file(text.str());
}

}  // namespace dcpp::detail
