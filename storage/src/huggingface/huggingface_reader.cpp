// The Hugging Face storage reader: Metadata from the headers (huggingface_directory.h), then, per
// read item, only the bytes of its box: the box's contiguous runs (tensor_runs.h), read straight
// into the destination when it is contiguous; runs close together in the file are read with one
// call and copied out, so a column block costs a few large reads rather than one per row. Files are
// spread over the threads, each file read by one thread.

#include <dcpp/storage/huggingface_storage.h>

#include "format/file_io.h"
#include "huggingface_directory.h"
#include "parallel_for.h"
#include "tensor_runs.h"

#include <dcpp/core/checkpoint_error.h>

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>
#include <map>

namespace dcpp {

namespace {

namespace fs = std::filesystem;

// Runs at most this far apart are read together (the gap is read and dropped) ...
constexpr uint64_t kMaxGap = 64 * 1024;
// ... into a scratch buffer of at most this many bytes.
constexpr uint64_t kMaxSpan = 16 * 1024 * 1024;

class HuggingFaceReader final : public StorageReader {
 public:
  HuggingFaceReader(fs::path directory, HuggingFaceReaderOptions options)
      : directory_(std::move(directory)), options_(options) {
    if (options_.thread_count < 1) {
      throw CheckpointError(ErrorKind::kUsage,
                            "HuggingFaceReaderOptions::thread_count must be at least 1, not " +
                                std::to_string(options_.thread_count));
    }
  }

  Metadata read_metadata() override {
    scanned_ = detail::scan_huggingface_directory(directory_);
    return scanned_.metadata;
  }

  void set_up(const Metadata& metadata, int rank, bool is_coordinator) override {
    if (scanned_.files.empty()) {
      // Metadata from elsewhere (another rank, a cache): the headers are still needed here.
      scanned_ = detail::scan_huggingface_directory(directory_);
    }
  }

  void read_data(const LoadPlan& plan, LoadPlanner& planner) override {
    std::map<std::size_t, std::vector<const ReadItem*>> by_file;
    for (const ReadItem& item : plan.items) {
      if (item.type == LoadItemType::kBytes) {
        throw CheckpointError(
            ErrorKind::kIncompatible,
            "Hugging Face checkpoint " + directory_.string() + ": key '" + item.storage_index.fqn +
                "' is asked for as a value, but the directory holds only tensors");
      }
      by_file[chunk(item.storage_index).file].push_back(&item);
    }
    std::vector<std::pair<std::size_t, std::vector<const ReadItem*>>> files(by_file.begin(),
                                                                            by_file.end());
    detail::parallel_for(files.size(), options_.thread_count, [&](std::size_t i) {
      read_file(files[i].first, files[i].second, planner);
    });
  }

 private:
  const detail::HuggingFaceChunk& chunk(const MetadataIndex& index) const {
    auto found = scanned_.chunks.find(index);
    if (found == scanned_.chunks.end()) {
      throw CheckpointError(ErrorKind::kCorrupt, "Hugging Face checkpoint " + directory_.string() +
                                                     ": key '" + index.fqn +
                                                     "' has no chunk at the offsets asked for");
    }
    return found->second;
  }

  void read_file(std::size_t file_index, std::vector<const ReadItem*> items,
                 LoadPlanner& planner) const {
    const fs::path path = directory_ / scanned_.files[file_index];
    const detail::File file(path, detail::File::Mode::kRead);
    std::sort(items.begin(), items.end(), [&](const ReadItem* a, const ReadItem* b) {
      return chunk(a->storage_index).data_offset < chunk(b->storage_index).data_offset;
    });
    for (const ReadItem* item : items) {
      read_item(file, *item, planner);
    }
  }

