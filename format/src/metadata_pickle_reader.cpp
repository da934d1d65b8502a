// Decoding the `.metadata` pickle (see metadata_pickle.h and docs/format.md): any protocol from 2
// to 5, fields in any order, unknown extra fields (ignored), the pre-2.3 module of
// TensorProperties, Megatron-Core's additions (its `all_local_plans` of DCP SavePlans, read as
// data and ignored; its MCoreMetadata root); only those classes' globals, and nothing is ever
// called.

#include "format/metadata_pickle.h"

#include <dcpp/format/metadata_selection.h>

#include "format/pickle/pickle_reader.h"
#include "format/pickle/torch_pickle.h"
#include "metadata_classes.h"

#include <dcpp/core/checkpoint_error.h>

#include <c10/core/ScalarType.h>

#include <algorithm>
#include <array>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

namespace dcpp::detail {

namespace {

using namespace metadata_classes;

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
  if (module == kPlannerModule) {  // Megatron-Core's all_local_plans: read as data, ignored
    return name == "SavePlan" || name == "WriteItem" || name == "WriteItemType" ||
           name == "TensorWriteData";
  }
  if (module == kMcoreTorchModule) return name == "MCoreMetadata" || name == "MCoreSavePlan";
  return (module == kFsModule && name == "_StorageInfo") ||
         (module == "torch.serialization" && name == "_get_layout") ||
         ((module == "pathlib" || module == "pathlib._local") && name == "PosixPath") ||
         (module == "collections" && name == "OrderedDict");
}

/// `key` for an error message: long (hostile) keys are cut.
std::string shorten(std::string_view key) {
  return key.size() <= 200 ? std::string(key) : std::string(key.substr(0, 200)) + "...";
}

/// The name of a field for error messages ("state_dict_metadata['w'].chunks[].offsets"), kept as
/// pieces and joined only when an error is reported: decoding 100,000 entries must not build a
/// string for every field it checks. The pieces must outlive the Field.
class Field {
 public:
  Field(const char* name) : pieces_{name}, count_(1) {}  // NOLINT(google-explicit-constructor)
  Field(const std::string& name) : pieces_{name}, count_(1) {}  // NOLINT
  /// `container['key']`.
  Field(std::string_view container, std::string_view key)
      : pieces_{container, "['", key, "']"}, count_(4) {}

  /// This field followed by `suffix` (".size").
  Field then(std::string_view suffix) const {
    Field field = *this;
    if (field.count_ < field.pieces_.size()) field.pieces_[field.count_++] = suffix;
    return field;
  }

  std::string str() const {
    std::string joined;
    for (std::size_t i = 0; i < count_; ++i) joined += shorten(pieces_[i]);
    return joined;
  }

 private:
  std::array<std::string_view, 8> pieces_;
  std::size_t count_;
};

/// Converts an unpickled `.metadata` into Metadata. As a ContainerStream it takes the large parts
/// while the pickle is read (state_dict_metadata's entries, each tensor's chunks, storage_data's
/// entries), so that the tree holds only the rest; decode() then reads the rest from the tree.
class MetadataDecoder final : public ContainerStream {
 public:
  MetadataDecoder(const std::string& source, std::size_t input_size,
                  const MetadataSelection* selection)
      : source_(source),
        budget_((std::size_t{64} << 20) + input_size * 64),
        selection_(selection) {}

  bool adopt(const PyObject& container, const std::vector<PyObject*>& stack,
             const std::vector<std::size_t>& marks) override {
    if (container.kind == PyKind::kDict) return adopt_root_field(container, stack, marks);
    return adopt_chunks(container, stack, marks);
  }

