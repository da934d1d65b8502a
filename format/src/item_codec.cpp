// Data items as `torch.save` writes them: records data.pkl, .format_version, .storage_alignment,
// byteorder, data/<key>..., version, .data/serialization_id, in that order, under root "archive".
// Reading trusts nothing in the archive: sizes, dtypes, shapes and strides are checked against each
// other and against the `.metadata` before a byte is copied. Writing computes the CRC-32 of the
// whole item as it goes (for the checksum file); reading checks the item against it when it is
// given, or else checks the archive's layout and every record's CRC-32 (item_codec.h).

#include "format/item_codec.h"

#include "core/shape_string.h"
#include "format/content_checksum.h"
#include "format/crc32.h"
#include "format/pickle/torch_pickle.h"
#include "format/zip/zip_blob_reader.h"
#include "format/zip/zip_blob_writer.h"
#include "format/zip/zip_layout_check.h"

#include <dcpp/core/checkpoint_error.h>

#include <ATen/ATen.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <random>

namespace dcpp::detail {

namespace {

// A tensor that can be written straight from its storage: it covers its storage exactly once.
bool owns_storage_densely(const at::Tensor& tensor) {
  return tensor.storage_offset() == 0 && tensor.is_non_overlapping_and_dense() &&
         tensor.storage().nbytes() ==
             static_cast<std::size_t>(tensor.numel()) * tensor.element_size();
}

// PyTorch's serialization id: 20 digits of randomness and 20 digits of a per-process counter.
std::string serialization_id() {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t seed =
      std::random_device{}() ^
      static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  char id[48];
  std::snprintf(id, sizeof(id), "%020llu%020llu",
                static_cast<unsigned long long>(seed % 10000000000000000000ULL),
                static_cast<unsigned long long>(counter.fetch_add(1)));
  return id;
}

void add_string(ZipBlobWriter& zip, const char* name, const std::string& value) {
  zip.add(name, value.data(), value.size());
}

void add_header_records(ZipBlobWriter& zip, const std::string& pickle) {
  add_string(zip, "data.pkl", pickle);
  add_string(zip, ".format_version", "1");
  add_string(zip, ".storage_alignment", "64");
  add_string(zip, "byteorder", "little");
}

WrittenItem finish_archive(ZipBlobWriter& zip, uint64_t start, ByteSink& sink) {
  add_string(zip, "version", "3\n");
  add_string(zip, ".data/serialization_id", serialization_id());
  zip.finish();
  return WrittenItem{sink.position() - start, zip.archive_crc32(), std::nullopt};
}

uint32_t add_storage(ZipBlobWriter& zip, const std::string& key, const at::Tensor& tensor) {
  return zip.add("data/" + key, tensor.storage().data(), tensor.storage().nbytes());
}

// A CPU tensor that covers its storage exactly once: the tensor itself when it does, otherwise a
// compact copy (a view of a larger storage, an expanded tensor) or a CPU copy (CUDA), as DCP does.
at::Tensor writable_form(const at::Tensor& tensor) {
  const at::Tensor cpu = tensor.device().is_cpu() ? tensor : tensor.to(at::kCPU);
  return owns_storage_densely(cpu) ? cpu : cpu.clone(at::MemoryFormat::Contiguous);
}

}  // namespace

WrittenItem write_tensor_item(ByteSink& sink, const at::Tensor& tensor) {
  const at::Tensor data = writable_form(tensor);
  TensorRef ref;
  ref.storage_key = "0";
  ref.dtype = data.scalar_type();
  ref.storage_numel = data.numel();
  ref.storage_offset = 0;
  ref.sizes = data.sizes().vec();
  ref.strides = data.strides().vec();
  const uint64_t start = sink.position();
  ZipBlobWriter zip(sink);
  add_header_records(zip, encode_tensor_pickle(ref));
  const uint32_t payload_crc = add_storage(zip, "0", data);
  WrittenItem written = finish_archive(zip, start, sink);
  if (data.is_contiguous()) {  // the payload is the elements in row-major order
    written.content_crc32 = content_crc32_from_bytes_crc32(data, payload_crc);
  }
  return written;
}

WrittenItem write_bytes_item(ByteSink& sink, const c10::IValue& value) {
  std::vector<at::Tensor> tensors;
  const std::string pickle = encode_value_pickle(value, tensors);
  return write_pickled_bytes_item(sink, pickle, tensors);
}

WrittenItem write_pickled_bytes_item(ByteSink& sink, const std::string& pickle,
                                     const std::vector<at::Tensor>& tensors) {
  const uint64_t start = sink.position();
  ZipBlobWriter zip(sink);
  add_header_records(zip, pickle);
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    add_storage(zip, std::to_string(i), writable_form(tensors[i]));
  }
  return finish_archive(zip, start, sink);
}

