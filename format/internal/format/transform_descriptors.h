#pragma once
// DCP's stream transforms (torch/distributed/checkpoint/_extension.py): `_StorageInfo.
// transform_descriptors` lists, per item, the transforms its stored bytes went through, each as
// "name[@local-domain]/version". Reading applies them in list order to the stored bytes (the first
// descriptor names the outermost transform). PyTorch 2.14 registers one: "stream.zstd", whose
// versions are accepted when their major part is "1" ("1", "1.2"). Anything else, a missing
// version included, is unknown and a CheckpointError, as in DCP.

#include <string>
#include <vector>

namespace dcpp::detail {

/// The descriptor dcpp writes for a zstd-compressed item.
constexpr const char* kZstdDescriptor = "stream.zstd/1";

/// What reading an item's stored bytes must undo: `zstd_layers` nested zstd frames.
struct ItemTransforms {
  int zstd_layers = 0;
  bool any() const { return zstd_layers > 0; }
};

/// Checks every descriptor. Throws CheckpointError naming `where` (the checkpoint, file and key)
/// and the descriptor when one is unknown or of an unsupported version.
ItemTransforms parse_transform_descriptors(const std::vector<std::string>& descriptors,
                                           const std::string& where);

}  // namespace dcpp::detail
