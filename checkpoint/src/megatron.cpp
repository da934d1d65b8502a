#include <dcpp/checkpoint/megatron.h>

#include "format/file_io.h"
#include "format/item_codec.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/core/checkpoint_error.h>
#include <dcpp/state_dict/whole_value.h>
#include <dcpp/storage/checkpoint_layout.h>

#include <algorithm>

namespace dcpp::megatron {
namespace {

namespace fs = std::filesystem;

// The ShardedObject of the common state: one shard, written by rank 0 (`<key>/shard_0_1`).
constexpr const char* kCommonStateObject = "common_state";
constexpr const char* kCommonStateKey = "common_state/shard_0_1";
constexpr const char* kContentMetadataKey = "content_metadata";
constexpr const char* kLegacyCommonFile = "common.pt";

StateDict as_dict(StateValue value, const std::string& where) {
  if (!value.is_dict()) {
    throw CheckpointError(ErrorKind::kCorrupt, where + " holds a " + value.kind_name() +
                                                   ", not the dict of Megatron's common state");
  }
  return std::move(value.dict());
}

}  // namespace

StateDict load_common_state_dict(const fs::path& directory) {
  if (checkpoint_layout(directory)->name() != kMegatronLayout) {
    throw CheckpointError(ErrorKind::kUsage, directory.string() +
                                                 " is not a Megatron-Core checkpoint (it has no "
                                                 "metadata.json); read it with load_from_keys");
  }
  const Metadata metadata = read_metadata(directory);
  const bool in_items =
      std::any_of(metadata.state_dict_metadata.begin(), metadata.state_dict_metadata.end(),
                  [](const auto& entry) { return entry.first == kCommonStateKey; });
  if (in_items) {
    // The shard's payload is `torch.save([common_state])`.
    StateDict loaded = load_from_keys(directory, {kCommonStateKey});
    StateValue& payload = loaded.at(kCommonStateKey);
    const std::string where = directory.string() + ", " + kCommonStateKey;
    if (!payload.is_list() || payload.list().size() != 1) {
      throw CheckpointError(ErrorKind::kCorrupt,
                            where + " holds a " + payload.kind_name() +
                                ", not the one-element list of a ShardedObject's payload");
    }
    return as_dict(std::move(payload.list()[0]), where);
  }
  const fs::path legacy = directory / kLegacyCommonFile;
  if (!fs::is_regular_file(legacy)) {
    throw CheckpointError(ErrorKind::kNotFound, directory.string() +
                                                    " holds no common state: neither the item " +
                                                    kCommonStateKey + " nor " + kLegacyCommonFile);
  }
  const detail::File file(legacy, detail::File::Mode::kRead);
  const detail::FileRangeSource source(file, 0, file.size(), legacy.string());
  return as_dict(StateValue(detail::read_bytes_item(source, /*verify_crc=*/true)), legacy.string());
}

StateDict load_content_metadata(const fs::path& directory) {
  StateDict common = load_common_state_dict(directory);
  StateValue* content = common.find(kContentMetadataKey);
  if (content == nullptr || (content->is_value() && content->value().isNone())) return {};
  return as_dict(std::move(*content), directory.string() + ", the common state's content_metadata");
}

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
  if (!content_metadata.empty()) common.insert_or_assign(kContentMetadataKey, content_metadata);
  const c10::IValue whole = whole_value(common);
  add_sharded_object(state_dict, kCommonStateObject, *whole_value_of(whole), {0}, {1});
}

}  // namespace dcpp::megatron
