// The streamed decode of a `.metadata` (issue 62): state_dict_metadata's entries, their chunks and
// storage_data's entries are converted as the pickle is read and never held as a tree. It must
// read every file exactly as the whole-tree decode does, and fall back to that decode, not to a
// different result, where a pickle is not laid out as DCP's pickler lays it out.

#include "dcpp_test.h"

#include <dcpp/format/metadata_selection.h>

#include "format/metadata_pickle.h"
#include "format/pickle/pickle_reader.h"
#include "format/pickle/pickle_writer.h"

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

using namespace dcpp;
using namespace dcpp::detail;

namespace {

void require_same_metadata(const Metadata& got, const Metadata& want) {
  REQUIRE(got.state_dict_metadata.size() == want.state_dict_metadata.size());
  for (std::size_t i = 0; i < want.state_dict_metadata.size(); ++i) {
    const auto& [key, value] = want.state_dict_metadata[i];
    INFO("state_dict_metadata entry " << i << " '" << key << "'");
    REQUIRE(got.state_dict_metadata[i].first == key);
    REQUIRE(got.state_dict_metadata[i].second.index() == value.index());
    if (const auto* tensor = std::get_if<TensorStorageMetadata>(&value)) {
      const auto& other = std::get<TensorStorageMetadata>(got.state_dict_metadata[i].second);
      REQUIRE(other.properties.dtype == tensor->properties.dtype);
      REQUIRE(other.properties.layout == tensor->properties.layout);
      REQUIRE(other.properties.requires_grad == tensor->properties.requires_grad);
      REQUIRE(other.properties.memory_format == tensor->properties.memory_format);
      REQUIRE(other.properties.pin_memory == tensor->properties.pin_memory);
      REQUIRE(other.size == tensor->size);
      REQUIRE((other.chunks == tensor->chunks));
    }
  }
  REQUIRE((got.planner_data == want.planner_data));
  REQUIRE(got.storage_data.size() == want.storage_data.size());
  for (std::size_t i = 0; i < want.storage_data.size(); ++i) {
    const auto& [index, info] = want.storage_data[i];
    INFO("storage_data entry " << i << " '" << index.fqn << "'");
    REQUIRE(got.storage_data[i].first == index);
    REQUIRE(got.storage_data[i].first.index == index.index);
    REQUIRE(got.storage_data[i].second.relative_path == info.relative_path);
    REQUIRE(got.storage_data[i].second.offset == info.offset);
    REQUIRE(got.storage_data[i].second.length == info.length);
    REQUIRE(got.storage_data[i].second.transform_descriptors == info.transform_descriptors);
  }
  REQUIRE(got.storage_meta.has_value() == want.storage_meta.has_value());
  if (want.storage_meta) {
    REQUIRE(got.storage_meta->checkpoint_id == want.storage_meta->checkpoint_id);
    REQUIRE(got.storage_meta->save_id == want.storage_meta->save_id);
    REQUIRE(got.storage_meta->load_id == want.storage_meta->load_id);
    REQUIRE(got.storage_meta->modules == want.storage_meta->modules);
  }
  REQUIRE(got.version == want.version);
  REQUIRE(got.nd_reformulated_shapes == want.nd_reformulated_shapes);
}

/// `ranks` x `tensors` FSDP chunks, each rank's in a file of its own.
Metadata sharded_metadata(int ranks, int tensors) {
  Metadata m;
  for (int t = 0; t < tensors; ++t) {
    const std::string key = "layers." + std::to_string(t) + ".weight";
    TensorStorageMetadata tensor;
    tensor.properties.dtype = t % 2 == 0 ? at::kFloat : at::kBFloat16;
    tensor.size = {int64_t{4} * ranks, 16};
    for (int r = 0; r < ranks; ++r) {
      tensor.chunks.push_back({{int64_t{4} * r, 0}, {4, 16}});
      m.storage_data.emplace_back(
          MetadataIndex{key, std::vector<int64_t>{int64_t{4} * r, 0}, r},
          StorageInfo{"__" + std::to_string(r) + "_0.distcp", int64_t{256} * t, 256, {}});
    }
    m.state_dict_metadata.emplace_back(key, std::move(tensor));
  }
  m.state_dict_metadata.emplace_back("step", BytesStorageMetadata{});
  m.storage_data.emplace_back(MetadataIndex{"step", std::nullopt, std::nullopt},
                              StorageInfo{"__0_0.distcp", 0, 8, {}});
  m.planner_data.emplace_back("step", ObjectPath{std::string("step")});
  m.version = "1.0.0";
  return m;
}

void require_streamed_as_tree(const std::string& bytes, const std::string& name) {
  MetadataDecodeStats stats;
  const Metadata streamed = decode_metadata(bytes, name, stats);
  CHECK(stats.streamed);
  require_same_metadata(streamed, decode_metadata_as_tree(bytes, name));
}

}  // namespace

