// Hostile pickles and `.metadata` files (docs/reliability.md, "Hostile input"): no code runs, and
// what the fuzz targets found is refused with a CheckpointError that says what is wrong.

#include "dcpp_test.h"

#include "format/byte_io.h"
#include "format/item_codec.h"
#include "format/metadata_pickle.h"
#include "format/pickle/pickle_reader.h"
#include "format/pickle/pickle_writer.h"
#include "format/pickle/torch_pickle.h"

#include <dcpp/core/checkpoint_error.h>

using dcpp::CheckpointError;
using namespace dcpp::detail;
namespace fs = std::filesystem;

namespace {

/// `module.name(argument)` as `pickle.dumps` writes it: GLOBAL (protocol 2) or STACK_GLOBAL
/// (protocol 4), then REDUCE.
std::string call_pickle(int protocol, const std::string& module, const std::string& name,
                        const std::string& argument) {
  PickleWriter w(protocol);
  w.put_global(module, name);
  w.put_tuple(1, [&] { w.put_str(argument); });
  w.reduce();
  return w.finish();
}

at::Tensor refuse_tensor(const TensorRef&) { throw std::runtime_error("no tensor expected"); }

/// `decode()` throws a CheckpointError that names `where` and the refused `global`, and says that
/// it was refused (dcpp runs no code), not that the bytes are malformed.
template <typename Decode>
void require_refused(Decode decode, const std::string& global, const std::string& where) {
  try {
    decode();
    FAIL("decoded a pickle that calls " << global);
  } catch (const CheckpointError& error) {
    const std::string message = error.what_without_backtrace();
    CHECK(error.kind() == dcpp::ErrorKind::kCorrupt);
    CHECK_THAT(message, Catch::Contains("refers to the Python global '" + global + "'"));
    CHECK_THAT(message, Catch::Contains("without running any of it"));
    CHECK_THAT(message, Catch::Contains("runs code") || Catch::Contains("does not load"));
    CHECK_THAT(message, Catch::Contains(where));
    CHECK_THAT(message, !Catch::Contains("malformed"));
  }
}

bool allow_everything(std::string_view, std::string_view) { return true; }

/// The bytes of a string literal, NULs included.
template <std::size_t N>
std::string bytes(const char (&literal)[N]) {
  return std::string(literal, N - 1);
}

}  // namespace

TEST_CASE("pickles that would run code are refused by every decoder with the global named") {
  dcpp::test::TempDir dir;
  const std::string marker = (dir / "ran").string();
  const std::pair<std::string, std::string> globals[] = {
      {"os", "system"},          {"posix", "system"},  {"builtins", "eval"},
      {"__builtin__", "eval"},   {"builtins", "exec"}, {"subprocess", "Popen"},
      {"builtins", "__import__"}};
  for (const auto& [module, name] : globals) {
    for (int protocol : {2, 4}) {
      INFO(module << "." << name << ", protocol " << protocol);
      const std::string pickle = call_pickle(protocol, module, name, "touch " + marker);
      const std::string global = module + "." + name;
      require_refused([&] { decode_value_pickle(pickle, refuse_tensor, "file f, key 'k'"); },
                      global, "file f, key 'k'");
      require_refused([&] { decode_tensor_pickle(pickle, "file f, key 'k'"); }, global,
                      "file f, key 'k'");
      require_refused([&] { decode_metadata(pickle, "ckpt/.metadata"); }, global, "ckpt/.metadata");
    }
  }
  REQUIRE_FALSE(fs::exists(marker));
}

TEST_CASE("a global is only recorded and never called; one that runs code is refused anyway") {
  // With every global let through, a call of any global is a description of the call.
  dcpp::test::TempDir dir;
  const std::string command = "touch " + (dir / "ran").string();
  const std::string pickle = call_pickle(2, "mytools", "touch", command);
  const Unpickled tree = unpickle(pickle, allow_everything, "p");  // it views `pickle`
  const dcpp::detail::PyObject& root = tree.root();
  REQUIRE(root.kind == PyKind::kReduce);
  REQUIRE(root.callable().is_global("mytools", "touch"));
  REQUIRE(root.args().items.size() == 1);
  REQUIRE(root.args().items[0]->text == command);
  // A global that runs code is refused whatever the caller's allowlist says.
  const std::string os_system = call_pickle(2, "os", "system", command);
  require_refused([&] { unpickle(os_system, allow_everything, "p"); }, "os.system", "p");
  REQUIRE_FALSE(fs::exists(dir / "ran"));
  // The data.pkl decoders turn a recorded call of an allowed global they do not expect into an
  // error: torch._utils._rebuild_tensor_v2 with arguments that are not a tensor's.
  PickleWriter w(2);
  w.put_global("torch._utils", "_rebuild_tensor_v2");
  w.put_tuple(1, [&] { w.put_str("anything"); });
  w.reduce();
  const std::string rebuild = w.finish();
  REQUIRE_THROWS_WITH(decode_tensor_pickle(rebuild, "key 'w'"),
                      Catch::Contains("_rebuild_tensor_v2 with 1 arguments"));
}

