// The `.metadata` pickle (see metadata_pickle.h and docs/format.md).
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

#include "metadata_pickle.h"

#include "pickle_reader.h"
#include "pickle_writer.h"
#include "torch_pickle.h"

#include <dcpp/core/checkpoint_error.h>

#include <set>
#include <unordered_set>

namespace dcpp::detail {

namespace {

constexpr std::string_view kMetaModule = "torch.distributed.checkpoint.metadata";
constexpr std::string_view kShardModule = "torch.distributed._shard.sharded_tensor.metadata";
constexpr std::string_view kFsModule = "torch.distributed.checkpoint.filesystem";

constexpr std::pair<at::Layout, std::string_view> kLayouts[] = {
    {at::kStrided, "torch.strided"},      {at::kSparse, "torch.sparse_coo"},
    {at::kSparseCsr, "torch.sparse_csr"}, {at::kSparseCsc, "torch.sparse_csc"},
    {at::kSparseBsr, "torch.sparse_bsr"}, {at::kSparseBsc, "torch.sparse_bsc"},
    {at::kMkldnn, "torch._mkldnn"},
};

bool allow_metadata_global(std::string_view module, std::string_view name) {
  if (module == kMetaModule) {
    return name == "Metadata" || name == "TensorStorageMetadata" ||
           name == "BytesStorageMetadata" || name == "ChunkStorageMetadata" ||
           name == "TensorProperties" || name == "MetadataIndex" || name == "StorageMeta" ||
           name == "_MEM_FORMAT_ENCODING";
  }
  if (module == kShardModule) {
    return name == "TensorProperties" || name == "MEM_FORMAT_ENCODING";
  }
  if (module == "torch") {
    return name == "Size" || is_python_dtype_name(name);
  }
  return (module == kFsModule && name == "_StorageInfo") ||
         (module == "torch.serialization" && name == "_get_layout") ||
         ((module == "pathlib" || module == "pathlib._local") && name == "PosixPath") ||
         (module == "collections" && name == "OrderedDict");
}

// ---- encoding ----

class MetadataEncoder {
 public:
  std::string encode(const Metadata& m) {
    open_object(kMetaModule, "Metadata");
    std::size_t fields = 4 + (m.version ? 1 : 0);
    w_.put_dict(fields, [&](std::size_t i) {
      switch (i) {
        case 0:
          w_.put_shared_str("state_dict_metadata");
          w_.put_dict(m.state_dict_metadata.size(), [&](std::size_t j) {
            w_.put_shared_str(m.state_dict_metadata[j].first);
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
          w_.put_dict(m.storage_data.size(), [&](std::size_t j) {
            put_index(m.storage_data[j].first);
            put_storage_info(m.storage_data[j].second);
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
  /// Pushes an instance of `module.name` made by NEWOBJ with no arguments (no state yet).
  void open_object(std::string_view module, std::string_view name) {
    w_.put_global(module, name);
    w_.empty_tuple();
    w_.newobj();
  }

  void put_size(const std::vector<int64_t>& values) {
    w_.put_global("torch", "Size");
    w_.put_tuple(1, [&] {
      w_.put_tuple(values.size(), [&] {
        for (int64_t v : values) w_.put_int(v);
      });
    });
    w_.reduce();
  }

  void put_properties(const TensorProperties& p) {
    open_object(kMetaModule, "TensorProperties");
    w_.put_tuple(5, [&] {
      w_.put_global("torch", python_dtype_name(p.dtype));
      put_layout(p.layout);
      w_.put_bool(p.requires_grad);
      const auto encoding = static_cast<int64_t>(p.memory_format);
      const std::string key = "memory_format:" + std::to_string(encoding);
      if (!w_.put_shared(key)) {
        w_.put_global(kMetaModule, "_MEM_FORMAT_ENCODING");
        w_.put_tuple(1, [&] { w_.put_int(encoding); });
        w_.reduce();
        w_.remember_shared(key, -1);
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
      throw CheckpointError("cannot write .metadata: layout " + std::string(c10::toString(layout)) +
                            " has no name in Python");
    }
    const std::string key = "layout:" + std::string(name);
    if (w_.put_shared(key)) return;
    w_.put_global("torch.serialization", "_get_layout");
    w_.put_tuple(1, [&] { w_.put_shared_str(name); });
    w_.reduce();
    w_.remember_shared(key, -1);
  }

  void put_storage_metadata(const StorageMetadata& item) {
    if (std::holds_alternative<BytesStorageMetadata>(item)) {
      open_object(kMetaModule, "BytesStorageMetadata");
      return;
    }
    const auto& t = std::get<TensorStorageMetadata>(item);
    open_object(kMetaModule, "TensorStorageMetadata");
    w_.put_dict(3, [&](std::size_t i) {
      if (i == 0) {
        w_.put_shared_str("properties");
        put_properties(t.properties);
      } else if (i == 1) {
        w_.put_shared_str("size");
        put_size(t.size);
      } else {
        w_.put_shared_str("chunks");
        w_.put_list(t.chunks.size(), [&](std::size_t j) {
          open_object(kMetaModule, "ChunkStorageMetadata");
          w_.put_dict(2, [&](std::size_t k) {
            w_.put_shared_str(k == 0 ? "offsets" : "sizes");
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

  void put_index(const MetadataIndex& index) {
    open_object(kMetaModule, "MetadataIndex");
    w_.put_dict(index.offset ? 3 : 2, [&](std::size_t i) {
      if (i == 0) {
        w_.put_shared_str("fqn");
        w_.put_shared_str(index.fqn);
      } else if (i == 1) {
        w_.put_shared_str("index");
        if (index.index) {
          w_.put_int(*index.index);
        } else {
          w_.put_none();
        }
      } else {
        w_.put_shared_str("offset");
        put_size(*index.offset);
      }
    });
    w_.build();
  }

  void put_storage_info(const StorageInfo& info) {
    open_object(kFsModule, "_StorageInfo");
    const bool transforms = !info.transform_descriptors.empty();
    w_.put_dict(transforms ? 4 : 3, [&](std::size_t i) {
      if (i == 0) {
        w_.put_shared_str("relative_path");
        w_.put_shared_str(info.relative_path);
      } else if (i == 1) {
        w_.put_shared_str("offset");
        w_.put_int(info.offset);
      } else if (i == 2) {
        w_.put_shared_str("length");
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
    open_object(kMetaModule, "StorageMeta");
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
};

// ---- decoding ----

/// `key` for an error message: long (hostile) keys are cut.
std::string shorten(const std::string& key) {
  return key.size() <= 200 ? key : key.substr(0, 200) + "...";
}

class MetadataDecoder {
 public:
  MetadataDecoder(const std::string& source, std::size_t input_size)
      : source_(source), budget_((std::size_t{64} << 20) + input_size * 64) {}

  [[noreturn]] void fail(const std::string& problem) const {
    throw CheckpointError(source_ + ": invalid checkpoint metadata: " + problem);
  }

  Metadata decode(const PyObject& root) {
    Metadata m;
    const PyObject& state = object_state(root, {kMetaModule}, "Metadata", "the root");
    const PyObject* sdm = state.find("state_dict_metadata");
    if (sdm == nullptr) fail("Metadata has no state_dict_metadata");
    for_each_str_entry(*sdm, "state_dict_metadata", [&](std::string key, const PyObject& value) {
      m.state_dict_metadata.emplace_back(key, storage_metadata(value, key));
    });
    if (const PyObject* planner = present(state.find("planner_data"))) {
      for_each_str_entry(*planner, "planner_data", [&](std::string key, const PyObject& value) {
        m.planner_data.emplace_back(key, path(value, key));
      });
    }
    if (const PyObject* storage = present(state.find("storage_data"))) {
      if (storage->kind != PyKind::kDict) fail("storage_data is a " + describe(*storage));
      std::set<MetadataIndex> seen;
      for (std::size_t i = 0; i < storage->dict_size(); ++i) {
        MetadataIndex index = metadata_index(storage->key(i));
        if (!seen.insert(index).second) {
          fail("storage_data has the key '" + shorten(index.fqn) + "' twice");
        }
        StorageInfo info = storage_info(storage->value(i), index.fqn);
        m.storage_data.emplace_back(std::move(index), std::move(info));
      }
    }
    if (const PyObject* meta = present(state.find("storage_meta"))) {
      m.storage_meta = storage_meta(*meta);
    }
    if (const PyObject* version = present(state.find("version"))) {
      m.version = str(*version, "Metadata.version");
    }
    return m;
  }

 private:
  static const PyObject* present(const PyObject* field) {
    return field == nullptr || field->kind == PyKind::kNone ? nullptr : field;
  }

  void charge(std::size_t units) {
    if (units > budget_) {
      fail("it expands to more data than its size allows (a hostile or corrupt pickle)");
    }
    budget_ -= units;
  }

  std::string str(const PyObject& object, const std::string& field) {
    if (object.kind != PyKind::kStr) fail(field + " is a " + describe(object) + ", not a str");
    charge(object.text.size() + 16);
    return object.text;
  }

  int64_t integer(const PyObject& object, const std::string& field) {
    if (object.kind != PyKind::kInt) fail(field + " is a " + describe(object) + ", not an int");
    charge(8);
    return object.int_value;
  }

  bool boolean(const PyObject& object, const std::string& field) {
    if (object.kind != PyKind::kBool) fail(field + " is a " + describe(object) + ", not a bool");
    return object.bool_value;
  }

  /// The state of `object`, which must be `NEWOBJ(module.name, ())` for one of `modules`; nullptr
  /// if it had no BUILD.
  const PyObject* raw_state(const PyObject& object, std::initializer_list<std::string_view> modules,
                            std::string_view name, const std::string& field) {
    bool match = false;
    for (std::string_view module : modules) match = match || object.is_instance_of(module, name);
    if (!match || object.kind != PyKind::kNewObj || !object.args().items.empty()) {
      fail(field + " is a " + describe(object) + ", not a " + std::string(name));
    }
    return object.state();
  }

  /// Like raw_state, for classes whose state is a dict (no BUILD reads as an empty dict).
  const PyObject& object_state(const PyObject& object,
                               std::initializer_list<std::string_view> modules,
                               std::string_view name, const std::string& field) {
    static const PyObject kEmptyDict = [] {
      PyObject d;
      d.kind = PyKind::kDict;
      return d;
    }();
    const PyObject* state = raw_state(object, modules, name, field);
    if (state == nullptr) return kEmptyDict;
    if (state->kind != PyKind::kDict) {
      fail(field + " (" + std::string(name) + ") has a state that is a " + describe(*state));
    }
    return *state;
  }

  template <typename Fn>
  void for_each_str_entry(const PyObject& dict, const std::string& field, Fn&& fn) {
    if (dict.kind != PyKind::kDict) fail(field + " is a " + describe(dict) + ", not a dict");
    std::unordered_set<std::string_view> seen;
    for (std::size_t i = 0; i < dict.dict_size(); ++i) {
      std::string key = str(dict.key(i), "a key of " + field);
      if (!seen.insert(dict.key(i).text).second) {
        fail(field + " has the key '" + shorten(key) + "' twice");
      }
      fn(std::move(key), dict.value(i));
    }
  }

  std::vector<int64_t> size(const PyObject& object, const std::string& field) {
    const PyObject* tuple = &object;
    if (object.is_instance_of("torch", "Size")) {
      if (object.kind != PyKind::kReduce || object.state() != nullptr ||
          object.args().items.size() != 1) {
        fail(field + " is a malformed torch.Size");
      }
      tuple = object.args().items[0];
    }
    if (tuple->kind != PyKind::kTuple && tuple->kind != PyKind::kList) {
      fail(field + " is a " + describe(object) + ", not a torch.Size");
    }
    std::vector<int64_t> values;
    values.reserve(tuple->items.size());
    for (const PyObject* item : tuple->items) {
      const int64_t v = integer(*item, field);
      if (v < 0) fail(field + " holds the negative value " + std::to_string(v));
      values.push_back(v);
    }
    return values;
  }

  StorageMetadata storage_metadata(const PyObject& object, const std::string& key) {
    const std::string field = "state_dict_metadata['" + shorten(key) + "']";
    if (object.is_instance_of(kMetaModule, "BytesStorageMetadata")) {
      raw_state(object, {kMetaModule}, "BytesStorageMetadata", field);
      return BytesStorageMetadata{};
    }
    const PyObject& state = object_state(object, {kMetaModule}, "TensorStorageMetadata", field);
    TensorStorageMetadata t;
    const PyObject* properties = state.find("properties");
    const PyObject* global_size = state.find("size");
    const PyObject* chunks = state.find("chunks");
    if (properties == nullptr || global_size == nullptr || chunks == nullptr) {
      fail(field + " lacks properties, size or chunks");
    }
    t.properties = tensor_properties(*properties, field + ".properties");
    t.size = size(*global_size, field + ".size");
    if (chunks->kind != PyKind::kList) fail(field + ".chunks is a " + describe(*chunks));
    for (const PyObject* chunk : chunks->items) {
      const PyObject& cs =
          object_state(*chunk, {kMetaModule}, "ChunkStorageMetadata", field + ".chunks[]");
      const PyObject* offsets = cs.find("offsets");
      const PyObject* sizes = cs.find("sizes");
      if (offsets == nullptr || sizes == nullptr) fail(field + " has a chunk without offsets");
      ChunkStorageMetadata c;
      c.offsets = size(*offsets, field + ".chunks[].offsets");
      c.sizes = size(*sizes, field + ".chunks[].sizes");
      if (c.offsets.size() != t.size.size() || c.sizes.size() != t.size.size()) {
        fail(field + " has a chunk whose rank differs from the tensor's");
      }
      t.chunks.push_back(std::move(c));
    }
    return t;
  }

  TensorProperties tensor_properties(const PyObject& object, const std::string& field) {
    const PyObject* state =
        raw_state(object, {kMetaModule, kShardModule}, "TensorProperties", field);
    if (state == nullptr || state->kind != PyKind::kTuple || state->items.size() != 5) {
      fail(field +
           " has a state that is not the 5-tuple (dtype, layout, requires_grad, "
           "memory_format, pin_memory)");
    }
    const auto& s = state->items;
    TensorProperties p;
    if (s[0]->kind != PyKind::kGlobal || s[0]->text != "torch") {
      fail(field + ".dtype is a " + describe(*s[0]));
    }
    p.dtype = dtype_from_python_name(s[0]->name, source_ + ": " + field);
    if (!s[1]->is_instance_of("torch.serialization", "_get_layout") ||
        s[1]->kind != PyKind::kReduce || s[1]->args().items.size() != 1 ||
        s[1]->args().items[0]->kind != PyKind::kStr) {
      fail(field + ".layout is a " + describe(*s[1]));
    }
    const std::string& layout = s[1]->args().items[0]->text;
    bool known_layout = false;
    for (const auto& [value, name] : kLayouts) {
      if (name == layout) {
        p.layout = value;
        known_layout = true;
      }
    }
    if (!known_layout) fail(field + " has the unknown layout '" + layout + "'");
    p.requires_grad = boolean(*s[2], field + ".requires_grad");
    const PyObject& format = *s[3];
    if (!(format.is_instance_of(kMetaModule, "_MEM_FORMAT_ENCODING") ||
          format.is_instance_of(kShardModule, "MEM_FORMAT_ENCODING")) ||
        format.kind != PyKind::kReduce || format.args().items.size() != 1) {
      fail(field + ".memory_format is a " + describe(format));
    }
    const int64_t encoding = integer(*format.args().items[0], field + ".memory_format");
    if (encoding < 0 || encoding > 2) {
      fail(field + " has the unknown memory format encoding " + std::to_string(encoding));
    }
    p.memory_format = static_cast<MemoryFormatEncoding>(encoding);
    p.pin_memory = boolean(*s[4], field + ".pin_memory");
    return p;
  }

  ObjectPath path(const PyObject& object, const std::string& key) {
    const std::string field = "planner_data['" + shorten(key) + "']";
    if (object.kind != PyKind::kTuple && object.kind != PyKind::kList) {
      fail(field + " is a " + describe(object) + ", not a path tuple");
    }
    ObjectPath result;
    result.reserve(object.items.size());
    for (const PyObject* item : object.items) {
      if (item->kind == PyKind::kInt) {
        result.emplace_back(integer(*item, field));
      } else {
        result.emplace_back(str(*item, field));
      }
    }
    return result;
  }

  MetadataIndex metadata_index(const PyObject& object) {
    const PyObject& state =
        object_state(object, {kMetaModule}, "MetadataIndex", "a storage_data key");
    MetadataIndex index;
    const PyObject* fqn = state.find("fqn");
    if (fqn == nullptr) fail("a storage_data key has no fqn");
    index.fqn = str(*fqn, "a storage_data key's fqn");
    const std::string field = "storage_data key '" + shorten(index.fqn) + "'";
    if (const PyObject* offset = present(state.find("offset"))) {
      index.offset = size(*offset, field + ".offset");
    }
    if (const PyObject* hint = present(state.find("index"))) {
      index.index = integer(*hint, field + ".index");
    }
    return index;
  }

  StorageInfo storage_info(const PyObject& object, const std::string& fqn) {
    const std::string field = "storage_data['" + shorten(fqn) + "']";
    const PyObject& state = object_state(object, {kFsModule}, "_StorageInfo", field);
    const PyObject* path = state.find("relative_path");
    const PyObject* offset = state.find("offset");
    const PyObject* length = state.find("length");
    if (path == nullptr || offset == nullptr || length == nullptr) {
      fail(field + " lacks relative_path, offset or length");
    }
    StorageInfo info;
    info.relative_path = str(*path, field + ".relative_path");
    info.offset = integer(*offset, field + ".offset");
    info.length = integer(*length, field + ".length");
    if (info.offset < 0 || info.length < 0) fail(field + " has a negative offset or length");
    if (const PyObject* transforms = present(state.find("transform_descriptors"))) {
      if (transforms->kind != PyKind::kList && transforms->kind != PyKind::kTuple) {
        fail(field + ".transform_descriptors is a " + describe(*transforms));
      }
      for (const PyObject* t : transforms->items) {
        info.transform_descriptors.push_back(str(*t, field + ".transform_descriptors"));
      }
    }
    return info;
  }

  std::string checkpoint_path(const PyObject& object) {
    if (object.kind == PyKind::kStr) return str(object, "StorageMeta.checkpoint_id");
    if (!(object.is_instance_of("pathlib", "PosixPath") ||
          object.is_instance_of("pathlib._local", "PosixPath")) ||
        object.kind != PyKind::kReduce || object.state() != nullptr) {
      fail("StorageMeta.checkpoint_id is a " + describe(object));
    }
    // PosixPath(*parts), joined as pathlib does: an absolute part restarts the path.
    std::string joined;
    for (const PyObject* part : object.args().items) {
      std::string p = str(*part, "a StorageMeta.checkpoint_id part");
      if (!p.empty() && p[0] == '/') {
        joined = std::move(p);
      } else if (!p.empty()) {
        if (!joined.empty() && joined.back() != '/') joined += '/';
        joined += p;
      }
    }
    return joined.empty() ? "." : joined;
  }

  StorageMeta storage_meta(const PyObject& object) {
    const PyObject& state = object_state(object, {kMetaModule}, "StorageMeta", "storage_meta");
    StorageMeta meta;
    if (const PyObject* id = present(state.find("checkpoint_id"))) {
      meta.checkpoint_id = checkpoint_path(*id);
    }
    if (const PyObject* id = present(state.find("save_id"))) {
      meta.save_id = str(*id, "StorageMeta.save_id");
    }
    if (const PyObject* id = present(state.find("load_id"))) {
      meta.load_id = str(*id, "StorageMeta.load_id");
    }
    if (const PyObject* modules = present(state.find("modules"))) {
      if (modules->kind != PyKind::kList) fail("StorageMeta.modules is a " + describe(*modules));
      for (const PyObject* module : modules->items) {
        meta.modules.push_back(str(*module, "StorageMeta.modules"));
      }
    }
    return meta;
  }

  const std::string& source_;
  std::size_t budget_;
};

}  // namespace

std::string encode_metadata(const Metadata& metadata) { return MetadataEncoder().encode(metadata); }

Metadata decode_metadata(std::string_view bytes, const std::string& source) {
  const Unpickled tree = unpickle(bytes, allow_metadata_global, source);
  return MetadataDecoder(source, bytes.size()).decode(tree.root());
}

}  // namespace dcpp::detail
