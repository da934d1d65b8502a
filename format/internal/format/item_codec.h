#pragma once
// One data item of a checkpoint: a `torch.save` archive of a tensor chunk or of a value.

#include "format/byte_io.h"
#include "format/checksum_file.h"
#include "format/pickle/torch_pickle.h"
#include "format/zip/zip_blob_reader.h"

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dcpp::detail {

/// What writing an item produced: its length, and the CRC-32 of all its bytes (computed as they
/// were written, the payloads' record CRC-32s folded in); for a tensor written from row-major
/// memory, also its content_crc32 (content_checksum.h), from the payload's CRC-32.
struct WrittenItem {
  uint64_t length = 0;
  uint32_t crc32 = 0;
  std::optional<uint32_t> content_crc32;
};

/// Writes `torch.save(tensor)` for a CPU tensor, straight from its memory when the tensor owns
/// its storage densely (any strides); otherwise from a compact copy, as DCP does.
WrittenItem write_tensor_item(ByteSink& sink, const at::Tensor& tensor);

/// Writes `torch.save(value)` (tensors inside the value are stored as in `write_tensor_item`).
WrittenItem write_bytes_item(ByteSink& sink, const c10::IValue& value);
/// write_bytes_item for a value already pickled: `pickle` and `tensors` as encode_value_pickle
/// gives them.
WrittenItem write_pickled_bytes_item(ByteSink& sink, const std::string& pickle,
                                     const std::vector<at::Tensor>& tensors);

/// Where to put a box of a saved tensor chunk: `dest` (shape `lengths`) receives the chunk's box
/// starting at `storage_offsets`, in the chunk's own coordinates.
struct TensorReadRequest {
  at::Tensor dest;
  std::vector<int64_t> storage_offsets;
  std::vector<int64_t> lengths;
  at::ScalarType expected_dtype;
  std::vector<int64_t> expected_chunk_sizes;
};

/// What a tensor item's data.pkl says, and where its records are (pointers into the reader).
struct TensorItemInfo {
  TensorRef ref;
  const ZipRecordInfo* pickle_record;
  const ZipRecordInfo* storage_record;
};

/// Checks a tensor item without reading its storage payload: data.pkl decodes (its CRC-32 checked
/// when `verify_crc`) to a view that fits its storage record, of the dtype and shape `.metadata`
/// gives. Throws CheckpointError naming `zip.source().describe()`.
TensorItemInfo check_tensor_item(const ZipBlobReader& zip, at::ScalarType expected_dtype,
                                 const std::vector<int64_t>& expected_sizes, bool verify_crc);

/// Reads a box of the tensor item `source` holds into `request.dest`, reading only the bytes it
/// needs when the box is a contiguous range of a contiguous chunk, and straight into `dest` when
/// `dest` is contiguous. Throws CheckpointError naming `source.describe()` on a malformed archive,
/// a dtype or shape other than expected, or corrupted data.
///
/// Without `verify_crc` nothing is checked beyond what decoding needs. With it:
/// - when `expected` (the item's entry in the checksum file) is given and the read covers the
///   whole storage record, the CRC-32 of every byte of the item, the payload's computed as it is
///   read and the rest's read for it (a few hundred bytes);
/// - otherwise the format's own checks: the archive's layout (check_pytorch_layout), the CRC-32 of
///   every record, except the storage record's when only part of it is read (resharding).
void read_tensor_item(const ByteSource& source, const TensorReadRequest& request, bool verify_crc,
                      const ItemChecksum* expected = nullptr);

/// Reads the value of a bytes item. Python objects of classes other than plain values are a
/// CheckpointError naming the class and `source.describe()`. With `verify_crc`: the CRC-32 of the
/// whole item when `expected` is given, else the layout and every record's CRC-32.
c10::IValue read_bytes_item(const ByteSource& source, bool verify_crc,
                            const ItemChecksum* expected = nullptr);

/// The most bytes a `torch.save` archive of one tensor chunk of `dtype` and `sizes` may take: the
/// chunk's bytes and a generous allowance for the records around them (data.pkl, whose sizes and
/// strides grow with the dimensions, the small records, headers, 64-byte padding, the directory
/// and zip64 records; about 1.5 KiB in practice): 64 KiB plus 64 bytes per dimension. What a zstd
/// frame of such an item may decompress to.
uint64_t tensor_archive_bound(at::ScalarType dtype, const std::vector<int64_t>& sizes);

/// When the box [offsets, offsets + lengths) of a row-major tensor of `sizes` is one contiguous
/// range, its first element's linear index; otherwise -1.
int64_t contiguous_range_start(const std::vector<int64_t>& sizes,
                               const std::vector<int64_t>& offsets,
                               const std::vector<int64_t>& lengths);

/// The CRC-32 of all of `source`'s bytes, read in blocks.
uint32_t source_crc32(const ByteSource& source);

/// Throws CheckpointError (item_mismatch_message) when `actual` differs from `expected.crc32`.
void check_item_crc(const ByteSource& source, const ItemChecksum& expected, uint32_t actual);

}  // namespace dcpp::detail
