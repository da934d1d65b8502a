#pragma once
// A Hugging Face safetensors directory as a checkpoint layout ("huggingface"): a directory
// without `.metadata` that has `model.safetensors.index.json` or `*.safetensors` files.

#include <dcpp/storage/checkpoint_layout.h>

namespace dcpp::detail {

class HuggingFaceCheckpointLayout final : public CheckpointLayout {
 public:
  std::string name() const override { return kHuggingFaceLayout; }
  /// Directories only: is_huggingface_directory.
  bool recognizes(const Location& location, LocationFiles& files) const override;
  /// make_huggingface_reader with `reading`'s thread count. Throws CheckpointError (kUsage) for a
  /// location other than a directory.
  std::unique_ptr<StorageReader> make_reader(const Location& location,
                                             const FileSystemReaderOptions& reading) const override;
};

}  // namespace dcpp::detail