  void take(const PyObject& container, PyObject* const* items, std::size_t count) override {
    if (&container == streamed_sdm_) {
      for (std::size_t i = 0; i + 1 < count; i += 2) state_dict_entry(*items[i], *items[i + 1]);
    } else if (&container == streamed_storage_) {
      for (std::size_t i = 0; i + 1 < count; i += 2) storage_entry(*items[i], *items[i + 1]);
    } else {
      StreamedChunks& list = streamed_chunks_.at(&container);
      const Field field("state_dict_metadata", list.key);
      for (std::size_t i = 0; i < count; ++i) {
        ChunkStorageMetadata c = chunk(*items[i], field);
        if (selection_ == nullptr || MetadataSelection::keeps(list.boxes, c)) {
          list.chunks.push_back(std::move(c));
        }
      }
    }
  }

  [[noreturn]] void fail(const std::string& problem) const {
    throw CheckpointError(ErrorKind::kCorrupt,
                          source_ + ": invalid checkpoint metadata: " + printable(problem));
  }

  /// The Metadata of `root`, with what was streamed from it. Throws StreamAbandoned where the
  /// streamed containers are not the root's fields after all (a field repeated).
  Metadata decode(const PyObject& root) {
    Metadata& m = m_;
    const bool mcore = root.is_instance_of(kMcoreTorchModule, "MCoreMetadata");
    const PyObject& state =
        mcore ? object_state(root, {kMcoreTorchModule}, "MCoreMetadata", "the root")
              : object_state(root, {kMetaModule}, "Metadata", "the root");
    const PyObject* sdm = state.find("state_dict_metadata");
    if (sdm == nullptr) fail("Metadata has no state_dict_metadata");
    require_streamed_here(sdm, streamed_sdm_, "state_dict_metadata");
    if (!sdm->streamed) {
      for_each_str_entry(*sdm, "state_dict_metadata", [&](std::string key, const PyObject& value) {
        m.state_dict_metadata.emplace_back(key, storage_metadata(value, key));
      });
    }
    if (const PyObject* planner = present(state.find("planner_data"))) {
      for_each_str_entry(*planner, "planner_data", [&](std::string key, const PyObject& value) {
        m.planner_data.emplace_back(key, path(value, key));
      });
      charge_list_lengths(m.planner_data);
    }
    const PyObject* storage = present(state.find("storage_data"));
    require_streamed_here(storage, streamed_storage_, "storage_data");
    if (storage != nullptr) {
      if (storage->kind != PyKind::kDict) fail("storage_data is a " + describe(*storage));
      if (!storage->streamed) {
        m.storage_data.reserve(storage->dict_size());
        for (std::size_t i = 0; i < storage->dict_size(); ++i) {
          storage_entry(storage->key(i), storage->value(i));
        }
      }
      if (unsure_of_storage_) drop_storage_of_chunks_left_out();
      reject_repeated_storage_keys(m.storage_data);
    }
    if (const PyObject* meta = present(state.find("storage_meta"))) {
      m.storage_meta = storage_meta(*meta);
    }
    if (const PyObject* version = present(state.find("version"))) {
      m.version = str(*version, "Metadata.version");
    }
    if (const PyObject* mcore = present(state.find("mcore_data"))) {
      m.nd_reformulated_shapes = nd_reformulated_shapes(*mcore);
    }
    return std::move(m_);
  }

  // Megatron-Core's mcore_data: {key: {'nd_reformulated_orig_global_shape': (sizes...), ...}}.
  // Only that entry is read; the rest is Megatron's and ignored.
  OrderedEntries<std::vector<int64_t>> nd_reformulated_shapes(const PyObject& mcore) {
    OrderedEntries<std::vector<int64_t>> shapes;
    if (mcore.kind != PyKind::kDict) fail("mcore_data is a " + describe(mcore));
    for_each_str_entry(mcore, "mcore_data", [&](std::string key, const PyObject& entry) {
      const PyObject* shape = entry.kind == PyKind::kDict
                                  ? present(entry.find("nd_reformulated_orig_global_shape"))
                                  : nullptr;
      if (shape == nullptr) return;
      const Field field("mcore_data", key);
      if (shape->kind != PyKind::kTuple && shape->kind != PyKind::kList) {
        fail(field.str() + "['nd_reformulated_orig_global_shape'] is a " + describe(*shape));
      }
      std::vector<int64_t> sizes;
      for (const PyObject* size : shape->items) {
        if (size->kind != PyKind::kInt || size->int_value < 0) {
          fail(field.str() + "['nd_reformulated_orig_global_shape'] holds a " + describe(*size) +
               ", not a size");
        }
        sizes.push_back(size->int_value);
      }
      shapes.emplace_back(std::move(key), std::move(sizes));
    });
    return shapes;
  }