TEST_CASE("opcodes that import or call outside the allowlist are not implemented") {
  const auto refused = [](const std::string& pickle, const std::string& message) {
    INFO(message);
    REQUIRE_THROWS_WITH(decode_value_pickle(pickle, refuse_tensor, "key 'k'"),
                        Catch::Contains(message) && Catch::Contains("key 'k'"));
  };
  // INST: MARK args INST 'os\nsystem\n' imports and calls in one opcode.
  refused(bytes("\x80\x02(X\x02\x00\x00\x00lsios\nsystem\n."),
          "(opcode 0x69 'i'): unsupported opcode");
  // OBJ: MARK class args OBJ, with a class on the allowlist.
  refused("\x80\x02(ccollections\nOrderedDict\no.", "(opcode 0x6f 'o'): unsupported opcode");
  // EXT1: a global from the copyreg extension registry.
  refused(bytes("\x80\x02\x82\x01."), "(opcode 0x82): unsupported opcode");
  // PERSID (text persistent id) and the protocol 0 INT.
  refused("\x80\x02Pstorage\n.", "(opcode 0x50 'P'): unsupported opcode");
}

TEST_CASE("a .metadata whose planner_data pads a list without bound is refused") {
  // Found by the metadata fuzz target: load_from_keys rebuilds lists along planner_data, padding
  // them with None up to the index a path names (DCP's set_element), so one index of 2^40 in a
  // 1.5 KB file asked for terabytes.
  dcpp::Metadata m;
  m.state_dict_metadata.emplace_back("l.0", dcpp::BytesStorageMetadata{});
  m.planner_data.emplace_back("l.0", dcpp::ObjectPath{std::string("l"), int64_t{1} << 40});
  REQUIRE_THROWS_WITH(decode_metadata(encode_metadata(m), "ckpt/.metadata"),
                      Catch::Contains("ckpt/.metadata") &&
                          Catch::Contains("index 1099511627776 of the list 'l'") &&
                          Catch::Contains("more data than the file's size allows"));
  // Found by the metadata fuzz target's 10-million run: index 524654 in a 6 KB file decoded, and
  // planning the load then took 0.8 GB and 30 s. Slots are charged what a load spends on them.
  m.planner_data[0].second = dcpp::ObjectPath{std::string("l"), int64_t{1000000}};
  REQUIRE_THROWS_WITH(decode_metadata(encode_metadata(m), "ckpt/.metadata"),
                      Catch::Contains("index 1000000 of the list 'l'"));
  m.planner_data[0].second = dcpp::ObjectPath{std::string("l"), int64_t{-1}};
  REQUIRE_THROWS_WITH(decode_metadata(encode_metadata(m), "ckpt/.metadata"),
                      Catch::Contains("planner_data['l.0'] holds the negative list index -1"));

  // A real list of 20000 items, each with its own entry, decodes: every list is charged its length
  // once, not once per item.
  dcpp::Metadata list;
  for (int64_t i = 0; i < 20000; ++i) {
    const std::string key = "opt.groups." + std::to_string(i) + ".lr";
    list.state_dict_metadata.emplace_back(key, dcpp::BytesStorageMetadata{});
    list.planner_data.emplace_back(
        key, dcpp::ObjectPath{std::string("opt"), std::string("groups"), i, std::string("lr")});
  }
  const dcpp::Metadata decoded = decode_metadata(encode_metadata(list), "ckpt/.metadata");
  REQUIRE(decoded.planner_data.size() == 20000);
  REQUIRE(std::get<int64_t>(decoded.planner_data.back().second[2]) == 19999);
}

