#pragma once
// Future and Promise: the result of background work (staging, uploading), with its error inside.
//
// Unlike std::future, `wait()` rethrows the error of the work it stands for, a Future can be
// copied and waited on by any number of threads, and a `Future<void>` can watch any `Future<T>`
// (it completes when the other does). Built on std::mutex and std::condition_variable only, so
// ThreadSanitizer sees every hand-off through it.

#include <dcpp/core/checkpoint_error.h>

#include <chrono>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <type_traits>
#include <utility>

namespace dcpp {

namespace detail {

/// Completion and error of one piece of work. Thread-safe.
class FutureStateBase {
 public:
  virtual ~FutureStateBase() = default;
  void wait() const {
    std::unique_lock<std::mutex> lock(mutex_);
    done_changed_.wait(lock, [this] { return done_; });
  }
  template <typename Rep, typename Period>
  bool wait_for(std::chrono::duration<Rep, Period> timeout) const {
    std::unique_lock<std::mutex> lock(mutex_);
    return done_changed_.wait_for(lock, timeout, [this] { return done_; });
  }
  bool ready() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return done_;
  }
  /// The error, or null; meaningful once ready.
  std::exception_ptr error() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return error_;
  }
  /// Completes the work (once; later calls are ignored). Returns whether this call completed it.
  bool complete(std::exception_ptr error) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (done_) {
        return false;
      }
      done_ = true;
      error_ = std::move(error);
    }
    done_changed_.notify_all();
    return true;
  }

 protected:
  mutable std::mutex mutex_;
  mutable std::condition_variable done_changed_;
  bool done_ = false;
  std::exception_ptr error_;
};

/// A FutureStateBase that also holds a value, written before completion and never after.
template <typename T>
class FutureState : public FutureStateBase {
 public:
  void set_value(T value) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (done_) {
        return;
      }
      value_.emplace(std::move(value));
    }
    complete(nullptr);
  }
  /// Only after wait() returned without error.
  const T& value() const { return *value_; }

 private:
  std::optional<T> value_;
};

template <>
class FutureState<void> : public FutureStateBase {};

/// What every Future does, whatever its value: waits, and reports completion and error.
class FutureWaiter {
 public:
  bool valid() const { return state_ != nullptr; }
  /// True once the work has completed, successfully or not. Never blocks.
  bool is_ready() const { return state_ && state_->ready(); }
  /// Blocks until the work completes; rethrows its error (a CheckpointError for dcpp's own work).
  void wait() const {
    check_valid();
    state_->wait();
    if (std::exception_ptr error = state_->error()) {
      std::rethrow_exception(error);
    }
  }
  /// Blocks at most `timeout`; returns whether the work completed. Never throws its error.
  template <typename Rep, typename Period>
  bool wait_for(std::chrono::duration<Rep, Period> timeout) const {
    check_valid();
    return state_->wait_for(timeout);
  }
  /// The error once ready (null when it succeeded or is not ready yet). Never blocks or throws.
  std::exception_ptr error() const { return is_ready() ? state_->error() : nullptr; }

 protected:
  FutureWaiter() = default;
  explicit FutureWaiter(std::shared_ptr<const FutureStateBase> state) : state_(std::move(state)) {}

  std::shared_ptr<const FutureStateBase> state_;

 private:
  void check_valid() const {
    if (!state_) {
      throw CheckpointError(ErrorKind::kUsage,
                            "waiting on an invalid dcpp::Future (default-constructed): use the "
                            "futures of an AsyncSaveResponse or of AsyncStager::stage()");
    }
  }
};

}  // namespace detail

template <typename T>
class Promise;

/// The result of background work. Copyable; every copy sees the same result; thread-safe.
/// A default-constructed Future is invalid: waiting on it throws CheckpointError.
template <typename T = void>
class Future : public detail::FutureWaiter {
 public:
  Future() = default;

  /// wait(), then the value (valid as long as any copy of this Future lives).
  const T& get() const {
    wait();
    return static_cast<const detail::FutureState<T>&>(*state_).value();
  }

 private:
  friend class Promise<T>;
  explicit Future(std::shared_ptr<const detail::FutureState<T>> state)
      : FutureWaiter(std::move(state)) {}
};

