// A rank's checkpoint in the memory tier (storage/internal/storage/memory_step.h): what a save
// without collectives writes, laid out in a memory slot, read back bit for bit through the
// ordinary load planner, several ranks' steps merged and resharded, and payloads that do not hold
// together refused with errors naming the region.

#include "dcpp_test.h"

#include "storage/memory_payload.h"

#include <dcpp/storage/memory_step.h>

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/state_dict/sharded_tensor.h>

#include <unistd.h>

#include <string>
#include <vector>

using dcpp::MemorySlots;
using dcpp::MemoryStep;
using dcpp::MemoryStepReader;
using dcpp::MemoryStepWriter;
using dcpp::StateDict;

namespace {

// Rank `rank`'s slots under a job name of this test process's own, removed when the test ends.
struct RankSlots {
  explicit RankSlots(int rank, const std::string& what)
      : slots("memstep-" + what + "-" + std::to_string(::getpid()), rank, 64 << 20) {
    slots.release();
  }
  ~RankSlots() { slots.release(); }
  MemorySlots slots;
};

dcpp::SaveOptions alone(int rank) {
  return dcpp::SaveOptions().with_use_collectives(false).with_rank(rank);
}

// Saves `state` as rank `rank` of `world` into `slots` as `step`.
void save_step(MemorySlots& slots, const StateDict& state, int rank, int world, int64_t step) {
  MemoryStepWriter writer(slots, step, "save-" + std::to_string(step), world,
                          "{\"step\": " + std::to_string(step) + "}");
  dcpp::save(state, writer, alone(rank));
  REQUIRE(writer.slot() >= 0);
}

// A state of several dtypes, a strided tensor, an empty one and values; `target`: the same
// structure with other contents, to load into.
StateDict mixed_state(bool target = false) {
  StateDict inner;
  inner.insert("bf16", at::randn({5, 3}).to(at::kBFloat16));
  inner.insert("flags", at::rand({17}) > 0.5);
  inner.insert("empty", at::zeros({0, 4}));
  inner.insert("name", std::string(target ? "" : "layer"));
  StateDict state;
  state.insert("transposed", at::randn({6, 9}).t());  // not contiguous
  state.insert("ids", target ? at::zeros({43}, at::kLong) : at::arange(-3, 40, at::kLong));
  state.insert("inner", inner);
  state.insert("step", target ? 0 : 1234);
  return state;
}

// mixed_state's values of `loaded` equal `saved`'s, bit for bit.
void require_mixed_equal(const StateDict& loaded, const StateDict& saved) {
  for (const char* key : {"transposed", "ids"}) {
    INFO(key);
    CHECK(dcpp::test::bitwise_equal(loaded.at(key).tensor(), saved.at(key).tensor()));
  }
  for (const char* key : {"bf16", "flags", "empty"}) {
    INFO(key);
    CHECK(dcpp::test::bitwise_equal(loaded.at("inner").dict().at(key).tensor(),
                                    saved.at("inner").dict().at(key).tensor()));
  }
  CHECK(loaded.at("step").value() == saved.at("step").value());
  CHECK(loaded.at("inner").dict().at("name").value() ==
        saved.at("inner").dict().at("name").value());
}

// Rows [begin, end) of w (13 x 5) as rank `rank` holds them, and a tensor of its own.
at::Tensor global_w() { return at::arange(13 * 5, at::kDouble).reshape({13, 5}).cos(); }

StateDict rows_of(int64_t begin, int64_t end, const at::Tensor& w) {
  StateDict state;
  state.insert("w",
               dcpp::ShardedTensor({13, 5}, {{w.narrow(0, begin, end - begin).clone(), {begin, 0}}},
                                   at::kDouble));
  return state;
}

}  // namespace

