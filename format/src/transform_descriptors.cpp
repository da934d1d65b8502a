#include "format/transform_descriptors.h"

#include <dcpp/core/checkpoint_error.h>

namespace dcpp::detail {

ItemTransforms parse_transform_descriptors(const std::vector<std::string>& descriptors,
                                           const std::string& where) {
  ItemTransforms transforms;
  for (const std::string& descriptor : descriptors) {
    // DCP: name, _, version = desc.partition("/"); ZStandard.from_descriptor(version) accepts
    // version.partition(".")[0] == "1".
    const std::size_t slash = descriptor.find('/');
    const std::string name = descriptor.substr(0, slash);
    const std::string version = slash == std::string::npos ? "" : descriptor.substr(slash + 1);
    if (name != "stream.zstd") {
      throw CheckpointError(
          ErrorKind::kIncompatible,
          where + ": saved with the stream transform '" + descriptor +
              "', which dcpp does not know (it reads \"stream.zstd/1\" only); load "
              "it with the PyTorch that wrote it and save it again without it");
    }
    if (version.substr(0, version.find('.')) != "1") {
      throw CheckpointError(
          ErrorKind::kIncompatible,
          where + ": saved with the stream transform '" + descriptor +
              "', a version of stream.zstd that dcpp does not read (major version 1 "
              "only); load it with the PyTorch that wrote it");
    }
    ++transforms.zstd_layers;
  }
  return transforms;
}

}  // namespace dcpp::detail
