#pragma once
// A checksum of what a write item holds, independent of how it is archived (a torch.save archive
// also holds a per-save serialization id): two ranks' copies of one item have the same checksum
// when they hold the same dtype, shape and bytes (replica_check.h compares them).

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <cstdint>

namespace dcpp::detail {

/// CRC-32 of a tensor's dtype, shape and elements in row-major order. A CUDA tensor is copied to
/// the CPU and a non-contiguous one compacted first; a contiguous CPU tensor is read in place.
uint32_t content_crc32(const at::Tensor& tensor);

/// content_crc32 of a contiguous CPU tensor whose bytes have the CRC-32 `bytes_crc32` (computed
/// as they were written), without reading them again.
uint32_t content_crc32_from_bytes_crc32(const at::Tensor& contiguous, uint32_t bytes_crc32);

/// CRC-32 of a value's pickle (the data.pkl write_bytes_item writes for it) followed by the
/// content_crc32 of each tensor the value holds.
uint32_t content_crc32(const c10::IValue& value);

}  // namespace dcpp::detail