TEST_CASE("a .metadata chunk outside its tensor or a tensor too large to address is refused") {
  // Before, a chunk's offsets + sizes past int64 overflowed (undefined behaviour) where the load
  // planner intersects chunks, and a size whose bytes overflow int64 made libtorch throw c10::Error
  // rather than CheckpointError when load_from_keys allocated it.
  dcpp::TensorStorageMetadata t;
  t.properties.dtype = at::kFloat;
  t.size = {4, 6};
  t.chunks = {{{0, 0}, {2, 6}}, {{2, 0}, {2, 6}}};
  dcpp::Metadata m;
  m.state_dict_metadata.emplace_back("w", t);
  REQUIRE(decode_metadata(encode_metadata(m), "f").state_dict_metadata.size() == 1);

  const int64_t huge = int64_t{1} << 62;
  for (const dcpp::ChunkStorageMetadata& chunk :
       {dcpp::ChunkStorageMetadata{{2, 0}, {3, 6}}, dcpp::ChunkStorageMetadata{{5, 0}, {0, 6}},
        dcpp::ChunkStorageMetadata{{huge, 0}, {huge, 6}}}) {
    auto& stored = std::get<dcpp::TensorStorageMetadata>(m.state_dict_metadata[0].second);
    stored.chunks = {chunk};
    REQUIRE_THROWS_WITH(decode_metadata(encode_metadata(m), "ckpt/.metadata"),
                        Catch::Contains("ckpt/.metadata") &&
                            Catch::Contains("state_dict_metadata['w'] has a chunk at offsets [") &&
                            Catch::Contains("reaches outside the tensor's size [4, 6]"));
  }
  // An empty chunk at the end of a dimension is inside.
  std::get<dcpp::TensorStorageMetadata>(m.state_dict_metadata[0].second).chunks = {
      {{4, 0}, {0, 6}}};
  REQUIRE_NOTHROW(decode_metadata(encode_metadata(m), "f"));

  t.size = {int64_t{1} << 31, int64_t{1} << 31};  // 2^62 elements of 4 bytes
  t.chunks = {};
  m.state_dict_metadata[0].second = t;
  REQUIRE_THROWS_WITH(decode_metadata(encode_metadata(m), "ckpt/.metadata"),
                      Catch::Contains("state_dict_metadata['w'] has the size [2147483648, "
                                      "2147483648], too large for a tensor to address"));
  t.properties.dtype = at::kByte;  // 2^62 bytes: addressable
  m.state_dict_metadata[0].second = t;
  REQUIRE_NOTHROW(decode_metadata(encode_metadata(m), "f"));
}

TEST_CASE("hostile names in error messages are escaped and never cut short") {
  // A NUL would end what() (a C string) there; an escape sequence would drive the terminal that
  // shows the message.
  const std::string pickle = call_pickle(2, std::string("o\0s", 3), "sys\x1b[2Jtem", "ls");
  try {
    decode_tensor_pickle(pickle, "key 'k'");
    FAIL("decoded");
  } catch (const CheckpointError& error) {
    const std::string message = error.what();
    REQUIRE_THAT(message, Catch::Contains("global 'o\\x00s.sys\\x1b[2Jtem'"));
    REQUIRE(message.find('\x1b') == std::string::npos);
  }
  dcpp::Metadata m;
  m.state_dict_metadata.emplace_back("w\x1b[2J", dcpp::BytesStorageMetadata{});
  m.state_dict_metadata.emplace_back("w\x1b[2J", dcpp::BytesStorageMetadata{});
  REQUIRE_THROWS_WITH(decode_metadata(encode_metadata(m), "ckpt/.metadata"),
                      Catch::Contains("state_dict_metadata has the key 'w\\x1b[2J' twice"));
}

TEST_CASE("an empty box of an empty tensor reads as nothing") {
  // Found by the item fuzz target (UBSan): the partial read of a box with no element passed the
  // empty destination's null data pointer to memcpy, which is undefined even for 0 bytes.
  MemorySink sink;
  write_tensor_item(sink, at::empty({2, 0}));
  const MemorySource source(sink.buffer(), "file f, key 'e'");
  TensorReadRequest request;
  request.dest = at::empty({1, 0});
  request.storage_offsets = {1, 0};
  request.lengths = {1, 0};
  request.expected_dtype = at::kFloat;
  request.expected_chunk_sizes = {2, 0};
  REQUIRE(request.dest.data_ptr() == nullptr);
  read_tensor_item(source, request, /*verify_crc=*/true);
  char nothing = 'x';
  source.read(0, nullptr, 0);
  source.read(sink.buffer().size(), &nothing, 0);
  REQUIRE(nothing == 'x');
}
