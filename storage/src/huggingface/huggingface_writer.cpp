// The Hugging Face storage writer: every rank writes its slices straight into the consolidated
// safetensors files, with no merge pass afterwards (unlike DCP's consolidate_safetensors_files).
// Protocol:
//   prepare_global_plan (coordinator): from every rank's plan (global shapes and dtypes in each
//     WriteItem), lay out the files (huggingface_layout.h), create each as a hidden staging file
//     `.<name>.<tag>.partial` with its header written and its full size allocated, and give each
//     rank, in SavePlan::storage_data, the files and the offsets of the tensors it writes.
//   write_data (every rank): each chunk's bytes go in place with pwrite, one call per contiguous
//     run of the chunk in the row-major tensor (tensor_runs.h); then the rank fsyncs the files.
//   finish (coordinator, after every rank wrote): check every tensor's bytes were written, fsync
//     every file, rename them into place, fsync the directory, then write the index
//     `model.safetensors.index.json` (`.tmp`, fsync, rename, fsync of the directory).
// A crash before the index's rename leaves staging files (ignored by every reader) or a set of
// complete files without an index, which the reader refuses when the set is incomplete. Replicated
// chunks are written once: the save planner gives each chunk to one rank.

#include <dcpp/storage/huggingface_storage.h>

#include "format/file_io.h"
#include "huggingface_layout.h"
#include "parallel_for.h"
#include "planner/save_plan_validation.h"
#include "random_tag.h"
#include "tensor_runs.h"

#include <dcpp/core/checkpoint_error.h>

#include <ATen/ATen.h>

#include <nlohmann/json.hpp>

#include <map>
#include <optional>
#include <set>

namespace dcpp {

namespace {

namespace fs = std::filesystem;

std::string refuse_value(const std::string& key) {
  return "key '" + key +
         "' is not a tensor: a Hugging Face checkpoint (safetensors) holds only tensors. Leave "
         "it out of the state dict saved with the Hugging Face writer, and save it elsewhere "
         "(e.g. dcpp::save to a DCP checkpoint, or a file of your own)";
}

class HuggingFaceWriter final : public StorageWriter {
 public:
  HuggingFaceWriter(fs::path directory, HuggingFaceWriterOptions options)
      : directory_(std::move(directory)), options_(std::move(options)) {
    if (options_.thread_count < 1) {
      throw CheckpointError(ErrorKind::kUsage,
                            "HuggingFaceWriterOptions::thread_count must be at least 1, not " +
                                std::to_string(options_.thread_count));
    }
  }

  void set_up(int rank, bool is_coordinator) override {
    std::error_code error;
    fs::create_directories(directory_, error);
    if (error) {
      throw CheckpointError(ErrorKind::kIo, "cannot create checkpoint directory " +
                                                directory_.string() + ": " + error.message());
    }
    if (is_huggingface_directory(directory_) || fs::exists(directory_ / ".metadata")) {
      throw CheckpointError(
          ErrorKind::kUsage,
          "directory " + directory_.string() +
              " already holds a checkpoint (*.safetensors files, " + kHuggingFaceIndexFile +
              " or .metadata); save the Hugging Face checkpoint to a new directory");
    }
    layout_.reset();
  }

  std::vector<SavePlan> prepare_global_plan(std::vector<SavePlan> plans) override {
    detail::validate_global_save_plan(plans);
    std::vector<detail::HuggingFaceTensorSpec> specs;
    std::set<std::string> seen;
    for (const SavePlan& plan : plans) {
      for (const WriteItem& item : plan.items) {
        if (!item.is_tensor() || !item.tensor_data) {
          throw CheckpointError(ErrorKind::kUsage, "cannot save to Hugging Face checkpoint " +
                                                       directory_.string() + ": " +
                                                       refuse_value(item.index.fqn));
        }
        if (seen.insert(item.index.fqn).second) {
          specs.push_back(detail::HuggingFaceTensorSpec{
              item.index.fqn, item.tensor_data->properties.dtype, item.tensor_data->size});
        }
      }
    }
    detail::HuggingFaceLayout layout = detail::compute_huggingface_layout(
        specs, options_.fqn_to_index_mapping, options_.max_file_size);
    const std::string tag = detail::random_tag(12);
    for (const detail::HuggingFaceFile& file : layout.files) {
      detail::File staging(directory_ / detail::huggingface_staging_name(file.name, tag),
                           detail::File::Mode::kCreateTruncate);
      staging.allocate(file.size);
      staging.write_at(0, file.header.data(), file.header.size());
      staging.close();
    }
    for (SavePlan& plan : plans) {
      std::vector<std::string> fqns;
      for (const WriteItem& item : plan.items) fqns.push_back(item.index.fqn);
      plan.storage_data = detail::encode_rank_layout(layout, tag, fqns);
    }
    layout_ = std::move(layout);
    tag_ = tag;
    return plans;
  }

