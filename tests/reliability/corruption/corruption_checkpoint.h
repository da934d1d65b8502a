#pragma once
// The checkpoint the corruption harness damages: what a small data-parallel job with a sharded
// model and an optimizer saves from a few ranks.

#include <dcpp/state_dict/state_dict.h>

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <filesystem>
#include <string>

namespace dcpp::corruption {

/// Rank `rank`'s state dict, of `ranks` ranks: row- and column-sharded tensors (one chunk larger
/// than the file system reader's in-memory limit), tensors every rank holds (saved once), a 0-d
/// and an empty tensor, bfloat16 and int64 tensors, ints, floats, strings, a tuple holding a
/// tensor, and an optimizer-like nested dict with per-parameter state and param_groups.
/// `filled`: the values saved; otherwise the same layout with zeroed tensors and placeholder
/// values, as a job about to resume would hold it.
StateDict make_rank_state(int rank, int ranks, bool filled);

/// Whether `loaded` equals `expected` bit for bit (tensors, shards and values). On a difference,
/// `where` names the first differing key.
bool same_state(const StateDict& loaded, const StateDict& expected, std::string& where);

}  // namespace dcpp::corruption
