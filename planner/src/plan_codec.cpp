// Little-endian, length-prefixed fields; every read is bounds-checked, so a damaged message is a
// CheckpointError rather than a crash.

#include "planner/plan_codec.h"

#include <dcpp/core/checkpoint_error.h>

#include <cstring>

namespace dcpp::detail {

namespace {

class Encoder {
 public:
  void u64(uint64_t v) {
    char b[8];
    for (int i = 0; i < 8; ++i) {
      b[i] = static_cast<char>(v >> (8 * i));
    }
    out_.append(b, 8);
  }
  void i64(int64_t v) { u64(static_cast<uint64_t>(v)); }
  void str(std::string_view s) {
    u64(s.size());
    out_.append(s.data(), s.size());
  }
  void ints(const std::vector<int64_t>& v) {
    u64(v.size());
    for (int64_t x : v) {
      i64(x);
    }
  }
  void optional_ints(const std::optional<std::vector<int64_t>>& v) {
    u64(v.has_value());
    if (v) {
      ints(*v);
    }
  }
  void index(const MetadataIndex& index) {
    str(index.fqn);
    optional_ints(index.offset);
    u64(index.index.has_value());
    i64(index.index.value_or(0));
  }
  void path(const ObjectPath& path) {
    u64(path.size());
    for (const PathElement& step : path) {
      if (const auto* key = std::get_if<std::string>(&step)) {
        u64(0);
        str(*key);
      } else {
        u64(1);
        i64(std::get<int64_t>(step));
      }
    }
  }
  void properties(const TensorProperties& p) {
    u64(static_cast<uint64_t>(p.dtype));
    u64(static_cast<uint64_t>(p.layout));
    u64(p.requires_grad);
    u64(static_cast<uint64_t>(p.memory_format));
    u64(p.pin_memory);
  }
  void storage_info(const StorageInfo& info) {
    str(info.relative_path);
    i64(info.offset);
    i64(info.length);
    u64(info.transform_descriptors.size());
    for (const std::string& t : info.transform_descriptors) {
      str(t);
    }
  }
  std::string take() { return std::move(out_); }

 private:
  std::string out_;
};

class Decoder {
 public:
  explicit Decoder(std::string_view bytes) : bytes_(bytes) {}
  uint64_t u64() {
    need(8);
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) {
      v |= static_cast<uint64_t>(static_cast<uint8_t>(bytes_[pos_ + i])) << (8 * i);
    }
    pos_ += 8;
    return v;
  }
  int64_t i64() { return static_cast<int64_t>(u64()); }
  std::string str() {
    const uint64_t n = count(1);
    std::string s(bytes_.substr(pos_, n));
    pos_ += n;
    return s;
  }
  std::vector<int64_t> ints() {
    std::vector<int64_t> v(count(8));
    for (int64_t& x : v) {
      x = i64();
    }
    return v;
  }
  std::optional<std::vector<int64_t>> optional_ints() {
    if (u64() == 0) {
      return std::nullopt;
    }
    return ints();
  }
  MetadataIndex index() {
    MetadataIndex index;
    index.fqn = str();
    index.offset = optional_ints();
    const bool has_index = u64() != 0;
    const int64_t value = i64();
    if (has_index) {
      index.index = value;
    }
    return index;
  }
  ObjectPath path() {
    ObjectPath path(count(9));
    for (PathElement& step : path) {
      if (u64() == 0) {
        step = str();
      } else {
        step = i64();
      }
    }
    return path;
  }
  TensorProperties properties() {
    TensorProperties p;
    p.dtype = enumerator<at::ScalarType>(static_cast<uint64_t>(at::ScalarType::NumOptions));
    p.layout = enumerator<at::Layout>(static_cast<uint64_t>(at::Layout::NumOptions));
    p.requires_grad = u64() != 0;
    p.memory_format = enumerator<MemoryFormatEncoding>(3);
    p.pin_memory = u64() != 0;
    return p;
  }
  StorageInfo storage_info() {
    StorageInfo info;
    info.relative_path = str();
    info.offset = i64();
    info.length = i64();
    info.transform_descriptors.resize(count(8));
    for (std::string& t : info.transform_descriptors) {
      t = str();
    }
    return info;
  }
  std::vector<std::string> strs() {
    std::vector<std::string> v(count(8));
    for (std::string& s : v) {
      s = str();
    }
    return v;
  }
  /// An enumerator of `Enum`, whose values are [0, `count`): anything else is a malformed message.
  template <typename Enum>
  Enum enumerator(uint64_t count) {
    const uint64_t value = u64();
    if (value >= count) {
      pos_ -= 8;  // the error names the field's first byte
      fail();
    }
    return static_cast<Enum>(value);
  }
  /// A count of elements of at least `min_size` bytes each, checked against the bytes left.
  uint64_t count(uint64_t min_size) {
    const uint64_t n = u64();
    if (n > (bytes_.size() - pos_) / min_size) {
      fail();
    }
    return n;
  }
  void finish() const {
    if (pos_ != bytes_.size()) {
      fail();
    }
  }