TEST_CASE("every fixture's .metadata decodes streamed, as the whole tree reads it", "[metadata]") {
  const std::filesystem::path fixtures = dcpp::test::fixture("", "2.6").parent_path().parent_path();
  int files = 0;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(fixtures)) {
    if (entry.path().filename() != ".metadata") continue;
    SECTION(entry.path().parent_path().lexically_relative(fixtures).string()) {
      require_streamed_as_tree(dcpp::test::read_file(entry.path()), entry.path().string());
    }
    ++files;
  }
  CHECK(files >= 10);
}

TEST_CASE("a large .metadata decodes streamed, keeping no tree of its entries", "[metadata]") {
  const Metadata m = sharded_metadata(64, 64);  // 4,096 chunks
  const std::string bytes = encode_metadata(m);
  MetadataDecodeStats stats;
  require_same_metadata(decode_metadata(bytes, "64 x 64", stats), m);
  REQUIRE(stats.streamed);
  // The tree holds the root, its small fields and the few objects read back from the memo: its
  // first blocks. Whole, it is over a KiB a chunk (pickle_tree_test.cpp).
  CHECK(stats.tree_bytes < (std::size_t{1} << 20));
  const Unpickled whole = unpickle(bytes, [](auto, auto) { return true; }, "64 x 64");
  CHECK(whole.bytes_held() > (std::size_t{3} << 20));
}

TEST_CASE("batches of one (SETITEM, APPEND) and batch boundaries stream as the tree reads them",
          "[metadata]") {
  // Python's pickler sets a dict's or list's items in batches of 1,000, a batch of one alone.
  for (const auto& [ranks, tensors] :
       std::vector<std::pair<int, int>>{{1, 1}, {1001, 1}, {1, 1000}, {2, 1001}, {1000, 2}}) {
    DYNAMIC_SECTION(ranks << " ranks x " << tensors << " tensors") {
      const std::string bytes = encode_metadata(sharded_metadata(ranks, tensors));
      require_streamed_as_tree(bytes, "batches");
      require_same_metadata(decode_metadata(bytes, "batches"), sharded_metadata(ranks, tensors));
    }
  }
}

TEST_CASE("a selection keeps the chunks that overlap its boxes, every chunk of keys it does not "
          "name, and only their storage_data",
          "[metadata]") {
  const Metadata full = sharded_metadata(16, 8);  // tensor t's chunk r: rows [4r, 4r + 4)
  const std::string bytes = encode_metadata(full);
  dcpp::MetadataSelection selection;
  for (int t = 0; t < 8; t += 2) {
    selection.add_box("layers." + std::to_string(t) + ".weight", {20, 0}, {4, 16});  // rank 5's
  }
  selection.add_box("layers.1.weight", {2, 0}, {4, 16});  // across ranks 0 and 1
  selection.add_box("layers.3.weight", {64, 0}, {0, 16});  // empty: overlaps nothing

  // Expected, from the geometry: even tensors keep chunk 5, layers.1 chunks 0 and 1, layers.3
  // none, and layers.5 and 7, which the selection does not name, every chunk.
  Metadata want = full;
  auto kept_ranks = [](const std::string& key) -> std::vector<int64_t> {
    if (key == "layers.1.weight") return {0, 1};
    if (key == "layers.3.weight") return {};
    if ((key[7] - '0') % 2 == 0) return {5};
    std::vector<int64_t> all(16);
    for (int64_t r = 0; r < 16; ++r) all[r] = r;
    return all;
  };
  for (auto& [key, value] : want.state_dict_metadata) {
    auto* tensor = std::get_if<TensorStorageMetadata>(&value);
    if (tensor == nullptr) continue;
    std::vector<ChunkStorageMetadata> kept;
    for (const int64_t r : kept_ranks(key)) kept.push_back(tensor->chunks[r]);
    tensor->chunks = kept;
  }
  want.storage_data.clear();
  for (const auto& entry : full.storage_data) {
    const auto& offset = entry.first.offset;
    if (!offset) {  // "step", not a tensor
      want.storage_data.push_back(entry);
      continue;
    }
    const std::vector<int64_t> ranks = kept_ranks(entry.first.fqn);
    if (std::find(ranks.begin(), ranks.end(), (*offset)[0] / 4) != ranks.end()) {
      want.storage_data.push_back(entry);
    }
  }
  REQUIRE(want.storage_data.size() == 4 + 2 + 0 + 2 * 16 + 1);

  MetadataDecodeStats stats;
  require_same_metadata(decode_metadata(bytes, "selected", stats, &selection), want);
  CHECK(stats.streamed);
  require_same_metadata(decode_metadata_as_tree(bytes, "selected", &selection), want);
}