/// Completes with the work of any Future: a Future<void> can watch a Future<StateDict>.
template <>
class Future<void> : public detail::FutureWaiter {
 public:
  Future() = default;
  template <typename U>
  Future(const Future<U>& other) : FutureWaiter(other) {}  // NOLINT(google-explicit-constructor)

 private:
  friend class Promise<void>;
  explicit Future(std::shared_ptr<const detail::FutureStateBase> state)
      : FutureWaiter(std::move(state)) {}
};

/// The producing side of a Future. Movable, not copyable. A Promise destroyed without a result
/// completes its Future with a CheckpointError (the work was abandoned), so no waiter hangs.
template <typename T = void>
class Promise {
 public:
  Promise() : state_(std::make_shared<detail::FutureState<T>>()) {}
  Promise(Promise&&) noexcept = default;
  Promise& operator=(Promise&& other) noexcept {
    abandon();
    state_ = std::move(other.state_);
    return *this;
  }
  Promise(const Promise&) = delete;
  Promise& operator=(const Promise&) = delete;
  ~Promise() { abandon(); }

  Future<T> get_future() const { return Future<T>(state_); }

  template <typename U = T, typename = std::enable_if_t<!std::is_void_v<U>>>
  void set_value(U value) {
    state_->set_value(std::move(value));
  }
  template <typename U = T, typename = std::enable_if_t<std::is_void_v<U>>>
  void set_value() {
    state_->complete(nullptr);
  }
  void set_exception(std::exception_ptr error) { state_->complete(std::move(error)); }

 private:
  void abandon() {
    if (state_ && !state_->ready()) {
      state_->complete(std::make_exception_ptr(CheckpointError(
          ErrorKind::kUsage,
          "the background work behind this future ended without a result (its owner was "
          "destroyed or failed); the checkpoint it stood for was not written")));
    }
  }

  std::shared_ptr<detail::FutureState<T>> state_;
};

/// A Future already complete with `value`: work that is done (or skipped) when its call returns.
template <typename T>
Future<T> make_ready_future(T value) {
  Promise<T> promise;
  promise.set_value(std::move(value));
  return promise.get_future();
}
inline Future<void> make_ready_future() {
  Promise<void> promise;
  promise.set_value();
  return promise.get_future();
}

#define DCPP_RENAMED_SAVE_FUTURE                                                               \
  "AsyncSaveResponse's staging_completion and upload_completion are `staged` and `committed` " \
  "since dcpp 0.2, as in the CheckpointManager's ManagedSave; these old names go in 0.3"

/// The old name of a renamed Future (AsyncSaveResponse's `staging_completion` and
/// `upload_completion`, now `staged` and `committed`): the same Future, every use of which warns.
/// Copying the struct that holds one warns nobody (see deprecated_field.h). Goes in 0.3.
template <typename T>
class DeprecatedFuture {
 public:
  DeprecatedFuture() = default;
  explicit DeprecatedFuture(Future<T> future) : future_(std::move(future)) {}

  [[deprecated(DCPP_RENAMED_SAVE_FUTURE)]] bool valid() const { return future_.valid(); }
  [[deprecated(DCPP_RENAMED_SAVE_FUTURE)]] bool is_ready() const { return future_.is_ready(); }
  [[deprecated(DCPP_RENAMED_SAVE_FUTURE)]] void wait() const { future_.wait(); }
  template <typename Rep, typename Period>
  [[deprecated(DCPP_RENAMED_SAVE_FUTURE)]] bool wait_for(
      std::chrono::duration<Rep, Period> timeout) const {
    return future_.wait_for(timeout);
  }
  [[deprecated(DCPP_RENAMED_SAVE_FUTURE)]] std::exception_ptr error() const {
    return future_.error();
  }
  template <typename U = T, typename = std::enable_if_t<!std::is_void_v<U>>>
  [[deprecated(DCPP_RENAMED_SAVE_FUTURE)]] const U& get() const {
    return future_.get();
  }
  /// Where a Future is taken.
  [[deprecated(DCPP_RENAMED_SAVE_FUTURE)]] operator Future<T>() const {  // NOLINT
    return future_;
  }

 private:
  Future<T> future_;
};

}  // namespace dcpp
