// `dcpp convert --to hf`: a Hugging Face directory from any source, through dcpp's own save with
// the library's Hugging Face writer. The state dict handed to save holds one meta placeholder per
// tensor under its flat key (the FQN the files will name); the streaming planner reads each tensor
// from the source when the writer asks for it. Values are skipped (safetensors hold only tensors).

#include "convert/destination.h"
#include "convert/format_writers.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/core/checkpoint_error.h>
#include <dcpp/storage/huggingface_storage.h>

#include <ATen/ATen.h>

namespace dcpp::tools {

namespace fs = std::filesystem;

std::vector<fs::path> write_huggingface(Conversion& conversion, const fs::path& dst,
                                        uint64_t max_shard_size,
                                        std::vector<std::string>& skipped) {
  require_new_directory(dst);
  StateDict state;
  for (const SourceEntry& entry : conversion.source().entries()) {
    if (!entry.is_tensor) {
      skipped.push_back(entry.key);
      continue;
    }
    state.insert(
        entry.key,
        at::empty(entry.shape,
                  at::TensorOptions().dtype(conversion.output_dtype(entry)).device(at::kMeta)));
  }
  if (state.size() == 0) {
    throw CheckpointError(ErrorKind::kUsage,
                          "the source holds no tensors; a Hugging Face checkpoint would be empty");
  }
  SaveOptions options;
  options.planner = make_streaming_save_planner(conversion);
  auto writer = make_huggingface_writer(
      dst, HuggingFaceWriterOptions().with_max_file_size(max_shard_size).with_thread_count(1));
  const Metadata metadata = save(state, *writer, options);
  std::vector<fs::path> files = data_files_of(dst, metadata);
  files.push_back(dst / kHuggingFaceIndexFile);
  return files;
}

}  // namespace dcpp::tools
