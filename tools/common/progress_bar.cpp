#include "common/progress_bar.h"

#include <unistd.h>

#include <algorithm>

namespace dcpp::tools {

bool stderr_is_terminal() { return isatty(STDERR_FILENO) == 1; }

ProgressBar::ProgressBar(std::string label, uint64_t total)
    : ProgressBar(std::move(label), total, stderr_is_terminal(), stderr) {}

ProgressBar::ProgressBar(std::string label, uint64_t total, bool enabled, std::FILE* out)
    : label_(std::move(label)), total_(total), enabled_(enabled), out_(out) {}

ProgressBar::~ProgressBar() { finish(); }

void ProgressBar::advance(uint64_t bytes, const std::string& item) {
  done_ += bytes;
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_draw_ >= std::chrono::milliseconds(100) || done_ >= total_) {
    last_draw_ = now;
    draw(item);
  }
}

void ProgressBar::finish() {
  if (!enabled_ || finished_) return;
  finished_ = true;
  draw("");
  std::fputc('\n', out_);
  std::fflush(out_);
}

void ProgressBar::draw(const std::string& item) {
  constexpr int kWidth = 30;
  const double fraction =
      total_ == 0 ? 1.0 : std::min(1.0, static_cast<double>(done_) / static_cast<double>(total_));
  const int filled = static_cast<int>(fraction * kWidth);
  std::string bar(static_cast<std::size_t>(filled), '=');
  if (filled < kWidth) bar += '>';
  bar.resize(kWidth, ' ');
  std::string name = item.size() > 40 ? "..." + item.substr(item.size() - 37) : item;
  std::fprintf(out_, "\r%s [%s] %3d%% %s / %s %-40s", label_.c_str(), bar.c_str(),
               static_cast<int>(fraction * 100), human_bytes(done_).c_str(),
               human_bytes(total_).c_str(), name.c_str());
  std::fflush(out_);
}

std::string human_bytes(uint64_t bytes) {
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 5) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof(text), "%.1f %s", value, kUnits[unit]);
  return text;
}

}  // namespace dcpp::tools