TEST_CASE("a rank's memory step reads back bit for bit, with its manifest") {
  RankSlots rank(2, "mixed");
  const StateDict saved = mixed_state();
  save_step(rank.slots, saved, 2, 4, 7);
  auto steps = rank.slots.complete_steps();
  REQUIRE(steps.size() == 1);
  CHECK(steps[0].step == 7);
  MemoryStepReader reader({steps[0]});
  CHECK(reader.manifests().at(2) == "{\"step\": 7}");
  StateDict loaded = mixed_state(/*target=*/true);
  dcpp::load(loaded, reader);
  require_mixed_equal(loaded, saved);

  // A second step goes to the other slot; both read back, newest first.
  StateDict next = mixed_state();
  save_step(rank.slots, next, 2, 4, 8);
  steps = rank.slots.complete_steps();
  REQUIRE(steps.size() == 2);
  CHECK(steps[0].step == 8);
  CHECK(steps[1].step == 7);
  StateDict older = mixed_state(/*target=*/true);
  MemoryStepReader older_reader({steps[1]});
  dcpp::load(older, older_reader);
  require_mixed_equal(older, saved);
}

TEST_CASE("three ranks' memory steps merge and reshard onto two") {
  const at::Tensor w = global_w();
  const int64_t bounds[] = {0, 5, 9, 13};
  std::vector<std::unique_ptr<RankSlots>> ranks;
  std::vector<MemoryStep> steps;
  for (int r = 0; r < 3; ++r) {
    ranks.push_back(std::make_unique<RankSlots>(r, "reshard"));
    save_step(ranks.back()->slots, rows_of(bounds[r], bounds[r + 1], w), r, 3, 11);
    steps.push_back(*ranks.back()->slots.newest());
  }
  // Two ranks of a smaller job: rows [0, 7) and [7, 13), each read from the steps that hold them.
  for (const auto& [begin, end] : {std::pair<int64_t, int64_t>{0, 7}, {7, 13}}) {
    StateDict target = rows_of(begin, end, at::zeros({13, 5}, at::kDouble));
    MemoryStepReader reader(steps);
    dcpp::load(target, reader);
    const auto& shard = target.at("w").sharded_tensor().local_shards().at(0).tensor;
    CHECK(dcpp::test::bitwise_equal(shard, w.narrow(0, begin, end - begin)));
  }
}

TEST_CASE("a memory step's payload that does not hold together is refused, naming the region") {
  RankSlots rank(0, "hostile");
  save_step(rank.slots, mixed_state(), 0, 1, 3);
  const MemoryStep step = *rank.slots.newest();
  const std::string good(step.bytes);
  const auto refusal = [&](std::string bytes) {
    return dcpp::test::error_of([&] { dcpp::detail::decode_memory_payload(bytes, "region-x"); });
  };
  std::string truncated = good.substr(0, good.size() - 1);
  dcpp::CheckpointError error = refusal(truncated);
  CHECK(error.kind() == dcpp::ErrorKind::kCorrupt);
  CHECK_THAT(error.what(), Catch::Contains("region-x"));
  std::string lying = good;
  lying[24] = '\xff';  // the manifest's size
  CHECK(refusal(lying).kind() == dcpp::ErrorKind::kCorrupt);
  CHECK(refusal(good.substr(0, 20)).kind() == dcpp::ErrorKind::kCorrupt);
  std::string metadata = good;
  metadata[48 + 13] ^= 0x5a;  // inside the pickled metadata, past the 13-byte manifest
  CHECK(refusal(metadata).kind() == dcpp::ErrorKind::kCorrupt);
}

TEST_CASE("a memory step is saved without collectives") {
  RankSlots rank(0, "collective");
  MemoryStepWriter writer(rank.slots, 1, "s", 1, "{}");
  const dcpp::CheckpointError error = dcpp::test::error_of([&] { writer.set_up(0, true); });
  CHECK(error.kind() == dcpp::ErrorKind::kUsage);
  CHECK_FALSE(rank.slots.newest().has_value());
}