 private:
  /// What adopt() recorded of a tensor's streamed chunks list.
  struct StreamedChunks {
    std::string_view key;  // the tensor's, in the pickle's bytes
    const std::vector<MetadataSelection::Box>* boxes;  // the selection's for the key
    std::vector<ChunkStorageMetadata> chunks;
  };

  static bool is_root_object(const PyObject& object) {
    return object.kind == PyKind::kNewObj && (object.is_instance_of(kMetaModule, "Metadata") ||
                                              object.is_instance_of(kMcoreTorchModule,
                                                                    "MCoreMetadata"));
  }

  /// The value of the root's state_dict_metadata or storage_data: the stack is [root object, its
  /// state dict, MARK, field name, value, ..., field name] and `dict` that field's value.
  bool adopt_root_field(const PyObject& dict, const std::vector<PyObject*>& stack,
                        const std::vector<std::size_t>& marks) {
    if (marks.size() != 1 || marks[0] != 2 || stack.size() < 3 || stack.size() % 2 != 1 ||
        !is_root_object(*stack[0]) || stack[1]->kind != PyKind::kDict ||
        stack.back()->kind != PyKind::kStr) {
      return false;
    }
    const std::string_view field = stack.back()->text;
    const PyObject** streamed = field == "state_dict_metadata" ? &streamed_sdm_
                                : field == "storage_data"      ? &streamed_storage_
                                                               : nullptr;
    if (streamed == nullptr) return false;
    if (*streamed != nullptr) throw StreamAbandoned(source_ + ": the root sets " +
                                                    std::string(field) + " twice");
    *streamed = &dict;
    return true;
  }

  /// The chunks of a TensorStorageMetadata in the streamed state_dict_metadata: the stack ends
  /// [..., key, the object, its state dict, MARK, field name, value, ..., 'chunks'], the entry
  /// (key, object) in a batch of state_dict_metadata's or set alone (SETITEM).
  bool adopt_chunks(const PyObject& list, const std::vector<PyObject*>& stack,
                    const std::vector<std::size_t>& marks) {
    if (streamed_sdm_ == nullptr || marks.size() < 2 || marks.size() > 3) return false;
    const std::size_t mark = marks.back();
    if (mark < 5 || stack.size() <= mark || (stack.size() - mark) % 2 != 1 ||
        stack.back()->kind != PyKind::kStr || stack.back()->text != "chunks") {
      return false;
    }
    const PyObject& state = *stack[mark - 1];
    const PyObject& tensor = *stack[mark - 2];
    const PyObject& key = *stack[mark - 3];
    if (state.kind != PyKind::kDict || tensor.kind != PyKind::kNewObj ||
        !tensor.is_instance_of(kMetaModule, "TensorStorageMetadata") || key.kind != PyKind::kStr) {
      return false;
    }
    const bool set_alone = marks.size() == 2 && stack[mark - 4] == streamed_sdm_;
    const bool in_batch = marks.size() == 3 && mark >= marks[1] + 3 &&
                          stack[marks[1] - 1] == streamed_sdm_ && (mark - 3 - marks[1]) % 2 == 0;
    if (!set_alone && !in_batch) return false;
    streamed_chunks_[&list] =
        StreamedChunks{key.text, selection_ ? selection_->boxes_of(key.text) : nullptr, {}};
    return true;
  }

