#include "core/exception_message.h"

#include <c10/util/Exception.h>

namespace dcpp::detail {

std::string exception_message(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const c10::Error& failure) {
    return failure.what_without_backtrace();
  } catch (const std::exception& failure) {
    return failure.what();
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}

ErrorKind exception_kind(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const CheckpointError& failure) {
    return failure.kind();
  } catch (...) {
    return ErrorKind::kUsage;
  }
}

}  // namespace dcpp::detail
