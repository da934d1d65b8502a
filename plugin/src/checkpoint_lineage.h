#pragma once
// Which run a managed checkpoint belongs to, so that the tiers compare saves, not step numbers.
//
// Every manifest carries a save identity (`save_id`, random) and the lineage of its run: a
// generation, and the step that generation forked from. A run forks when it resumes from a step
// that is not the newest of its tiers (a rollback: restore step 800, train on while steps 900 to
// 1200 of the first run are resumable): its saves get a generation above every one seen,
// branched from 800. A checkpoint is then *abandoned* when a later generation forked below its
// step: the first run's 900 to 1200 are, once a save of the new run exists, and a resume never
// takes them. An abandoned checkpoint is deleted (from every tier) once the resumable timeline has
// passed it (it holds a step at least as new), so it can be inspected until then and never outlives
// the run that abandoned it. Manifests written before lineages existed read as generation 0, never
// forked.

#include <dcpp/plugin/checkpoint_info.h>

#include <cstdint>
#include <string>
#include <vector>

namespace dcpp::detail {

/// The lineage a manager writes into its saves' manifests.
struct Lineage {
  int64_t generation = 0;
  int64_t branched_from = -1;  // -1: the first run, never forked
};

/// A fresh save identity: 32 hex digits from the system's random source.
std::string new_save_id();

/// True when some checkpoint of `all` has a later generation that forked below `checkpoint`'s step.
bool is_abandoned(const CheckpointInfo& checkpoint, const std::vector<CheckpointInfo>& all);

/// Of `all` (the tiers' complete checkpoints, the preferred tier's first), those a resume may take:
/// not abandoned, one per step (the first of `all` that has it), ascending by step.
std::vector<CheckpointInfo> resumable(const std::vector<CheckpointInfo>& all);

/// The abandoned checkpoints of `all` that resumable(all) has passed (it holds a step at least as
/// new), in `all`'s order: what retention deletes whatever the policy.
std::vector<CheckpointInfo> passed_abandoned(const std::vector<CheckpointInfo>& all);

/// The lineage of the saves that follow a resume from `restored`: its own, unless it is abandoned
/// or a resumable checkpoint of `all` is newer; then a fork from its step, of a generation above
/// all of `all`'s.
Lineage lineage_after_restore(const CheckpointInfo& restored,
                              const std::vector<CheckpointInfo>& all);

/// A fork from `restored`'s step, of a generation above all of `all`'s: the lineage of the saves
/// after a resume that could not see every tier (a remote tier that cannot be reached), so that
/// the steps newer than `restored` it may hold unseen are abandoned, never mixed with this run's.
Lineage fork_after_restore(const CheckpointInfo& restored, const std::vector<CheckpointInfo>& all);

/// The lineage of a manager's saves before any resume: that of the newest resumable checkpoint
/// of `all` (the first run's when there is none).
Lineage lineage_to_continue(const std::vector<CheckpointInfo>& all);

/// True when a save of `step` with `lineage` replaces `existing`, a checkpoint of that step: it
/// belongs to a generation the lineage abandons.
bool replaces(const Lineage& lineage, const CheckpointInfo& existing);

/// "generation branched_from", and back (the coordinator tells the other ranks).
std::string encode_lineage(const Lineage& lineage);
Lineage decode_lineage(const std::string& text);

}  // namespace dcpp::detail
