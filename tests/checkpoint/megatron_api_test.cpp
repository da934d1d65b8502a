// Megatron-Core's dist_checkpointing functions in C++ (megatron.h, megatron_load.h,
// megatron_state_dict.h) against what Megatron's own code returned for its fixture (the manifest
// lists what its load_tensors_metadata and load_sharded_metadata gave), and its StrictHandling.

#include "dcpp_test.h"
#include "rank_threads.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/checkpoint/megatron.h>
#include <dcpp/core/checkpoint_error.h>
#include <dcpp/state_dict/python_object.h>
#include <dcpp/state_dict/whole_value.h>
#include <dcpp/storage/checkpoint_layout.h>
#include <dcpp/storage/megatron_storage.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <set>

namespace {

namespace fs = std::filesystem;
using dcpp::megatron::StrictHandling;

nlohmann::json manifest() {
  std::ifstream in(dcpp::test::megatron_fixture("mcore_tp2.manifest.json"));
  REQUIRE(in.good());
  return nlohmann::json::parse(in);
}

fs::path fixture() { return dcpp::test::megatron_fixture("mcore_tp2"); }

// The fixture's Megatron keys, as its load_sharded_metadata's values' `.key` (the common state
// left out, as Megatron's load leaves it out).
std::set<std::string> megatron_keys() {
  std::set<std::string> keys;
  for (const auto& [key, tensor] : dcpp::megatron::load_tensors_metadata(fixture())) {
    keys.insert(key);
  }
  for (const auto& [unique_key, object] :
       dcpp::megatron::load_sharded_metadata(fixture()).objects) {
    if (object.key != "common_state") keys.insert(object.key);
  }
  return keys;
}

dcpp::StateDict embedding_and(const std::string& extra) {
  dcpp::StateDict state;
  state.insert("embedding.word_embeddings.weight", at::zeros({16, 8}));
  if (!extra.empty()) state.insert(extra, at::ones({2}));
  return state;
}

bool still_zero(const dcpp::StateDict& state) {
  return state.at("embedding.word_embeddings.weight").tensor().eq(0).all().item<bool>();
}

}  // namespace

TEST_CASE("Megatron's metadata functions list what Megatron's own listed for its checkpoint") {
  const nlohmann::json expected = manifest();
  std::set<std::string> tensors;
  for (const auto& [key, tensor] : dcpp::megatron::load_tensors_metadata(fixture())) {
    INFO(key);
    tensors.insert(key);
    CHECK(tensor.key == key);
    CHECK(tensor.global_shape ==
          expected["sharded_tensors"][key]["global_shape"].get<std::vector<int64_t>>());
  }
  CHECK(tensors == expected["megatron_load_tensors_metadata_keys"].get<std::set<std::string>>());

  const dcpp::megatron::ShardedMetadata sharded = dcpp::megatron::load_sharded_metadata(fixture());
  std::set<std::string> all;
  for (const auto& [key, tensor] : sharded.tensors) all.insert(key);
  for (const auto& [key, object] : sharded.objects) all.insert(key);
  CHECK(all == expected["megatron_load_sharded_metadata_keys"].get<std::set<std::string>>());
  const auto& rng = sharded.objects.at("rng_state/shard_0.1_1.2");
  CHECK(rng.key == "rng_state");
  CHECK(rng.global_offset == std::vector<int64_t>{0, 1});
  CHECK(rng.global_shape == std::vector<int64_t>{1, 2});

  // load_plain_tensors: every tensor whole, as a load of each whole gives it.
  const dcpp::StateDict plain = dcpp::megatron::load_plain_tensors(fixture());
  CHECK(plain.size() == tensors.size());
  dcpp::StateDict whole;
  for (const auto& [key, tensor] : sharded.tensors) {
    whole.insert(key, at::zeros(tensor.global_shape, at::TensorOptions().dtype(tensor.dtype)));
  }
  dcpp::load(whole, fixture());
  for (const auto& item : whole) {
    INFO(item.key);
    CHECK(dcpp::test::bitwise_equal(plain.at(item.key).tensor(), item.value.tensor()));
  }

  // A directory that is DCP's, not Megatron's.
  CHECK_THROWS_WITH(dcpp::megatron::load_tensors_metadata(dcpp::test::fixture("single_rank_mixed")),
                    Catch::Contains("is not a Megatron-Core checkpoint"));
}