  /// `value`, the root's field `name`, must be the container streamed for it, if one was.
  static void require_streamed_here(const PyObject* value, const PyObject* streamed,
                                    const char* name) {
    if ((value != nullptr && value->streamed) != (streamed != nullptr) ||
        (streamed != nullptr && value != streamed)) {
      throw StreamAbandoned(std::string(name) + " is not the dict streamed for it");
    }
  }

  void state_dict_entry(const PyObject& key_object, const PyObject& value) {
    std::string key = str(key_object, "a key of state_dict_metadata");
    if (!state_dict_keys_.insert(key_object.text).second) {
      fail("state_dict_metadata has the key '" + shorten(key) + "' twice");
    }
    m_.state_dict_metadata.emplace_back(key, storage_metadata(value, key));
  }

  void storage_entry(const PyObject& key, const PyObject& value) {
    MetadataIndex index = metadata_index(key);
    if (selection_ != nullptr && index.offset) {
      const auto kept = kept_offsets_.find(index.fqn);
      if (kept == kept_offsets_.end()) {
        unsure_of_storage_ = true;  // its tensor is not decoded yet: decide at the end
      } else if (kept->second.count(*index.offset) == 0) {
        return;
      }
    }
    StorageInfo info = storage_info(value, index.fqn);
    m_.storage_data.emplace_back(std::move(index), std::move(info));
  }

  /// With a selection: storage_data's entries of chunks it left out (those that came before their
  /// tensor's entry in state_dict_metadata, which DCP's pickles never do).
  void drop_storage_of_chunks_left_out() {
    auto& data = m_.storage_data;
    data.erase(std::remove_if(data.begin(), data.end(),
                              [&](const auto& entry) {
                                const MetadataIndex& index = entry.first;
                                if (!index.offset) return false;
                                const auto kept = kept_offsets_.find(index.fqn);
                                return kept == kept_offsets_.end() ||
                                       kept->second.count(*index.offset) == 0;
                              }),
               data.end());
  }

  void reject_repeated_storage_keys(
      const std::vector<std::pair<MetadataIndex, StorageInfo>>& data) {
    std::vector<const MetadataIndex*> sorted;
    sorted.reserve(data.size());
    for (const auto& entry : data) sorted.push_back(&entry.first);
    std::sort(sorted.begin(), sorted.end(),
              [](const MetadataIndex* a, const MetadataIndex* b) { return *a < *b; });
    for (std::size_t i = 1; i < sorted.size(); ++i) {
      if (*sorted[i - 1] == *sorted[i]) {
        fail("storage_data has the key '" + shorten(sorted[i]->fqn) + "' twice");
      }
    }
  }

  /// A load into an empty state dict rebuilds the lists planner_data names, padding each with None
  /// up to the largest index a path gives it (DCP's set_element). Each list is charged its length,
  /// so that one hostile index cannot make a load allocate without bound: a 6 KB file naming index
  /// 524654 took 0.8 GB and 30 s to plan. A slot costs the budget what 16 bytes of file add to it;
  /// each item of a real list brings several times that in its state_dict_metadata, planner_data
  /// and storage_data entries (metadata_pickle_test.cpp decodes a list of 200,000).
  void charge_list_lengths(const OrderedEntries<ObjectPath>& planner_data) {
    // About what one slot costs a load (the fuzz input above: 1.6 KiB under ASan): the padded
    // StateValue, its flattened key, the load planner's maps.
    constexpr std::size_t kUnitsPerSlot = 1024;
    std::map<ObjectPath, int64_t> lengths;  // a list, named by the path to it -> its length
    for (const auto& [key, path] : planner_data) {
      for (std::size_t depth = 0; depth < path.size(); ++depth) {
        const int64_t* index = std::get_if<int64_t>(&path[depth]);
        if (index == nullptr) continue;
        if (*index < 0) {
          fail(Field("planner_data", key).str() + " holds the negative list index " +
               std::to_string(*index));
        }
        int64_t& length = lengths[ObjectPath(path.begin(), path.begin() + depth)];
        length = std::max(length, *index);
      }
    }
    for (const auto& [list, largest_index] : lengths) {
      if (static_cast<uint64_t>(largest_index) >= budget_ / kUnitsPerSlot) {
        fail("planner_data names index " + std::to_string(largest_index) + " of the list '" +
             shorten(join_path(list)) +
             "', which expands to more data than the file's size allows (a hostile or corrupt "
             "pickle)");
      }
      charge((static_cast<std::size_t>(largest_index) + 1) * kUnitsPerSlot);
    }
  }

