// The memory tier's restore (memory_tier.h): the ranks' agreement on the newest step whose every
// saving rank's copy is on a host of this job, and its load, each copy read in place on its host
// or sent over the manager's group to a rank on another.

#include "memory_tier.h"

#include "checkpoint_info_json.h"
#include "core/group_calls.h"
#include "core/logging.h"

#include <dcpp/storage/memory_step.h>

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/core/checkpoint_error.h>

#include <ATen/ATen.h>

#include <cstdlib>
#include <limits>
#include <map>
#include <set>
#include <tuple>

namespace dcpp::detail {
namespace fs = std::filesystem;

namespace {

constexpr std::size_t kHeldFields = 10;

// The region set's name as a path: "/dev/shm/dcpp.<job>.<owner>[.at<holder>]".
fs::path regions_path(const std::string& job, int64_t owner, int64_t holder) {
  return fs::path("/dev/shm") / ("dcpp." + job + "." + std::to_string(owner) +
                                 (holder >= 0 ? ".at" + std::to_string(holder) : ""));
}

at::Tensor bytes_of(const std::string_view bytes) {
  // Sent only: Gloo reads it.
  return at::from_blob(const_cast<char*>(bytes.data()), {static_cast<int64_t>(bytes.size())},
                       at::TensorOptions().dtype(at::kByte));
}

}  // namespace

int64_t MemoryTier::node_of_this_rank() const {
  const char* value = std::getenv("GROUP_RANK");
  if (value != nullptr && *value != '\0') return std::atoll(value);
  return rank_ / ranks_per_host(options_);
}

std::vector<MemoryTier::HeldStep> MemoryTier::find_steps_on_host(
    const std::vector<int64_t>& nodes) {
  const int64_t here = nodes[rank_];
  int first_here = rank_;
  for (int r = 0; r < world_; ++r) {
    if (nodes[r] == here) {
      first_here = r;
      break;
    }
  }
  std::vector<std::string> problems;
  std::vector<HeldStep> found;
  held_.clear();
  for (const HeldSlots& regions : MemorySlots::on_this_host(job_)) {
    // Read by the rank that wrote them when it is a rank of this job on this host (the same
    // numbering as before: the common case), else by this host's first rank.
    const int writer = regions.holder >= 0 ? regions.holder : regions.rank;
    const bool writer_here = writer < world_ && nodes[writer] == here;
    if ((writer_here ? writer : first_here) != rank_) continue;
    const MemorySlots slots(job_, regions.rank, std::numeric_limits<int64_t>::max(), 1,
                            regions.holder);
    for (MemoryStep& step : slots.complete_steps_unchecked(&problems)) {
      if (passed_over_.count({regions.rank, regions.holder, step.step}) != 0) continue;
      HeldStep held;
      try {
        const MemoryStepReader reader({step});
        const std::map<int, int> worlds = reader.world_sizes();
        if (worlds.begin()->first != regions.rank) {
          throw CheckpointError(ErrorKind::kCorrupt, step.region + ": holds rank " +
                                                         std::to_string(worlds.begin()->first) +
                                                         "'s step, not rank " +
                                                         std::to_string(regions.rank) + "'s");
        }
        held.saved_world = worlds.begin()->second;
        const CheckpointInfo manifest =
            checkpoint_info_from_json(reader.manifests().begin()->second, step.region);
        held.generation = manifest.generation;
        held.branched_from = manifest.branched_from;
      } catch (const CheckpointError& e) {
        problems.push_back(e.what());
        continue;
      }
      held.owner = regions.rank;
      held.holder = regions.holder;
      held.step = step.step;
      held.key = save_id_key(step.save_id);
      held.bytes = static_cast<int64_t>(step.bytes.size());
      held.crc32 = step.crc32;
      held.node = here;
      found.push_back(held);
      held_.push_back(std::move(step));
    }
  }
  for (const std::string& problem : problems) {
    logger().warn("memory tier, rank {}: {} (left out)", rank_, problem);
  }
  return found;
}

std::vector<CheckpointInfo> MemoryTier::complete_steps() {
  exchange_findings();
  std::vector<CheckpointInfo> steps;
  for (const auto& [info, identity] : complete_in_findings()) steps.push_back(info);
  if (steps.empty() && rank_ == coordinator_ &&
      std::any_of(all_held_.begin(), all_held_.end(), [](const auto& h) { return !h.empty(); })) {
    std::string held;
    for (std::size_t r = 0; r < all_held_.size(); ++r) {
      held += (r == 0 ? "rank " : "; rank ") + std::to_string(r) + ":";
      for (const HeldStep& h : all_held_[r]) {
        held += " step " + std::to_string(h.step) + " of rank " + std::to_string(h.owner) + "/" +
                std::to_string(h.saved_world);
      }
    }
    logger().info("memory tier '{}': no step that the hosts hold for every rank ({})", job_, held);
  }
  return steps;
}

void MemoryTier::choose(const CheckpointInfo& step) {
  chosen_.reset();
  for (const auto& [info, identity] : complete_in_findings()) {
    if (info.step == step.step && info.save_id == step.save_id) chosen_ = identity;
  }
  if (!chosen_) {
    throw CheckpointError(ErrorKind::kNotFound,
                          "memory tier '" + job_ + "': step " + std::to_string(step.step) + " (" +
                              step.save_id + ") is not one of its complete steps");
  }
}

void MemoryTier::exchange_findings() {
  nodes_ = values_of_ranks(group_, node_of_this_rank());
  const std::vector<HeldStep> mine = find_steps_on_host(nodes_);
  // Every rank's findings: their counts, then as many (padded) on every rank.
  const std::vector<int64_t> counts = values_of_ranks(group_, static_cast<int64_t>(mine.size()));
  const int64_t most = *std::max_element(counts.begin(), counts.end());
  std::vector<int64_t> flat(static_cast<std::size_t>(most) * kHeldFields, -1);
  for (std::size_t i = 0; i < mine.size(); ++i) {
    const HeldStep& h = mine[i];
    const int64_t fields[kHeldFields] = {h.owner, h.holder, h.step, h.key,        h.saved_world,
                                         h.bytes, h.crc32,  h.node, h.generation, h.branched_from};
    std::copy(fields, fields + kHeldFields,
              flat.begin() + static_cast<std::ptrdiff_t>(i * kHeldFields));
  }
  const std::vector<std::vector<int64_t>> all = vectors_of_ranks(group_, flat);
  all_held_.assign(all.size(), {});
  for (std::size_t r = 0; r < all.size(); ++r) {
    for (int64_t i = 0; i < counts[r]; ++i) {
      const int64_t* f = all[r].data() + i * static_cast<int64_t>(kHeldFields);
      all_held_[r].push_back(HeldStep{f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7], f[8], f[9]});
    }
  }
}

