#pragma once
// The names of step checkpoints' directories, "step-00001200" (step_directory_name), read back
// without std::regex: its first use on two threads at once races in libstdc++'s locale cache, and
// the drain lists on its own thread.

#include <cctype>
#include <cstdint>
#include <optional>
#include <string_view>

namespace dcpp::detail {

/// The step of `name` when it is a step directory's name: "step-" and 8 or more digits (at most
/// 18: an int64); nullopt for any other name ("step-00001200.incomplete", "export-step-...").
inline std::optional<int64_t> step_of_directory_name(std::string_view name) {
  constexpr std::string_view kPrefix = "step-";
  if (name.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  const std::string_view digits = name.substr(kPrefix.size());
  if (digits.size() < 8 || digits.size() > 18) return std::nullopt;
  int64_t step = 0;
  for (const char c : digits) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
    step = step * 10 + (c - '0');
  }
  return step;
}

}  // namespace dcpp::detail
