#include "storage/megatron_object_key.h"

#include <dcpp/core/checkpoint_error.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <set>

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

std::string tuple_text(const std::vector<int64_t>& numbers) {
  std::string text;
  for (int64_t n : numbers) text += (text.empty() ? "" : ", ") + std::to_string(n);
  return "(" + text + (numbers.size() == 1 ? ",)" : ")");
}

bool lies_inside(const std::vector<int64_t>& offset, const std::vector<int64_t>& shape) {
  if (offset.size() != shape.size()) return false;
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (offset[d] < 0 || offset[d] >= shape[d]) return false;
  }
  return true;
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

void check_sharded_object_grids(const std::vector<MegatronObjectKey>& shards,
                                const std::string& where, const std::string& remedy) {
  struct Grid {
    std::vector<int64_t> shape;
    std::set<std::vector<int64_t>> offsets;
  };
  std::map<std::string, Grid> objects;
  for (const MegatronObjectKey& shard : shards) {
    Grid& grid = objects.try_emplace(shard.key, Grid{shard.global_shape, {}}).first->second;
    if (grid.shape != shard.global_shape) {
      throw CheckpointError(ErrorKind::kUsage, where + "the shards of ShardedObject '" + shard.key +
                                                   "' give its shape as " + tuple_text(grid.shape) +
                                                   " and as " + tuple_text(shard.global_shape) +
                                                   ": " + remedy);
    }
    grid.offsets.insert(shard.global_offset);
  }
  for (const auto& [key, grid] : objects) {
    if (std::find(grid.shape.begin(), grid.shape.end(), -1) != grid.shape.end()) continue;
    for (const std::vector<int64_t>& offset : grid.offsets) {
      if (!lies_inside(offset, grid.shape)) {
        throw CheckpointError(ErrorKind::kUsage, where + "the shard at " + tuple_text(offset) +
                                                     " of ShardedObject '" + key +
                                                     "' lies outside its shape " +
                                                     tuple_text(grid.shape) + ": " + remedy);
      }
    }
    // Every offset lies inside the grid, so walking it in row-major order for offsets.size()
    // steps ends on the first absent shard, if there is one, and otherwise back at the origin
    // (the grid whole): a hostile shape costs no more than the shards listed.
    std::vector<int64_t> offset(grid.shape.size(), 0);
    for (std::size_t visited = 0; visited < grid.offsets.size(); ++visited) {
      if (grid.offsets.count(offset) == 0) break;
      for (std::size_t d = offset.size(); d-- > 0;) {
        if (++offset[d] < grid.shape[d]) break;
        offset[d] = 0;
      }
    }
    if (grid.offsets.count(offset) == 0) {
      throw CheckpointError(ErrorKind::kUsage,
                            where + "no rank has the shard at " + tuple_text(offset) +
                                " of ShardedObject '" + key + "', of shape " +
                                tuple_text(grid.shape) +
                                " (Megatron's validate_access_integrity): " + remedy);
    }
  }
}

}  // namespace dcpp::detail
