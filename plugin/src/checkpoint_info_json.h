#pragma once
// The manifest's file name and its JSON text (private to the plugin).

#include <dcpp/plugin/checkpoint_info.h>

#include <string>

namespace dcpp {

inline constexpr const char* kCheckpointInfoFile = "dcpp_checkpoint.json";

namespace detail {
std::string checkpoint_info_to_json(const CheckpointInfo& info);

/// The manifest in `text`, read from `file` (named in errors); `path` left empty. Throws
/// CheckpointError (kCorrupt) naming `file` when it is malformed or names an unknown kind.
CheckpointInfo checkpoint_info_from_json(const std::string& text, const std::string& file);
}  // namespace detail

}  // namespace dcpp