  static const PyObject* present(const PyObject* field) {
    return field == nullptr || field->kind == PyKind::kNone ? nullptr : field;
  }

  void charge(std::size_t units) {
    if (units > budget_) {
      fail("it expands to more data than its size allows (a hostile or corrupt pickle)");
    }
    budget_ -= units;
  }

  std::string str(const PyObject& object, const Field& field) {
    if (object.kind != PyKind::kStr)
      fail(field.str() + " is a " + describe(object) + ", not a str");
    charge(object.text.size() + 16);
    return std::string(object.text);
  }

  int64_t integer(const PyObject& object, const Field& field) {
    if (object.kind != PyKind::kInt)
      fail(field.str() + " is a " + describe(object) + ", not an int");
    charge(8);
    return object.int_value;
  }

  bool boolean(const PyObject& object, const Field& field) {
    if (object.kind != PyKind::kBool)
      fail(field.str() + " is a " + describe(object) + ", not a bool");
    return object.bool_value;
  }

  /// The state of `object`, which must be `NEWOBJ(module.name, ())` for one of `modules`; nullptr
  /// if it had no BUILD.
  const PyObject* raw_state(const PyObject& object, std::initializer_list<std::string_view> modules,
                            std::string_view name, const Field& field) {
    bool match = false;
    for (std::string_view module : modules) match = match || object.is_instance_of(module, name);
    if (!match || object.kind != PyKind::kNewObj || !object.args().items.empty()) {
      fail(field.str() + " is a " + describe(object) + ", not a " + std::string(name));
    }
    return object.state();
  }

  /// Like raw_state, for classes whose state is a dict (no BUILD reads as an empty dict).
  const PyObject& object_state(const PyObject& object,
                               std::initializer_list<std::string_view> modules,
                               std::string_view name, const Field& field) {
    static const PyObject kEmptyDict = [] {
      PyObject d;
      d.kind = PyKind::kDict;
      return d;
    }();
    const PyObject* state = raw_state(object, modules, name, field);
    if (state == nullptr) return kEmptyDict;
    if (state->kind != PyKind::kDict) {
      fail(field.str() + " (" + std::string(name) + ") has a state that is a " + describe(*state));
    }
    return *state;
  }

  template <typename Fn>
  void for_each_str_entry(const PyObject& dict, const char* field, Fn&& fn) {
    if (dict.kind != PyKind::kDict)
      fail(std::string(field) + " is a " + describe(dict) + ", not a dict");
    std::unordered_set<std::string_view> seen;
    seen.reserve(dict.dict_size());
    for (std::size_t i = 0; i < dict.dict_size(); ++i) {
      std::string key = str(dict.key(i), Field("a key of ").then(field));
      if (!seen.insert(dict.key(i).text).second) {
        fail(std::string(field) + " has the key '" + shorten(key) + "' twice");
      }
      fn(std::move(key), dict.value(i));
    }
  }

  std::vector<int64_t> size(const PyObject& object, const Field& field) {
    const PyObject* tuple = &object;
    if (object.is_instance_of("torch", "Size")) {
      if (object.kind != PyKind::kReduce || object.state() != nullptr ||
          object.args().items.size() != 1) {
        fail(field.str() + " is a malformed torch.Size");
      }
      tuple = object.args().items[0];
    }
    if (tuple->kind != PyKind::kTuple && tuple->kind != PyKind::kList) {
      fail(field.str() + " is a " + describe(object) + ", not a torch.Size");
    }
    std::vector<int64_t> values;
    values.reserve(tuple->items.size());
    for (const PyObject* item : tuple->items) {
      const int64_t v = integer(*item, field);
      if (v < 0) fail(field.str() + " holds the negative value " + std::to_string(v));
      values.push_back(v);
    }
    return values;
  }

