#pragma once
// The manifest's file name and its JSON text (private to the plugin).

#include <dcpp/plugin/checkpoint_info.h>

#include <string>

namespace dcpp {

inline constexpr const char* kCheckpointInfoFile = "dcpp_checkpoint.json";

namespace detail {
std::string checkpoint_info_to_json(const CheckpointInfo& info);
}  // namespace detail

}  // namespace dcpp