std::vector<std::pair<CheckpointInfo, MemoryTier::HeldStep>> MemoryTier::complete_in_findings()
    const {
  using Identity = std::tuple<int64_t, int64_t, int64_t>;  // step, save key, saved world
  std::map<Identity, std::set<int64_t>> owners;
  std::map<Identity, HeldStep> copies;  // a copy of each
  for (const std::vector<HeldStep>& held : all_held_) {
    for (const HeldStep& h : held) {
      if (h.owner < 0 || h.owner >= h.saved_world) continue;
      owners[{h.step, h.key, h.saved_world}].insert(h.owner);
      copies.emplace(Identity{h.step, h.key, h.saved_world}, h);
    }
  }
  std::vector<std::pair<CheckpointInfo, HeldStep>> complete;
  for (const auto& [identity, found] : owners) {
    if (static_cast<int64_t>(found.size()) != std::get<2>(identity)) continue;
    const HeldStep& h = copies.at(identity);
    CheckpointInfo info;
    info.step = h.step;
    info.world_size = static_cast<int>(h.saved_world);
    info.save_id = "memory-" + std::to_string(h.key);
    info.generation = h.generation;
    info.branched_from = h.branched_from;
    info.path = fs::path("/dev/shm") / ("dcpp." + job_) /
                ("step-" + std::to_string(h.step) + "-" + info.save_id);
    complete.emplace_back(info, h);
  }
  return complete;
}

