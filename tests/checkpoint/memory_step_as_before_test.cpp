// The next memory step of a series written without planning (MemoryStepWriter::write_as_before,
// storage/src/memory/memory_step_layout.cpp): its payload equals, byte for byte, the one planning
// would write, and reads back bit for bit; any change of structure is refused, writes nothing,
// and the step planned in full reads back and becomes the layout repeated next.

#include "dcpp_test.h"

#include <dcpp/storage/memory_step.h>

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/planner/save_planner.h>
#include <dcpp/state_dict/sharded_tensor.h>

#include <unistd.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

using dcpp::MemorySlots;
using dcpp::MemoryStepCache;
using dcpp::MemoryStepReader;
using dcpp::MemoryStepWriter;
using dcpp::StateDict;

namespace {

// Rank `rank`'s slots under a name of this test process's own, removed when the test ends.
struct LayoutSlots {
  LayoutSlots(int rank, const std::string& what)
      : slots("memlayout-" + what + "-" + std::to_string(::getpid()), rank, 64 << 20) {
    slots.release();
  }
  ~LayoutSlots() { slots.release(); }
  MemorySlots slots;
};

// A training state whose contents follow `seed`: tensors of several dtypes (one strided, one
// empty, one requiring grad), a row-sharded tensor of which this rank holds two shards and an
// empty one, nested dicts, values and a list.
StateDict layout_state(double seed) {
  const at::Tensor w = at::arange(13 * 5, at::kDouble).reshape({13, 5}).mul(seed).sin();
  StateDict optim;
  optim.insert("exp_avg", at::arange(24, at::kFloat).mul(seed).cos().to(at::kBFloat16));
  optim.insert("step", at::full({}, seed, at::kFloat));
  optim.insert("lr", 0.25 * seed);
  StateDict state;
  state.insert("weight", at::arange(54, at::kFloat).mul(seed).reshape({6, 9}).t());
  state.insert("bias", at::arange(7, at::kFloat).mul(seed).set_requires_grad(true));
  state.insert("mask", at::arange(17, at::kInt).mul(static_cast<int64_t>(seed)).remainder(3) == 0);
  state.insert("empty", at::zeros({0, 4}));
  state.insert("w", dcpp::ShardedTensor({13, 5},
                                        {{w.narrow(0, 0, 4).clone(), {0, 0}},
                                         {w.narrow(0, 4, 0).clone(), {4, 0}},
                                         {w.narrow(0, 9, 4).clone(), {9, 0}}},
                                        at::kDouble));
  state.insert("optim", optim);
  state.insert("name", std::string("run-a"));
  state.insert("iteration", static_cast<int64_t>(1000 + seed));
  return state;
}

// `state` with each tensor that requires grad detached (a target loaded in place).
StateDict detached(StateDict state) {
  for (auto& [key, value] : state) {
    if (value.is_tensor() && value.tensor().requires_grad()) value = value.tensor().detach();
  }
  return state;
}

// What to load layout_state into: its structure, other contents.
StateDict layout_target() {
  StateDict state = detached(layout_state(0.0));
  state.insert_or_assign("weight", at::zeros({6, 9}).t());
  state.insert_or_assign("w", dcpp::ShardedTensor({13, 5},
                                                  {{at::zeros({4, 5}, at::kDouble), {0, 0}},
                                                   {at::zeros({0, 5}, at::kDouble), {4, 0}},
                                                   {at::zeros({4, 5}, at::kDouble), {9, 0}}},
                                                  at::kDouble));
  state.insert_or_assign("name", std::string(""));
  state.insert_or_assign("iteration", int64_t{0});
  return state;
}

void require_layout_equal(const StateDict& loaded, const StateDict& saved) {
  for (const char* key : {"weight", "bias", "mask", "empty"}) {
    INFO(key);
    CHECK(dcpp::test::bitwise_equal(loaded.at(key).tensor(), saved.at(key).tensor()));
  }
  const auto& loaded_shards = loaded.at("w").sharded_tensor().local_shards();
  const auto& saved_shards = saved.at("w").sharded_tensor().local_shards();
  for (std::size_t i = 0; i < saved_shards.size(); ++i) {
    INFO("shard " << i);
    CHECK(dcpp::test::bitwise_equal(loaded_shards[i].tensor, saved_shards[i].tensor));
  }
  for (const char* key : {"exp_avg", "step"}) {
    INFO(key);
    CHECK(dcpp::test::bitwise_equal(loaded.at("optim").dict().at(key).tensor(),
                                    saved.at("optim").dict().at(key).tensor()));
  }
  CHECK(loaded.at("optim").dict().at("lr").value() == saved.at("optim").dict().at("lr").value());
  CHECK(loaded.at("name").value() == saved.at("name").value());
  CHECK(loaded.at("iteration").value() == saved.at("iteration").value());
}

dcpp::SaveOptions on_its_own(int rank) {
  return dcpp::SaveOptions().with_use_collectives(false).with_rank(rank);
}

// The newest step of `slots`, loaded into `target`.
StateDict newest_into(MemorySlots& slots, StateDict target) {
  MemoryStepReader reader({*slots.newest()});
  dcpp::load(target, reader);
  return target;
}

// The bytes of the newest step of `slots`, each value item's archive zeroed: a `torch.save`
// archive holds a serialization id of its own, which differs from archive to archive.
std::string newest_bytes_but_archives(MemorySlots& slots, int64_t data_bytes) {
  const dcpp::MemoryStep step = *slots.newest();
  std::string bytes(step.bytes);
  MemoryStepReader reader({step});
  const dcpp::Metadata metadata = reader.read_metadata();
  const std::size_t data_start = bytes.size() - static_cast<std::size_t>(data_bytes);
  for (const auto& [index, info] : metadata.storage_data) {
    const std::string& fqn = index.fqn;
    const auto entry =
        std::find_if(metadata.state_dict_metadata.begin(), metadata.state_dict_metadata.end(),
                     [&](const auto& named) { return named.first == fqn; });
    REQUIRE(entry != metadata.state_dict_metadata.end());
    if (std::holds_alternative<dcpp::BytesStorageMetadata>(entry->second)) {
      bytes.replace(data_start + static_cast<std::size_t>(info.offset),
                    static_cast<std::size_t>(info.length),
                    std::string(static_cast<std::size_t>(info.length), '\0'));
    }
  }
  return bytes;
}

}  // namespace