  std::vector<WriteResult> write_data(const SavePlan& plan, SavePlanner& planner) override {
    const detail::HuggingFaceRankLayout layout = detail::decode_rank_layout(plan.storage_data);
    // Open only the files this rank writes into.
    std::vector<std::unique_ptr<detail::File>> files(layout.files.size());
    for (const WriteItem& item : plan.items) {
      if (!item.is_tensor() || !item.tensor_data) {
        throw CheckpointError(ErrorKind::kUsage, "cannot save to Hugging Face checkpoint " +
                                                     directory_.string() + ": " +
                                                     refuse_value(item.index.fqn));
      }
      auto found = layout.tensors.find(item.index.fqn);
      if (found == layout.tensors.end()) {
        throw CheckpointError(ErrorKind::kUsage,
                              "tensor '" + item.index.fqn +
                                  "' has no place in the Hugging Face layout this rank received");
      }
      std::unique_ptr<detail::File>& file = files[found->second.file];
      if (!file) {
        file = std::make_unique<detail::File>(directory_ / layout.staging_files[found->second.file],
                                              detail::File::Mode::kReadWrite);
      }
    }
    std::vector<WriteResult> results(plan.items.size());
    detail::parallel_for(plan.items.size(), options_.thread_count, [&](std::size_t i) {
      const WriteItem& item = plan.items[i];
      const auto& placed = layout.tensors.at(item.index.fqn);
      results[i] =
          write_item(item, placed, *files[placed.file], layout.files[placed.file], planner);
    });
    for (auto& file : files) {
      if (file) {
        if (options_.sync_files) file->sync();
        file->close();
      }
    }
    return results;
  }

  void finish(Metadata metadata, const std::vector<std::vector<WriteResult>>& results) override {
    if (!layout_) {
      throw CheckpointError(ErrorKind::kUsage,
                            "Hugging Face writer: finish without prepare_global_plan on this "
                            "rank (finish runs on the coordinator)");
    }
    const detail::HuggingFaceLayout& layout = *layout_;
    // Every tensor whole: the chunks written add up to its bytes (the plan was checked to cover
    // each tensor without overlap).
    std::map<std::string, uint64_t> written;
    for (const auto& rank_results : results) {
      for (const WriteResult& result : rank_results) {
        written[result.index.fqn] += static_cast<uint64_t>(result.size_in_bytes);
      }
    }
    for (const detail::HuggingFacePlacedTensor& tensor : layout.tensors) {
      if (written[tensor.spec.fqn] != tensor.nbytes) {
        throw CheckpointError(ErrorKind::kUsage,
                              "cannot commit Hugging Face checkpoint " + directory_.string() +
                                  ": tensor '" + tensor.spec.fqn + "' got " +
                                  std::to_string(written[tensor.spec.fqn]) + " of its " +
                                  std::to_string(tensor.nbytes) + " bytes from the ranks");
      }
    }
    for (const detail::HuggingFaceFile& file : layout.files) {
      const fs::path staging = directory_ / detail::huggingface_staging_name(file.name, tag_);
      if (options_.sync_files) {
        detail::File opened(staging, detail::File::Mode::kReadWrite);
        opened.sync();
        opened.close();
      }
    }
    for (const detail::HuggingFaceFile& file : layout.files) {
      rename(detail::huggingface_staging_name(file.name, tag_), file.name);
    }
    if (options_.sync_files) detail::sync_directory(directory_);
    nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
    for (const detail::HuggingFaceFile& file : layout.files) {
      for (std::size_t i : file.tensors) weight_map[layout.tensors[i].spec.fqn] = file.name;
    }
    const std::string index =
        nlohmann::ordered_json{{"metadata", {{"total_size", layout.total_size}}},
                               {"weight_map", weight_map}}
            .dump(2) +
        "\n";
    const std::string temp = std::string(kHuggingFaceIndexFile) + ".tmp";
    {
      detail::File file(directory_ / temp, detail::File::Mode::kCreateTruncate);
      file.write_all(index.data(), index.size());
      if (options_.sync_files) file.sync();
      file.close();
    }
    rename(temp, kHuggingFaceIndexFile);
    if (options_.sync_files) detail::sync_directory(directory_);
    layout_.reset();
  }