  StorageMetadata storage_metadata(const PyObject& object, const std::string& key) {
    const Field field("state_dict_metadata", key);
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
      fail(field.str() + " lacks properties, size or chunks");
    }
    t.properties = tensor_properties(*properties, field.then(".properties"));
    t.size = size(*global_size, field.then(".size"));
    check_addressable(t, field);
    if (chunks->kind != PyKind::kList) fail(field.str() + ".chunks is a " + describe(*chunks));
    if (chunks->streamed) {
      auto streamed = streamed_chunks_.find(chunks);
      if (streamed == streamed_chunks_.end()) {
        throw StreamAbandoned(source_ + ": " + field.str() + ".chunks is not the list streamed");
      }
      t.chunks = std::move(streamed->second.chunks);
      streamed_chunks_.erase(streamed);
    } else {
      const auto* boxes = selection_ ? selection_->boxes_of(key) : nullptr;
      for (const PyObject* object : chunks->items) {
        ChunkStorageMetadata c = chunk(*object, field);
        if (selection_ == nullptr || MetadataSelection::keeps(boxes, c)) {
          t.chunks.push_back(std::move(c));
        }
      }
    }
    for (const ChunkStorageMetadata& c : t.chunks) {
      if (c.offsets.size() != t.size.size() || c.sizes.size() != t.size.size()) {
        fail(field.str() + " has a chunk whose rank differs from the tensor's");
      }
      check_inside(c, t.size, field);
    }
    if (selection_ != nullptr) {
      std::set<std::vector<int64_t>>& kept = kept_offsets_[key];
      for (const ChunkStorageMetadata& c : t.chunks) kept.insert(c.offsets);
    }
    return t;
  }

  /// A ChunkStorageMetadata of the tensor `field`, not yet checked against the tensor's size.
  ChunkStorageMetadata chunk(const PyObject& object, const Field& field) {
    const PyObject& cs =
        object_state(object, {kMetaModule}, "ChunkStorageMetadata", field.then(".chunks[]"));
    const PyObject* offsets = cs.find("offsets");
    const PyObject* sizes = cs.find("sizes");
    if (offsets == nullptr || sizes == nullptr) fail(field.str() + " has a chunk without offsets");
    ChunkStorageMetadata c;
    c.offsets = size(*offsets, field.then(".chunks[].offsets"));
    c.sizes = size(*sizes, field.then(".chunks[].sizes"));
    return c;
  }

  /// The tensor's bytes must be countable in an int64, as libtorch counts them.
  void check_addressable(const TensorStorageMetadata& tensor, const Field& field) const {
    int64_t bytes = static_cast<int64_t>(c10::elementSize(tensor.properties.dtype));
    for (int64_t extent : tensor.size) {
      if (__builtin_mul_overflow(bytes, extent, &bytes)) {
        fail(field.str() + " has the size " + sizes_text(tensor.size) +
             ", too large for a tensor to address");
      }
    }
  }

  /// A chunk is a box inside the tensor: 0 <= offset and offset + size <= the tensor's size along
  /// every dimension (computed without overflow; sizes and offsets are non-negative already).
  void check_inside(const ChunkStorageMetadata& chunk, const std::vector<int64_t>& tensor_size,
                    const Field& field) const {
    for (std::size_t d = 0; d < tensor_size.size(); ++d) {
      if (chunk.offsets[d] > tensor_size[d] || chunk.sizes[d] > tensor_size[d] - chunk.offsets[d]) {
        fail(field.str() + " has a chunk at offsets " + sizes_text(chunk.offsets) + " of sizes " +
             sizes_text(chunk.sizes) + " that reaches outside the tensor's size " +
             sizes_text(tensor_size));
      }
    }
  }