MemoryTier::Loaded MemoryTier::load(StateDict& target, bool allow_partial_load, bool all_or_nothing,
                                    bool* passed_over) {
  *passed_over = false;
  if (!chosen_) {
    throw CheckpointError(ErrorKind::kNotFound,
                          "memory tier '" + job_ + "': no step was chosen (choose() first)");
  }
  const HeldStep choice = *chosen_;
  const int64_t step = choice.step;
  const auto matches = [&](const HeldStep& h) {
    return h.step == choice.step && h.key == choice.key && h.saved_world == choice.saved_world;
  };
  // Where rank r reads saving rank o's copy from: its own finding; else one on its host, read in
  // place; else the first rank that found it, which sends it.
  const auto found_by = [&](int r, int64_t o) -> const HeldStep* {
    for (const HeldStep& h : all_held_[r]) {
      if (h.owner == o && matches(h)) return &h;
    }
    return nullptr;
  };
  const auto source_of = [&](int r, int64_t o) {
    if (found_by(r, o) != nullptr) return r;
    int first = -1;
    for (int f = 0; f < static_cast<int>(all_held_.size()); ++f) {
      if (found_by(f, o) == nullptr) continue;
      if (nodes_[f] == nodes_[r]) return f;
      if (first < 0) first = f;
    }
    return first;
  };
  // A job of this world size: each rank its own step (the same layout); else every step,
  // resharded through the load planner.
  const auto needed_by = [&](int r) {
    std::vector<int64_t> owners;
    if (choice.saved_world == world_) {
      owners.push_back(r);
    } else {
      for (int64_t o = 0; o < choice.saved_world; ++o) owners.push_back(o);
    }
    return owners;
  };
  const auto held_step = [&](int64_t o) -> const MemoryStep& {
    const HeldStep* mine = found_by(rank_, o);
    return held_[static_cast<std::size_t>(mine - all_held_[rank_].data())];
  };
  GroupCalls calls(group_, "memory tier");
  std::vector<c10::intrusive_ptr<c10d::Work>> sends;
  for (int r = 0; r < world_; ++r) {
    for (int64_t o : needed_by(r)) {
      if (r != rank_ && source_of(r, o) == rank_ && nodes_[r] != nodes_[rank_]) {
        sends.push_back(calls.start_send(bytes_of(held_step(o).bytes), r, static_cast<int>(o),
                                         "rank " + std::to_string(o) + "'s memory step"));
      }
    }
  }
  // The copies from other hosts first, then those on this one: whatever fails here fails after
  // every transfer, so that no rank waits for one that threw.
  std::map<int64_t, MemoryStep> steps;
  std::map<int64_t, std::string> sources;
  std::map<int64_t, fs::path> paths;  // where each copy was: its region set, or its region here
  const auto kept = [](const HeldStep& where, int64_t o) {
    return where.holder >= 0
               ? "rank " + std::to_string(where.holder) + "'s replica of rank " + std::to_string(o)
               : "rank " + std::to_string(o) + "'s own slot";
  };
  for (int64_t o : needed_by(rank_)) {
    const int source = source_of(rank_, o);
    if (nodes_[source] == nodes_[rank_]) continue;
    const HeldStep& where = *found_by(source, o);
    auto bytes = std::make_shared<at::Tensor>(
        at::empty({where.bytes}, at::TensorOptions().dtype(at::kByte)));
    calls.recv(*bytes, source, static_cast<int>(o), "rank " + std::to_string(o) + "'s memory step");
    MemoryStep received;
    received.step = choice.step;
    received.region =
        "rank " + std::to_string(source) + "'s " + regions_path(job_, o, where.holder).string();
    received.crc32 = static_cast<uint32_t>(where.crc32);
    received.bytes = std::string_view(static_cast<const char*>(bytes->data_ptr()),
                                      static_cast<std::size_t>(where.bytes));
    received.mapping = bytes;
    steps[o] = std::move(received);
    paths[o] = regions_path(job_, o, where.holder);
    sources[o] = kept(where, o) + ", sent by rank " + std::to_string(source) + " from its host (" +
                 paths[o].string() + ")";
  }
  for (const auto& send : sends) calls.wait(send, "sending a memory step");
  for (int64_t o : needed_by(rank_)) {
    const int source = source_of(rank_, o);
    if (nodes_[source] != nodes_[rank_]) continue;
    const HeldStep& where = *found_by(source, o);
    if (source == rank_) {
      steps[o] = held_step(o);
    } else {  // found by another rank of this host: read in place (its finder checked its CRC)
      const MemorySlots slots(job_, static_cast<int>(o), std::numeric_limits<int64_t>::max(), 1,
                              static_cast<int>(where.holder));
      for (MemoryStep& held : slots.complete_steps_unchecked()) {
        if (held.step == choice.step && save_id_key(held.save_id) == choice.key) {
          steps[o] = std::move(held);
          break;
        }
      }
      if (steps.count(o) == 0) {
        throw CheckpointError(ErrorKind::kNotFound, regions_path(job_, o, where.holder).string() +
                                                        " no longer holds step " +
                                                        std::to_string(step));
      }
    }
    paths[o] = "/dev/shm" + steps[o].region;
    sources[o] = kept(where, o) + " (" + paths[o].string() + ")";
  }

  std::vector<MemoryStep> all_steps;
  for (auto& [owner, held] : steps) all_steps.push_back(std::move(held));
  MemoryStepReader reader(std::move(all_steps), /*verify_crc=*/true);
  LoadOptions options;
  options.allow_partial_load = allow_partial_load;
  options.all_or_nothing = all_or_nothing;
  try {
    dcpp::load(target, reader, options);
  } catch (const CheckpointError& e) {
    if (e.kind() != ErrorKind::kCorrupt) throw;
    // Which of this rank's own findings failed (the copies sent from other hosts are their
    // finders' to check): read again, on this path only.
    for (std::size_t i = 0; i < held_.size(); ++i) {
      const HeldStep& found = all_held_[rank_][i];
      if (found.step != choice.step || found.key != choice.key) continue;
      if (!MemorySlots::crc_matches(held_[i])) {
        logger().warn(
            "memory tier, rank {}: {}: corrupted (step {}: its bytes' CRC-32 does not match its "
            "header's) (left out)",
            rank_, held_[i].region, found.step);
        passed_over_.insert({found.owner, found.holder, found.step});
        *passed_over = true;
      }
    }
    throw;
  }
  const std::map<int, std::string> manifests = reader.manifests();
  const auto own = manifests.find(rank_);
  Loaded loaded;
  loaded.info = checkpoint_info_from_json(
      (own != manifests.end() ? own : manifests.begin())->second, "the memory tier's manifest");
  loaded.info.path = paths.at(needed_by(rank_).front());  // this rank's own step's, or rank 0's
  for (const auto& [owner, source] : sources) {
    loaded.source += (loaded.source.empty() ? "" : "; ") + source;
  }
  if (choice.saved_world != world_) {
    loaded.source += "; resharded from " + std::to_string(choice.saved_world) + " ranks";
  }
  // The step resumed from stays whole in this rank's slots until the next one is written: a
  // second kill meanwhile resumes from it again, whatever else the slots hold.
  slots_.keep(choice.step, loaded.info.save_id);
  return loaded;
}

}  // namespace dcpp::detail
