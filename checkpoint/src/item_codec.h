#pragma once
// One data item of a checkpoint: a `torch.save` archive of a tensor chunk or of a value.

#include "byte_io.h"

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <cstdint>
#include <string>
#include <vector>

namespace dcpp::detail {

/// Writes `torch.save(tensor)` for a CPU tensor, straight from its memory when the tensor owns
/// its storage densely (any strides); otherwise from a compact copy, as DCP does. Returns the
/// number of bytes written.
uint64_t write_tensor_item(ByteSink& sink, const at::Tensor& tensor);

/// Writes `torch.save(value)` (tensors inside the value are stored as in `write_tensor_item`).
/// Returns the number of bytes written.
uint64_t write_bytes_item(ByteSink& sink, const c10::IValue& value);

/// Where to put a box of a saved tensor chunk: `dest` (shape `lengths`) receives the chunk's box
/// starting at `storage_offsets`, in the chunk's own coordinates.
struct TensorReadRequest {
  at::Tensor dest;
  std::vector<int64_t> storage_offsets;
  std::vector<int64_t> lengths;
  at::ScalarType expected_dtype;
  std::vector<int64_t> expected_chunk_sizes;
};

/// Reads a box of the tensor item `source` holds into `request.dest`, reading only the bytes it
/// needs when the box is a contiguous range of a contiguous chunk, and straight into `dest` when
/// `dest` is contiguous. With `verify_crc`, the CRC-32 of every record read in full is checked.
/// Throws CheckpointError naming `source.describe()` on a malformed archive, a dtype or shape other
/// than expected, or corrupted data.
void read_tensor_item(const ByteSource& source, const TensorReadRequest& request, bool verify_crc);

/// Reads the value of a bytes item. Python objects of classes other than plain values are a
/// CheckpointError naming the class and `source.describe()`.
c10::IValue read_bytes_item(const ByteSource& source, bool verify_crc);

}  // namespace dcpp::detail
