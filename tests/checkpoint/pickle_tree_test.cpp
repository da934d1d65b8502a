// The unpickled tree's memory: equal ints and equal small tuples are one node, items live in
// storage the tree owns, and a large `.metadata` costs a bounded number of nodes and bytes a chunk
// (issue 62: read_metadata at 1,024 ranks took 3.8 GiB on every rank), while every value reads
// back exactly as it was written.

#include "dcpp_test.h"

#include "format/metadata_pickle.h"
#include "format/pickle/pickle_reader.h"
#include "format/pickle/pickle_writer.h"

#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

using namespace dcpp;
using namespace dcpp::detail;

namespace {

bool allow_all(std::string_view, std::string_view) { return true; }

/// Values that stress a direct-mapped cache: extremes, neighbours, multiples of large powers of
/// two (whose hashes differ in few bits) and random draws, each repeated at random.
std::vector<int64_t> awkward_ints(std::size_t count, uint32_t seed) {
  std::vector<int64_t> pool = {0,
                               1,
                               -1,
                               255,
                               256,
                               65535,
                               65536,
                               std::numeric_limits<int32_t>::min(),
                               std::numeric_limits<int32_t>::max(),
                               std::numeric_limits<int64_t>::min(),
                               std::numeric_limits<int64_t>::max()};
  std::mt19937_64 rng(seed);
  for (int shift = 12; shift < 63; ++shift) pool.push_back(int64_t{1} << shift);
  for (int i = 0; i < 3000; ++i) pool.push_back(static_cast<int64_t>(rng()));
  std::vector<int64_t> values(count);
  std::uniform_int_distribution<std::size_t> pick(0, pool.size() - 1);
  for (int64_t& v : values) v = pool[pick(rng)];
  return values;
}

Metadata fsdp_metadata(int ranks, int tensors) {
  Metadata m;
  for (int t = 0; t < tensors; ++t) {
    const std::string key = "model.layers." + std::to_string(t) + ".attention.wq.weight";
    TensorStorageMetadata tensor;
    tensor.properties.dtype = at::kFloat;
    tensor.size = {int64_t{8} * ranks, 64};
    for (int r = 0; r < ranks; ++r) {
      tensor.chunks.push_back({{int64_t{8} * r, 0}, {8, 64}});
      StorageInfo info;
      info.relative_path = "__" + std::to_string(r) + "_0.distcp";
      info.offset = int64_t{2048} * t;
      info.length = 2048;
      m.storage_data.emplace_back(MetadataIndex{key, std::vector<int64_t>{int64_t{8} * r, 0}, r},
                                  info);
    }
    m.state_dict_metadata.emplace_back(key, std::move(tensor));
  }
  return m;
}

}  // namespace

TEST_CASE("equal ints and tuples are shared, and every value reads back exactly", "[pickle]") {
  const std::vector<int64_t> ints = awkward_ints(100000, 62);
  // Tuples of 1 to 10 of those ints (sizes above 8 are never shared), and tuples of tuples.
  std::vector<std::vector<int64_t>> tuples;
  std::mt19937 rng(7);
  for (std::size_t i = 0; i + 10 < ints.size(); i += 1 + rng() % 10) {
    tuples.emplace_back(ints.begin() + static_cast<std::ptrdiff_t>(i),
                        ints.begin() + static_cast<std::ptrdiff_t>(i + 1 + rng() % 10));
    if (rng() % 3 == 0) tuples.push_back(tuples[rng() % tuples.size()]);  // an equal tuple again
  }
  PickleWriter writer(4);
  auto put_ints = [&](const std::vector<int64_t>& values) {
    writer.put_tuple(values.size(), [&] {
      for (const int64_t v : values) writer.put_int(v);
    });
  };
  writer.put_tuple(3, [&] {
    writer.put_list(ints.size(), [&](std::size_t i) { writer.put_int(ints[i]); });
    writer.put_list(tuples.size(), [&](std::size_t i) { put_ints(tuples[i]); });
    writer.put_list(tuples.size(), [&](std::size_t i) {  // ((t,),): a torch.Size's two tuples
      writer.put_tuple(1, [&] { put_ints(tuples[i]); });
    });
  });
  const std::string bytes = writer.finish();
  const Unpickled tree = unpickle(bytes, allow_all, "ints and tuples");

  const dcpp::detail::PyObject& root = tree.root();
  REQUIRE(root.kind == PyKind::kTuple);
  REQUIRE(root.items.size() == 3);
  const dcpp::detail::PyObject& int_list = *root.items[0];
  REQUIRE(int_list.items.size() == ints.size());
  for (std::size_t i = 0; i < ints.size(); ++i) {
    REQUIRE(int_list.items[i]->kind == PyKind::kInt);
    REQUIRE(int_list.items[i]->int_value == ints[i]);
  }
  auto require_tuple = [](const dcpp::detail::PyObject& tuple, const std::vector<int64_t>& values) {
    REQUIRE(tuple.kind == PyKind::kTuple);
    REQUIRE(tuple.items.size() == values.size());
    for (std::size_t j = 0; j < values.size(); ++j) {
      REQUIRE(tuple.items[j]->int_value == values[j]);
    }
  };
  for (std::size_t i = 0; i < tuples.size(); ++i) {
    require_tuple(*root.items[1]->items[i], tuples[i]);
    const dcpp::detail::PyObject& outer = *root.items[2]->items[i];
    REQUIRE(outer.items.size() == 1);
    require_tuple(*outer.items[0], tuples[i]);
  }

  // A chunk's offsets and sizes as a .metadata repeats them: 64 ranks' rows of 8 in 1,000 tensors,
  // each pickled as torch.Size's ((rows, columns),). 128,000 tuples and 256,000 ints written; 193
  // distinct tuples (two a Size) and 66 distinct ints read.
  PickleWriter sizes(4);
  sizes.put_list(64000, [&](std::size_t i) {
    const int64_t rank = static_cast<int64_t>(i % 64);
    sizes.put_tuple(2, [&] {
      for (const int64_t row : {8 * rank, int64_t{8}}) {
        sizes.put_tuple(1, [&] {
          sizes.put_tuple(2, [&] {
            sizes.put_int(row);
            sizes.put_int(i % 2 == 0 ? 0 : 4096);
          });
        });
      }
    });
  });
  const std::string size_bytes = sizes.finish();
  const Unpickled size_tree = unpickle(size_bytes, allow_all, "sizes");
  for (std::size_t i = 0; i < 64000; ++i) {
    const dcpp::detail::PyObject& pair = *size_tree.root().items[i];
    const int64_t column = i % 2 == 0 ? 0 : 4096;
    require_tuple(*pair.items[0]->items[0], {8 * static_cast<int64_t>(i % 64), column});
    require_tuple(*pair.items[1]->items[0], {8, column});
  }
  // Without sharing, 640,000 nodes; with it, the 64,000 pairs (each (a, b) holds two Sizes'
  // outer tuples, equal only for equal ranks and columns) and a few hundred more.
  CHECK(size_tree.node_count() < 1000 + 2 * 128);
}

