#pragma once
// The AWS shared files (~/.aws/credentials, ~/.aws/config): INI sections of `key = value` lines.

#include <map>
#include <optional>
#include <string>

namespace dcpp::detail {

/// One shared file, read whole: section name (the text between the brackets, trimmed) to its
/// entries (keys lowercased, values trimmed). Lines starting with '#' or ';' are comments; an
/// indented line continues the entry above (a nested block such as `s3 =` and its settings) and
/// is skipped, so nested settings never pass for top-level ones. A later duplicate wins.
struct AwsSharedFile {
  std::map<std::string, std::map<std::string, std::string>> sections;

  /// The value of `key` in `section`, or nullopt when either is missing or the value is empty.
  std::optional<std::string> get(const std::string& section, const std::string& key) const;
  bool has_section(const std::string& section) const;
};

/// Parses the text of a shared file. Never throws on odd lines: it skips them, as the SDKs do.
AwsSharedFile parse_aws_shared_file(const std::string& text);

/// Reads and parses the file at `path`, or nullopt when it cannot be read.
std::optional<AwsSharedFile> read_aws_shared_file(const std::string& path);

}  // namespace dcpp::detail
