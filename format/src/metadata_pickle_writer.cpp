// Encoding the `.metadata` pickle (see metadata_pickle.h and docs/format.md).
//
// Structure, as PyTorch 2.x writes it (protocol 4):
//   Metadata: NEWOBJ + BUILD({state_dict_metadata, planner_data, storage_data, storage_meta
//             [, version]})
//   TensorStorageMetadata: {properties, size, chunks}; ChunkStorageMetadata: {offsets, sizes}
//   BytesStorageMetadata: NEWOBJ without BUILD
//   TensorProperties: BUILD((dtype, layout, requires_grad, _MEM_FORMAT_ENCODING(n), pin_memory))
//   MetadataIndex: {fqn, index[, offset]}; _StorageInfo: {relative_path, offset, length
//             [, transform_descriptors]}; StorageMeta: {checkpoint_id, save_id, load_id[, modules]}
//   torch.Size: REDUCE(torch.Size, ((d0, ...),)); dtype: global torch.<name>;
//   layout: REDUCE(torch.serialization._get_layout, ("torch.strided",))
// Like Python, the encoder memoizes every container and fetches repeated strings, classes, the
// layout and the memory-format enum from the memo. The decoder accepts any protocol from 2 to 5,
// fields in any order, unknown extra fields (ignored) and the pre-2.3 module of TensorProperties.

#include "format/metadata_pickle.h"

#include "format/pickle/pickle_writer.h"
#include "format/pickle/torch_pickle.h"
#include "metadata_classes.h"

#include <dcpp/core/checkpoint_error.h>

#include <array>
#include <optional>
#include <set>
#include <unordered_set>

namespace dcpp::detail {

namespace {

using namespace metadata_classes;

/// The strs the encoder writes for every chunk and storage entry: each is looked up in the
/// writer's memo once, then fetched by its memo index.
enum Constant : std::size_t {
  kFqn,
  kIndex,
  kOffset,
  kRelativePath,
  kLength,
  kOffsets,
  kSizes,
  kProperties,
  kSize,
  kChunks,
  kConstants
};
constexpr std::array<std::string_view, kConstants> kConstantTexts{
    "fqn",     "index", "offset",     "relative_path", "length",
    "offsets", "sizes", "properties", "size",          "chunks"};

/// The classes it instantiates, likewise.
enum Class : std::size_t {
  kMetadataClass,
  kTensorStorageMetadataClass,
  kChunkStorageMetadataClass,
  kBytesStorageMetadataClass,
  kTensorPropertiesClass,
  kMetadataIndexClass,
  kStorageInfoClass,
  kStorageMetaClass,
  kTorchSizeClass,
  kClasses
};
constexpr std::array<std::pair<std::string_view, std::string_view>, kClasses> kClassNames{{
    {kMetaModule, "Metadata"},
    {kMetaModule, "TensorStorageMetadata"},
    {kMetaModule, "ChunkStorageMetadata"},
    {kMetaModule, "BytesStorageMetadata"},
    {kMetaModule, "TensorProperties"},
    {kMetaModule, "MetadataIndex"},
    {kFsModule, "_StorageInfo"},
    {kMetaModule, "StorageMeta"},
    {"torch", "Size"},
}};

class MetadataEncoder {
 public:
  std::string encode(const Metadata& m, const std::vector<StorageEntryRef>& more_storage_data) {
    w_.reserve(estimated_bytes(m) + 96 * more_storage_data.size());
    open_object(kMetadataClass);
    std::size_t fields = 4 + (m.version ? 1 : 0);
    w_.put_dict(fields, [&](std::size_t i) {
      switch (i) {
        case 0:
          w_.put_shared_str("state_dict_metadata");
          key_memos_.reserve(m.state_dict_metadata.size());
          w_.put_dict(m.state_dict_metadata.size(), [&](std::size_t j) {
            key_memos_.push_back(w_.put_shared_str(m.state_dict_metadata[j].first));
            put_storage_metadata(m.state_dict_metadata[j].second);
          });
          break;
        case 1:
          w_.put_shared_str("planner_data");
          w_.put_dict(m.planner_data.size(), [&](std::size_t j) {
            w_.put_shared_str(m.planner_data[j].first);
            put_path(m.planner_data[j].second);
          });
          break;
        case 2:
          w_.put_shared_str("storage_data");
          w_.put_dict(m.storage_data.size() + more_storage_data.size(), [&](std::size_t j) {
            if (j < m.storage_data.size()) {
              put_index(m.storage_data[j].first, m);
              put_storage_info(m.storage_data[j].second);
            } else {
              const StorageEntryRef& entry = more_storage_data[j - m.storage_data.size()];
              put_index(*entry.index, m);
              put_storage_info(*entry.info);
            }
          });
          break;
        case 3:
          w_.put_shared_str("storage_meta");
          if (m.storage_meta) {
            put_storage_meta(*m.storage_meta);
          } else {
            w_.put_none();
          }
          break;
        default:
          w_.put_shared_str("version");
          w_.put_shared_str(*m.version);
      }
    });
    w_.build();
    return w_.finish();
  }

