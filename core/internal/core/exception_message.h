#pragma once
// The text of an exception, for messages that carry it to other ranks or into a CheckpointError.

#include <exception>
#include <string>

namespace dcpp::detail {

/// `error`'s message: c10::Error's without its C++ backtrace, any std::exception's what(), or a
/// fixed text for anything else.
std::string exception_message(const std::exception_ptr& error);

}  // namespace dcpp::detail