namespace {

/// Pickles a Metadata whose state dict holds `fields`: (name, keys of a state_dict_metadata dict
/// of BytesStorageMetadata). A name may repeat, as a hostile or hand-made pickle may.
std::string metadata_with_fields(
    const std::vector<std::pair<std::string, std::vector<std::string>>>& fields) {
  PickleWriter w(4);
  w.put_global("torch.distributed.checkpoint.metadata", "Metadata");
  w.empty_tuple();
  w.newobj();
  w.put_dict(fields.size(), [&](std::size_t f) {
    w.put_str(fields[f].first);
    w.put_dict(fields[f].second.size(), [&](std::size_t k) {
      w.put_str(fields[f].second[k]);
      w.put_global("torch.distributed.checkpoint.metadata", "BytesStorageMetadata");
      w.empty_tuple();
      w.newobj();
    });
  });
  w.build();
  return w.finish();
}

std::vector<std::string> keys_of(const Metadata& m) {
  std::vector<std::string> keys;
  for (const auto& [key, value] : m.state_dict_metadata) keys.push_back(key);
  return keys;
}

}  // namespace

TEST_CASE("a .metadata whose root repeats a field decodes as the tree does: the last one",
          "[metadata]") {
  const std::string bytes = metadata_with_fields(
      {{"state_dict_metadata", {"a", "b"}}, {"state_dict_metadata", {"c"}}});
  MetadataDecodeStats stats;
  const Metadata decoded = decode_metadata(bytes, "repeated", stats);
  CHECK_FALSE(stats.streamed);
  CHECK(keys_of(decoded) == std::vector<std::string>{"c"});
  CHECK(keys_of(decode_metadata_as_tree(bytes, "repeated")) == std::vector<std::string>{"c"});

  const std::string once = metadata_with_fields({{"state_dict_metadata", {"a", "b"}}});
  CHECK(keys_of(decode_metadata(once, "once", stats)) == std::vector<std::string>{"a", "b"});
  CHECK(stats.streamed);
}

namespace {

bool allow_any_global_streamed(std::string_view, std::string_view) { return true; }

/// Streams the dicts and lists set under the key "streamed" (the str below them on the stack),
/// recording the ints and strs it is given.
class RecordingStream : public ContainerStream {
 public:
  bool adopt(const dcpp::detail::PyObject&, const std::vector<dcpp::detail::PyObject*>& stack,
             const std::vector<std::size_t>&) override {
    return !stack.empty() && stack.back()->kind == PyKind::kStr &&
           stack.back()->text == "streamed";
  }
  void take(const dcpp::detail::PyObject&, dcpp::detail::PyObject* const* items,
            std::size_t count) override {
    ++batches;
    for (std::size_t i = 0; i < count; ++i) {
      const dcpp::detail::PyObject& item = *items[i];
      taken.push_back(item.kind == PyKind::kInt ? std::to_string(item.int_value)
                      : item.kind == PyKind::kStr ? std::string(item.text)
                                                  : describe(item));
    }
  }
  std::vector<std::string> taken;
  int batches = 0;
};

}  // namespace

namespace {

/// A pickle written opcode by opcode.
class RawPickle {
 public:
  RawPickle() { bytes_ = "\x80\x04"; }
  RawPickle& op(uint8_t code) {
    bytes_ += static_cast<char>(code);
    return *this;
  }
  RawPickle& integer(int32_t value) { return op(op::kBinInt).u32(static_cast<uint32_t>(value)); }
  RawPickle& str(const std::string& text) {
    op(op::kBinUnicode).u32(static_cast<uint32_t>(text.size()));
    bytes_ += text;
    return *this;
  }
  RawPickle& put(uint32_t index) { return op(op::kLongBinPut).u32(index); }
  RawPickle& get(uint32_t index) { return op(op::kLongBinGet).u32(index); }
  std::string finish() { return bytes_ + static_cast<char>(op::kStop); }

 private:
  RawPickle& u32(uint32_t value) {
    for (int i = 0; i < 4; ++i) bytes_ += static_cast<char>((value >> (8 * i)) & 0xff);
    return *this;
  }
  std::string bytes_;
};

}  // namespace