 private:
  /// About what the pickle of `m` takes, a little more for the usual FQNs (their strings are
  /// written once, then fetched from the memo: 2 to 5 bytes): 96 bytes a chunk and a storage
  /// entry, each key's name once. Pages reserved and never written cost nothing.
  static std::size_t estimated_bytes(const Metadata& m) {
    std::size_t bytes = 4096 + 96 * m.storage_data.size();
    for (const auto& [key, storage] : m.state_dict_metadata) {
      bytes += 128 + key.size();
      if (const auto* tensor = std::get_if<TensorStorageMetadata>(&storage)) {
        bytes += 96 * tensor->chunks.size();
      }
    }
    for (const auto& [key, path] : m.planner_data) bytes += 64 + 2 * key.size();
    return bytes;
  }

  /// Pushes an instance of `type` made by NEWOBJ with no arguments (no state yet).
  void open_object(Class type) {
    put_class(type);
    w_.empty_tuple();
    w_.newobj();
  }

  void put_class(Class type) {
    std::optional<uint32_t>& memo = class_memos_[type];
    if (memo) {
      w_.put_memo(*memo);
    } else {
      memo = w_.put_global(kClassNames[type].first, kClassNames[type].second);
    }
  }

  void put_constant(Constant constant) {
    std::optional<uint32_t>& memo = constant_memos_[constant];
    if (memo) {
      w_.put_memo(*memo);
    } else {
      memo = w_.put_shared_str(kConstantTexts[constant]);
    }
  }

  /// A storage entry's FQN, one of state_dict_metadata's keys as a rule: entries name them rank
  /// after rank, mostly in the keys' order, so the key after the last one is tried first.
  void put_fqn(const std::string& fqn, const Metadata& m) {
    const auto& keys = m.state_dict_metadata;
    std::size_t key = next_key_ < keys.size() && keys[next_key_].first == fqn ? next_key_
                      : !keys.empty() && keys.front().first == fqn            ? 0
                                                                              : keys.size();
    if (key == keys.size() || key >= key_memos_.size()) {
      w_.put_shared_str(fqn);
      return;
    }
    w_.put_memo(key_memos_[key]);
    next_key_ = key + 1;
  }

  /// A storage entry's file, the same as the entry before's as a rule.
  void put_relative_path(const std::string& path) {
    if (last_path_memo_ && last_path_ == path) {
      w_.put_memo(*last_path_memo_);
      return;
    }
    last_path_memo_ = w_.put_shared_str(path);
    last_path_ = path;
  }

  void put_size(const std::vector<int64_t>& values) {
    put_class(kTorchSizeClass);
    w_.put_tuple(1, [&] {
      w_.put_tuple(values.size(), [&] {
        for (int64_t v : values) w_.put_int(v);
      });
    });
    w_.reduce();
  }

  void put_properties(const TensorProperties& p) {
    open_object(kTensorPropertiesClass);
    w_.put_tuple(5, [&] {
      w_.put_global("torch", python_dtype_name(p.dtype));
      put_layout(p.layout);
      w_.put_bool(p.requires_grad);
      const auto encoding = static_cast<int64_t>(p.memory_format);
      std::optional<uint32_t>& memo = memory_format_memo_.at(static_cast<std::size_t>(encoding));
      if (memo) {
        w_.put_memo(*memo);
      } else {
        w_.put_global(kMetaModule, "_MEM_FORMAT_ENCODING");
        w_.put_tuple(1, [&] { w_.put_int(encoding); });
        memo = w_.reduce();
      }
      w_.put_bool(p.pin_memory);
    });
    w_.build();
  }

  void put_layout(at::Layout layout) {
    std::string_view name;
    for (const auto& [value, layout_name] : kLayouts) {
      if (value == layout) name = layout_name;
    }
    if (name.empty()) {
      throw CheckpointError(ErrorKind::kUsage, "cannot write .metadata: layout " +
                                                   std::string(c10::toString(layout)) +
                                                   " has no name in Python");
    }
    for (const auto& [memo_layout, memo] : layout_memo_) {
      if (memo_layout == layout) {
        w_.put_memo(memo);
        return;
      }
    }
    w_.put_global("torch.serialization", "_get_layout");
    w_.put_tuple(1, [&] { w_.put_shared_str(name); });
    layout_memo_.emplace_back(layout, w_.reduce());
  }