 private:
  void need(uint64_t n) const {
    if (n > bytes_.size() - pos_) {
      fail();
    }
  }
  [[noreturn]] void fail() const {
    throw CheckpointError(ErrorKind::kCorrupt,
                          "a plan message from another rank is malformed (at byte " +
                              std::to_string(pos_) + " of " + std::to_string(bytes_.size()) +
                              "); do all ranks run the same dcpp build?");
  }
  std::string_view bytes_;
  uint64_t pos_ = 0;
};

}  // namespace

std::string encode_save_plan(const SavePlan& plan) {
  Encoder e;
  e.u64(plan.items.size());
  for (const WriteItem& item : plan.items) {
    e.index(item.index);
    e.u64(static_cast<uint64_t>(item.type));
    e.u64(item.tensor_data.has_value());
    if (item.tensor_data) {
      const TensorWriteData& data = *item.tensor_data;
      e.ints(data.chunk.offsets);
      e.ints(data.chunk.sizes);
      e.properties(data.properties);
      e.ints(data.size);
    }
  }
  e.u64(plan.planner_data.size());
  for (const auto& [key, path] : plan.planner_data) {
    e.str(key);
    e.path(path);
  }
  e.str(plan.storage_data);
  return e.take();
}

SavePlan decode_save_plan(std::string_view bytes) {
  Decoder d(bytes);
  SavePlan plan;
  plan.items.resize(d.count(32));
  for (WriteItem& item : plan.items) {
    item.index = d.index();
    item.type = d.enumerator<WriteItemType>(3);
    if (d.u64() != 0) {
      TensorWriteData data;
      data.chunk.offsets = d.ints();
      data.chunk.sizes = d.ints();
      data.properties = d.properties();
      data.size = d.ints();
      item.tensor_data = std::move(data);
    }
  }
  plan.planner_data.resize(d.count(16));
  for (auto& [key, path] : plan.planner_data) {
    key = d.str();
    path = d.path();
  }
  plan.storage_data = d.str();
  d.finish();
  return plan;
}

std::string encode_write_results(const std::vector<WriteResult>& results) {
  Encoder e;
  e.u64(results.size());
  for (const WriteResult& result : results) {
    e.index(result.index);
    e.i64(result.size_in_bytes);
    e.storage_info(result.storage_data);
    e.u64(result.crc32.has_value());
    e.u64(result.crc32.value_or(0));
  }
  return e.take();
}

std::vector<WriteResult> decode_write_results(std::string_view bytes) {
  Decoder d(bytes);
  std::vector<WriteResult> results(d.count(64));
  for (WriteResult& result : results) {
    result.index = d.index();
    result.size_in_bytes = d.i64();
    result.storage_data = d.storage_info();
    const bool has_crc = d.u64() != 0;
    const uint64_t crc = d.u64();
    if (has_crc) {
      result.crc32 = static_cast<uint32_t>(crc);
    }
  }
  d.finish();
  return results;
}

std::string encode_load_plan(const LoadPlan& plan) {
  Encoder e;
  e.u64(plan.items.size());
  for (const ReadItem& item : plan.items) {
    e.u64(static_cast<uint64_t>(item.type));
    e.index(item.dest_index);
    e.ints(item.dest_offsets);
    e.index(item.storage_index);
    e.ints(item.storage_offsets);
    e.ints(item.lengths);
  }
  e.str(plan.storage_data);
  return e.take();
}

