#include "random_tag.h"

#include <chrono>
#include <cstdint>
#include <random>

namespace dcpp::detail {

std::string random_tag(int digits) {
  std::mt19937_64 random(
      std::random_device{}() ^
      static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()));
  static const char hex[] = "0123456789abcdef";
  std::string tag;
  for (int i = 0; i < digits; ++i) {
    tag += hex[random() % 16];
  }
  return tag;
}

}  // namespace dcpp::detail