  void read_item(const detail::File& file, const ReadItem& item, LoadPlanner& planner) const {
    const detail::HuggingFaceChunk& stored = chunk(item.storage_index);
    const std::string where =
        "safetensors file " + file.path().string() + ", key '" + item.storage_index.fqn + "'";
    const std::size_t dims = stored.shape.size();
    bool inside = item.storage_offsets.size() == dims && item.lengths.size() == dims;
    for (std::size_t d = 0; inside && d < dims; ++d) {
      inside = item.storage_offsets[d] >= 0 && item.lengths[d] >= 0 &&
               item.storage_offsets[d] <= stored.shape[d] - item.lengths[d];
    }
    if (!inside) {
      throw CheckpointError(ErrorKind::kCorrupt,
                            where + ": the load plan asks for a box outside the stored tensor");
    }
    at::Tensor dest = planner.resolve_tensor(item);
    if (dest.scalar_type() != stored.dtype || dest.sizes().vec() != item.lengths) {
      throw CheckpointError(ErrorKind::kIncompatible,
                            where + ": the destination is " + c10::toString(dest.scalar_type()) +
                                " of shape " + c10::str(dest.sizes()) + ", the file holds " +
                                c10::toString(stored.dtype) + " (a box of " +
                                c10::str(c10::IntArrayRef(item.lengths)) + " asked for)");
    }
    const bool direct = dest.is_contiguous() && dest.device().is_cpu();
    at::Tensor buffer =
        direct ? dest : at::empty(item.lengths, at::TensorOptions().dtype(stored.dtype));
    char* out = static_cast<char*>(buffer.data_ptr());
    const detail::BoxRuns runs =
        detail::box_runs(stored.shape, item.storage_offsets, item.lengths,
                         static_cast<uint64_t>(c10::elementSize(stored.dtype)));
    // Gather runs into spans read with one call each.
    std::vector<std::pair<uint64_t, uint64_t>> span;  // (tensor offset, box offset) of its runs
    std::string scratch;
    const auto flush = [&] {
      if (span.empty()) return;
      const uint64_t begin = span.front().first;
      if (span.size() == 1) {
        file.read_exactly(stored.data_offset + begin, out + span.front().second, runs.run_bytes);
      } else {
        const uint64_t length = span.back().first + runs.run_bytes - begin;
        scratch.resize(length);
        file.read_exactly(stored.data_offset + begin, scratch.data(), length);
        for (const auto& [tensor_offset, box_offset] : span) {
          std::memcpy(out + box_offset, scratch.data() + (tensor_offset - begin), runs.run_bytes);
        }
      }
      span.clear();
    };
    runs.for_each([&](uint64_t tensor_offset, uint64_t box_offset) {
      if (!span.empty()) {
        const uint64_t end = span.back().first + runs.run_bytes;
        if (tensor_offset - end > kMaxGap ||
            tensor_offset + runs.run_bytes - span.front().first > kMaxSpan) {
          flush();
        }
      }
      span.emplace_back(tensor_offset, box_offset);
    });
    flush();
    if (!direct) {
      dest.copy_(buffer);
    }
    planner.commit_tensor(item, dest);
  }

  fs::path directory_;
  HuggingFaceReaderOptions options_;
  detail::HuggingFaceDirectory scanned_;
};

}  // namespace

bool is_huggingface_directory(const std::filesystem::path& directory) {
  std::error_code error;
  if (!fs::is_directory(directory, error) || fs::exists(directory / ".metadata", error)) {
    return false;
  }
  if (fs::exists(directory / kHuggingFaceIndexFile, error)) {
    return true;
  }
  for (const auto& entry : fs::directory_iterator(directory, error)) {
    const std::string name = entry.path().filename().string();
    if (name.size() > 12 && name.front() != '.' &&
        name.compare(name.size() - 12, 12, ".safetensors") == 0) {
      return true;
    }
  }
  return false;
}

std::unique_ptr<StorageReader> make_huggingface_reader(std::filesystem::path directory,
                                                       HuggingFaceReaderOptions options) {
  return std::make_unique<HuggingFaceReader>(std::move(directory), options);
}

}  // namespace dcpp
