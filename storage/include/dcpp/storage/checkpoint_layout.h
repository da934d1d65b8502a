#pragma once
// The layouts (formats) a checkpoint can have at a location, in one registry: PyTorch DCP's
// ("pytorch-dcp"), a Hugging Face safetensors directory ("huggingface") and Megatron-Core's
// ("megatron-core") are built in; a program adds its own with register_checkpoint_layout. load,
// load_from_keys, read_metadata and the `dcpp` command find a location's layout here, once; save
// writes the layout Location::with_layout names (DCP's, or Megatron-Core's).

#include <dcpp/core/export.h>
#include <dcpp/storage/filesystem_reader.h>
#include <dcpp/storage/location.h>
#include <dcpp/storage/location_driver.h>
#include <dcpp/storage/storage_reader.h>
#include <dcpp/storage/storage_writer.h>

#include <memory>
#include <string>
#include <vector>

namespace dcpp {

/// A format dcpp reads a checkpoint in, through a StorageReader that presents it as DCP's
/// Metadata and items.
class DCPP_API CheckpointLayout {
 public:
  virtual ~CheckpointLayout() = default;
  /// The name `dcpp inspect` prints and Location::with_layout takes ("pytorch-dcp").
  virtual std::string name() const = 0;
  /// Whether the checkpoint at `location` is of this layout, from its files (list them only when
  /// the answer needs it: on an object store, a listing is a request).
  virtual bool recognizes(const Location& location, LocationFiles& files) const = 0;
  virtual std::unique_ptr<StorageReader> make_reader(
      const Location& location, const FileSystemReaderOptions& reading) const = 0;
  /// The writer of a checkpoint in this layout at `location` (a save to a Location whose
  /// with_layout names it), given `dcp_files`: the writer of DCP's files there, from the
  /// location's driver. DCP's layout returns it as it is; Megatron-Core's adds its files around
  /// it. The default throws CheckpointError (kUsage): dcpp reads this layout but does not write it.
  virtual std::unique_ptr<StorageWriter> make_writer(
      const Location& location, std::unique_ptr<StorageWriter> dcp_files) const;
};

/// The name of DCP's own layout, the one a location is read as when no other recognises it.
inline constexpr const char* kDcpLayout = "pytorch-dcp";
/// The name of a Hugging Face safetensors directory's layout (huggingface_storage.h).
inline constexpr const char* kHuggingFaceLayout = "huggingface";
/// The name of Megatron-Core's `torch_dist` checkpoints' layout (docs/megatron.md): DCP's layout
/// with Megatron's `metadata.json` and `.metadata` additions.
inline constexpr const char* kMegatronLayout = "megatron-core";

/// Adds `layout`, asked before every layout registered earlier (the built-in ones first
/// registered: DCP's, then Hugging Face's, then Megatron-Core's), replacing one of the same name.
/// Thread-safe.
DCPP_API void register_checkpoint_layout(std::shared_ptr<const CheckpointLayout> layout);

/// The layout of the checkpoint at `location`: the one Location::with_layout names, else the
/// newest registered layout that recognises it, else DCP's (whose reader then says what is
/// missing). Throws CheckpointError (kUsage) for a with_layout name no layout has, naming those
/// there are.
DCPP_API std::shared_ptr<const CheckpointLayout> checkpoint_layout(const Location& location);

/// The names of the registered layouts, newest first.
DCPP_API std::vector<std::string> checkpoint_layout_names();

}  // namespace dcpp