 private:
  WriteResult write_item(const WriteItem& item, const detail::HuggingFaceRankLayout::Tensor& placed,
                         detail::File& file, const std::string& file_name,
                         SavePlanner& planner) const {
    const TensorWriteData& data = *item.tensor_data;
    const std::string where = "Hugging Face checkpoint " + directory_.string() + ", file " +
                              file_name + ", key '" + item.index.fqn + "'";
    if (data.size != placed.shape || data.properties.dtype != placed.dtype) {
      throw CheckpointError(ErrorKind::kUsage,
                            where + ": the plan's global shape or dtype differs from the layout's");
    }
    const std::size_t dims = placed.shape.size();
    bool inside = data.chunk.offsets.size() == dims && data.chunk.sizes.size() == dims;
    for (std::size_t d = 0; inside && d < dims; ++d) {
      inside = data.chunk.offsets[d] >= 0 && data.chunk.sizes[d] >= 0 &&
               data.chunk.offsets[d] <= placed.shape[d] - data.chunk.sizes[d];
    }
    if (!inside) {
      throw CheckpointError(ErrorKind::kUsage, where + ": the chunk lies outside the tensor");
    }
    WriteItemData resolved = planner.resolve_data(item);
    const at::Tensor* given = std::get_if<at::Tensor>(&resolved);
    if (given == nullptr) {
      throw CheckpointError(ErrorKind::kUsage, "cannot save to " + directory_.string() + ": " +
                                                   refuse_value(item.index.fqn));
    }
    at::Tensor tensor = given->to(at::kCPU).contiguous();
    if (tensor.scalar_type() != placed.dtype || tensor.sizes().vec() != data.chunk.sizes) {
      throw CheckpointError(ErrorKind::kUsage, where + ": the planner resolved a " +
                                                   c10::toString(tensor.scalar_type()) +
                                                   " tensor of shape " + c10::str(tensor.sizes()) +
                                                   " for a chunk of shape " +
                                                   c10::str(c10::IntArrayRef(data.chunk.sizes)));
    }
    const char* bytes = static_cast<const char*>(tensor.data_ptr());
    const detail::BoxRuns runs =
        detail::box_runs(placed.shape, data.chunk.offsets, data.chunk.sizes,
                         static_cast<uint64_t>(c10::elementSize(placed.dtype)));
    runs.for_each([&](uint64_t tensor_offset, uint64_t box_offset) {
      file.write_at(placed.offset + tensor_offset, bytes + box_offset, runs.run_bytes);
    });
    WriteResult result;
    result.index = item.index;
    result.size_in_bytes = static_cast<int64_t>(runs.run_bytes * runs.count);
    result.storage_data = StorageInfo{
        file_name, static_cast<int64_t>(placed.offset + runs.first), result.size_in_bytes, {}};
    return result;
  }

  void rename(const std::string& from, const std::string& to) const {
    std::error_code error;
    fs::rename(directory_ / from, directory_ / to, error);
    if (error) {
      throw CheckpointError(ErrorKind::kIo, "cannot commit Hugging Face checkpoint " +
                                                directory_.string() + ": renaming " + from +
                                                " to " + to + " failed: " + error.message());
    }
  }

  fs::path directory_;
  HuggingFaceWriterOptions options_;
  // The coordinator's layout of the save in progress, between prepare_global_plan and finish.
  std::optional<detail::HuggingFaceLayout> layout_;
  std::string tag_;
};

}  // namespace

std::unique_ptr<StorageWriter> make_huggingface_writer(std::filesystem::path directory,
                                                       HuggingFaceWriterOptions options) {
  return std::make_unique<HuggingFaceWriter>(std::move(directory), std::move(options));
}

}  // namespace dcpp