  static std::string sizes_text(const std::vector<int64_t>& values) {
    std::string text = "[";
    for (std::size_t i = 0; i < values.size() && i < 8; ++i) {
      text += (i ? ", " : "") + std::to_string(values[i]);
    }
    return text + (values.size() > 8 ? ", ...]" : "]");
  }

  TensorProperties tensor_properties(const PyObject& object, const Field& field) {
    const PyObject* state =
        raw_state(object, {kMetaModule, kShardModule}, "TensorProperties", field);
    if (state == nullptr || state->kind != PyKind::kTuple || state->items.size() != 5) {
      fail(field.str() +
           " has a state that is not the 5-tuple (dtype, layout, requires_grad, "
           "memory_format, pin_memory)");
    }
    const auto& s = state->items;
    TensorProperties p;
    if (s[0]->kind != PyKind::kGlobal || s[0]->text != "torch" ||
        !is_python_dtype_name(s[0]->name())) {
      fail(field.str() + ".dtype is a " + describe(*s[0]));
    }
    const std::optional<at::ScalarType> dtype = find_dtype_by_python_name(s[0]->name());
    // Without a dtype, dtype_from_python_name throws, naming the key.
    p.dtype = dtype ? *dtype : dtype_from_python_name(s[0]->name(), source_ + ": " + field.str());
    if (!s[1]->is_instance_of("torch.serialization", "_get_layout") ||
        s[1]->kind != PyKind::kReduce || s[1]->args().items.size() != 1 ||
        s[1]->args().items[0]->kind != PyKind::kStr) {
      fail(field.str() + ".layout is a " + describe(*s[1]));
    }
    const std::string_view layout = s[1]->args().items[0]->text;
    bool known_layout = false;
    for (const auto& [value, name] : kLayouts) {
      if (name == layout) {
        p.layout = value;
        known_layout = true;
      }
    }
    if (!known_layout) fail(field.str() + " has the unknown layout '" + std::string(layout) + "'");
    p.requires_grad = boolean(*s[2], field.then(".requires_grad"));
    const PyObject& format = *s[3];
    if (!(format.is_instance_of(kMetaModule, "_MEM_FORMAT_ENCODING") ||
          format.is_instance_of(kShardModule, "MEM_FORMAT_ENCODING")) ||
        format.kind != PyKind::kReduce || format.args().items.size() != 1) {
      fail(field.str() + ".memory_format is a " + describe(format));
    }
    const int64_t encoding = integer(*format.args().items[0], field.then(".memory_format"));
    if (encoding < 0 || encoding > 2) {
      fail(field.str() + " has the unknown memory format encoding " + std::to_string(encoding));
    }
    p.memory_format = static_cast<MemoryFormatEncoding>(encoding);
    p.pin_memory = boolean(*s[4], field.then(".pin_memory"));
    return p;
  }

