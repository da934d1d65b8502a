#pragma once
// The plugin's options checked where they are first used (the manager's and the callback's
// constructors), so a value that cannot mean anything fails at once, naming its field, rather than
// silently doing something else steps or hours later.

#include <dcpp/plugin/checkpoint_callback.h>
#include <dcpp/plugin/checkpoint_manager.h>

namespace dcpp::detail {

/// Throws CheckpointError kUsage naming the first field of `options` that is out of its range, as
/// "CheckpointManagerOptions::retention.keep_latest is -1: ...", with what to give instead.
void check_manager_options(const CheckpointManagerOptions& options);

/// The same for a CheckpointCallback's options ("CheckpointCallbackOptions::...").
void check_callback_options(const CheckpointCallbackOptions& options);

}  // namespace dcpp::detail