namespace {

void check_view(const TensorRef& ref, const ByteSource& source) {
  if (ref.sizes.size() != ref.strides.size() || ref.storage_offset < 0 || ref.storage_numel < 0) {
    throw CheckpointError(ErrorKind::kCorrupt,
                          source.describe() + ": data.pkl describes an invalid tensor view");
  }
  bool empty = false;
  for (std::size_t d = 0; d < ref.sizes.size(); ++d) {
    if (ref.sizes[d] < 0 || ref.strides[d] < 0) {
      throw CheckpointError(ErrorKind::kCorrupt,
                            source.describe() + ": data.pkl has a negative size or stride");
    }
    empty = empty || ref.sizes[d] == 0;
  }
  if (empty) {
    return;  // no element: any offset and strides are fine
  }
  int64_t last = ref.storage_offset;
  for (std::size_t d = 0; d < ref.sizes.size(); ++d) {
    if (ref.strides[d] > (INT64_MAX - last) / ref.sizes[d]) {
      throw CheckpointError(ErrorKind::kCorrupt,
                            source.describe() + ": data.pkl has sizes and strides that overflow");
    }
    last += (ref.sizes[d] - 1) * ref.strides[d];
  }
  if (last >= ref.storage_numel) {
    throw CheckpointError(ErrorKind::kCorrupt,
                          source.describe() + ": the tensor of size " + shape_string(ref.sizes) +
                              " and stride " + shape_string(ref.strides) + " reaches past its " +
                              std::to_string(ref.storage_numel) + "-element storage");
  }
}

bool is_contiguous_view(const TensorRef& ref) {
  int64_t expected = 1;
  for (std::size_t d = ref.sizes.size(); d-- > 0;) {
    if (ref.sizes[d] != 1 && ref.strides[d] != expected) {
      return false;
    }
    expected *= ref.sizes[d];
  }
  return ref.storage_offset == 0;
}

// The format's own checks of everything but what the caller reads itself: the layout, and the
// CRC-32 of every record not in `read` (data.pkl and the storage records read in full are checked
// as they are read).
void check_format(const ZipBlobReader& zip, const std::vector<const ZipRecordInfo*>& read) {
  check_pytorch_layout(zip);
  for (const ZipRecordInfo& record : zip.records()) {
    if (std::find(read.begin(), read.end(), &record) == read.end()) {
      zip.check_crc(record);
    }
  }
}

// The CRC-32 of the whole item from its storage record's payload CRC-32 (computed as it was read):
// the bytes before and after the payload are read and checksummed here.
uint32_t item_crc_around(const ByteSource& source, const ZipRecordInfo& record,
                         uint32_t payload_crc) {
  const uint64_t after = record.data_offset + record.size;
  std::string bytes(static_cast<std::size_t>(std::max(record.data_offset, source.size() - after)),
                    '\0');
  source.read(0, bytes.data(), static_cast<std::size_t>(record.data_offset));
  uint32_t crc = crc32(0, bytes.data(), static_cast<std::size_t>(record.data_offset));
  crc = crc32_combine(crc, payload_crc, record.size);
  source.read(after, bytes.data(), static_cast<std::size_t>(source.size() - after));
  return crc32_combine(crc, crc32(0, bytes.data(), static_cast<std::size_t>(source.size() - after)),
                       source.size() - after);
}

}  // namespace