  void put_storage_metadata(const StorageMetadata& item) {
    if (std::holds_alternative<BytesStorageMetadata>(item)) {
      open_object(kBytesStorageMetadataClass);
      return;
    }
    const auto& t = std::get<TensorStorageMetadata>(item);
    open_object(kTensorStorageMetadataClass);
    w_.put_dict(3, [&](std::size_t i) {
      if (i == 0) {
        put_constant(kProperties);
        put_properties(t.properties);
      } else if (i == 1) {
        put_constant(kSize);
        put_size(t.size);
      } else {
        put_constant(kChunks);
        w_.put_list(t.chunks.size(), [&](std::size_t j) {
          open_object(kChunkStorageMetadataClass);
          w_.put_dict(2, [&](std::size_t k) {
            put_constant(k == 0 ? kOffsets : kSizes);
            put_size(k == 0 ? t.chunks[j].offsets : t.chunks[j].sizes);
          });
          w_.build();
        });
      }
    });
    w_.build();
  }

  void put_path(const ObjectPath& path) {
    w_.put_tuple(path.size(), [&] {
      for (const PathElement& element : path) {
        if (const auto* s = std::get_if<std::string>(&element)) {
          w_.put_shared_str(*s);
        } else {
          w_.put_int(std::get<int64_t>(element));
        }
      }
    });
  }

  void put_index(const MetadataIndex& index, const Metadata& m) {
    open_object(kMetadataIndexClass);
    w_.put_dict(index.offset ? 3 : 2, [&](std::size_t i) {
      if (i == 0) {
        put_constant(kFqn);
        put_fqn(index.fqn, m);
      } else if (i == 1) {
        put_constant(kIndex);
        if (index.index) {
          w_.put_int(*index.index);
        } else {
          w_.put_none();
        }
      } else {
        put_constant(kOffset);
        put_size(*index.offset);
      }
    });
    w_.build();
  }

  void put_storage_info(const StorageInfo& info) {
    open_object(kStorageInfoClass);
    const bool transforms = !info.transform_descriptors.empty();
    w_.put_dict(transforms ? 4 : 3, [&](std::size_t i) {
      if (i == 0) {
        put_constant(kRelativePath);
        put_relative_path(info.relative_path);
      } else if (i == 1) {
        put_constant(kOffset);
        w_.put_int(info.offset);
      } else if (i == 2) {
        put_constant(kLength);
        w_.put_int(info.length);
      } else {
        w_.put_shared_str("transform_descriptors");
        w_.put_list(info.transform_descriptors.size(),
                    [&](std::size_t j) { w_.put_shared_str(info.transform_descriptors[j]); });
      }
    });
    w_.build();
  }

  void put_optional_str(const std::string& value) {
    if (value.empty()) {
      w_.put_none();
    } else {
      w_.put_shared_str(value);
    }
  }

  void put_storage_meta(const StorageMeta& meta) {
    open_object(kStorageMetaClass);
    w_.put_dict(4, [&](std::size_t i) {
      if (i == 0) {
        w_.put_shared_str("checkpoint_id");
        if (meta.checkpoint_id) {
          // pathlib.PosixPath(str): readable by every Python 3 (3.13 writes pathlib._local).
          w_.put_global("pathlib", "PosixPath");
          w_.put_tuple(1, [&] { w_.put_shared_str(*meta.checkpoint_id); });
          w_.reduce();
        } else {
          w_.put_none();
        }
      } else if (i == 1) {
        w_.put_shared_str("save_id");
        put_optional_str(meta.save_id);
      } else if (i == 2) {
        w_.put_shared_str("load_id");
        put_optional_str(meta.load_id);
      } else {
        // PyTorch 2.7+ has `modules` (a dataclass field without a class default, so it must be
        // present there); 2.6 and older keep the extra attribute and ignore it.
        w_.put_shared_str("modules");
        w_.put_list(meta.modules.size(),
                    [&](std::size_t j) { w_.put_shared_str(meta.modules[j]); });
      }
    });
    w_.build();
  }

  PickleWriter w_{4};
  // The one _MEM_FORMAT_ENCODING object per encoding and _get_layout object per layout, as Python
  // shares them: their memo indices once written.
  std::array<std::optional<uint32_t>, 3> memory_format_memo_;
  std::vector<std::pair<at::Layout, uint32_t>> layout_memo_;
  std::array<std::optional<uint32_t>, kConstants> constant_memos_;
  std::array<std::optional<uint32_t>, kClasses> class_memos_;
  std::vector<uint32_t> key_memos_;  // state_dict_metadata's keys', in order
  std::size_t next_key_ = 0;
  std::string last_path_;
  std::optional<uint32_t> last_path_memo_;
};

}  // namespace

std::string encode_metadata(const Metadata& metadata) {
  return MetadataEncoder().encode(metadata, {});
}

std::string encode_metadata(const Metadata& metadata,
                            const std::vector<StorageEntryRef>& more_storage_data) {
  return MetadataEncoder().encode(metadata, more_storage_data);
}

}  // namespace dcpp::detail
