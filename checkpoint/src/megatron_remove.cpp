// Megatron-Core's remove_sharded_tensors as a rewrite (megatron.h): the kept items loaded whole,
// then saved over the checkpoint with the Megatron writer's overwrite protocol, so the old
// checkpoint stays loadable until the new one is committed.

#include <dcpp/checkpoint/megatron.h>

#include <dcpp/checkpoint/checkpointer.h>
#include <dcpp/core/checkpoint_error.h>
#include <dcpp/state_dict/whole_value.h>
#include <dcpp/storage/checkpoint_layout.h>
#include <dcpp/storage/megatron_storage.h>

#include <ATen/ATen.h>

#include <algorithm>
#include <variant>

namespace dcpp::megatron {
namespace {

namespace fs = std::filesystem;

}  // namespace

std::vector<std::string> remove_sharded_tensors(const fs::path& directory,
                                                const std::string& key_prefix) {
  const std::map<std::string, TensorMetadata> tensors = load_tensors_metadata(directory);
  std::vector<std::string> removed;
  StateDict kept;
  for (const auto& [key, entry] : read_metadata(directory).state_dict_metadata) {
    if (key.compare(0, key_prefix.size(), key_prefix) == 0) {
      removed.push_back(key);
    } else if (const auto tensor = tensors.find(key); tensor != tensors.end()) {
      kept.insert(key, at::empty(tensor->second.global_shape,
                                 at::TensorOptions().dtype(tensor->second.dtype)));
    } else {
      kept.insert(key, whole_value(c10::IValue()));
    }
  }
  if (removed.empty()) {
    throw CheckpointError(ErrorKind::kNotFound, "no key of " + directory.string() +
                                                    " starts with '" + key_prefix +
                                                    "': nothing removed, the checkpoint is as it "
                                                    "was");
  }
  if (std::find(removed.begin(), removed.end(), kMegatronCommonStateKey) != removed.end()) {
    throw CheckpointError(ErrorKind::kUsage, "'" + key_prefix + "' would remove " +
                                                 kMegatronCommonStateKey + " of " +
                                                 directory.string() +
                                                 ", the common state Megatron-Core's load reads "
                                                 "first: nothing removed");
  }
  dcpp::load(kept, directory);
  if (!kept.contains(kMegatronCommonStateKey)) {  // a legacy common.pt: saved as current code does
    add_common_state(kept, load_common_state_dict(directory));
  }
  const bool integrity_file = fs::exists(directory / kMegatronIntegrityFile);
  save(kept, *make_megatron_writer(
                 directory, MegatronWriterOptions()
                                .with_file_system(FileSystemWriterOptions().with_overwrite(true))
                                .with_integrity_file(integrity_file)));
  return removed;
}

}  // namespace dcpp::megatron
