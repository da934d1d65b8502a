// Making a Gloo group: the ranks leave together, so a rank 0 that exits at once (taking the job's
// store with it, as the TCPStore's host does) never fails a rank still making its group.

#include "dcpp_test.h"

#include <dcpp/dist/process_group.h>

#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include <atomic>
#include <chrono>
#include <exception>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

namespace {

// One rank's view of a store that its host can take away: once `closed`, every call fails as a
// TCPStore client's does when the host has exited. `late` delays each get: a rank descheduled on
// a busy machine while it reads its peers' addresses.
class HostedStore final : public c10d::PrefixStore {
 public:
  HostedStore(c10::intrusive_ptr<c10d::Store> store, std::shared_ptr<std::atomic<bool>> closed,
              std::chrono::milliseconds late)
      : c10d::PrefixStore("job", std::move(store)), closed_(std::move(closed)), late_(late) {}

  void set(const std::string& key, const std::vector<uint8_t>& value) override {
    check_open();
    c10d::PrefixStore::set(key, value);
  }
  std::vector<uint8_t> get(const std::string& key) override {
    std::this_thread::sleep_for(late_);
    check_open();
    return c10d::PrefixStore::get(key);
  }
  int64_t add(const std::string& key, int64_t value) override {
    check_open();
    return c10d::PrefixStore::add(key, value);
  }
  bool check(const std::vector<std::string>& keys) override {
    check_open();
    return c10d::PrefixStore::check(keys);
  }
  void wait(const std::vector<std::string>& keys) override {
    check_open();
    c10d::PrefixStore::wait(keys);
  }
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    check_open();
    c10d::PrefixStore::wait(keys, timeout);
  }

 private:
  void check_open() const {
    if (closed_->load()) throw std::runtime_error("Connection closed by peer (the host exited)");
  }

  std::shared_ptr<std::atomic<bool>> closed_;
  std::chrono::milliseconds late_;
};

}  // namespace

TEST_CASE("a rank 0 that exits as soon as its group is made fails no rank still making it") {
  constexpr int kRanks = 3;
  auto shared = c10::make_intrusive<c10d::HashStore>();
  auto closed = std::make_shared<std::atomic<bool>>(false);
  std::vector<std::exception_ptr> errors(kRanks);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < kRanks; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        const auto late = std::chrono::milliseconds(rank == 1 ? 300 : 0);
        auto store = c10::make_intrusive<HostedStore>(shared, closed, late);
        auto group = dcpp::make_gloo_process_group(store, rank, kRanks,
                                                   dcpp::ProcessGroupOptions()
                                                       .with_group_name("leave-together")
                                                       .with_gloo_hostname("127.0.0.1")
                                                       .with_timeout(std::chrono::seconds(30)));
        if (rank == 0) closed->store(true);  // rank 0's work is done: it exits, the store goes
      } catch (...) {
        errors[rank] = std::current_exception();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int rank = 0; rank < kRanks; ++rank) {
    INFO("rank " << rank);
    REQUIRE_NOTHROW(errors[rank] ? std::rethrow_exception(errors[rank]) : void());
  }
}
