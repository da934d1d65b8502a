#include "storage/megatron_object_key.h"

#include <dcpp/core/checkpoint_error.h>

#include <algorithm>
#include <cctype>
#include <optional>

namespace dcpp::detail {

namespace {

// "0.1.2" as (0, 1, 2), as Python's tuple(map(int, text.split("."))) reads it; nullopt when a
// part is not a whole number.
std::optional<std::vector<int64_t>> dotted_numbers(const std::string& text) {
  std::vector<int64_t> numbers;
  std::size_t start = 0;
  while (true) {
    const std::size_t end = std::min(text.find('.', start), text.size());
    const std::string part = text.substr(start, end - start);
    std::size_t digits = part.size() > 0 && part[0] == '-' ? 1 : 0;
    if (part.size() == digits || part.size() - digits > 18) return std::nullopt;
    for (std::size_t i = digits; i < part.size(); ++i) {
      if (!std::isdigit(static_cast<unsigned char>(part[i]))) return std::nullopt;
    }
    numbers.push_back(std::stoll(part));
    if (end == text.size()) return numbers;
    start = end + 1;
  }
}

}  // namespace

MegatronObjectKey parse_megatron_object_key(const std::string& unique_key) {
  const auto refuse = [&](const std::string& why) -> MegatronObjectKey {
    throw CheckpointError(
        ErrorKind::kCorrupt,
        "the object key '" + unique_key + "' is not a ShardedObject shard's " +
            "(<key>/shard_<offsets>_<shape>, as Megatron-Core writes it): " + why);
  };
  const std::size_t slash = unique_key.find('/');
  if (slash == std::string::npos || unique_key.find('/', slash + 1) != std::string::npos) {
    return refuse("it must hold exactly one '/'");
  }
  const std::string shard = unique_key.substr(slash + 1);
  const std::size_t first = shard.find('_');
  const std::size_t second = first == std::string::npos ? first : shard.find('_', first + 1);
  if (second == std::string::npos || shard.find('_', second + 1) != std::string::npos ||
      shard.substr(0, first) != "shard") {
    return refuse("after the '/' must come shard_<offsets>_<shape>");
  }
  const auto offset = dotted_numbers(shard.substr(first + 1, second - first - 1));
  const auto shape = dotted_numbers(shard.substr(second + 1));
  if (!offset || !shape) return refuse("its offsets and shape must be numbers joined by '.'");
  MegatronObjectKey parsed{unique_key.substr(0, slash), *shape, *offset};
  // Megatron's backward-compatible reading of a shape one dimension short of its offset.
  if (parsed.global_shape.size() + 1 == parsed.global_offset.size()) {
    parsed.global_shape.push_back(-1);
  }
  return parsed;
}

}  // namespace dcpp::detail
