#pragma once
// Hugging Face safetensors directories as a checkpoint: DCP's `HuggingFaceStorageReader` and
// `HuggingFaceStorageWriter` (torch/distributed/checkpoint/hf_storage.py), for dcpp::load and
// dcpp::save. See docs/huggingface.md.

#include <dcpp/core/export.h>
#include <dcpp/storage/storage_reader.h>
#include <dcpp/storage/storage_writer.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>

namespace dcpp {

/// The index file of a Hugging Face checkpoint directory.
inline constexpr const char* kHuggingFaceIndexFile = "model.safetensors.index.json";

/// True when `directory` is a Hugging Face checkpoint directory rather than a DCP one: it has no
/// `.metadata`, and it has `model.safetensors.index.json` or at least one `*.safetensors` file.
/// Does not throw (false for anything unreadable).
DCPP_API bool is_huggingface_directory(const std::filesystem::path& directory);

struct DCPP_API HuggingFaceReaderOptions {
  /// Threads reading; each takes whole files.
  int thread_count = 1;

  HuggingFaceReaderOptions& with_thread_count(int n) {
    thread_count = n;
    return *this;
  }
};

/// Reads a directory of `*.safetensors` files: the files `model.safetensors.index.json` names in
/// its "weight_map" when there is one (every weight_map file must exist inside the directory and
/// hold the tensors the index places in it), otherwise every `*.safetensors` file at its top
/// level. Each file's `__metadata__` may carry DCP's "DCP_SHARDING_INFO" (the offsets of the chunk
/// the file holds, as DCP's sharded saves write it); without it (Hugging Face Hub checkpoints),
/// every tensor is whole. `read_metadata` checks every header before anything is read (length
/// limit, JSON shape, known dtypes, sizes, data ranges exactly the tensor's size inside the file,
/// no overlaps; chunks of a tensor that overlap or leave part of it uncovered) and throws a
/// CheckpointError naming the file and key. `read_data` reads only the bytes of the boxes asked
/// for: one contiguous range for rows of a row-major tensor, one range per run otherwise. Tensors
/// only: a Hugging Face directory holds no other values.
DCPP_API std::unique_ptr<StorageReader> make_huggingface_reader(
    std::filesystem::path directory, HuggingFaceReaderOptions options = {});

struct DCPP_API HuggingFaceWriterOptions {
  /// Which file each tensor goes to, as DCP's `fqn_to_index_mapping`: FQN -> file index 1..N,
  /// giving files `model-0000i-of-0000N.safetensors` (every index up to the largest gets a file,
  /// empty if no tensor maps to it). When set, every tensor saved must be in it. When empty,
  /// `max_file_size` decides.
  std::map<std::string, int> fqn_to_index_mapping;
  /// Without a mapping: the most bytes of tensor data per file (tensors in save order, a new file
  /// when the next would not fit; a larger tensor gets a file of its own). 0: one file.
  uint64_t max_file_size = 0;
  /// Threads writing this rank's chunks (each chunk by one thread).
  int thread_count = 1;
  /// fsync the files, the index and the directory. Off only for scratch checkpoints.
  bool sync_files = true;

  HuggingFaceWriterOptions& with_fqn_to_index_mapping(std::map<std::string, int> mapping) {
    fqn_to_index_mapping = std::move(mapping);
    return *this;
  }
  HuggingFaceWriterOptions& with_max_file_size(uint64_t bytes) {
    max_file_size = bytes;
    return *this;
  }
  HuggingFaceWriterOptions& with_thread_count(int n) {
    thread_count = n;
    return *this;
  }
  HuggingFaceWriterOptions& with_sync_files(bool v) {
    sync_files = v;
    return *this;
  }
};

/// Writes a consolidated Hugging Face directory straight from every rank, with no merge pass: the
/// coordinator's `prepare_global_plan` lays out the files (which tensor goes where, each file's
/// header, every tensor's byte range), creates them as hidden staging files
/// (`.<name>.<tag>.partial`, header written, full size allocated) and sends each rank the layout
/// of the tensors it writes; each rank writes its chunks' bytes in place (a chunk of a row-major
/// tensor is one or more contiguous runs); `finish` fsyncs the files, renames them into place and
/// writes `model.safetensors.index.json` last (`.tmp`, fsync, rename, fsync of the directory), so
/// a directory with the index is complete. The directory is created if needed; one that already
/// holds `*.safetensors` files or an index is refused. Only tensors: a non-tensor value in the
/// state dict is a CheckpointError naming its key (save it elsewhere, e.g. with a DCP checkpoint).
/// A failed save may leave staging files, which no reader looks at.
DCPP_API std::unique_ptr<StorageWriter> make_huggingface_writer(
    std::filesystem::path directory, HuggingFaceWriterOptions options = {});

}  // namespace dcpp