TEST_CASE("a memory step of the last one's structure is written without planning, bit for bit") {
  LayoutSlots series(3, "series");
  LayoutSlots planned(3, "planned");
  MemoryStepCache cache;
  const auto writer_for = [&](MemorySlots& slots, int64_t step, MemoryStepCache* with) {
    return std::make_unique<MemoryStepWriter>(slots, step, "save-" + std::to_string(step), 4,
                                              "{\"step\": " + std::to_string(step) + "}", with);
  };

  // Nothing planned yet through the cache: nothing to repeat, nothing written.
  {
    auto writer = writer_for(series.slots, 1, &cache);
    CHECK_FALSE(writer->write_as_before(layout_state(1.0), 3));
    CHECK(writer->slot() == -1);
    dcpp::save(layout_state(1.0), *writer, on_its_own(3));
  }
  CHECK(cache.repeated_layouts() == 0);
  // A writer without a cache never repeats.
  CHECK_FALSE(writer_for(planned.slots, 1, nullptr)->write_as_before(layout_state(1.0), 3));

  for (int64_t step = 2; step <= 4; ++step) {
    INFO("step " << step);
    const StateDict saved = layout_state(static_cast<double>(step));
    auto writer = writer_for(series.slots, step, &cache);
    REQUIRE(writer->write_as_before(saved, 3));
    CHECK(writer->slot() >= 0);
    CHECK(cache.repeated_layouts() == step - 1);
    require_layout_equal(newest_into(series.slots, layout_target()), saved);

    // The same step planned in full (no cache) is the same payload, byte for byte (but for the
    // value archives' serialization ids; their values are read back above).
    auto full = writer_for(planned.slots, step, nullptr);
    dcpp::save(saved, *full, on_its_own(3));
    REQUIRE(writer->data_bytes() == full->data_bytes());
    CHECK(newest_bytes_but_archives(series.slots, writer->data_bytes()) ==
          newest_bytes_but_archives(planned.slots, full->data_bytes()));
  }
}

