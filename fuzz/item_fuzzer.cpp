// Fuzz target: one whole data item (item_codec): the zip archive, its data.pkl and the tensor or
// value it rebuilds from the storage records, read as a load reads it.
//
// A load knows from `.metadata` which dtype and chunk shape to expect; here the expectation is
// taken from the item itself (when it describes a tensor of at most 65536 elements), so that the
// reads get past those checks and copy data: the whole chunk into a contiguous tensor, its first
// half along dimension 0 (the partial-read path), and the whole chunk into a transposed tensor
// (the strided-copy path). The reads skip the CRC-32 check (as a load with verify_checksums off
// does), so that mutated data.pkl records get past it. Contract checked: any bytes either load or
// throw CheckpointError.

#include "format/byte_io.h"
#include "format/item_codec.h"
#include "format/pickle/torch_pickle.h"
#include "format/zip/zip_blob_reader.h"

#include <dcpp/core/checkpoint_error.h>

#include <ATen/ATen.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace {

using namespace dcpp::detail;

constexpr int64_t kMaxElements = int64_t{1} << 16;

// The dtype and shape the item claims, when the tensor is small enough to allocate.
std::optional<TensorRef> claimed_tensor(const ByteSource& source) {
  try {
    const ZipBlobReader zip(source);
    const TensorRef ref =
        decode_tensor_pickle(zip.read_string(zip.get("data.pkl"), false), "fuzz input");
    int64_t numel = 1;
    for (int64_t size : ref.sizes) {
      if (size > kMaxElements || (numel *= size) > kMaxElements) return std::nullopt;
    }
    return ref;
  } catch (const dcpp::CheckpointError&) {
    return std::nullopt;
  }
}

void read_as(const ByteSource& source, const TensorRef& ref, bool first_half, bool transposed) {
  TensorReadRequest request;
  request.expected_dtype = ref.dtype;
  request.expected_chunk_sizes = ref.sizes;
  request.storage_offsets.assign(ref.sizes.size(), 0);
  request.lengths = ref.sizes;
  if (first_half && !ref.sizes.empty()) request.lengths[0] = ref.sizes[0] / 2;
  const at::TensorOptions options = at::TensorOptions().dtype(ref.dtype);
  if (transposed && request.lengths.size() >= 2) {
    std::vector<int64_t> swapped = request.lengths;
    std::swap(swapped[0], swapped[1]);
    request.dest = at::empty(swapped, options).transpose(0, 1);
  } else {
    request.dest = at::empty(request.lengths, options);
  }
  try {
    read_tensor_item(source, request, /*verify_crc=*/false);
  } catch (const dcpp::CheckpointError&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const MemorySource source(bytes, "fuzz input");
  for (const bool verify_crc : {true, false}) {
    try {
      read_bytes_item(source, verify_crc);
    } catch (const dcpp::CheckpointError&) {
    }
  }
  if (const std::optional<TensorRef> ref = claimed_tensor(source)) {
    read_as(source, *ref, /*first_half=*/false, /*transposed=*/false);
    read_as(source, *ref, /*first_half=*/true, /*transposed=*/false);
    read_as(source, *ref, /*first_half=*/false, /*transposed=*/true);
  }
  return 0;
}
