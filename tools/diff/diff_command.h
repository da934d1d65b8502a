#pragma once
// `dcpp diff A B [--json]`: what differs between two checkpoints (any formats of
// checkpoint_source.h): keys on one side only, kind, shape and dtype changes, and for tensors the
// largest absolute and relative differences. Streams: one tensor of each side at a time.

#include <ATen/core/Tensor.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <ostream>

namespace dcpp::tools {

/// How two tensors of the same shape differ, over their values in float64 (complex: complex128,
/// differences as magnitudes). Equal elements (infinities of one sign, NaNs on both sides) differ
/// by 0. `max_rel` is the largest |a - b| / max(|a|, |b|) (1 where one side is infinite);
/// `nan_mismatches` counts elements NaN on one side only, which take no part in the maxima.
struct TensorDifference {
  double max_abs = 0;
  double max_rel = 0;
  int64_t differing = 0;  // elements that differ, NaN mismatches included
  int64_t nan_mismatches = 0;
};

/// Compares `a` and `b` (same shape; any dtypes) block by block.
TensorDifference compare_tensors(const at::Tensor& a, const at::Tensor& b);

/// {"equal": bool, "only_in_a": [key...], "only_in_b": [key...], "same": count,
///  "changed": {key: {"change": "kind"|"shape"|"dtype"|"values"|"value", "a": ..., "b": ...,
///                    tensors of one shape: "max_abs_diff", "max_rel_diff", "differing_elements",
///                    "nan_mismatches"}}}.
/// Tensors are equal when their dtype, shape and bytes are; values when their JSON forms are.
nlohmann::json diff_checkpoints(const std::filesystem::path& a, const std::filesystem::path& b);

/// The human-readable form: one line per difference and a summary line.
void print_diff(const nlohmann::json& diff, std::ostream& out);

/// Registers the `diff` subcommand on `app`: exit status 0 when equal, 1 when not.
void add_diff_command(CLI::App& app);

}  // namespace dcpp::tools