TEST_CASE("the VM streams adopted containers, keeping what the memo reads back after a batch",
          "[pickle]") {
  // {"streamed": {i: (list_i, list_i) for i in 0..2499}, "later": [the tuples of 7 and 2100]},
  // where list_i = [i, list_i]: shared and cyclic objects made inside batches, read back after.
  RawPickle p;
  p.op(op::kEmptyDict).op(op::kMark).str("streamed").op(op::kEmptyDict);
  for (int32_t i = 0; i < 2500; ++i) {
    if (i % 1000 == 0) p.op(op::kMark);
    const auto list = static_cast<uint32_t>(2 * i);
    p.integer(i).op(op::kEmptyList).put(list).integer(i).op(op::kAppend);
    p.get(list).op(op::kAppend).get(list).op(op::kTuple2).put(list + 1);
    if (i % 1000 == 999 || i == 2499) p.op(op::kSetItems);
  }
  p.str("later").op(op::kEmptyList).op(op::kMark).get(2 * 7 + 1).get(2 * 2100 + 1);
  p.op(op::kAppends).op(op::kSetItems);
  const std::string bytes = p.finish();

  RecordingStream stream;
  const Unpickled tree = unpickle(bytes, allow_any_global_streamed, "streamed", &stream);
  CHECK(stream.batches == 3);  // 1,000 + 1,000 + 500
  REQUIRE(stream.taken.size() == 5000);
  CHECK(stream.taken[2 * 2499] == "2499");
  CHECK(stream.taken[2 * 2499 + 1] == "tuple of 2");
  const dcpp::detail::PyObject* streamed = tree.root().find("streamed");
  REQUIRE(streamed != nullptr);
  CHECK(streamed->streamed);
  CHECK(streamed->items.empty());
  const dcpp::detail::PyObject* later = tree.root().find("later");
  REQUIRE(later != nullptr);
  REQUIRE(later->items.size() == 2);
  for (std::size_t j = 0; j < 2; ++j) {
    const dcpp::detail::PyObject& tuple = *later->items[j];
    REQUIRE(tuple.kind == PyKind::kTuple);
    REQUIRE(tuple.items.size() == 2);
    const dcpp::detail::PyObject* list = tuple.items[0];
    CHECK(tuple.items[1] == list);  // still one list
    REQUIRE(list->kind == PyKind::kList);
    REQUIRE(list->items.size() == 2);
    CHECK(list->items[0]->int_value == (j == 0 ? 7 : 2100));
    CHECK(list->items[1] == list);  // still a cycle
  }
  // Without the stream, the same tree with the entries in it.
  const Unpickled whole = unpickle(bytes, allow_any_global_streamed, "streamed");
  CHECK(whole.root().find("streamed")->dict_size() == 2500);
}

TEST_CASE("a batch that changes an older object, closes by another opcode or is read back from "
          "the memo abandons the stream; without one, the pickle reads",
          "[pickle]") {
  std::vector<std::pair<std::string, std::string>> cases;
  {
    RawPickle p;  // {"pre": [], "streamed": {1: pre after appending 5 to it}}
    p.op(op::kEmptyDict).op(op::kMark).str("pre").op(op::kEmptyList).put(0);
    p.str("streamed").op(op::kEmptyDict).op(op::kMark).integer(1).get(0).integer(5);
    p.op(op::kAppend).op(op::kSetItems).op(op::kSetItems);
    cases.emplace_back("appends to an older list", p.finish());
  }
  {
    RawPickle p;  // {"pre": x, "streamed": {}} where x = SimpleObject(), built inside the batch
    p.op(op::kEmptyDict).op(op::kMark).str("pre").str("mod").str("Cls").op(op::kStackGlobal);
    p.op(op::kEmptyTuple).op(op::kNewObj).put(0).str("streamed").op(op::kEmptyDict);
    p.op(op::kMark).integer(1).get(0).op(op::kEmptyDict).op(op::kBuild).op(op::kSetItems);
    p.op(op::kSetItems);
    cases.emplace_back("builds an older object", p.finish());
  }
  {
    RawPickle p;  // {"streamed": {}, (1, 2): "x"}: the tuple's MARK follows the dict
    p.op(op::kEmptyDict).op(op::kMark).str("streamed").op(op::kEmptyDict).op(op::kMark);
    p.integer(1).integer(2).op(op::kTuple).str("x").op(op::kSetItems);
    cases.emplace_back("closed by TUPLE", p.finish());
  }
  {
    RawPickle p;  // {"streamed": d, "again": d}
    p.op(op::kEmptyDict).op(op::kMark).str("streamed").op(op::kEmptyDict).put(0);
    p.str("again").get(0).op(op::kSetItems);
    cases.emplace_back("read back from the memo", p.finish());
  }
  for (const auto& [name, bytes] : cases) {
    SECTION(name) {
      RecordingStream stream;
      CHECK_THROWS_AS(unpickle(bytes, allow_any_global_streamed, name, &stream), StreamAbandoned);
      CHECK(unpickle(bytes, allow_any_global_streamed, name).root().kind == PyKind::kDict);
    }
  }
}
