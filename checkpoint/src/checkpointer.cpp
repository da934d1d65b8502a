// save() and load(): DCP's `state_dict_saver` / `state_dict_loader` steps, SPMD over the ranks of a
// process group (or one process). Protocol, the same on every rank:
//   save: plan locally -> gather the plans at the coordinator -> it plans globally and scatters
//         each rank its final plan -> write -> gather the results at the coordinator -> it
//         commits `.metadata` and broadcasts the outcome and the Metadata. With a SavePlanCache,
//         unchanged plans travel as tokens and the global plan is reused
//         (cached_save_planning.h).
//   load: read `.metadata`, plan locally -> gather at the coordinator -> it scatters the final
//         plans -> read -> agree on the outcome. Reading once (LoadOptions::read_once), the
//         coordinator leaves a box that several ranks need in one rank's plan, and that rank
//         sends it to the others after the reads (read_once_schedule.h).
//   save without collectives: plan locally -> a global plan of this plan alone -> write -> commit
//         `__<rank>.metadata`; no collective (DCP's use_collectives=False, without its barrier).
// A rank other than the coordinator sends and receives its own plans and results only, so its
// traffic does not grow with the world size. Every step also settles every rank's status
// (spmd_step.h), so a failure anywhere becomes the same CheckpointError, of the same kind, on
// every rank before the next step starts; nothing is committed after a failure, and no rank waits
// in a collective that the others will never join. A failed save then calls every rank's
// StorageWriter::abort_save, which removes what that rank wrote and releases the directory (the
// file system writer's lock, taken by the coordinator's set_up in the first step: a save refused
// there fails on every rank of its group before any of them writes).

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/storage/storage_location.h>

#include "checkpoint/cached_save_planning.h"
#include "checkpoint/replicated_items.h"
#include "checkpoint/save_commit.h"
#include "core/logging.h"
#include "dist/collectives.h"
#include "dist/legacy_ranks.h"
#include "dist/spmd_step.h"
#include "format/metadata_pickle.h"
#include "load_scratch.h"
#include "load_selection.h"
#include "optimizer_layout_match.h"
#include "planner/plan_codec.h"
#include "rank_metadata.h"
#include "read_once_exchange.h"
#include "read_once_schedule.h"
#include "storage/location_defaults.h"

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/state_dict/flatten.h>
#include <dcpp/state_dict/stateful.h>
#include <dcpp/state_dict/stateful_swap.h>

#include <functional>
#include <optional>
#include <typeinfo>
#include <unordered_set>

