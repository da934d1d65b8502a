#pragma once
// What a rank is about to save, recorded before the save (a file of its own, written durably), so
// that a job resumed later — on the same ranks or another layout — can compare what it loaded with
// what was saved, bit for bit.

#include <dcpp/state_dict/state_dict.h>

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace crash {

/// The state dict CheckpointManager::save writes for `state`: every Stateful replaced by its
/// state_dict(), recursively.
dcpp::StateDict resolve_stateful(const dcpp::StateDict& state);

/// A piece of a tensor in the global tensor's coordinates (a plain tensor: one piece at 0).
struct RecordedPiece {
  std::vector<int64_t> offsets;
  at::Tensor tensor;  // contiguous, CPU
};

/// One flattened key (DCP's dotted name) of a recorded state.
struct RecordedEntry {
  bool is_value = false;
  std::string value_text;  // values: an exact text form (doubles in hexadecimal)
  std::vector<int64_t> global_shape;
  at::ScalarType dtype = at::kFloat;
  std::vector<RecordedPiece> pieces;
};

using Record = std::map<std::string, RecordedEntry>;

/// The record of a resolved state dict (flattened as DCP flattens it).
Record make_record(const dcpp::StateDict& resolved);

/// Writes `record` to `file` durably: a temporary name, fsync, rename, fsync of the directory.
/// Throws std::runtime_error naming the file when that fails.
void write_record(const Record& record, const std::filesystem::path& file);

/// Throws std::runtime_error naming the file when it is missing, truncated or malformed.
Record read_record(const std::filesystem::path& file);

/// The outcome of comparing a loaded state with the records of the ranks that saved it.
struct Comparison {
  int64_t entries = 0;  // flattened keys compared
  int64_t bytes = 0;    // tensor bytes compared
  std::vector<std::string> mismatches;
  bool equal() const { return mismatches.empty(); }
};

/// Compares this rank's loaded state (`loaded`, resolved) with `saved`, the records of every rank
/// that saved the checkpoint: the keys must be the same, every value equal, every tensor piece this
/// rank holds equal byte for byte to the same box of the saved global tensor (assembled from the
/// saved ranks' pieces; replicated pieces must agree with each other).
Comparison compare_with_saved(const dcpp::StateDict& loaded, const std::vector<Record>& saved);

}  // namespace crash