  ObjectPath path(const PyObject& object, const std::string& key) {
    const Field field("planner_data", key);
    if (object.kind != PyKind::kTuple && object.kind != PyKind::kList) {
      fail(field.str() + " is a " + describe(object) + ", not a path tuple");
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
    const Field field("storage_data", index.fqn);
    if (const PyObject* offset = present(state.find("offset"))) {
      index.offset = size(*offset, field.then(" key's offset"));
    }
    if (const PyObject* hint = present(state.find("index"))) {
      index.index = integer(*hint, field.then(" key's index"));
    }
    return index;
  }

  StorageInfo storage_info(const PyObject& object, const std::string& fqn) {
    const Field field("storage_data", fqn);
    const PyObject& state = object_state(object, {kFsModule}, "_StorageInfo", field);
    const PyObject* path = state.find("relative_path");
    const PyObject* offset = state.find("offset");
    const PyObject* length = state.find("length");
    if (path == nullptr || offset == nullptr || length == nullptr) {
      fail(field.str() + " lacks relative_path, offset or length");
    }
    StorageInfo info;
    info.relative_path = str(*path, field.then(".relative_path"));
    if (info.relative_path.find('\0') != std::string::npos) {
      fail(field.str() + ".relative_path '" + shorten(info.relative_path) +
           "' holds a NUL byte, which no file name can");
    }
    info.offset = integer(*offset, field.then(".offset"));
    info.length = integer(*length, field.then(".length"));
    if (info.offset < 0 || info.length < 0) fail(field.str() + " has a negative offset or length");
    if (const PyObject* transforms = present(state.find("transform_descriptors"))) {
      if (transforms->kind != PyKind::kList && transforms->kind != PyKind::kTuple) {
        fail(field.str() + ".transform_descriptors is a " + describe(*transforms));
      }
      for (const PyObject* t : transforms->items) {
        info.transform_descriptors.push_back(str(*t, field.then(".transform_descriptors")));
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
    // PosixPath(*parts), joined and normalised as pathlib does: an absolute part restarts the
    // path; empty and "." components drop out ("./ckpt" is "ckpt", "a//b/" is "a/b").
    std::string joined;
    for (const PyObject* part : object.args().items) {
      const std::string p = str(*part, "a StorageMeta.checkpoint_id part");
      if (!p.empty() && p[0] == '/') joined = "/";
      std::size_t begin = 0;
      while (begin <= p.size()) {
        std::size_t end = p.find('/', begin);
        if (end == std::string::npos) end = p.size();
        const std::string component = p.substr(begin, end - begin);
        if (!component.empty() && component != ".") {
          if (!joined.empty() && joined.back() != '/') joined += '/';
          joined += component;
        }
        begin = end + 1;
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
  const MetadataSelection* selection_;  // null: every chunk is kept
  /// With a selection: the offsets of the chunks kept, by tensor, once its entry is decoded.
  std::map<std::string, std::set<std::vector<int64_t>>, std::less<>> kept_offsets_;
  bool unsure_of_storage_ = false;  // an entry came before its tensor's: see decode()
  Metadata m_;
  const PyObject* streamed_sdm_ = nullptr;      // the root's state_dict_metadata, if streamed
  const PyObject* streamed_storage_ = nullptr;  // its storage_data, likewise
  std::unordered_set<std::string_view> state_dict_keys_;  // views of the pickle's bytes
  std::unordered_map<const PyObject*, StreamedChunks> streamed_chunks_;  // by list, until used
};

}  // namespace

Metadata decode_metadata_as_tree(std::string_view bytes, const std::string& source,
                                 const MetadataSelection* selection) {
  const Unpickled tree = unpickle(bytes, allow_metadata_global, source);
  return MetadataDecoder(source, bytes.size(), selection).decode(tree.root());
}

Metadata decode_metadata(std::string_view bytes, const std::string& source,
                         MetadataDecodeStats& stats, const MetadataSelection* selection) {
  try {
    MetadataDecoder decoder(source, bytes.size(), selection);
    const Unpickled tree = unpickle(bytes, allow_metadata_global, source, &decoder);
    Metadata metadata = decoder.decode(tree.root());
    stats = {true, tree.bytes_held()};
    return metadata;
  } catch (const StreamAbandoned&) {
    // Not DCP's layout of the pickle (a field repeated, objects shared across batches): read
    // whole, as a tree.
    const Unpickled tree = unpickle(bytes, allow_metadata_global, source);
    Metadata metadata = MetadataDecoder(source, bytes.size(), selection).decode(tree.root());
    stats = {false, tree.bytes_held()};
    return metadata;
  }
}

Metadata decode_metadata(std::string_view bytes, const std::string& source) {
  MetadataDecodeStats stats;
  return decode_metadata(bytes, source, stats);
}

}  // namespace dcpp::detail