TEST_CASE("memory steps written as a DCP checkpoint load resharded, bit for bit") {
  const at::Tensor w = global_w();
  const int64_t bounds[] = {0, 5, 9, 13};
  std::vector<std::unique_ptr<RankSlots>> ranks;
  std::vector<MemoryStep> steps;
  for (int r = 0; r < 3; ++r) {
    ranks.push_back(std::make_unique<RankSlots>(r, "todisk"));
    StateDict state = rows_of(bounds[r], bounds[r + 1], w);
    state.insert("step", 17);
    state.insert("own_" + std::to_string(r), at::full({3}, r, at::kInt));
    save_step(ranks.back()->slots, state, r, 3, 17);
    steps.push_back(*ranks.back()->slots.newest());
  }
  dcpp::test::TempDir dir;
  const dcpp::Metadata metadata =
      dcpp::write_memory_steps_as_checkpoint(steps, dir / "ckpt", /*sync_files=*/false);
  CHECK(metadata.state_dict_metadata.size() == 5);
  CHECK(std::filesystem::exists(dir / "ckpt" / ".metadata"));
  for (int r = 0; r < 3; ++r) {
    CHECK(std::filesystem::exists(dir / "ckpt" / ("__" + std::to_string(r) + "_0.distcp")));
  }
  // One process reads it all, as a checkpoint of any save.
  StateDict whole;
  whole.insert("w", at::zeros({13, 5}, at::kDouble));
  whole.insert("step", 0);
  for (int r = 0; r < 3; ++r) whole.insert("own_" + std::to_string(r), at::zeros({3}, at::kInt));
  dcpp::load(whole, dir / "ckpt");
  CHECK(dcpp::test::bitwise_equal(whole.at("w").tensor(), w));
  CHECK(whole.at("step").value().toInt() == 17);
  for (int r = 0; r < 3; ++r) {
    CHECK(dcpp::test::bitwise_equal(whole.at("own_" + std::to_string(r)).tensor(),
                                    at::full({3}, r, at::kInt)));
  }
  // Its checksum file covers every item, as any save's: one changed byte is named.
  REQUIRE(std::filesystem::exists(dir / "ckpt" / ".checksums"));
  const std::filesystem::path data = dir / "ckpt" / "__1_0.distcp";
  std::string bytes = dcpp::test::read_file(data);
  const at::Tensor rows = w.slice(0, bounds[1], bounds[2]).contiguous();
  const size_t payload = bytes.find(
      std::string(static_cast<const char*>(rows.data_ptr()), static_cast<size_t>(rows.nbytes())));
  REQUIRE(payload != std::string::npos);  // rank 1's rows of w, as stored
  bytes[payload + 3] = static_cast<char>(bytes[payload + 3] ^ 0x10);
  dcpp::test::write_file(data, bytes);
  try {
    dcpp::load(whole, dir / "ckpt");
    FAIL("a changed byte of a flushed memory step was loaded");
  } catch (const dcpp::CheckpointError& error) {
    CHECK(error.kind() == dcpp::ErrorKind::kCorrupt);
    CHECK_THAT(std::string(error.what()), Catch::Contains("the checksum file records"));
  }
}

TEST_CASE("a series of memory steps through one cache reuses what did not change, and only that") {
  RankSlots rank(0, "cache");
  dcpp::MemoryStepCache cache;
  const auto save_cached = [&](const StateDict& state, int64_t step) {
    MemoryStepWriter writer(rank.slots, step, "save-" + std::to_string(step), 1, "{}", &cache);
    dcpp::save(state, writer, alone(0));
  };
  const auto read_back = [&](StateDict target) {
    MemoryStepReader reader({*rank.slots.newest()});
    dcpp::load(target, reader);
    return target;
  };
  StateDict saved = mixed_state();
  save_cached(saved, 1);
  CHECK(cache.pickled_metadata() == 1);
  CHECK(cache.reused_metadata() == 0);

  // New tensor contents and a new value of the same pickled size: the Metadata is reused; the
  // value reads back as saved now, not as cached.
  StateDict next = mixed_state();
  next.insert_or_assign("step", int64_t{4321});
  save_cached(next, 2);
  CHECK(cache.reused_metadata() == 1);
  StateDict loaded = read_back(mixed_state(/*target=*/true));
  require_mixed_equal(loaded, next);
  CHECK(loaded.at("step").value().toInt() == 4321);

  // A tensor resized: pickled again, and read back.
  StateDict resized = mixed_state();
  resized.insert_or_assign("ids", at::arange(0, 50, at::kLong));
  save_cached(resized, 3);
  CHECK(cache.pickled_metadata() == 2);
  StateDict target = mixed_state(/*target=*/true);
  target.insert_or_assign("ids", at::zeros({50}, at::kLong));
  CHECK(dcpp::test::bitwise_equal(read_back(target).at("ids").tensor(),
                                  at::arange(0, 50, at::kLong)));
}

