#pragma once
// What every dcpp test includes: Catch2 (v2 or v3) and small helpers.

// ATen first: it pulls in glog, whose CHECK macros Catch's must replace, not the other way round.
#include <ATen/ATen.h>

#ifdef DCPP_CATCH2_V3
#include <catch2/catch_approx.hpp>
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
// The v2 spellings the tests use.
using Catch::Approx;
namespace Catch {
inline Matchers::StringContainsMatcher Contains(const std::string& text) {
  return Matchers::ContainsSubstring(text);
}
}  // namespace Catch
#else
#include <catch2/catch.hpp>
#endif

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/core/torch_compat.h>
#include <dcpp/state_dict/flatten.h>

#include <filesystem>
#include <functional>
#include <string>

namespace dcpp::test {

/// A shared_ptr to `object` that owns nothing: for a Stateful adapter (which shares what it
/// points at, so that a program cannot let it die first) over an object the test's own scope
/// keeps alive longer than the adapter.
template <typename T>
std::shared_ptr<T> borrowed(T& object) {
  return std::shared_ptr<T>(std::shared_ptr<T>(), &object);
}

/// A fresh directory under the system temp dir, removed with everything in it on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string str() const { return path_.string(); }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

/// Where the PyTorch fixtures are: tests/fixtures/pytorch-<version>/<name> (2.6 or 2.14).
std::filesystem::path fixture(const std::string& name, const std::string& version = "2.6");
/// Where the Megatron-Core fixtures are: tests/fixtures/megatron-core/<name> (made by
/// ../shared/tools/megatron-ref/make_megatron_fixtures.py with Megatron-Core's own code).
std::filesystem::path megatron_fixture(const std::string& name);

/// Where a `[.interop]` test writes what Python checks: $DCPP_INTEROP_OUT when set (the interop
/// scripts, tests/interop/*.sh, set it), else <build>/<name>. Created if missing.
std::filesystem::path interop_output_dir(const std::string& name);

/// The bytes of a file (empty when it cannot be read), and writing them back.
std::string read_file(const std::filesystem::path& path);
void write_file(const std::filesystem::path& path, const std::string& bytes);

/// What a shell command printed (stdout and stderr together) and how it ended.
struct CommandResult {
  int exit_code;  // 128 + the signal for a command killed by a signal
  std::string output;
  double seconds;
};

/// Runs `command` through the shell and waits for it.
CommandResult run_command(const std::string& command);

/// A TCP port of 127.0.0.1 that nothing listens on now (for a job's store).
int free_loopback_port();

/// True when `a` and `b` have the same dtype, shape and bytes (NaNs with equal bits compare equal).
bool bitwise_equal(const at::Tensor& a, const at::Tensor& b);

/// Whether `a` and `b` are equal as Python would see them: tensors bit for bit, Python objects
/// (python_object.h) by class and attributes, whole values (whole_value.h) by what they hold,
/// tuples, lists and dicts element by element, other values by IValue equality.
bool same_value(const c10::IValue& a, const c10::IValue& b);

/// A state dict of `state`'s keys, each tensor as zeros of its dtype and shape, each other value 0:
/// a target for a load that must fill every value.
StateDict zeros_like(const StateDict& state);

/// The CheckpointError `f` throws; FAILs the test when it throws none.
CheckpointError error_of(const std::function<void()>& f);

/// REQUIREs that every key of `saved` is in `loaded` with a value equal to it: tensors bit for bit,
/// other values by IValue equality.
void require_equal(const StateDict& loaded, const StateDict& saved);

}  // namespace dcpp::test

// Catch prints object paths as DCP joins them (libtorch's glog would otherwise claim, and fail,
// to print vectors of variants).
namespace Catch {
template <>
struct StringMaker<dcpp::ObjectPath> {
  static std::string convert(const dcpp::ObjectPath& path) {
    std::string out = "(";
    for (const auto& step : path) {
      out += std::holds_alternative<std::string>(step) ? "'" + std::get<std::string>(step) + "'"
                                                       : std::to_string(std::get<int64_t>(step));
      out += ", ";
    }
    return out + ")";
  }
};
}  // namespace Catch
