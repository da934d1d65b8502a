// A Hugging Face checkpoint directory as a CheckpointSource, through the library's reader
// (huggingface_storage.h): the index and every header are checked once, when the source opens;
// each tensor is then loaded whole with dcpp::load, which reads only its bytes (and assembles it
// from its chunks when the files are DCP's sharded ones).

#include "common/cached_metadata_reader.h"
#include "convert/checkpoint_source.h"

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/core/checkpoint_error.h>
#include <dcpp/storage/huggingface_storage.h>

#include <ATen/ATen.h>

namespace dcpp::tools {

namespace {

namespace fs = std::filesystem;

class HuggingFaceSource final : public CheckpointSource {
 public:
  explicit HuggingFaceSource(const fs::path& directory)
      : reader_(make_huggingface_reader(directory)) {
    for (const auto& [key, storage] : reader_.metadata().state_dict_metadata) {
      const auto& tensor = std::get<TensorStorageMetadata>(storage);
      SourceEntry entry;
      entry.key = key;
      entry.path = ObjectPath{key};
      entry.is_tensor = true;
      entry.dtype = tensor.properties.dtype;
      entry.shape = tensor.size;
      entries_.push_back(std::move(entry));
    }
  }

  std::string format() const override { return "huggingface"; }
  const std::vector<SourceEntry>& entries() const override { return entries_; }

  at::Tensor read_tensor(const SourceEntry& entry) override {
    StateDict target;
    target.insert(entry.key, at::empty(entry.shape, at::TensorOptions().dtype(entry.dtype)));
    LoadOptions options;
    options.allow_partial_load = false;
    load(target, reader_, options);
    return target.at(entry.key).tensor();
  }

  c10::IValue read_value(const SourceEntry& entry) override {
    throw CheckpointError(ErrorKind::kUsage,
                          "Hugging Face entry '" + entry.key + "' is not a value");
  }

 private:
  CachedMetadataReader reader_;
  std::vector<SourceEntry> entries_;
};

}  // namespace

std::unique_ptr<CheckpointSource> open_huggingface_source(const fs::path& directory) {
  return std::make_unique<HuggingFaceSource>(directory);
}

}  // namespace dcpp::tools
