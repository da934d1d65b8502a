#include "planner/planner_helpers.h"

#include <dcpp/core/checkpoint_error.h>

#include <ATen/core/List.h>

#include <algorithm>

namespace dcpp::detail {

std::vector<LocalChunk> local_chunks(const StateValue& value) {
  if (value.is_tensor()) {
    return {LocalChunk{value.tensor(), std::vector<int64_t>(value.tensor().dim(), 0)}};
  }
  std::vector<LocalChunk> chunks;
  for (const Shard& shard : value.sharded_tensor().local_shards()) {
    chunks.push_back(LocalChunk{shard.tensor, shard.offsets});
  }
  return chunks;
}

namespace {

TensorProperties properties_of(const at::Tensor& tensor) {
  TensorProperties properties;
  properties.dtype = tensor.scalar_type();
  properties.layout = tensor.layout();
  properties.requires_grad = tensor.requires_grad();
  return properties;
}

LocalWriteItem tensor_write_item(const std::string& fqn, const LocalChunk& chunk,
                                 const std::vector<int64_t>& size, WriteItemType type) {
  WriteItem item;
  item.index = MetadataIndex{fqn, chunk.offsets, std::nullopt};
  item.type = type;
  item.tensor_data =
      TensorWriteData{ChunkStorageMetadata{chunk.offsets, chunk.tensor.sizes().vec()},
                      properties_of(chunk.tensor), size};
  return LocalWriteItem{std::move(item), chunk.tensor};
}

bool same_properties(const TensorProperties& a, const TensorProperties& b) {
  return a.dtype == b.dtype && a.layout == b.layout && a.requires_grad == b.requires_grad &&
         a.memory_format == b.memory_format && a.pin_memory == b.pin_memory;
}

}  // namespace

std::vector<LocalWriteItem> local_write_items(const FlatEntry& entry) {
  const StateValue& value = *entry.value;
  std::vector<LocalWriteItem> items;
  if (value.is_tensor()) {
    items.push_back(tensor_write_item(entry.key, local_chunks(value).front(),
                                      value.tensor().sizes().vec(), WriteItemType::kTensor));
  } else if (value.is_sharded_tensor()) {
    const std::vector<int64_t>& shape = value.sharded_tensor().global_shape();
    const bool tensor_is_empty = std::find(shape.begin(), shape.end(), 0) != shape.end();
    for (const LocalChunk& chunk : local_chunks(value)) {
      if (chunk.tensor.numel() == 0 && !tensor_is_empty) continue;
      items.push_back(tensor_write_item(entry.key, chunk, shape, WriteItemType::kShard));
    }
  } else {
    WriteItem item;
    item.index = MetadataIndex{entry.key, std::nullopt, std::nullopt};
    item.type = WriteItemType::kBytes;
    items.push_back(LocalWriteItem{std::move(item), at::Tensor()});
  }
  return items;
}

bool same_write_item(const WriteItem& a, const WriteItem& b) {
  if (a.type != b.type || a.index.fqn != b.index.fqn || a.index.offset != b.index.offset ||
      a.tensor_data.has_value() != b.tensor_data.has_value()) {
    return false;
  }
  if (!a.tensor_data) return true;
  const TensorWriteData &x = *a.tensor_data, &y = *b.tensor_data;
  return x.chunk == y.chunk && same_properties(x.properties, y.properties) && x.size == y.size;
}

std::vector<int64_t> global_shape(const StateValue& value) {
  return value.is_tensor() ? value.tensor().sizes().vec() : value.sharded_tensor().global_shape();
}

at::ScalarType value_dtype(const StateValue& value) {
  return value.is_tensor() ? value.tensor().scalar_type() : value.sharded_tensor().dtype();
}

std::vector<ReadItem> read_items_for_chunk(const std::string& fqn, const LocalChunk& dest,
                                           int64_t dest_index,
                                           const std::vector<ChunkStorageMetadata>& chunks,
                                           int64_t* covered_elements) {
  std::vector<ReadItem> items;
  const std::size_t dims = dest.offsets.size();
  *covered_elements = 0;
  for (std::size_t c = 0; c < chunks.size(); ++c) {
    const ChunkStorageMetadata& saved = chunks[c];
    if (saved.offsets.size() != dims || saved.sizes.size() != dims) {
      throw CheckpointError(ErrorKind::kCorrupt,
                            "key '" + fqn + "': saved chunk " + std::to_string(c) + " has " +
                                std::to_string(saved.offsets.size()) + " dimensions, the tensor " +
                                std::to_string(dims) +
                                "; the checkpoint's .metadata is inconsistent");
    }
    ReadItem item;
    item.type = LoadItemType::kTensor;
    int64_t volume = 1;
    for (std::size_t d = 0; d < dims; ++d) {
      const int64_t begin = std::max(dest.offsets[d], saved.offsets[d]);
      const int64_t end = std::min(dest.offsets[d] + dest.tensor.size(static_cast<int64_t>(d)),
                                   saved.offsets[d] + saved.sizes[d]);
      if (end <= begin) {
        volume = 0;
        break;
      }
      item.dest_offsets.push_back(begin - dest.offsets[d]);
      item.storage_offsets.push_back(begin - saved.offsets[d]);
      item.lengths.push_back(end - begin);
      volume *= end - begin;
    }
    if (volume == 0) {
      // An empty local chunk still reads the saved chunk of the same (empty) box: nothing is
      // copied, but the item is read, and so checked, like any other.
      if (dest.tensor.numel() != 0 || saved.offsets != dest.offsets ||
          saved.sizes != dest.tensor.sizes().vec()) {
        continue;
      }
      item.dest_offsets.assign(dims, 0);
      item.storage_offsets.assign(dims, 0);
      item.lengths = saved.sizes;
    }
    item.dest_index = MetadataIndex{fqn, dest.offsets, dest_index};
    item.storage_index = MetadataIndex{fqn, saved.offsets, static_cast<int64_t>(c)};
    *covered_elements += volume;
    items.push_back(std::move(item));
  }
  return items;
}

at::Tensor narrow_to_box(at::Tensor tensor, const std::vector<int64_t>& offsets,
                         const std::vector<int64_t>& lengths) {
  for (std::size_t d = 0; d < offsets.size(); ++d) {
    tensor = tensor.narrow(static_cast<int64_t>(d), offsets[d], lengths[d]);
  }
  return tensor;
}

c10::IValue to_saved_value(const StateValue& value) {
  switch (value.kind()) {
    case StateValue::Kind::kValue:
      return value.value();
    case StateValue::Kind::kList: {
      c10::impl::GenericList list(c10::AnyType::get());
      for (const StateValue& element : value.list()) {
        list.push_back(to_saved_value(element));
      }
      return list;
    }
    default:
      throw CheckpointError(ErrorKind::kUsage, std::string("a ") + value.kind_name() +
                                                   " cannot be saved as a bytes item");
  }
}

}  // namespace dcpp::detail