TEST_CASE("a memory step of another structure is planned in full, and its layout repeated next") {
  using Change = std::function<void(StateDict&)>;
  const std::vector<std::pair<std::string, Change>> changes = {
      {"a key added", [](StateDict& s) { s.insert("extra", at::ones({2})); }},
      {"a key removed", [](StateDict& s) { s.erase("empty"); }},
      {"a nested key renamed",
       [](StateDict& s) {
         StateDict optim = s.at("optim").dict();
         optim.insert("exp_avg_sq", optim.at("exp_avg").tensor());
         optim.erase("exp_avg");
         s.insert_or_assign("optim", optim);
       }},
      {"a dtype changed",
       [](StateDict& s) { s.insert_or_assign("bias", s.at("bias").tensor().to(at::kDouble)); }},
      {"a shape changed", [](StateDict& s) { s.insert_or_assign("bias", at::ones({8})); }},
      {"requires_grad dropped",
       [](StateDict& s) { s.insert_or_assign("bias", s.at("bias").tensor().detach()); }},
      {"a tensor made a value", [](StateDict& s) { s.insert_or_assign("empty", int64_t{5}); }},
      {"a value made a tensor",
       [](StateDict& s) { s.insert_or_assign("iteration", at::ones({1}, at::kLong)); }},
      {"a value's archive resized",
       [](StateDict& s) { s.insert_or_assign("name", std::string(300, 'n')); }},
      {"a shard moved",
       [](StateDict& s) {
         const at::Tensor w = at::ones({13, 5}, at::kDouble);
         s.insert_or_assign("w", dcpp::ShardedTensor({13, 5},
                                                     {{w.narrow(0, 0, 5).clone(), {0, 0}},
                                                      {w.narrow(0, 9, 4).clone(), {9, 0}}},
                                                     at::kDouble));
       }},
  };
  for (const auto& [what, change] : changes) {
    DYNAMIC_SECTION(what) {
      LayoutSlots rank(0, "changed");
      MemoryStepCache cache;
      {
        MemoryStepWriter first(rank.slots, 1, "save-1", 1, "{}", &cache);
        dcpp::save(layout_state(1.0), first, on_its_own(0));
      }
      StateDict changed = layout_state(2.0);
      change(changed);
      MemoryStepWriter writer(rank.slots, 2, "save-2", 1, "{}", &cache);
      CHECK_FALSE(writer.write_as_before(changed, 0));
      CHECK(writer.slot() == -1);
      CHECK(cache.repeated_layouts() == 0);
      CHECK(rank.slots.newest()->step == 1);
      // The same writer then saves it in full; it reads back, and the next step of its
      // structure repeats its layout.
      dcpp::save(changed, writer, on_its_own(0));
      StateDict next = layout_state(3.0);
      change(next);
      MemoryStepWriter repeat(rank.slots, 3, "save-3", 1, "{}", &cache);
      CHECK(repeat.write_as_before(next, 0));
      CHECK(cache.repeated_layouts() == 1);
      MemoryStepReader reader({*rank.slots.newest()});
      StateDict blank = layout_state(0.0);
      change(blank);
      blank = detached(std::move(blank));
      dcpp::load(blank, reader);
      for (const auto& [key, value] : next) {
        INFO(key);
        if (value.is_tensor()) {
          CHECK(dcpp::test::bitwise_equal(blank.at(key).tensor(), value.tensor()));
        } else if (value.is_value()) {
          CHECK(blank.at(key).value() == value.value());
        }
      }
    }
  }
}

TEST_CASE("a memory step is repeated only for the rank and the planner that laid it out") {
  LayoutSlots rank(1, "planner");
  MemoryStepCache cache;
  {
    MemoryStepWriter first(rank.slots, 1, "save-1", 2, "{}", &cache);
    dcpp::save(layout_state(1.0), first, on_its_own(1));
  }
  MemoryStepWriter as_rank_zero(rank.slots, 2, "save-2", 2, "{}", &cache);
  CHECK_FALSE(as_rank_zero.write_as_before(layout_state(2.0), 0));

  // A subclass of the DefaultSavePlanner may transform what it writes: its layout is not kept.
  struct Doubling : dcpp::DefaultSavePlanner {
    dcpp::WriteItemData transform_object(const dcpp::WriteItem& item,
                                         dcpp::WriteItemData object) override {
      if (auto* tensor = std::get_if<at::Tensor>(&object); tensor && tensor->is_floating_point()) {
        return *tensor * 2;
      }
      return DefaultSavePlanner::transform_object(item, std::move(object));
    }
  };
  {
    MemoryStepWriter transformed(rank.slots, 2, "save-2", 2, "{}", &cache);
    dcpp::save(layout_state(2.0), transformed,
               on_its_own(1).with_planner(std::make_shared<Doubling>()));
  }
  MemoryStepWriter after(rank.slots, 3, "save-3", 2, "{}", &cache);
  CHECK_FALSE(after.write_as_before(layout_state(3.0), 1));
  CHECK(cache.repeated_layouts() == 0);
}

TEST_CASE("a memory step written without planning that fails leaves the step before whole") {
  LayoutSlots rank(0, "failing");
  MemoryStepCache cache;
  const StateDict first = layout_state(1.0);
  {
    MemoryStepWriter writer(rank.slots, 1, "save-1", 1, "{}", &cache);
    dcpp::save(first, writer, on_its_own(0));
  }
  // The same regions through slots that take no step this big: the slot write refuses it.
  MemorySlots too_small("memlayout-failing-" + std::to_string(::getpid()), 0, 4096);
  MemoryStepWriter failing(too_small, 2, "save-2", 1, "{}", &cache);
  const dcpp::CheckpointError error =
      dcpp::test::error_of([&] { failing.write_as_before(layout_state(2.0), 0); });
  CHECK(error.kind() == dcpp::ErrorKind::kUsage);
  CHECK(failing.slot() == -1);
  CHECK(cache.repeated_layouts() == 0);
  // Step 1 is untouched and the cache still holds: the next step is written as before.
  REQUIRE(rank.slots.newest()->step == 1);
  require_layout_equal(newest_into(rank.slots, layout_target()), first);
  const StateDict third = layout_state(3.0);
  MemoryStepWriter next(rank.slots, 3, "save-3", 1, "{}", &cache);
  REQUIRE(next.write_as_before(third, 0));
  CHECK(cache.repeated_layouts() == 1);
  require_layout_equal(newest_into(rank.slots, layout_target()), third);
}
