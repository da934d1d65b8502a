#include "convert/checkpoint_source.h"

#include "common/megatron_lm_root.h"

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/storage/checkpoint_layout.h>

#include <c10/core/ScalarType.h>

#include <fstream>

namespace dcpp::tools {

uint64_t SourceEntry::nbytes() const {
  if (!is_tensor) return 0;
  uint64_t n = c10::elementSize(dtype);
  for (int64_t size : shape) n *= static_cast<uint64_t>(size);
  return n;
}

std::unique_ptr<CheckpointSource> open_checkpoint_source(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  const Location location(path);
  // Megatron-LM's save directory: the iteration its tracker names (megatron_lm_root.h).
  if (location.is_directory() && is_megatron_lm_root(path)) {
    return open_checkpoint_source(megatron_lm_checkpoint(path, std::nullopt).directory);
  }
  if (!location.is_directory() || fs::is_directory(path)) {
    const std::shared_ptr<const CheckpointLayout> layout = checkpoint_layout(location);
    if (layout->name() == kHuggingFaceLayout) return open_huggingface_source(path);
    return open_layout_source(location, *layout);
  }
  if (!fs::is_regular_file(path)) {
    throw CheckpointError(ErrorKind::kNotFound,
                          path.string() +
                              " does not exist (expected a DCP checkpoint directory, "
                              "a Hugging Face directory, a torch.save file or a safetensors file)");
  }
  char magic[2] = {0, 0};
  std::ifstream(path, std::ios::binary).read(magic, 2);
  if (magic[0] == 'P' && magic[1] == 'K') {
    return open_torch_save_source(path);
  }
  return open_safetensors_source(path);
}

const SourceEntry* find_entry(const CheckpointSource& source, const std::string& key) {
  for (const SourceEntry& entry : source.entries()) {
    if (entry.key == key) return &entry;
  }
  return nullptr;
}

}  // namespace dcpp::tools