TEST_CASE("a large .metadata unpickles in a bounded number of nodes and bytes a chunk",
          "[metadata]") {
  const int ranks = 64;
  const int tensors = 64;
  const Metadata m = fsdp_metadata(ranks, tensors);
  const std::string bytes = encode_metadata(m);
  const std::size_t chunks = std::size_t{ranks} * tensors;

  const Unpickled tree = unpickle(bytes, allow_all, "fsdp .metadata");
  // A chunk pickles as three objects (its ChunkStorageMetadata, MetadataIndex and _StorageInfo),
  // three state dicts, three torch.Size calls and two strings: 11 nodes. Without sharing, its 9
  // ints and 6 tuples made 26 nodes, and the tree 3.8 KiB a chunk with its item vectors.
  const double nodes_per_chunk = static_cast<double>(tree.node_count()) / chunks;
  const double bytes_per_chunk = static_cast<double>(tree.bytes_held()) / chunks;
  INFO(nodes_per_chunk << " nodes and " << bytes_per_chunk << " bytes a chunk");
  CHECK(nodes_per_chunk <= 11.5);
  CHECK(bytes_per_chunk <= 1200);

  // The values are the Metadata written.
  const Metadata decoded = decode_metadata(bytes, "fsdp .metadata");
  REQUIRE(decoded.storage_data.size() == m.storage_data.size());
  for (std::size_t i = 0; i < m.storage_data.size(); ++i) {
    REQUIRE(decoded.storage_data[i].first == m.storage_data[i].first);
    REQUIRE(decoded.storage_data[i].first.index == m.storage_data[i].first.index);
    REQUIRE(decoded.storage_data[i].second.relative_path == m.storage_data[i].second.relative_path);
    REQUIRE(decoded.storage_data[i].second.offset == m.storage_data[i].second.offset);
    REQUIRE(decoded.storage_data[i].second.length == m.storage_data[i].second.length);
  }
  REQUIRE(decoded.state_dict_metadata.size() == m.state_dict_metadata.size());
  for (std::size_t t = 0; t < m.state_dict_metadata.size(); ++t) {
    const auto& want = std::get<TensorStorageMetadata>(m.state_dict_metadata[t].second);
    const auto& got = std::get<TensorStorageMetadata>(decoded.state_dict_metadata[t].second);
    REQUIRE(decoded.state_dict_metadata[t].first == m.state_dict_metadata[t].first);
    REQUIRE(got.size == want.size);
    REQUIRE(got.chunks.size() == want.chunks.size());
    for (std::size_t c = 0; c < want.chunks.size(); ++c) {
      REQUIRE(got.chunks[c].offsets == want.chunks[c].offsets);
      REQUIRE(got.chunks[c].sizes == want.chunks[c].sizes);
    }
  }
}