namespace dcpp {

namespace {

// Drops from the swapped-in dicts the keys `metadata` lacks that their Stateful says may be missing
// (Stateful::may_be_missing), so a strict load does not fail on them. Only keys that are dict
// entries can be dropped (a list would renumber). Costs a flatten of each Stateful's dict (the
// planner flattens the whole state dict once more) and, when some key may be missing, one pass
// over the metadata's keys.
void drop_optional_keys_missing_from(const StatefulSwap& statefuls, const Metadata& metadata) {
  struct Candidate {
    const StatefulSwap::Swapped* swapped;
    ObjectPath relative;
    std::string key;
  };
  std::vector<Candidate> candidates;
  for (const StatefulSwap::Swapped& swapped : statefuls.swapped()) {
    for (const FlatEntry& entry : flatten_state_dict(swapped.slot->dict())) {
      if (std::holds_alternative<std::string>(entry.path.back()) &&
          swapped.stateful->may_be_missing(entry.key)) {
        ObjectPath full = swapped.path;
        full.insert(full.end(), entry.path.begin(), entry.path.end());
        candidates.push_back(Candidate{&swapped, entry.path, join_path(full)});
      }
    }
  }
  if (candidates.empty()) {
    return;
  }
  std::unordered_set<std::string> saved;
  for (const auto& item : metadata.state_dict_metadata) {
    saved.insert(item.first);
  }
  for (const Candidate& candidate : candidates) {
    if (saved.count(candidate.key) > 0) {
      continue;
    }
    StateDict& dict = candidate.swapped->slot->dict();
    const ObjectPath parent(candidate.relative.begin(), candidate.relative.end() - 1);
    StateValue* holder = parent.empty() ? nullptr : find_element(dict, parent);
    StateDict* container = parent.empty()                           ? &dict
                           : holder != nullptr && holder->is_dict() ? &holder->dict()
                                                                    : nullptr;
    if (container != nullptr) {
      container->erase(std::get<std::string>(candidate.relative.back()));
    }
  }
}

std::unique_ptr<detail::Collectives> collectives_for(
    const c10::intrusive_ptr<c10d::ProcessGroup>& group, int coordinator) {
  std::unique_ptr<detail::Collectives> ranks = group ? detail::make_process_group_collectives(group)
                                                     : detail::make_single_process_collectives();
  if (coordinator < 0 || coordinator >= ranks->size()) {
    throw CheckpointError(ErrorKind::kUsage, "coordinator rank " + std::to_string(coordinator) +
                                                 " is not a rank of the " +
                                                 std::to_string(ranks->size()) +
                                                 "-rank process group");
  }
  return ranks;
}

// Runs `save`; when it throws, the writer's abort_save first (its own failure logged, not thrown),
// then the failure goes on.
template <typename Save>
Metadata aborting_on_failure(StorageWriter& writer, const Save& save) {
  try {
    return save();
  } catch (...) {
    try {
      writer.abort_save();
    } catch (const std::exception& error) {
      detail::logger().warn("the storage writer's abort_save failed after the failed save: {}",
                            error.what());
    } catch (...) {
      detail::logger().warn("the storage writer's abort_save failed after the failed save");
    }
    throw;
  }
}

Metadata save_with_collectives(const StateDict& state_dict, StorageWriter& storage_writer,
                               const SaveOptions& options);

}  // namespace

Metadata save(const StateDict& state_dict, const Location& location, const SaveOptions& options) {
  const std::unique_ptr<StorageWriter> writer =
      make_storage_writer(detail::with_default_s3(location, options.s3), options.file_system);
  return save(state_dict, *writer, options);
}

// A save without collectives: DCP's `use_collectives=False` path (local plan, a global plan of
// this plan alone, write, finish), with no collective at all.
Metadata save_without_collectives(const StateDict& state_dict, StorageWriter& storage_writer,
                                  const SaveOptions& options) {
  int rank = options.ranks.rank;
  if (options.ranks.process_group) {
    const int group_rank = options.ranks.process_group->getRank();
    if (rank != -1 && rank != group_rank) {
      throw CheckpointError(ErrorKind::kUsage,
                            "SaveOptions::ranks.rank is " + std::to_string(rank) +
                                " but this process is rank " + std::to_string(group_rank) +
                                " of the process group; leave rank at -1 or make them agree");
    }
    rank = group_rank;
  }
  if (rank < 0) {
    throw CheckpointError(
        ErrorKind::kUsage,
        "a save without collectives (SaveOptions::use_collectives = false) needs this process's "
        "rank: set SaveOptions::ranks.rank (with_rank()), or give a process group");
  }
  return detail::run_alone(rank, "checkpoint save", "saving without collectives", [&] {
    std::shared_ptr<SavePlanner> planner =
        options.planner ? options.planner : std::make_shared<DefaultSavePlanner>();
    StateDict resolved = resolve_statefuls(state_dict);
    storage_writer.set_up_without_collectives(rank);
    planner->set_up(resolved, rank == options.ranks.coordinator_rank);
    std::vector<SavePlan> plans;
    plans.push_back(storage_writer.prepare_local_plan(planner->create_local_plan()));
    auto [global_plans, metadata] = planner->create_global_plan(std::move(plans));
    global_plans = storage_writer.prepare_global_plan(std::move(global_plans));
    if (global_plans.size() != 1) {
      throw CheckpointError(
          ErrorKind::kUsage,
          "rank " + std::to_string(rank) +
              ": the global plan of a save without collectives must be one plan, not " +
              std::to_string(global_plans.size()) + "; the save planner must return one plan");
    }
    const SavePlan final_plan = planner->finish_plan(std::move(global_plans.front()));
    std::vector<std::vector<WriteResult>> results{storage_writer.write_data(final_plan, *planner)};
    storage_writer.finish(metadata, results);
    for (const WriteResult& result : results.front()) {
      metadata.storage_data.emplace_back(result.index, result.storage_data);
    }
    return metadata;
  });
}

Metadata save(const StateDict& state_dict, StorageWriter& storage_writer,
              const SaveOptions& given) {
  const SaveOptions options = detail::fold_legacy_ranks(given, "SaveOptions");
  return aborting_on_failure(storage_writer, [&] {
    return options.use_collectives ? save_with_collectives(state_dict, storage_writer, options)
                                   : save_without_collectives(state_dict, storage_writer, options);
  });
}

namespace {

Metadata save_with_collectives(const StateDict& state_dict, StorageWriter& storage_writer,
                               const SaveOptions& options) {
  const int coordinator = options.ranks.coordinator_rank;
  auto ranks = collectives_for(options.ranks.process_group, coordinator);
  const bool is_coordinator = ranks->rank() == coordinator;
  const char* operation = "checkpoint save";
  std::shared_ptr<SavePlanner> planner =
      options.planner ? options.planner : std::make_shared<DefaultSavePlanner>();
  StateDict resolved;

  // 1-2. Every rank plans what it holds; the coordinator merges the plans (or reuses the cached
  // merge) and sends every rank its own final plan.
  detail::SavePlanningSteps steps;
  steps.local = [&] {
    resolved = resolve_statefuls(state_dict);
    storage_writer.set_up(ranks->rank(), is_coordinator);
    planner->set_up(resolved, is_coordinator);
    return storage_writer.prepare_local_plan(planner->create_local_plan());
  };
  steps.global = [&](std::vector<SavePlan> plans) {
    return planner->create_global_plan(std::move(plans));
  };
  steps.prepare_global = [&](std::vector<SavePlan> plans) {
    return storage_writer.prepare_global_plan(std::move(plans));
  };
  steps.find_replicas = options.replica_check != ReplicaCheck::kOff && ranks->size() > 1;
  const SavePlanner& planner_object = *planner;
  const std::string context =
      std::to_string(ranks->size()) + " ranks, rank " + std::to_string(ranks->rank()) +
      ", coordinator " + std::to_string(coordinator) + ", planner " +
      typeid(planner_object).name() + " {" + planner_object.plan_cache_key() + "}, writer " +
      typeid(storage_writer).name() + (steps.find_replicas ? ", replica check" : "");
  detail::SavePlanning planning =
      detail::plan_save(*ranks, coordinator, options.plan_cache.get(), context, steps);
  Metadata& metadata = planning.metadata;
  // 3. Every rank writes its items, and checksums meanwhile those other ranks hold too; the
  // coordinator learns where they landed, and the checksums.
  SavePlan written_plan;                   // this rank's final plan
  std::vector<WriteResult> written_items;  // where its items landed
  const std::vector<std::string> results =
      detail::gather_at_coordinator(*ranks, coordinator, operation, "writing", [&] {
        written_plan =
            planner->finish_plan(detail::final_plan(planning, options.plan_cache.get(), context));
        detail::ReplicaChecksums checksums(planning.local, planning.replicated_positions,
                                           written_plan, *planner);
        written_items = storage_writer.write_data(written_plan, *planner);
        return detail::encode_written_items(written_items, checksums.take(written_items));
      });
  // 4. The coordinator commits; every rank learns the outcome, and gets the Metadata when it
  // asked for it (otherwise the traffic of a save would grow with the world: the coordinator
  // would send the whole Metadata to every rank).
  const bool metadata_everywhere = options.metadata_on_every_rank;
  const std::string committed =
      detail::from_coordinator(*ranks, coordinator, operation, "committing", [&] {
        metadata = detail::commit_save(storage_writer, std::move(metadata), results,
                                       planning.replicated.get(), options.replica_check);
        return metadata_everywhere ? detail::encode_metadata_message(metadata) : std::string();
      });
  detail::keep_save_plans(options.plan_cache.get());
  if (is_coordinator) return std::move(metadata);
  if (!metadata_everywhere) return detail::rank_metadata(written_plan, written_items);
  if (committed.empty()) {
    throw CheckpointError(ErrorKind::kUsage,
                          "checkpoint save: committed, but the coordinator (rank " +
                              std::to_string(coordinator) +
                              ") did not send the Metadata this rank asked for: "
                              "SaveOptions::metadata_on_every_rank must be the same on every "
                              "rank; read it with read_metadata()");
  }
  return detail::decode_metadata_message(committed);
}

// The reader of the layout found at `location` (DCP's unless another recognises it), which a
// layout other than DCP's logs, so reading a directory as another format is never silent.
std::unique_ptr<StorageReader> reader_for(const Location& given,
                                          const FileSystemReaderOptions& options,
                                          const S3Options& s3) {
  const Location location = detail::with_default_s3(given, s3);
  const std::shared_ptr<const CheckpointLayout> layout = checkpoint_layout(location);
  if (layout->name() != kDcpLayout) {
    detail::logger().info("reading {} as a {} checkpoint{}", location.url(), layout->name(),
                          location.layout().empty() ? " (found by its files)" : " (as asked)");
  }
  return layout->make_reader(location, options);
}

}  // namespace

IncompatibleKeys load(StateDict& state_dict, const Location& location, const LoadOptions& options) {
  auto reader = reader_for(location, options.file_system, options.s3);
  return load(state_dict, *reader, options);
}

namespace {

// One rank's targets across a load's steps.
struct LoadTargets {
  explicit LoadTargets(StateDict& targets) : state_dict(targets) {}

