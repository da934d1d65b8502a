#include "plugin/megatron_tracker.h"

#include <dcpp/plugin/checkpoint_info.h>

#include <cctype>
#include <fstream>
#include <sstream>

namespace dcpp::detail {

namespace fs = std::filesystem;

fs::path megatron_tracker_path(const fs::path& root) { return root / kMegatronTrackerFile; }

std::optional<MegatronTracker> read_megatron_tracker(const fs::path& root) {
  std::error_code error;
  const fs::path path = megatron_tracker_path(root);
  if (!fs::is_regular_file(path, error)) return std::nullopt;
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string text(64, '\0');  // an iteration is at most 19 digits: the rest is not one
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  const auto space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  while (!text.empty() && space(text.back())) text.pop_back();
  std::size_t start = 0;
  while (start < text.size() && space(text[start])) ++start;
  text.erase(0, start);

  MegatronTracker tracker;
  if (text == "release") {
    tracker.release = true;
    tracker.problem = "it says 'release'";
    return tracker;
  }
  // Python's int(): an optional sign, then digits (Megatron-LM asserts the iteration is >= 0).
  std::size_t digits = !text.empty() && text[0] == '+' ? 1 : 0;
  bool number = text.size() > digits && text.size() - digits <= 18;
  for (std::size_t i = digits; number && i < text.size(); ++i) {
    number = std::isdigit(static_cast<unsigned char>(text[i])) != 0;
  }
  if (number) {
    tracker.iteration = std::stoll(text.substr(digits));
  } else {
    tracker.problem = "its text '" + text.substr(0, 40) + (text.size() > 40 ? "...'" : "'") +
                      " is no iteration number (nor 'release')";
  }
  return tracker;
}

}  // namespace dcpp::detail
