#pragma once
// The one exception type dcpp throws for anything wrong with a checkpoint, its input or its
// storage.

#include <dcpp/core/export.h>
#include <dcpp/core/torch_compat.h>

#include <c10/util/Exception.h>

#include <string>

namespace dcpp {

/// Thrown by every dcpp operation that fails: bad input, a malformed or hostile checkpoint, an I/O
/// error, a failed rank. Derives from `c10::Error` so code that already catches libtorch errors
/// catches dcpp's too. `what()` is the message alone, with no C++ backtrace: messages name the key,
/// file or rank involved and say what to do. DCPP_API although header-only: its typeinfo must be
/// one in the process, or a program's catch would not match what a library throws.
class DCPP_API CheckpointError : public c10::Error {
 public:
  explicit CheckpointError(std::string message)
      : c10::Error(std::move(message), compat::no_backtrace()) {}
};

}  // namespace dcpp