LoadPlan decode_load_plan(std::string_view bytes) {
  Decoder d(bytes);
  LoadPlan plan;
  plan.items.resize(d.count(64));
  for (ReadItem& item : plan.items) {
    item.type = d.enumerator<LoadItemType>(2);
    item.dest_index = d.index();
    item.dest_offsets = d.ints();
    item.storage_index = d.index();
    item.storage_offsets = d.ints();
    item.lengths = d.ints();
  }
  plan.storage_data = d.str();
  d.finish();
  return plan;
}

std::string encode_strings(const std::vector<std::string>& strings) {
  return encode_string_views(std::vector<std::string_view>(strings.begin(), strings.end()));
}

std::string encode_string_views(const std::vector<std::string_view>& strings) {
  Encoder e;
  e.u64(strings.size());
  for (std::string_view s : strings) {
    e.str(s);
  }
  return e.take();
}

std::vector<std::string> decode_strings(std::string_view bytes) {
  Decoder d(bytes);
  std::vector<std::string> strings = d.strs();
  d.finish();
  return strings;
}

std::string encode_metadata_message(const Metadata& metadata) {
  Encoder e;
  e.u64(metadata.state_dict_metadata.size());
  for (const auto& [key, storage] : metadata.state_dict_metadata) {
    e.str(key);
    const auto* tensor = std::get_if<TensorStorageMetadata>(&storage);
    e.u64(tensor != nullptr);
    if (tensor) {
      e.properties(tensor->properties);
      e.ints(tensor->size);
      e.u64(tensor->chunks.size());
      for (const ChunkStorageMetadata& chunk : tensor->chunks) {
        e.ints(chunk.offsets);
        e.ints(chunk.sizes);
      }
    }
  }
  e.u64(metadata.planner_data.size());
  for (const auto& [key, path] : metadata.planner_data) {
    e.str(key);
    e.path(path);
  }
  e.u64(metadata.storage_data.size());
  for (const auto& [index, info] : metadata.storage_data) {
    e.index(index);
    e.storage_info(info);
  }
  e.u64(metadata.storage_meta.has_value());
  if (metadata.storage_meta) {
    const StorageMeta& meta = *metadata.storage_meta;
    e.u64(meta.checkpoint_id.has_value());
    e.str(meta.checkpoint_id.value_or(""));
    e.str(meta.save_id);
    e.str(meta.load_id);
    e.u64(meta.modules.size());
    for (const std::string& module : meta.modules) {
      e.str(module);
    }
  }
  e.u64(metadata.version.has_value());
  e.str(metadata.version.value_or(""));
  return e.take();
}

Metadata decode_metadata_message(std::string_view bytes) {
  Decoder d(bytes);
  Metadata metadata;
  metadata.state_dict_metadata.resize(d.count(16));
  for (auto& [key, storage] : metadata.state_dict_metadata) {
    key = d.str();
    if (d.u64() == 0) {
      storage = BytesStorageMetadata{};
      continue;
    }
    TensorStorageMetadata tensor;
    tensor.properties = d.properties();
    tensor.size = d.ints();
    tensor.chunks.resize(d.count(16));
    for (ChunkStorageMetadata& chunk : tensor.chunks) {
      chunk.offsets = d.ints();
      chunk.sizes = d.ints();
    }
    storage = std::move(tensor);
  }
  metadata.planner_data.resize(d.count(16));
  for (auto& [key, path] : metadata.planner_data) {
    key = d.str();
    path = d.path();
  }
  metadata.storage_data.resize(d.count(64));
  for (auto& [index, info] : metadata.storage_data) {
    index = d.index();
    info = d.storage_info();
  }
  if (d.u64() != 0) {
    StorageMeta meta;
    const bool has_checkpoint_id = d.u64() != 0;
    std::string checkpoint_id = d.str();
    if (has_checkpoint_id) {
      meta.checkpoint_id = std::move(checkpoint_id);
    }
    meta.save_id = d.str();
    meta.load_id = d.str();
    meta.modules = d.strs();
    metadata.storage_meta = std::move(meta);
  }
  const bool has_version = d.u64() != 0;
  std::string version = d.str();
  if (has_version) {
    metadata.version = std::move(version);
  }
  d.finish();
  return metadata;
}

}  // namespace dcpp::detail
