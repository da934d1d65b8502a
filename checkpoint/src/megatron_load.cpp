// Megatron-Core's strict handling of a load (megatron_load.h), as its validation.py does it:
// the unexpected keys from this rank's keys and the checkpoint's, the missing ones from every
// rank's, then logged, thrown or returned, and the unexpected ones left out of the load; then its
// validate_access_integrity, on the coordinator, over every rank's plan. Every step that may fail
// on one rank is agreed on (dist/spmd_step.h), so a failure reaches every rank.

#include <dcpp/checkpoint/megatron_load.h>

#include "core/bounded_list.h"
#include "core/logging.h"
#include "dist/collectives.h"
#include "dist/spmd_step.h"
#include "planner/plan_codec.h"
#include "planner/save_plan_validation.h"
#include "storage/megatron_object_key.h"

#include <dcpp/checkpoint/megatron_state_dict.h>
#include <dcpp/core/checkpoint_error.h>
#include <dcpp/planner/save_planner.h>
#include <dcpp/state_dict/flatten.h>
#include <dcpp/storage/checkpoint_layout.h>

#include <algorithm>
#include <iterator>
#include <sstream>
#include <vector>

namespace dcpp::megatron {
namespace {

namespace fs = std::filesystem;

constexpr const char* kOperation = "Megatron-Core load";
// The ShardedObject of the common state, loaded apart: a key on neither side.
constexpr const char* kCommonStateObject = "common_state";

// Megatron's key of a checkpoint or state-dict key: a ShardedObject shard's object key, else the
// key itself (a tensor's).
std::string megatron_key(const std::string& key) {
  if (key.find('/') == std::string::npos) return key;
  try {
    return parse_sharded_object_key(key).key;
  } catch (const CheckpointError&) {
    return key;
  }
}

bool finds_missing_keys(StrictHandling strict) {
  return strict == StrictHandling::kLogAll || strict == StrictHandling::kRaiseAll ||
         strict == StrictHandling::kReturnAll || strict == StrictHandling::kIgnoreAll;
}

// Megatron's report of a mismatch (maybe_report_missing_and_unexpected_keys), with what to do;
// each list counts its keys and names a few (every rank reports it).
std::string mismatch_report(const MismatchedKeys& keys) {
  std::string report;
  if (!keys.missing_keys.empty()) {
    report += std::to_string(keys.missing_keys.size()) +
              " key(s) in the checkpoint that no rank's state dict requests (missing, for all "
              "ranks): " +
              detail::quoted_list(keys.missing_keys);
  }
  if (!keys.unexpected_keys.empty()) {
    report += std::string(report.empty() ? "" : "; ") +
              std::to_string(keys.unexpected_keys.size()) +
              " key(s) this rank's state dict requests that the checkpoint lacks (unexpected): " +
              detail::quoted_list(keys.unexpected_keys);
  }
  return report;
}

std::string joined_lines(const std::set<std::string>& keys) {
  std::string text;
  for (const std::string& key : keys) text += key + "\n";
  return text;
}

// The keys of joined_lines(keys) as all_gather returns it (maybe padded with NULs).
void add_lines(const std::string& text, std::set<std::string>& keys) {
  std::istringstream lines(text.substr(0, text.find('\0')));
  for (std::string line; std::getline(lines, line);) {
    if (!line.empty()) keys.insert(line);
  }
}

// Megatron's validate_sharding_integrity of a load: every rank's requests, as a save of its state
// dict would plan them, gathered on the coordinator and checked there (validate_tensor_access,
// check_sharded_object_grids). A value whose key is not a ShardedObject shard is not checked
// here: the strict handling, or the load, says what is wrong with it.
void validate_access_integrity(StateDict& state_dict, detail::Collectives& ranks, int coordinator,
                               const fs::path& directory) {
  const std::vector<std::string> encoded = detail::gather_at_coordinator(
      ranks, coordinator, kOperation, "listing what each rank requests", [&] {
        DefaultSavePlanner planner;
        planner.set_up(state_dict, /*is_coordinator=*/false);
        SavePlan plan = planner.create_local_plan();
        plan.planner_data.clear();
        return detail::encode_save_plan(plan);
      });
  detail::from_coordinator(ranks, coordinator, kOperation, "validating access integrity", [&] {
    const std::string where = directory.string() + ": ";
    const std::string remedy =
        "request each chunk once over all ranks (Megatron's validate_access_integrity), or load "
        "with AccessIntegrity::kSkip";
    std::vector<SavePlan> plans;
    std::vector<detail::MegatronObjectKey> shards;
    for (const std::string& bytes : encoded) {
      plans.push_back(detail::decode_save_plan(bytes));
      for (const WriteItem& item : plans.back().items) {
        if (item.is_tensor() || item.index.fqn.find('/') == std::string::npos) continue;
        try {
          shards.push_back(detail::parse_megatron_object_key(item.index.fqn));
        } catch (const CheckpointError&) {
          // Not a ShardedObject shard: not this check's to refuse (see above).
        }
      }
    }
    try {
      detail::validate_tensor_access(plans);
    } catch (const CheckpointError& e) {
      throw CheckpointError(e.kind(), where + e.what_without_backtrace() + ": " + remedy);
    }
    detail::check_sharded_object_grids(shards, where, remedy);
    return std::string();
  });
}

}  // namespace

MismatchedKeys load(StateDict& state_dict, const fs::path& directory, StrictHandling strict,
                    const LoadOptions& options, AccessIntegrity access) {
  const auto& group = options.ranks.process_group;
  const std::unique_ptr<detail::Collectives> ranks =
      group ? detail::make_process_group_collectives(group)
            : detail::make_single_process_collectives();
  const int coordinator = group ? options.ranks.coordinator_rank : 0;
  if (strict == StrictHandling::kAssumeOkUnexpected) {
    if (access == AccessIntegrity::kValidate) {
      validate_access_integrity(state_dict, *ranks, coordinator, directory);
    }
    dcpp::load(state_dict, directory, options);
    return {};
  }

  // 1. This rank's keys against the checkpoint's (the common state is loaded apart, not a key).
  std::vector<FlatEntry> entries;
  std::set<std::string> requested;
  MismatchedKeys found;
  detail::agree(*ranks, kOperation, "comparing the keys with the checkpoint", [&] {
    if (checkpoint_layout(directory)->name() != kMegatronLayout) {
      throw CheckpointError(ErrorKind::kUsage, directory.string() +
                                                   " is not a Megatron-Core checkpoint (it has "
                                                   "no metadata.json); load it with dcpp::load");
    }
    std::set<std::string> in_checkpoint;
    for (const auto& [key, entry] : read_metadata(directory).state_dict_metadata) {
      in_checkpoint.insert(megatron_key(key));
    }
    entries = flatten_state_dict(state_dict);
    for (const FlatEntry& entry : entries) requested.insert(megatron_key(entry.key));
    in_checkpoint.erase(kCommonStateObject);
    requested.erase(kCommonStateObject);
    std::set_difference(requested.begin(), requested.end(), in_checkpoint.begin(),
                        in_checkpoint.end(),
                        std::inserter(found.unexpected_keys, found.unexpected_keys.end()));
    if (finds_missing_keys(strict)) found.missing_keys = std::move(in_checkpoint);
  });

  // 2. The missing keys: the checkpoint's that no rank requests.
  if (finds_missing_keys(strict)) {
    std::set<std::string> anywhere;
    for (const std::string& keys : ranks->all_gather(joined_lines(requested))) {
      add_lines(keys, anywhere);
    }
    for (const std::string& key : anywhere) found.missing_keys.erase(key);
  }

  // 3. Reported as the mode says, on every rank.
  const std::string report = mismatch_report(found);
  detail::agree(*ranks, kOperation, "checking the keys", [&] {
    if (report.empty()) return;
    if (strict == StrictHandling::kRaiseUnexpected || strict == StrictHandling::kRaiseAll) {
      throw CheckpointError(ErrorKind::kNotFound,
                            directory.string() + ": " + report +
                                "; load what the checkpoint holds, or a weaker StrictHandling");
    }
    if (strict == StrictHandling::kLogUnexpected || strict == StrictHandling::kLogAll) {
      detail::logger().warn("{}: {}; loading the rest", directory.string(), report);
    }
  });

  // 4. The ranks' requests, all of them (Megatron validates before leaving any out).
  if (access == AccessIntegrity::kValidate) {
    validate_access_integrity(state_dict, *ranks, coordinator, directory);
  }

  // 5. The load, without the unexpected keys (their values stay as they were).
  StateDict to_load;
  std::vector<const FlatEntry*> loaded;
  for (const FlatEntry& entry : entries) {
    if (found.unexpected_keys.count(megatron_key(entry.key)) != 0) continue;
    set_element(to_load, entry.path, *entry.value);
    loaded.push_back(&entry);
  }
  dcpp::load(to_load, directory, options);
  for (const FlatEntry* entry : loaded) *entry->value = *find_element(to_load, entry->path);

  if (strict == StrictHandling::kReturnUnexpected) found.missing_keys.clear();
  if (strict != StrictHandling::kReturnUnexpected && strict != StrictHandling::kReturnAll) {
    found = {};
  }
  return found;
}

}  // namespace dcpp::megatron
