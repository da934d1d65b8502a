#pragma once
// What every format writer of `dcpp convert` shares: reading one tensor at a time from the source,
// cast to the requested floating dtype, with progress; and the nested state dict of the source,
// its tensors standing in as meta tensors (shape and output dtype only, no memory).

#include "common/progress_bar.h"
#include "convert/checkpoint_source.h"

#include <dcpp/state_dict/state_dict.h>

#include <optional>
#include <string>
#include <unordered_map>

namespace dcpp::tools {

class Conversion {
 public:
  /// `dtype`: the floating dtype floating tensors of at least one dimension are cast to; others
  /// keep theirs (integers, bools, complex, and 0-dim scalars such as optimizer counters); nullopt
  /// keeps every dtype. `source` must outlive the conversion.
  Conversion(CheckpointSource& source, std::optional<at::ScalarType> dtype, ProgressBar& progress);

  CheckpointSource& source() { return source_; }
  /// The dtype `entry` is written with.
  at::ScalarType output_dtype(const SourceEntry& entry) const;
  /// Reads `entry` whole (contiguous, CPU), casts it to `output_dtype` and counts it as done.
  /// Holds at most the tensor and its cast copy at once.
  at::Tensor read_tensor(const SourceEntry& entry);

  /// The source as a nested state dict (DCP's un-flattening along each entry's path): values
  /// read, each saved whole (whole_value.h), tensors as meta placeholders of the output dtype.
  /// `entry_of` then maps a placeholder back to its entry.
  StateDict placeholder_state_dict();
  /// The entry a placeholder of `placeholder_state_dict` stands for, or nullptr for other tensors.
  const SourceEntry* entry_of(const at::Tensor& placeholder) const;

  /// Bytes of every tensor in the source (the progress bar's total).
  static uint64_t total_bytes(const CheckpointSource& source);

 private:
  CheckpointSource& source_;
  std::optional<at::ScalarType> dtype_;
  ProgressBar& progress_;
  std::unordered_map<const void*, const SourceEntry*> placeholders_;
};

/// Nested StateDicts and StateLists as one IValue: dicts with string keys (insertion order kept),
/// lists, tensors and values, as Python's `torch.save` of a nested dict sees them.
c10::IValue to_ivalue(const StateValue& value);

}  // namespace dcpp::tools
