#include "checkpoint/replicated_items.h"

#include "core/bounded_list.h"
#include "core/shape_string.h"
#include "core/thread_priority.h"
#include "format/content_checksum.h"
#include "format/metadata_index_hash.h"
#include "planner/same_index_items.h"

#include <dcpp/core/checkpoint_error.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <string_view>
#include <system_error>
#include <unordered_map>
#include <unordered_set>
#include <utility>

namespace dcpp::detail {

namespace {

using IndexHash = detail::MetadataIndexHash;
using IndexEqual = detail::MetadataIndexEqual;

constexpr uint32_t kNotReplicated = UINT32_MAX;

std::string item_name(const MetadataIndex& index) {
  std::string name = "'" + index.fqn + "'";
  if (index.offset) {
    name += " (chunk at " + shape_string(*index.offset) + ")";
  }
  return name;
}

std::string rank_list(const std::vector<std::size_t>& ranks) {
  return (ranks.size() == 1 ? "rank " : "ranks ") +
         bounded_list(ranks, [](std::size_t rank) { return std::to_string(rank); });
}

// "optim.param_groups.0.params": the parameter names of a nested optimizer state dict's group.
bool is_nested_param_group_list(const std::string& key) {
  const std::string suffix = ".params";
  return key.find("param_groups.") != std::string::npos && key.size() > suffix.size() &&
         key.compare(key.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

ReplicatedItems find_replicated_items(const std::vector<SavePlan>& local_plans) {
  const SameIndexItems same = find_same_index_items(local_plans);
  const std::vector<uint32_t>& leader = same.leader;
  const std::vector<uint32_t>& first_of_rank = same.first_of_rank;
  ReplicatedItems replicated;
  replicated.marks.resize(local_plans.size());
  replicated.of_rank.resize(local_plans.size());
  if (!same.any) return replicated;
  std::vector<uint32_t> id_of_leader(leader.size(), kNotReplicated);
  for (std::size_t rank = 0; rank < local_plans.size(); ++rank) {
    const std::vector<WriteItem>& items = local_plans[rank].items;
    std::string& marks = replicated.marks[rank];
    for (std::size_t i = 0; i < items.size(); ++i) {
      const uint32_t first = leader[first_of_rank[rank] + i];
      if (first == SameIndexItems::kAlone) {
        continue;
      }
      uint32_t& id = id_of_leader[first];
      if (id == kNotReplicated) {
        id = static_cast<uint32_t>(replicated.items.size());
        replicated.items.push_back(items[i].index);
        if (items[i].type != WriteItemType::kShard) {
          replicated.items.back().offset.reset();  // a whole tensor: named by its key alone
        }
      }
      replicated.of_rank[rank].push_back(id);
      if (marks.empty()) {
        marks.assign((items.size() + 7) / 8, '\0');
      }
      marks[i / 8] = static_cast<char>(marks[i / 8] | (1 << (i % 8)));
    }
  }
  return replicated;
}

std::vector<std::size_t> decode_marks(const std::string& marks, std::size_t plan_items) {
  std::vector<std::size_t> positions;
  if (marks.empty()) {
    return positions;
  }
  if (marks.size() != (plan_items + 7) / 8) {
    throw CheckpointError(ErrorKind::kCorrupt,
                          "checkpoint save: the coordinator marked the replicated items of a "
                          "plan of " +
                              std::to_string(marks.size() * 8) +
                              " items, but this rank's plan has " + std::to_string(plan_items) +
                              "; every rank must run the same dcpp build");
  }
  for (std::size_t i = 0; i < plan_items; ++i) {
    if ((static_cast<unsigned char>(marks[i / 8]) >> (i % 8)) & 1) {
      positions.push_back(i);
    }
  }
  return positions;
}

ReplicaChecksums::ReplicaChecksums(const SavePlan& local_plan, std::vector<std::size_t> positions,
                                   const SavePlan& written_plan, SavePlanner& planner)
    : plan_(local_plan),
      positions_(std::move(positions)),
      planner_(planner),
      checksums_(positions_.size()) {
  if (positions_.empty()) {
    hashed_ = true;
    return;
  }
  std::unordered_set<const MetadataIndex*, IndexHash, IndexEqual> written;
  written.reserve(written_plan.items.size());
  for (const WriteItem& item : written_plan.items) {
    written.insert(&item.index);
  }
  written_here_.reserve(positions_.size());
  for (std::size_t position : positions_) {
    written_here_.push_back(written.count(&plan_.items.at(position).index) > 0);
  }
  try {
    thread_ = std::thread([this] {
      // Yields to the writers: hashing runs on what they leave idle (their waits for the disk),
      // and only the rest adds to the save's time.
      lower_current_thread_priority(19);
      streams_.run_with([this] { hash_others_items(); });
    });
  } catch (const std::system_error&) {
    // No thread to be had (limits, memory): take() hashes them on the caller's.
  }
}

ReplicaChecksums::~ReplicaChecksums() {
  stop_ = true;  // after take(), the thread is done already
  if (thread_.joinable()) {
    thread_.join();
  }
}

uint32_t ReplicaChecksums::checksum_of(std::size_t position) {
  const WriteItemData data = planner_.resolve_data(plan_.items.at(position));
  return std::visit([](const auto& value) { return content_crc32(value); }, data);
}

void ReplicaChecksums::hash_others_items() noexcept {
  try {
    for (std::size_t n = 0; n < positions_.size(); ++n) {
      if (stop_) {
        return;  // the save failed elsewhere: nobody will read the checksums
      }
      if (!written_here_[n]) {
        checksums_[n] = checksum_of(positions_[n]);
      }
    }
  } catch (...) {
    error_ = std::current_exception();
  }
  hashed_ = true;
}

std::vector<uint32_t> ReplicaChecksums::take(const std::vector<WriteResult>& written) {
  if (thread_.joinable()) {
    thread_.join();
  } else if (!hashed_) {
    hash_others_items();
  }
  if (error_) {
    std::rethrow_exception(error_);
  }
  std::unordered_map<const MetadataIndex*, const WriteResult*, IndexHash, IndexEqual> results;
  results.reserve(written.size());
  for (const WriteResult& result : written) {
    results.emplace(&result.index, &result);
  }
  for (std::size_t n = 0; n < positions_.size(); ++n) {
    if (written_here_[n]) {
      auto found = results.find(&plan_.items[positions_[n]].index);
      checksums_[n] = found != results.end() && found->second->content_crc32
                          ? *found->second->content_crc32
                          : checksum_of(positions_[n]);
    }
  }
  return std::move(checksums_);
}

std::string encode_checksums(const std::vector<uint32_t>& checksums) {
  std::string bytes(checksums.size() * sizeof(uint32_t), '\0');
  if (!checksums.empty()) {
    std::memcpy(bytes.data(), checksums.data(), bytes.size());
  }
  return bytes;
}

std::vector<uint32_t> decode_checksums(const std::string& bytes) {
  if (bytes.size() % sizeof(uint32_t) != 0) {
    throw CheckpointError(ErrorKind::kCorrupt,
                          "checkpoint save: a rank's replica checksums are " +
                              std::to_string(bytes.size()) +
                              " bytes, not a whole number of CRC-32s; every rank must run the "
                              "same dcpp build");
  }
  std::vector<uint32_t> checksums(bytes.size() / sizeof(uint32_t));
  if (!checksums.empty()) {
    std::memcpy(checksums.data(), bytes.data(), bytes.size());
  }
  return checksums;
}

std::string describe_differing_replicas(const ReplicatedItems& replicated,
                                        const std::vector<std::vector<uint32_t>>& checksums) {
  if (checksums.size() != replicated.of_rank.size()) {
    throw CheckpointError(ErrorKind::kCorrupt, "checkpoint save: replica checksums from " +
                                                   std::to_string(checksums.size()) +
                                                   " ranks, expected " +
                                                   std::to_string(replicated.of_rank.size()));
  }
  // First pass, O(items) memory: which items' copies differ at all.
  std::vector<uint32_t> first(replicated.items.size());
  std::vector<char> seen(replicated.items.size(), 0), differs(replicated.items.size(), 0);
  for (std::size_t rank = 0; rank < checksums.size(); ++rank) {
    const std::vector<uint32_t>& ids = replicated.of_rank[rank];
    if (checksums[rank].size() != ids.size()) {
      throw CheckpointError(ErrorKind::kCorrupt,
                            "checkpoint save: rank " + std::to_string(rank) + " sent " +
                                std::to_string(checksums[rank].size()) + " replica checksums for " +
                                std::to_string(ids.size()) +
                                " replicated items; every rank must run the same dcpp build");
    }
    for (std::size_t i = 0; i < ids.size(); ++i) {
      if (!seen[ids[i]]) {
        seen[ids[i]] = 1;
        first[ids[i]] = checksums[rank][i];
      } else if (first[ids[i]] != checksums[rank][i]) {
        differs[ids[i]] = 1;
      }
    }
  }
  constexpr std::size_t kNamed = 5;
  std::size_t differing = 0;
  bool optimizer_param_groups = false;
  // Second pass, for the items named only: the ranks holding each distinct checksum, in the
  // order the checksums were met.
  using Groups = std::vector<std::pair<uint32_t, std::vector<std::size_t>>>;
  std::map<uint32_t, Groups> named_groups;
  for (uint32_t id = 0; id < differs.size(); ++id) {
    if (differs[id]) {
      ++differing;
      optimizer_param_groups =
          optimizer_param_groups || is_nested_param_group_list(replicated.items[id].fqn);
      if (named_groups.size() < kNamed) named_groups.emplace(id, Groups());
    }
  }
  for (std::size_t rank = 0; rank < checksums.size() && !named_groups.empty(); ++rank) {
    const std::vector<uint32_t>& ids = replicated.of_rank[rank];
    for (std::size_t i = 0; i < ids.size(); ++i) {
      auto named_item = named_groups.find(ids[i]);
      if (named_item == named_groups.end()) continue;
      Groups& item = named_item->second;
      auto same = std::find_if(item.begin(), item.end(), [&](const auto& group) {
        return group.first == checksums[rank][i];
      });
      if (same == item.end()) {
        item.emplace_back(checksums[rank][i], std::vector<std::size_t>{rank});
      } else {
        same->second.push_back(rank);
      }
    }
  }
  std::string named;
  for (const auto& [id, item_groups] : named_groups) {
    named += (named.empty() ? "" : "; ") + item_name(replicated.items[id]) + ": ";
    const std::size_t shown = std::min(item_groups.size(), kItemsNamedInMessages);
    for (std::size_t g = 0; g < shown; ++g) {
      named += (g ? " / " : "") + rank_list(item_groups[g].second);
    }
    if (item_groups.size() > shown) {
      named += " / ... and " + std::to_string(item_groups.size() - shown) + " more groups";
    }
  }
  if (differing == 0) {
    return {};
  }
  return "checkpoint save: " + std::to_string(differing) +
         (differing == 1 ? " item that several ranks hold has"
                         : " items that several ranks hold have") +
         " different bytes on different ranks (ranks separated by '/' disagree): " + named +
         (differing > kNamed ? "; and " + std::to_string(differing - kNamed) + " more" : "") +
         ". A checkpoint keeps one copy of such an item, so the others would be lost. " +
         (optimizer_param_groups
              ? "An optimizer's nested param groups list each pipeline stage's own parameters "
                "under 'param_groups.<n>.params': save optimizer state flattened "
                "(StateDictOptions::flatten_optimizer_state_dict, as torchtitan does). "
              : "") +
         (optimizer_param_groups ? "Otherwise this" : "This") +
         " usually means one of three things. Replicas drifted apart: their gradients were not "
         "averaged over the group that replicates them before the optimizer stepped (call "
         "DataParallel::synchronize_gradients(), TensorParallel::synchronize_gradients() or "
         "FullyShardedDataParallel::reduce_gradients() every step, over the data-parallel "
         "group). Or a layout lists a shard as a whole tensor (a tensor-parallel shard under a "
         "layout of its own over the data-parallel group, for example): describe it as a shard "
         "of the whole tensor (ParameterPlacement::global_shape and offsets). Or ranks hold "
         "their own values under one key: give each its own key. "
         "SaveOptions::replica_check = ReplicaCheck::kWarn or kOff saves anyway "
         "(docs/distributed.md, \"Replication\")";
}

}  // namespace dcpp::detail
