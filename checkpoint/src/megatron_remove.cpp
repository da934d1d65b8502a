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

namespace dcpp::megatron {
namespace {

namespace fs = std::filesystem;

}  // namespace

std::vector<std::string> remove_sharded_tensors(const fs::path& directory,
                                                const std::string& key_prefix) {
  const ShardedMetadata items = load_sharded_metadata(directory);
  const auto removes = [&](const std::string& key) {
    return key.compare(0, key_prefix.size(), key_prefix) == 0;
  };
  std::vector<std::string> removed;
  StateDict kept;
  for (const auto& [key, tensor] : items.tensors) {
    if (removes(key)) {
      removed.push_back(key);
    } else {
      kept.insert(key, at::empty(tensor.global_shape, at::TensorOptions().dtype(tensor.dtype)));
    }
  }
  for (const auto& [key, object] : items.objects) {
    if (removes(key)) {
      removed.push_back(key);
    } else {
      kept.insert(key, whole_value(c10::IValue()));  // read and saved as one item, as it is
    }
  }
  std::sort(removed.begin(), removed.end());
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
