#include <dcpp/checkpoint/megatron_state_dict.h>

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/state_dict/whole_value.h>

#include <algorithm>
#include <cctype>
#include <optional>
#include <string>
#include <vector>

namespace dcpp::megatron {

namespace {

std::string dot_joined(const std::vector<int64_t>& numbers) {
  std::string text;
  for (int64_t n : numbers) text += (text.empty() ? "" : ".") + std::to_string(n);
  return text;
}

}  // namespace

std::string sharded_object_key(const std::string& key, const std::vector<int64_t>& global_offset,
                               const std::vector<int64_t>& global_shape) {
  const std::string shard = "offset (" + dot_joined(global_offset) + ") of shape (" +
                            dot_joined(global_shape) + ") of ShardedObject '" + key + "'";
  if (global_shape.empty() || global_offset.size() != global_shape.size()) {
    throw CheckpointError(ErrorKind::kUsage,
                          shard + ": give one offset per dimension of a shape of one or more");
  }
  for (std::size_t d = 0; d < global_shape.size(); ++d) {
    if (global_offset[d] < 0 || global_offset[d] >= global_shape[d]) {
      throw CheckpointError(ErrorKind::kUsage, shard + ": the offset is outside the shape");
    }
  }
  return key + "/shard_" + dot_joined(global_offset) + "_" + dot_joined(global_shape);
}

void add_sharded_object(StateDict& state_dict, const std::string& key, c10::IValue data,
                        const std::vector<int64_t>& global_offset,
                        const std::vector<int64_t>& global_shape) {
  c10::impl::GenericList payload(c10::AnyType::get());  // Megatron's `torch.save([data])`
  payload.push_back(std::move(data));
  state_dict.insert(sharded_object_key(key, global_offset, global_shape),
                    whole_value(std::move(payload)));
}

void add_common_state(StateDict& state_dict, StateDict common, const StateDict& content_metadata) {
  if (!content_metadata.empty()) common.insert_or_assign(kContentMetadataEntry, content_metadata);
  const c10::IValue whole = whole_value(common);
  add_sharded_object(state_dict, "common_state", *whole_value_of(whole), {0}, {1});
}

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

ShardedObjectMetadata parse_sharded_object_key(const std::string& unique_key) {
  const auto refuse = [&](const std::string& why) -> ShardedObjectMetadata {
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
  ShardedObjectMetadata parsed{unique_key.substr(0, slash), *shape, *offset, unique_key};
  // Megatron's backward-compatible reading of a shape one dimension short of its offset.
  if (parsed.global_shape.size() + 1 == parsed.global_offset.size()) {
    parsed.global_shape.push_back(-1);
  }
  return parsed;
}

}  // namespace dcpp::megatron