int64_t contiguous_range_start(const std::vector<int64_t>& sizes,
                               const std::vector<int64_t>& offsets,
                               const std::vector<int64_t>& lengths) {
  std::size_t d = sizes.size();
  while (d > 0 && offsets[d - 1] == 0 && lengths[d - 1] == sizes[d - 1]) {
    --d;
  }
  // Dimensions before d-1 must have length 1 for the box to be one range.
  for (std::size_t k = 0; k + 1 < d; ++k) {
    if (lengths[k] != 1) {
      return -1;
    }
  }
  int64_t start = 0;
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    start = start * sizes[k] + offsets[k];
  }
  return start;
}

uint64_t tensor_archive_bound(at::ScalarType dtype, const std::vector<int64_t>& sizes) {
  constexpr uint64_t kAllowance = 64 * 1024;
  constexpr uint64_t kAllowancePerDimension = 64;
  constexpr uint64_t kLarge = UINT64_MAX / 4;  // past any file; keeps the sum from overflowing
  uint64_t bytes = c10::elementSize(dtype);
  for (int64_t size : sizes) {
    const uint64_t n = static_cast<uint64_t>(std::max<int64_t>(size, 0));
    bytes = (n != 0 && bytes > kLarge / n) ? kLarge : bytes * n;
  }
  return bytes + kAllowance + kAllowancePerDimension * std::min<uint64_t>(sizes.size(), kLarge);
}

uint32_t source_crc32(const ByteSource& source) {
  constexpr std::size_t kBlock = std::size_t{1} << 20;
  std::string block(static_cast<std::size_t>(std::min<uint64_t>(source.size(), kBlock)), '\0');
  uint32_t crc = 0;
  for (uint64_t done = 0; done < source.size();) {
    const std::size_t n =
        static_cast<std::size_t>(std::min<uint64_t>(kBlock, source.size() - done));
    source.read(done, block.data(), n);
    crc = crc32(crc, block.data(), n);
    done += n;
  }
  return crc;
}

void check_item_crc(const ByteSource& source, const ItemChecksum& expected, uint32_t actual) {
  if (actual != expected.crc32) {
    throw CheckpointError(ErrorKind::kCorrupt,
                          item_mismatch_message(source.describe(), expected, actual));
  }
}

TensorItemInfo check_tensor_item(const ZipBlobReader& zip, at::ScalarType expected_dtype,
                                 const std::vector<int64_t>& expected_sizes, bool verify_crc) {
  const ByteSource& source = zip.source();
  const ZipRecordInfo& pickle_record = zip.get("data.pkl");
  const std::string pickle = zip.read_string(pickle_record, verify_crc);
  TensorRef ref = decode_tensor_pickle(pickle, source.describe());
  check_view(ref, source);
  if (ref.dtype != expected_dtype) {
    throw CheckpointError(ErrorKind::kCorrupt,
                          source.describe() + ": the stored tensor is " + c10::toString(ref.dtype) +
                              " but .metadata says " + c10::toString(expected_dtype));
  }
  if (ref.sizes != expected_sizes) {
    throw CheckpointError(ErrorKind::kCorrupt,
                          source.describe() + ": the stored tensor has shape " +
                              shape_string(ref.sizes) + " but .metadata says " +
                              shape_string(expected_sizes));
  }
  const ZipRecordInfo& record = zip.get("data/" + ref.storage_key);
  const int64_t element_size = static_cast<int64_t>(c10::elementSize(ref.dtype));
  if (record.size != static_cast<uint64_t>(ref.storage_numel) * element_size) {
    throw CheckpointError(ErrorKind::kCorrupt,
                          source.describe() + ": storage record data/" + ref.storage_key +
                              " holds " + std::to_string(record.size) + " bytes, not the " +
                              std::to_string(ref.storage_numel * element_size) +
                              " its tensor needs");
  }
  return TensorItemInfo{std::move(ref), &pickle_record, &record};
}