TEST_CASE(
    "a ShardedObject's key is read as Megatron reads it, and refused when it does not parse") {
  const auto parsed = dcpp::megatron::parse_sharded_object_key("train_state/shard_1_2");
  CHECK(parsed.key == "train_state");
  CHECK(parsed.global_offset == std::vector<int64_t>{1});
  CHECK(parsed.global_shape == std::vector<int64_t>{2});
  // Megatron's backward-compatible reading: a shape one dimension short ends in -1.
  CHECK(dcpp::megatron::parse_sharded_object_key("x/shard_0.1_2").global_shape ==
        std::vector<int64_t>{2, -1});
  for (const std::string bad : {"a/b/shard_0_1", "no_slash", "x/shard_0_1_2", "x/shard_a_1",
                                "x/shard__1", "x/piece_0_1", "x/shard_0.._1", "x/shard_0_"}) {
    INFO(bad);
    const dcpp::CheckpointError error =
        dcpp::test::error_of([&] { dcpp::megatron::parse_sharded_object_key(bad); });
    CHECK(error.kind() == dcpp::ErrorKind::kCorrupt);
    CHECK_THAT(error.what(), Catch::Contains("the object key '" + bad + "'"));
  }

  // In a checkpoint: load_sharded_metadata names the checkpoint and the key.
  dcpp::test::TempDir dir;
  dcpp::StateDict state;
  state.insert("w", at::ones({2}));
  state.insert("rng_state/shard_x_1", 5);
  dcpp::megatron::add_common_state(state, {});
  // (Megatron's validate_access_integrity refuses it: unchecked, to read it.)
  dcpp::save(state, *dcpp::make_megatron_writer(
                        dir / "ckpt",
                        dcpp::MegatronWriterOptions().with_validate_access_integrity(false)));
  CHECK_THROWS_WITH(
      dcpp::megatron::load_sharded_metadata(dir / "ckpt"),
      Catch::Contains((dir / "ckpt").string() + ": the object key 'rng_state/shard_x_1'"));
}

TEST_CASE("StrictHandling: each of Megatron's eight modes on one process") {
  using Mode = StrictHandling;
  SECTION("kAssumeOkUnexpected: the load fails on the unexpected key") {
    dcpp::StateDict state = embedding_and("bogus.weight");
    CHECK_THROWS_WITH(dcpp::megatron::load(state, fixture(), Mode::kAssumeOkUnexpected),
                      Catch::Contains("bogus.weight"));
  }
  SECTION("kRaiseUnexpected and kRaiseAll: thrown before anything is read") {
    dcpp::StateDict state = embedding_and("bogus.weight");
    const dcpp::CheckpointError error = dcpp::test::error_of(
        [&] { dcpp::megatron::load(state, fixture(), Mode::kRaiseUnexpected); });
    CHECK(error.kind() == dcpp::ErrorKind::kNotFound);
    CHECK_THAT(error.what(), Catch::Contains("the checkpoint lacks (unexpected): 'bogus.weight'"));
    CHECK(still_zero(state));
    // Every key requested but one: kRaiseAll names what no rank requests.
    dcpp::StateDict everything_but_rng = dcpp::megatron::load_plain_tensors(fixture());
    for (const auto& [key, object] : dcpp::megatron::load_sharded_metadata(fixture()).objects) {
      if (object.key != "rng_state")
        everything_but_rng.insert(key, dcpp::whole_value(c10::IValue()));
    }
    CHECK_THROWS_WITH(dcpp::megatron::load(everything_but_rng, fixture(), Mode::kRaiseAll),
                      Catch::Contains("(missing, for all ranks): 'rng_state'"));
    everything_but_rng.insert("rng_state/shard_0.0_1.2", dcpp::whole_value(c10::IValue()));
    everything_but_rng.insert("rng_state/shard_0.1_1.2", dcpp::whole_value(c10::IValue()));
    const dcpp::megatron::MismatchedKeys none =
        dcpp::megatron::load(everything_but_rng, fixture(), Mode::kRaiseAll);
    CHECK(none.missing_keys.empty());
    CHECK(none.unexpected_keys.empty());
  }
  SECTION("kLog*, kIgnoreAll: the rest loads, nothing is returned") {
    for (const Mode mode : {Mode::kLogUnexpected, Mode::kLogAll, Mode::kIgnoreAll}) {
      dcpp::StateDict state = embedding_and("bogus.weight");
      const dcpp::megatron::MismatchedKeys keys = dcpp::megatron::load(state, fixture(), mode);
      CHECK(keys.missing_keys.empty());
      CHECK(keys.unexpected_keys.empty());
      CHECK_FALSE(still_zero(state));
      CHECK(state.at("bogus.weight").tensor().eq(1).all().item<bool>());  // left as it was
    }
  }
  SECTION("kReturnUnexpected and kReturnAll") {
    dcpp::StateDict state = embedding_and("bogus.weight");
    dcpp::megatron::MismatchedKeys keys =
        dcpp::megatron::load(state, fixture(), Mode::kReturnUnexpected);
    CHECK(keys.unexpected_keys == std::set<std::string>{"bogus.weight"});
    CHECK(keys.missing_keys.empty());
    CHECK_FALSE(still_zero(state));
    keys = dcpp::megatron::load(state, fixture(), Mode::kReturnAll);
    std::set<std::string> missing = megatron_keys();
    missing.erase("embedding.word_embeddings.weight");
    CHECK(keys.missing_keys == missing);
    CHECK(missing.count("rng_state") == 1);
    CHECK(keys.unexpected_keys == std::set<std::string>{"bogus.weight"});
  }
}

