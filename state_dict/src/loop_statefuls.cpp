// The adapters for the rest of a training loop's state (stateful_adapters.h): the RNG, a counter,
// a getter and a setter.

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/state_dict/stateful_adapters.h>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>

#include <mutex>

namespace dcpp {

namespace {

class RngStateful final : public Stateful {
 public:
  StateDict state_dict() override {
    at::Generator generator = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(generator.mutex());
    StateDict state;
    state.insert("cpu", generator.get_state());
    return state;
  }
  void load_state_dict(const StateDict& state) override {
    at::Generator generator = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(generator.mutex());
    generator.set_state(state.at("cpu").tensor());
  }
};

class CounterStateful final : public Stateful {
 public:
  explicit CounterStateful(std::shared_ptr<int64_t> value) : value_(std::move(value)) {}
  StateDict state_dict() override {
    StateDict state;
    state.insert("value", *value_);
    return state;
  }
  void load_state_dict(const StateDict& state) override {
    *value_ = state.at("value").value().toInt();
  }

 private:
  std::shared_ptr<int64_t> value_;
};

class FunctionStateful final : public Stateful {
 public:
  FunctionStateful(std::function<StateDict()> get, std::function<void(const StateDict&)> set)
      : get_(std::move(get)), set_(std::move(set)) {}
  StateDict state_dict() override { return get_(); }
  void load_state_dict(const StateDict& state) override { set_(state); }

 private:
  std::function<StateDict()> get_;
  std::function<void(const StateDict&)> set_;
};

}  // namespace

std::shared_ptr<Stateful> make_rng_stateful() { return std::make_shared<RngStateful>(); }

std::shared_ptr<Stateful> make_counter_stateful(std::shared_ptr<int64_t> value) {
  if (!value) {
    throw CheckpointError(ErrorKind::kUsage, "make_counter_stateful: the counter must not be null");
  }
  return std::make_shared<CounterStateful>(std::move(value));
}

std::shared_ptr<Stateful> make_counter_stateful(int64_t& value) {
  // Owns nothing: the deprecated overload's promise is that the caller keeps `value` alive.
  return make_counter_stateful(std::shared_ptr<int64_t>(std::shared_ptr<int64_t>(), &value));
}

std::shared_ptr<Stateful> make_function_stateful(std::function<StateDict()> get,
                                                 std::function<void(const StateDict&)> set) {
  if (!get || !set) {
    throw CheckpointError(ErrorKind::kUsage,
                          "make_function_stateful needs both a getter and a setter");
  }
  return std::make_shared<FunctionStateful>(std::move(get), std::move(set));
}

}  // namespace dcpp