  /// What the reader fills: the scratch copy (all_or_nothing), or the targets themselves.
  StateDict& destination() { return scratch ? *scratch : state_dict; }

  StateDict& state_dict;
  std::optional<StatefulSwap> statefuls;  // the Statefuls' dicts, swapped in by step 1
  std::optional<StateDict> scratch;       // all_or_nothing's copy of the targets
};

// Whether the coordinator schedules each shared box to be read once (LoadOptions::read_once).
bool reads_once(const LoadOptions& options, const StorageReader& reader, int world_size) {
  return world_size > 1 && (options.read_once == ReadOnce::kAlways ||
                            (options.read_once == ReadOnce::kAuto && reader.is_shared_storage()));
}

// Step 1 on each rank: the metadata (read, or adopted from the coordinator's `shared` copy), the
// Statefuls swapped in, the scratch copy made, and this rank's local plan, encoded. With
// `narrow`, the reader is told the boxes this rank reads first (StorageReader::narrow_metadata).
std::string plan_local_load(LoadTargets& targets, Metadata& metadata, StorageReader& reader,
                            LoadPlanner& planner, const LoadOptions& options, int rank,
                            bool is_coordinator, bool share_metadata, const std::string& shared,
                            bool narrow) {
  targets.statefuls.emplace(targets.state_dict);
  if (share_metadata && !is_coordinator && !shared.empty()) {
    metadata = reader.read_shared_metadata(shared);
  } else if (!share_metadata || !is_coordinator) {
    if (narrow) reader.narrow_metadata(detail::load_selection(targets.state_dict));
    metadata = reader.read_metadata();
  }  // else the coordinator read it in step 0
  drop_optional_keys_missing_from(*targets.statefuls, metadata);
  detail::match_optimizer_layouts(targets.state_dict, metadata);
  if (options.all_or_nothing) targets.scratch = detail::make_load_scratch(targets.state_dict);
  reader.set_up(metadata, rank, is_coordinator);
  planner.set_up(targets.destination(), metadata, is_coordinator);
  return detail::encode_load_plan(reader.prepare_local_plan(planner.create_local_plan()));
}

// Step 2 on the coordinator: the global plan, and with `read_once` each rank's schedule of what it
// reads for others and receives from them; per rank, encoded.
std::vector<std::string> plan_global_load(const std::vector<std::string>& local_plans,
                                          LoadPlanner& planner, StorageReader& reader,
                                          const Metadata& metadata, bool read_once) {
  std::vector<LoadPlan> plans;
  for (const std::string& bytes : local_plans) plans.push_back(detail::decode_load_plan(bytes));
  plans = planner.create_global_plan(std::move(plans));
  std::vector<detail::ReadOnceSchedule> schedules;
  if (read_once) {  // before the reader prepares the plans: it sees what each rank reads
    schedules = detail::schedule_read_once(plans, metadata);
  }
  plans = reader.prepare_global_plan(std::move(plans));
  if (read_once && plans.size() != schedules.size()) {
    throw CheckpointError(ErrorKind::kUsage,
                          "checkpoint load: the storage reader's prepare_global_plan returned " +
                              std::to_string(plans.size()) + " plans for " +
                              std::to_string(schedules.size()) + " ranks");
  }
  std::vector<std::string> encoded;
  for (std::size_t rank = 0; rank < plans.size(); ++rank) {
    encoded.push_back(detail::encode_strings(
        {detail::encode_load_plan(plans[rank]),
         read_once ? detail::encode_read_once_schedule(schedules[rank]) : std::string()}));
  }
  return encoded;
}

// What step 2 sent this rank: its final plan, and its read-once schedule when there is one.
struct FinalLoadPlan {
  LoadPlan plan;
  std::optional<detail::ReadOnceSchedule> schedule;
};

FinalLoadPlan decode_final_load_plan(const std::string& central, int rank, int world_size) {
  const std::vector<std::string> parts = detail::decode_strings(central);
  if (parts.size() != 2) {
    throw CheckpointError(ErrorKind::kCorrupt,
                          "checkpoint load: the coordinator's final plan has " +
                              std::to_string(parts.size()) +
                              " parts, not 2; every rank must run the same dcpp build");
  }
  FinalLoadPlan final_plan{detail::decode_load_plan(parts[0]), std::nullopt};
  if (!parts[1].empty()) {
    final_plan.schedule = detail::decode_read_once_schedule(parts[1], rank, world_size);
  }
  return final_plan;
}

}  // namespace

IncompatibleKeys load(StateDict& state_dict, StorageReader& storage_reader,
                      const LoadOptions& given) {
  const LoadOptions options = detail::fold_legacy_ranks(given, "LoadOptions");
  const int coordinator = options.ranks.coordinator_rank;
  auto ranks = collectives_for(options.ranks.process_group, coordinator);
  const bool is_coordinator = ranks->rank() == coordinator;
  const char* operation = "checkpoint load";
  std::shared_ptr<LoadPlanner> planner =
      options.planner ? options.planner
                      : std::make_shared<DefaultLoadPlanner>(options.allow_partial_load);
  Metadata metadata;
  LoadTargets targets(state_dict);

  // 0. On shared storage the coordinator reads the metadata and sends what it read to the others
  // (when its reader shares it), so the store serves it once, not once per rank.
  std::string shared_metadata;
  const bool share_metadata = ranks->size() > 1 && storage_reader.is_shared_storage();
  if (share_metadata) {
    shared_metadata =
        detail::from_coordinator(*ranks, coordinator, operation, "reading the metadata", [&] {
          metadata = storage_reader.read_metadata();
          return storage_reader.metadata_to_share().value_or(std::string());
        });
  }
  // 1. Every rank reads the metadata (or adopts the coordinator's) and plans its reads; the
  // coordinator receives the plans. A rank other than the coordinator, whose default planner
  // needs only the chunks its own tensors overlap (no read-once schedule has it read others'),
  // lets its reader leave the rest out.
  const bool narrow =
      !is_coordinator && !options.planner && !reads_once(options, storage_reader, ranks->size());
  const std::vector<std::string> local_plans =
      detail::gather_at_coordinator(*ranks, coordinator, operation, "planning", [&] {
        return plan_local_load(targets, metadata, storage_reader, *planner, options, ranks->rank(),
                               is_coordinator, share_metadata, shared_metadata, narrow);
      });
  // 2. The coordinator sees every plan, may adjust them, and sends every rank its own (with a
  // read-once schedule: what it reads for others, and what others read for it).
  const std::string central =
      detail::scatter_from_coordinator(*ranks, coordinator, operation, "global planning", [&] {
        return plan_global_load(local_plans, *planner, storage_reader, metadata,
                                reads_once(options, storage_reader, ranks->size()));
      });
  // 3. Every rank reads its items (into the targets, or the scratch copy), keeping a copy of what
  // it reads for others; all learn whether every rank succeeded. The targets' Statefuls take
  // their dicts back once nothing else is to come: after the reads, the exchange of what was
  // read once (3b), or all or nothing's copy (4).
  std::optional<detail::ReadOnceSchedule> schedule;  // set on every rank, or on none
  std::optional<detail::StashingLoadPlanner> stashing;
  detail::agree(*ranks, operation, "reading", [&] {
    FinalLoadPlan final_plan = decode_final_load_plan(central, ranks->rank(), ranks->size());
    const LoadPlan plan = planner->finish_plan(std::move(final_plan.plan));
    schedule = std::move(final_plan.schedule);
    if (schedule) stashing.emplace(*planner, ranks->rank(), *schedule, metadata);
    storage_reader.read_data(plan, stashing ? static_cast<LoadPlanner&>(*stashing) : *planner);
    if (!targets.scratch && !schedule) targets.statefuls->commit();
  });
  // 3b. Read once: every rank sends what it read for others and receives what others read for it.
  if (schedule) {
    detail::agree(*ranks, operation, "exchanging what was read once", [&] {
      detail::exchange_read_once(*ranks, *schedule, &*stashing, *planner, metadata);
      stashing.reset();
      if (!targets.scratch) targets.statefuls->commit();
    });
  }
  // 4. All or nothing: every rank read and verified everything; now the targets change.
  if (targets.scratch) {
    detail::agree(*ranks, operation, "applying the loaded state", [&] {
      detail::apply_loaded_scratch(state_dict, *targets.scratch);
      targets.statefuls->commit();
    });
  }
  return planner->report();
}

StateDict load_from_keys(const Location& location, const std::vector<std::string>& keys,
                         const LoadOptions& options) {
  if (options.planner) {
    throw CheckpointError(ErrorKind::kUsage,
                          "load_from_keys(" + location.url() +
                              "): LoadOptions::planner must be null (load_from_keys plans the "
                              "load of the keys itself); use load() with your planner");
  }
  LoadOptions load_options = options;
  load_options.planner = make_empty_state_dict_load_planner(keys);
  StateDict state_dict;
  load(state_dict, location, load_options);
  return state_dict;
}

Metadata read_metadata(const Location& location) {
  return reader_for(location, {}, {})->read_metadata();
}

StateDict load_from_keys(const std::filesystem::path& directory,
                         const std::vector<std::string>& keys,
                         const FileSystemReaderOptions& options, const S3Options& s3) {
  return load_from_keys(detail::with_default_s3(directory, s3), keys,
                        LoadOptions().with_file_system(options));
}

Metadata read_metadata(const std::filesystem::path& directory, const S3Options& s3) {
  return read_metadata(detail::with_default_s3(directory, s3));
}

}  // namespace dcpp