TEST_CASE("StrictHandling on 2 ranks: unexpected keys per rank, missing keys over both") {
  std::vector<dcpp::megatron::MismatchedKeys> found(2);
  std::vector<std::string> raised(2);
  dcpp::test::on_ranks(2, "megatron-strict", [&](int rank, const auto& group) {
    dcpp::StateDict state;
    if (rank == 0) {
      state = embedding_and("bogus.a");
    } else {
      state.insert("output_layer.weight", at::zeros({16, 8}));
    }
    const auto options = dcpp::LoadOptions().with_process_group(group);
    found[rank] = dcpp::megatron::load(state, fixture(), StrictHandling::kReturnAll, options);
    // One rank's unexpected key fails the load on both, naming it: none waits for the other.
    try {
      dcpp::megatron::load(state, fixture(), StrictHandling::kRaiseUnexpected, options);
    } catch (const dcpp::CheckpointError& e) {
      raised[rank] = e.what();
    }
  });
  for (const std::string& error : raised) {
    CHECK_THAT(error, Catch::Contains("rank 0"));
    CHECK_THAT(error, Catch::Contains("'bogus.a'"));
  }
  std::set<std::string> missing = megatron_keys();
  missing.erase("embedding.word_embeddings.weight");
  missing.erase("output_layer.weight");
  CHECK(found[0].missing_keys == missing);
  CHECK(found[1].missing_keys == missing);
  CHECK(found[0].unexpected_keys == std::set<std::string>{"bogus.a"});
  CHECK(found[1].unexpected_keys.empty());
}

TEST_CASE("remove_sharded_tensors rewrites the checkpoint without them, the rest as it was") {
  dcpp::test::TempDir dir;
  const fs::path copy = dir / "mcore_tp2";
  fs::copy(fixture(), copy);
  const std::set<std::string> old_files = [&] {
    std::set<std::string> names;
    for (const auto& entry : fs::directory_iterator(copy)) {
      names.insert(entry.path().filename().string());
    }
    return names;
  }();
  const dcpp::StateDict before = dcpp::megatron::load_plain_tensors(copy);

  const std::vector<std::string> removed =
      dcpp::megatron::remove_sharded_tensors(copy, "decoder.layers.mlp");
  CHECK(removed == std::vector<std::string>{"decoder.layers.mlp.linear_fc1.weight",
                                            "decoder.layers.mlp.linear_fc2.weight"});
  const dcpp::StateDict after = dcpp::megatron::load_plain_tensors(copy);
  CHECK(after.size() == before.size() - 2);
  for (const auto& item : after) {
    INFO(item.key);
    CHECK(dcpp::test::bitwise_equal(item.value.tensor(), before.at(item.key).tensor()));
  }
  CHECK(dcpp::megatron::load_common_state_dict(copy).at("iteration").value().toInt() == 100);
  CHECK(dcpp::megatron::load_sharded_metadata(copy).objects.size() == 9);
  CHECK(dcpp::test::read_file(copy / "metadata.json") ==
        dcpp::test::read_file(fixture() / "metadata.json"));
  for (const auto& entry : fs::directory_iterator(copy)) {  // Megatron's data files are gone
    const std::string name = entry.path().filename().string();
    CHECK((name == "metadata.json" || old_files.count(name) == 0 || name == ".metadata"));
  }

  // Nothing under the prefix, or the common state: refused, the checkpoint as it was.
  const std::string metadata = dcpp::test::read_file(copy / ".metadata");
  CHECK_THROWS_WITH(dcpp::megatron::remove_sharded_tensors(copy, "no.such"),
                    Catch::Contains("starts with 'no.such': nothing removed"));
  CHECK_THROWS_WITH(dcpp::megatron::remove_sharded_tensors(copy, "common"),
                    Catch::Contains("would remove common_state/shard_0_1"));
  CHECK(dcpp::test::read_file(copy / ".metadata") == metadata);
}

