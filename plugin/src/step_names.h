#pragma once
// The names of step checkpoints' directories, "step-00001200" and Megatron-LM's "iter_0001200"
// (step_directory_name), read back without std::regex: its first use on two threads at once races
// in libstdc++'s locale cache, and the drain lists on its own thread.

#include <cctype>
#include <cstdint>
#include <optional>
#include <string_view>

namespace dcpp::detail {

/// Whether `name` is a step directory's name in Megatron-LM's form, "iter_" and digits.
inline bool is_megatron_step_name(std::string_view name) { return name.substr(0, 5) == "iter_"; }

/// The step of `name` when it is a step directory's name: "step-" and 8 or more digits, or
/// Megatron-LM's "iter_" and 7 or more (at most 18: an int64); nullopt for any other name
/// ("step-00001200.incomplete", "export-step-...", Megatron-LM's "release").
inline std::optional<int64_t> step_of_directory_name(std::string_view name) {
  const bool megatron = is_megatron_step_name(name);
  if (!megatron && name.substr(0, 5) != "step-") return std::nullopt;
  const std::string_view digits = name.substr(5);
  if (digits.size() < (megatron ? 7U : 8U) || digits.size() > 18) return std::nullopt;
  int64_t step = 0;
  for (const char c : digits) {
    if (!std::isdigit(static_cast<unsigned char>(c))) return std::nullopt;
    step = step * 10 + (c - '0');
  }
  return step;
}

}  // namespace dcpp::detail