// A copy of `step` whose byte at `offset` is flipped, its bytes held by the copy itself.
MemoryStep with_flipped_byte(const MemoryStep& step, std::size_t offset) {
  auto bytes = std::make_shared<std::string>(step.bytes);
  (*bytes)[offset] = static_cast<char>((*bytes)[offset] ^ 0x01);
  MemoryStep flipped = step;
  flipped.bytes = *bytes;
  flipped.mapping = bytes;
  return flipped;
}

TEST_CASE(
    "a load that verifies the CRC-32 as it copies reads back bit for bit, and fails on a "
    "flipped byte anywhere, naming the region") {
  RankSlots rank(1, "verified");
  // mixed_state and two tensors over several of the check's 256 KiB blocks: one read whole into a
  // contiguous target (copied and checksummed in one pass), one into a strided target (copied by
  // ATen, checksummed with the rest at the end).
  StateDict saved = mixed_state();
  saved.insert("big", at::randn({400001}));
  saved.insert("big_strided", at::randn({700, 300}));
  const auto target = [] {
    StateDict state = mixed_state(/*target=*/true);
    state.insert("big", at::zeros({400001}));
    state.insert("big_strided", at::zeros({300, 700}).t());
    return state;
  };
  save_step(rank.slots, saved, 1, 2, 5);
  const std::vector<MemoryStep> steps = rank.slots.complete_steps_unchecked();
  REQUIRE(steps.size() == 1);
  const MemoryStep& step = steps[0];
  // The mapping starts on a 2 MiB boundary (its huge pages then map whole; header page first).
  CHECK(reinterpret_cast<uintptr_t>(step.bytes.data() - 4096) % (2 << 20) == 0);

  StateDict loaded = target();
  MemoryStepReader reader({step}, /*verify_crc=*/true);
  dcpp::load(loaded, reader);
  require_mixed_equal(loaded, saved);
  CHECK(dcpp::test::bitwise_equal(loaded.at("big").tensor(), saved.at("big").tensor()));
  CHECK(dcpp::test::bitwise_equal(loaded.at("big_strided").tensor(),
                                  saved.at("big_strided").tensor()));

  // Where the flipped byte lies: the preamble, inside "big" (the copy's own CRC), inside
  // "big_strided" (the end's), the last byte.
  const at::Tensor big = saved.at("big").tensor();
  const std::string big_bytes(static_cast<const char*>(big.data_ptr()),
                              static_cast<std::size_t>(big.nbytes()));
  const at::Tensor strided = saved.at("big_strided").tensor();
  const std::string strided_bytes(static_cast<const char*>(strided.data_ptr()),
                                  static_cast<std::size_t>(strided.nbytes()));
  const std::size_t big_at = step.bytes.find(big_bytes);
  const std::size_t strided_at = step.bytes.find(strided_bytes);
  REQUIRE(big_at != std::string::npos);
  REQUIRE(strided_at != std::string::npos);
  for (const std::size_t offset :
       {std::size_t{20}, big_at + 700000, strided_at + 5, step.bytes.size() - 1}) {
    INFO("flipped byte at " << offset);
    const MemoryStep flipped = with_flipped_byte(step, offset);
    StateDict into = target();
    MemoryStepReader flipped_reader({flipped}, /*verify_crc=*/true);
    const dcpp::CheckpointError error =
        dcpp::test::error_of([&] { dcpp::load(into, flipped_reader); });
    CHECK(error.kind() == dcpp::ErrorKind::kCorrupt);
    CHECK_THAT(error.what(), Catch::Contains(step.region));
    // (The last byte may be a value's, whose archive's own check can name it first.)
    if (offset != step.bytes.size() - 1) CHECK_THAT(error.what(), Catch::Contains("CRC-32"));
  }
  // Without verify_crc, the same flipped byte in "big" loads (the caller checked the CRC before).
  StateDict unchecked = target();
  MemoryStepReader unchecked_reader({with_flipped_byte(step, big_at + 700000)});
  dcpp::load(unchecked, unchecked_reader);
  CHECK_FALSE(dcpp::test::bitwise_equal(unchecked.at("big").tensor(), saved.at("big").tensor()));
}
