// DCP's DefaultSavePlanner: one write item per tensor, per local shard, and per non-tensor leaf;
// duplicates across ranks are written once (by the rank with the fewest planned bytes so far, as
// `dedup_save_plans` does); the coordinator builds the Metadata from all plans.

#include <dcpp/planner/save_planner.h>

#include "planner/planner_helpers.h"
#include "planner/same_index_items.h"
#include "planner/save_plan_validation.h"

#include <dcpp/core/checkpoint_error.h>

#include <algorithm>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

namespace dcpp {

int64_t WriteItem::tensor_storage_size() const {
  if (!tensor_data) {
    return 0;
  }
  int64_t numel = 1;
  for (int64_t s : tensor_data->chunk.sizes) {
    numel *= s;
  }
  return numel * static_cast<int64_t>(c10::elementSize(tensor_data->properties.dtype));
}

namespace {

// Items at one index (key and offsets) on two ranks are replicas only when their chunks have the
// same sizes: rows [0, 16) and [0, 8) of one tensor overlap, and keeping either would lose or
// misplace the other's elements. Throws CheckpointError (kUsage) naming both.
void require_replica(const WriteItem& first, std::size_t first_rank, const WriteItem& other,
                     std::size_t other_rank) {
  if (!first.tensor_data || !other.tensor_data ||
      first.tensor_data->chunk.sizes == other.tensor_data->chunk.sizes) {
    return;
  }
  const auto chunk = [](const WriteItem& item, std::size_t rank) {
    return "rank " + std::to_string(rank) + "'s chunk of sizes " +
           detail::shape_string(item.tensor_data->chunk.sizes);
  };
  throw CheckpointError(
      ErrorKind::kUsage,
      "key '" + other.index.fqn + "': " + chunk(first, first_rank) + " and " +
          chunk(other, other_rank) + " both start at offsets " +
          detail::shape_string(other.tensor_data->chunk.offsets) +
          ": they overlap without being equal (replicas). Shards of a tensor must not overlap; "
          "check the layouts' placements (ParameterPlacement::offsets and the local shapes)");
}

// Removes items planned on several ranks from all but one: the rank with the fewest bytes planned
// so far, visiting items in the order they were first planned (an item held once counts for its
// rank where it lies).
void dedup_save_plans(std::vector<SavePlan>& plans) {
  if (plans.size() < 2) return;  // one rank's keys and chunks are its own
  const detail::SameIndexItems same = detail::find_same_index_items(plans);
  if (!same.any) return;  // sharded only (FSDP, TP): nothing to remove
  const auto item_of = [&](uint32_t number, std::size_t* rank) -> const WriteItem& {
    *rank = static_cast<std::size_t>(
        std::upper_bound(same.first_of_rank.begin(), same.first_of_rank.end(), number) -
        same.first_of_rank.begin() - 1);
    return plans[*rank].items[number - same.first_of_rank[*rank]];
  };
  // The ranks holding each led group, in plan order, by its leader's number.
  std::unordered_map<uint32_t, std::vector<std::size_t>> holders;
  for (std::size_t rank = 0; rank < plans.size(); ++rank) {
    for (std::size_t i = 0; i < plans[rank].items.size(); ++i) {
      const uint32_t leader = same.leader[same.number(rank, i)];
      if (leader == detail::SameIndexItems::kAlone) continue;
      std::vector<std::size_t>& ranks = holders[leader];
      if (!ranks.empty()) {
        std::size_t first_rank = 0;
        require_replica(item_of(leader, &first_rank), first_rank, plans[rank].items[i], rank);
      }
      ranks.push_back(rank);
    }
  }
  std::vector<int64_t> planned_bytes(plans.size(), 0);
  std::unordered_map<uint32_t, std::size_t> writer;  // by leader
  for (std::size_t rank = 0; rank < plans.size(); ++rank) {
    for (std::size_t i = 0; i < plans[rank].items.size(); ++i) {
      const uint32_t number = same.number(rank, i);
      const uint32_t leader = same.leader[number];
      const int64_t bytes = plans[rank].items[i].tensor_storage_size();
      if (leader == detail::SameIndexItems::kAlone) {
        planned_bytes[rank] += bytes;
      } else if (leader == number) {
        const std::vector<std::size_t>& ranks = holders.at(leader);
        std::size_t chosen = ranks.front();
        for (std::size_t holder : ranks) {
          if (planned_bytes[holder] < planned_bytes[chosen]) chosen = holder;
        }
        planned_bytes[chosen] += bytes;
        writer.emplace(leader, chosen);
      }
    }
  }
  for (std::size_t rank = 0; rank < plans.size(); ++rank) {
    auto& items = plans[rank].items;
    std::size_t kept = 0;
    for (std::size_t i = 0; i < items.size(); ++i) {
      const uint32_t leader = same.leader[same.number(rank, i)];
      if (leader == detail::SameIndexItems::kAlone || writer.at(leader) == rank) {
        if (kept != i) items[kept] = std::move(items[i]);
        ++kept;
      }
    }
    items.resize(kept);
  }
}

}  // namespace

struct DefaultSavePlanner::State {
  StateDict* state_dict = nullptr;
  bool is_coordinator = false;
  std::vector<FlatEntry> entries;
  std::unordered_map<std::string, const FlatEntry*> by_key;
};

DefaultSavePlanner::DefaultSavePlanner() : state_(std::make_unique<State>()) {}
DefaultSavePlanner::~DefaultSavePlanner() = default;

void DefaultSavePlanner::set_up(StateDict& state_dict, bool is_coordinator) {
  state_->state_dict = &state_dict;
  state_->is_coordinator = is_coordinator;
  state_->entries = flatten_state_dict(state_dict);
  state_->by_key.clear();
  for (const FlatEntry& entry : state_->entries) {
    state_->by_key.emplace(entry.key, &entry);
  }
}

SavePlan DefaultSavePlanner::create_local_plan() {
  SavePlan plan;
  for (const FlatEntry& entry : state_->entries) {
    for (detail::LocalWriteItem& local : detail::local_write_items(entry)) {
      plan.items.push_back(std::move(local.item));
    }
    plan.planner_data.emplace_back(entry.key, entry.path);
  }
  return plan;
}

std::pair<std::vector<SavePlan>, Metadata> DefaultSavePlanner::create_global_plan(
    std::vector<SavePlan> plans) {
  dedup_save_plans(plans);
  detail::validate_global_save_plan(plans);
  Metadata metadata;
  auto& keys = metadata.state_dict_metadata;
  std::unordered_map<std::string_view, std::size_t> position;  // views of the plans' keys
  for (SavePlan& plan : plans) {
    // Ranks list their items in the order of one state dict, as a rule: the key after the last
    // item's is tried before the hash map (10 million items at 10,000 ranks).
    std::size_t next = 0;
    for (WriteItem& item : plan.items) {
      std::size_t at = next;
      if (at >= keys.size() || keys[at].first != item.index.fqn) {
        auto [it, added] = position.emplace(item.index.fqn, keys.size());
        if (added) {
          keys.emplace_back(item.index.fqn,
                            item.is_tensor()
                                ? StorageMetadata(TensorStorageMetadata{
                                      item.tensor_data->properties, item.tensor_data->size, {}})
                                : StorageMetadata(BytesStorageMetadata{}));
        }
        at = it->second;
      }
      next = at + 1;
      auto& stored = keys[at].second;
      if (item.is_tensor() != std::holds_alternative<TensorStorageMetadata>(stored)) {
        throw CheckpointError(
            ErrorKind::kUsage,
            "key '" + item.index.fqn + "' is a tensor on some ranks and a value on others");
      }
      if (auto* tensor = std::get_if<TensorStorageMetadata>(&stored)) {
        item.index.index = static_cast<int64_t>(tensor->chunks.size());
        tensor->chunks.push_back(item.tensor_data->chunk);
      }
    }
  }
  // Every rank's planner_data, each key's first: most ranks list the same keys as the first
  // plan that listed any, in the same order, and add nothing.
  std::unordered_set<std::string_view> seen;
  const std::vector<std::pair<std::string, ObjectPath>>* first = nullptr;
  for (const SavePlan& plan : plans) {
    if (first != nullptr && plan.planner_data.size() == first->size() &&
        std::equal(plan.planner_data.begin(), plan.planner_data.end(), first->begin(),
                   [](const auto& a, const auto& b) { return a.first == b.first; })) {
      continue;
    }
    for (const auto& [key, path] : plan.planner_data) {
      if (seen.insert(key).second) {
        metadata.planner_data.emplace_back(key, path);
      }
    }
    if (first == nullptr && !plan.planner_data.empty()) first = &plan.planner_data;
  }
  return {std::move(plans), std::move(metadata)};
}

SavePlan DefaultSavePlanner::finish_plan(SavePlan central_plan) { return central_plan; }

WriteItemData DefaultSavePlanner::resolve_data(const WriteItem& item) {
  return transform_object(item, lookup_object(item.index));
}

WriteItemData DefaultSavePlanner::lookup_object(const MetadataIndex& index) {
  auto found = state_->by_key.find(index.fqn);
  if (found == state_->by_key.end()) {
    throw CheckpointError(ErrorKind::kUsage, "save plan names key '" + index.fqn +
                                                 "', which is not in the state dict being saved");
  }
  const StateValue& value = *found->second->value;
  if (!value.is_tensor() && !value.is_sharded_tensor()) {
    return detail::to_saved_value(value);
  }
  for (const detail::LocalChunk& chunk : detail::local_chunks(value)) {
    if (index.offset == chunk.offsets) {
      return chunk.tensor.detach();
    }
  }
  throw CheckpointError(ErrorKind::kUsage,
                        "save plan names a chunk of '" + index.fqn + "' at offsets " +
                            detail::shape_string(index.offset.value_or(std::vector<int64_t>{})) +
                            " that this rank does not hold");
}

WriteItemData DefaultSavePlanner::transform_object(const WriteItem&, WriteItemData object) {
  return object;
}

const StateDict& DefaultSavePlanner::state_dict() const {
  if (state_->state_dict == nullptr) {
    throw CheckpointError(ErrorKind::kUsage, "DefaultSavePlanner::state_dict() before set_up()");
  }
  return *state_->state_dict;
}

bool DefaultSavePlanner::is_coordinator() const { return state_->is_coordinator; }

}  // namespace dcpp
