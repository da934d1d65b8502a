#pragma once
// The text and kind of an exception, for messages that carry it to other ranks or into a
// CheckpointError.

#include <dcpp/core/checkpoint_error.h>

#include <exception>
#include <string>

namespace dcpp::detail {

/// `error`'s message: c10::Error's without its C++ backtrace, any std::exception's what(), or a
/// fixed text for anything else.
std::string exception_message(const std::exception_ptr& error);

/// `error`'s kind: a CheckpointError's own, kUsage for any other exception (the caller's code: a
/// Stateful, a planner, a storage driver).
ErrorKind exception_kind(const std::exception_ptr& error);

}  // namespace dcpp::detail
