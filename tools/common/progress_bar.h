#pragma once
// A progress bar on stderr for long conversions: drawn only when stderr is a terminal, so logs and
// pipes stay clean.

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace dcpp::tools {

/// Counts bytes done out of `total` and redraws one line (at most ten times a second, and at the
/// end). Not thread-safe. `enabled` defaults to whether stderr is a terminal.
class ProgressBar {
 public:
  ProgressBar(std::string label, uint64_t total);
  ProgressBar(std::string label, uint64_t total, bool enabled, std::FILE* out);
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  bool enabled() const { return enabled_; }
  /// Adds `bytes` to the count; `item` names what is being worked on.
  void advance(uint64_t bytes, const std::string& item);
  /// Draws the final state and ends the line (also done by the destructor).
  void finish();

 private:
  void draw(const std::string& item);

  std::string label_;
  uint64_t total_;
  uint64_t done_ = 0;
  bool enabled_;
  bool finished_ = false;
  std::FILE* out_;
  std::chrono::steady_clock::time_point last_draw_{};
};

/// Whether stderr is a terminal (where a progress bar belongs).
bool stderr_is_terminal();

/// "1.5 GiB", "12.0 KiB", "17 B".
std::string human_bytes(uint64_t bytes);

}  // namespace dcpp::tools