void read_tensor_item(const ByteSource& source, const TensorReadRequest& request, bool verify_crc,
                      const ItemChecksum* expected) {
  const ZipBlobReader zip(source);
  const TensorItemInfo info =
      check_tensor_item(zip, request.expected_dtype, request.expected_chunk_sizes, verify_crc);
  const TensorRef& ref = info.ref;
  const ZipRecordInfo& pickle_record = *info.pickle_record;
  const ZipRecordInfo& record = *info.storage_record;
  const int64_t element_size = static_cast<int64_t>(c10::elementSize(ref.dtype));
  // Reads the whole storage record into `dst`, then checks the item: whole, against the checksum
  // file when it has an entry; otherwise the rest of the archive by the format's checks.
  const auto read_whole = [&](void* dst) {
    const uint32_t payload_crc = zip.read(record, dst, verify_crc);
    if (!verify_crc) return;
    if (expected != nullptr) {
      check_item_crc(source, *expected, item_crc_around(source, record, payload_crc));
    } else {
      check_format(zip, {&pickle_record, &record});
    }
  };
  const at::Tensor& dest = request.dest;
  const bool dest_direct =
      dest.is_contiguous() && dest.scalar_type() == ref.dtype && dest.device().is_cpu();
  const bool whole = request.lengths == ref.sizes &&
                     std::all_of(request.storage_offsets.begin(), request.storage_offsets.end(),
                                 [](int64_t o) { return o == 0; });
  if (dest_direct && whole && is_contiguous_view(ref) && ref.storage_numel == dest.numel()) {
    read_whole(dest.data_ptr());
    return;
  }
  // Part of a record: read only that range. Its CRC covers the whole record and is not checked,
  // nor is the item's; the rest of the archive is, by the format's checks.
  if (dest_direct && !whole && is_contiguous_view(ref)) {
    const int64_t start =
        contiguous_range_start(ref.sizes, request.storage_offsets, request.lengths);
    if (start >= 0) {
      if (verify_crc) check_format(zip, {&pickle_record, &record});
      zip.read_range(record, static_cast<uint64_t>(start * element_size), dest.data_ptr(),
                     static_cast<std::size_t>(dest.numel() * element_size));
      return;
    }
  }
  at::Tensor storage = at::empty({ref.storage_numel}, at::TensorOptions().dtype(ref.dtype));
  read_whole(storage.data_ptr());
  at::Tensor view = storage.as_strided(ref.sizes, ref.strides, ref.storage_offset);
  for (std::size_t d = 0; d < request.lengths.size(); ++d) {
    view = view.narrow(static_cast<int64_t>(d), request.storage_offsets[d], request.lengths[d]);
  }
  dest.copy_(view);
}

c10::IValue read_bytes_item(const ByteSource& source, bool verify_crc,
                            const ItemChecksum* expected) {
  if (verify_crc && expected != nullptr) {
    // The whole item against the checksum file first; then nothing in it needs checking again.
    check_item_crc(source, *expected, source_crc32(source));
    verify_crc = false;
  }
  const ZipBlobReader zip(source);
  std::vector<const ZipRecordInfo*> read;
  const ZipRecordInfo& pickle_record = zip.get("data.pkl");
  read.push_back(&pickle_record);
  const std::string pickle = zip.read_string(pickle_record, verify_crc);
  c10::IValue value = decode_value_pickle(
      pickle,
      [&](const TensorRef& ref) {
        check_view(ref, source);
        const ZipRecordInfo& record = zip.get("data/" + ref.storage_key);
        const uint64_t expected_size =
            static_cast<uint64_t>(ref.storage_numel) * c10::elementSize(ref.dtype);
        if (record.size != expected_size) {
          throw CheckpointError(ErrorKind::kCorrupt,
                                source.describe() + ": storage record data/" + ref.storage_key +
                                    " holds " + std::to_string(record.size) + " bytes, not " +
                                    std::to_string(expected_size));
        }
        at::Tensor storage = at::empty({ref.storage_numel}, at::TensorOptions().dtype(ref.dtype));
        zip.read(record, storage.data_ptr(), verify_crc);
        read.push_back(&record);
        return storage.as_strided(ref.sizes, ref.strides, ref.storage_offset);
      },
      source.describe());
  if (verify_crc) check_format(zip, read);
  return value;
}

}  // namespace dcpp::detail