TEST_CASE("the common state compared across ranks, after Megatron's preprocessing hook") {
  std::vector<std::vector<int>> same(2), differing(2), preprocessed(2);
  dcpp::test::on_ranks(2, "megatron-common-check", [&](int rank, const auto& group) {
    dcpp::StateDict common;
    common.insert("iteration", 100);
    common.insert("args",
                  dcpp::python_object_value(dcpp::kNamespaceClass, {{"hidden_size", int64_t{8}}}));
    same[rank] = dcpp::megatron::common_state_disagreements(common, group);
    common.insert("step_time", 0.25 * (rank + 1));  // differs from rank to rank
    differing[rank] = dcpp::megatron::common_state_disagreements(common, group);
    preprocessed[rank] =
        dcpp::megatron::common_state_disagreements(common, group, [](const dcpp::StateDict& state) {
          dcpp::StateDict kept = state;
          kept.erase("step_time");
          return kept;
        });
  });
  for (int rank = 0; rank < 2; ++rank) {
    INFO("rank " << rank);
    CHECK(same[rank].empty());
    CHECK(differing[rank] == std::vector<int>{1});
    CHECK(preprocessed[rank].empty());
  }
  CHECK(dcpp::megatron::common_state_disagreements({}, {}).empty());  // one process
}

TEST_CASE("validate_access_integrity on load: one process must request every chunk once") {
  const fs::path dir = fixture();
  const at::Tensor whole = dcpp::megatron::load_plain_tensors(dir)
                               .at("embedding.word_embeddings.weight")
                               .tensor();  // [16, 8]
  const auto half_of_embedding = [&] {
    dcpp::StateDict state;
    state.insert("embedding.word_embeddings.weight",
                 dcpp::ShardedTensor::from_chunk_of(at::zeros({16, 8}), 0, 1, 2));
    return state;
  };

  // Half a tensor: refused before anything is read, naming the key; skipped, its rows load.
  dcpp::StateDict half = half_of_embedding();
  const dcpp::CheckpointError error = dcpp::test::error_of(
      [&] { dcpp::megatron::load(half, dir, StrictHandling::kAssumeOkUnexpected); });
  CHECK(error.kind() == dcpp::ErrorKind::kUsage);
  CHECK_THAT(error.what(), Catch::Contains("key 'embedding.word_embeddings.weight'"));
  CHECK_THAT(error.what(), Catch::Contains("cover 64 of the 128 elements"));
  CHECK_THAT(error.what(), Catch::Contains("AccessIntegrity::kSkip"));
  const auto rows_of = [](const dcpp::StateDict& state) {
    return state.at("embedding.word_embeddings.weight").sharded_tensor().local_shards()[0].tensor;
  };
  CHECK(rows_of(half).eq(0).all().item<bool>());
  for (const StrictHandling mode : {StrictHandling::kAssumeOkUnexpected, StrictHandling::kLogAll}) {
    dcpp::StateDict loaded = half_of_embedding();
    dcpp::megatron::load(loaded, dir, mode, {}, dcpp::megatron::AccessIntegrity::kSkip);
    CHECK(dcpp::test::bitwise_equal(rows_of(loaded), whole.slice(0, 8, 16)));
  }
  CHECK_THROWS_WITH(dcpp::megatron::load(half, dir, StrictHandling::kReturnAll),
                    Catch::Contains("cover 64 of the 128 elements"));

  // One shard of a ShardedObject of two: refused, naming the other; both: loaded.
  dcpp::StateDict rng;
  rng.insert("rng_state/shard_0.0_1.2", dcpp::whole_value(c10::IValue()));
  CHECK_THROWS_WITH(
      dcpp::megatron::load(rng, dir, StrictHandling::kAssumeOkUnexpected),
      Catch::Contains("no rank has the shard at (0, 1) of ShardedObject 'rng_state', of shape "
                      "(1, 2)"));
  dcpp::megatron::load(rng, dir, StrictHandling::kAssumeOkUnexpected, {},
                       dcpp::megatron::AccessIntegrity::kSkip);
  const auto loaded = [&](const std::string& key) {  // Megatron's [data], whole
    const c10::IValue* value = dcpp::whole_value_of(rng.at(key).value());
    return value && value->isList() && value->toListRef().size() == 1;
  };
  CHECK(loaded("rng_state/shard_0.0_1.2"));
  rng.insert("rng_state/shard_0.1_1.2", dcpp::whole_value(c10::IValue()));
  dcpp::megatron::load(rng, dir, StrictHandling::kAssumeOkUnexpected);
  CHECK(loaded("rng_state/shard_0.1_1.2"));
}

