#include <dcpp/checkpoint/megatron.h>

#include "format/file_io.h"
#include "format/item_codec.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/core/checkpoint_error.h>
#include <dcpp/storage/checkpoint_layout.h>
#include <dcpp/storage/megatron_storage.h>

#include <algorithm>
#include <variant>

namespace dcpp::megatron {
namespace {

namespace fs = std::filesystem;

// The ShardedObject of the common state: one shard, written by rank 0 (`<key>/shard_0_1`).
constexpr const char* kCommonStateKey = kMegatronCommonStateKey;
constexpr const char* kLegacyCommonFile = kMegatronLegacyCommonFile;

StateDict as_dict(StateValue value, const std::string& where) {
  if (!value.is_dict()) {
    throw CheckpointError(ErrorKind::kCorrupt, where + " holds a " + value.kind_name() +
                                                   ", not the dict of Megatron's common state");
  }
  return std::move(value.dict());
}

// The Metadata of the Megatron-Core checkpoint in `directory` (Megatron's `verify_checkpoint`).
Metadata megatron_metadata(const fs::path& directory) {
  if (checkpoint_layout(directory)->name() != kMegatronLayout) {
    throw CheckpointError(ErrorKind::kUsage, directory.string() +
                                                 " is not a Megatron-Core checkpoint (it has no "
                                                 "metadata.json); read it with load_from_keys");
  }
  return read_metadata(directory);
}

int64_t element_count(const std::vector<int64_t>& sizes) {
  int64_t count = 1;
  for (const int64_t size : sizes) {
    if (__builtin_mul_overflow(count, size, &count)) return -1;
  }
  return count;
}

// Every ShardedTensor, by key, with its global shape as Megatron gives it: a tensor saved with a
// flattened_range and reformulated on disk (Metadata::nd_reformulated_shapes) has its original
// shape, as Megatron v0.14's get_reformulation_metadata gives it.
std::map<std::string, TensorMetadata> tensors_of(const Metadata& metadata,
                                                 const fs::path& directory) {
  const std::map<std::string, std::vector<int64_t>> original(
      metadata.nd_reformulated_shapes.begin(), metadata.nd_reformulated_shapes.end());
  std::map<std::string, TensorMetadata> tensors;
  for (const auto& [key, entry] : metadata.state_dict_metadata) {
    if (const auto* tensor = std::get_if<TensorStorageMetadata>(&entry)) {
      std::vector<int64_t> shape = tensor->size;
      if (const auto found = original.find(key); found != original.end()) {
        if (element_count(found->second) != element_count(tensor->size)) {
          throw CheckpointError(
              ErrorKind::kCorrupt,
              directory.string() + "/.metadata: mcore_data['" + key +
                  "'] gives the original shape " + c10::str(at::IntArrayRef(found->second)) +
                  " to a tensor saved as " + c10::str(at::IntArrayRef(tensor->size)) +
                  ": their element counts differ");
        }
        shape = found->second;
      }
      tensors[key] = TensorMetadata{key, tensor->properties.dtype, std::move(shape)};
    }
  }
  return tensors;
}

}  // namespace

StateDict load_common_state_dict(const fs::path& directory) {
  const Metadata metadata = megatron_metadata(directory);
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
  StateValue* content = common.find(kContentMetadataEntry);
  if (content == nullptr || (content->is_value() && content->value().isNone())) return {};
  return as_dict(std::move(*content), directory.string() + ", the common state's content_metadata");
}

std::map<std::string, TensorMetadata> load_tensors_metadata(const fs::path& directory) {
  return tensors_of(megatron_metadata(directory), directory);
}

ShardedMetadata load_sharded_metadata(const fs::path& directory) {
  const Metadata metadata = megatron_metadata(directory);
  ShardedMetadata sharded;
  sharded.tensors = tensors_of(metadata, directory);
  for (const auto& [key, entry] : metadata.state_dict_metadata) {
    if (std::holds_alternative<BytesStorageMetadata>(entry)) {
      try {
        sharded.objects[key] = parse_sharded_object_key(key);
      } catch (const CheckpointError& e) {
        throw CheckpointError(e.kind(), directory.string() + ": " + e.what_without_backtrace());
      }
    }
  }
  return sharded;
}

StateDict load_plain_tensors(const fs::path& directory) {
  const Metadata metadata = megatron_metadata(directory);
  std::vector<std::string> keys;
  for (const auto& [key, tensor] : tensors_of(metadata, directory)) keys.push_back(key);
  StateDict tensors = load_from_keys(directory, keys);
  // A reformulated tensor comes back flat, its elements in the original order, as Megatron's
  // load_plain_tensors gives it (its flattened_range covers the whole tensor).
  for (const auto& [key, shape] : metadata.nd_reformulated_shapes) {
    if (StateValue* value = tensors.find(key); value != nullptr && value->is_tensor()) {
      *value = value->tensor().reshape({-1});
    }
  }
  return tensors;
}

}  // namespace dcpp::megatron