TEST_CASE(
    "validate_access_integrity on load over 2 ranks: replicas and halves pass, overlaps "
    "and disagreements fail on both") {
  const fs::path dir = fixture();
  const at::Tensor whole =
      dcpp::megatron::load_plain_tensors(dir).at("embedding.word_embeddings.weight").tensor();
  constexpr const char* kKey = "embedding.word_embeddings.weight";
  std::vector<bool> halves_equal(2), replicas_equal(2);
  std::vector<std::string> overlap(2), dtype(2);
  dcpp::test::on_ranks(2, "megatron-access", [&](int rank, const auto& group) {
    const auto options = dcpp::LoadOptions().with_process_group(group);
    // Each rank its half (tensor parallel), then both the whole tensor (data parallel replicas).
    dcpp::StateDict halves;
    halves.insert(kKey, dcpp::ShardedTensor::from_chunk_of(at::zeros({16, 8}), 0, rank, 2));
    dcpp::megatron::load(halves, dir, StrictHandling::kAssumeOkUnexpected, options);
    halves_equal[rank] =
        dcpp::test::bitwise_equal(halves.at(kKey).sharded_tensor().local_shards()[0].tensor,
                                  whole.slice(0, 8 * rank, 8 * rank + 8));
    dcpp::StateDict replicas;
    replicas.insert(kKey, at::zeros({16, 8}));
    dcpp::megatron::load(replicas, dir, StrictHandling::kReturnUnexpected, options);
    replicas_equal[rank] = dcpp::test::bitwise_equal(replicas.at(kKey).tensor(), whole);

    // Rows 0-7 and 4-11: overlapping, and rows 12-15 requested by no rank.
    dcpp::StateDict overlapping;
    const int64_t first = rank == 0 ? 0 : 4;
    overlapping.insert(kKey,
                       dcpp::ShardedTensor({16, 8}, {dcpp::Shard{at::zeros({8, 8}), {first, 0}}}));
    try {
      dcpp::megatron::load(overlapping, dir, StrictHandling::kAssumeOkUnexpected, options);
    } catch (const dcpp::CheckpointError& e) {
      overlap[rank] = e.what();
    }
    // One dtype on rank 0, another on rank 1.
    dcpp::StateDict typed;
    typed.insert(kKey, at::zeros({16, 8}, rank == 0 ? at::kFloat : at::kDouble));
    try {
      dcpp::megatron::load(typed, dir, StrictHandling::kLogAll, options);
    } catch (const dcpp::CheckpointError& e) {
      dtype[rank] = e.what();
    }
  });
  for (int rank = 0; rank < 2; ++rank) {
    INFO("rank " << rank);
    CHECK(halves_equal[rank]);
    CHECK(replicas_equal[rank]);
    CHECK_THAT(overlap[rank], Catch::Contains("key '" + std::string(kKey) +
                                              "': the chunk at "
                                              "offsets [4, 0] of sizes [8, 8] from rank 1 "
                                              "overlaps the chunk at offsets [0, 0]"));
    CHECK_THAT(dtype[rank], Catch::Contains("rank 1 a Double tensor of shape [16, 8]"));
  }
}
