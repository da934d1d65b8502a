#pragma once
// Ranks as threads of one test process: a real Gloo process group on loopback per thread, over
// one in-memory store.

#include "dcpp_test.h"

#include <dcpp/dist/process_group.h>

#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <exception>
#include <string>
#include <thread>
#include <vector>

namespace dcpp::test {

/// Runs `body(rank, group)` on `ranks` threads, each with its rank's Gloo group named `name`;
/// waits for all and rethrows the first failure (assertions belong after it, on the main thread).
template <typename Body>
void on_ranks(int ranks, const std::string& name, Body body) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<std::exception_ptr> errors(ranks);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < ranks; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        auto group = make_gloo_process_group(
            store, rank, ranks,
            ProcessGroupOptions().with_group_name(name).with_gloo_hostname("127.0.0.1"));
        body(rank, group);
      } catch (...) {
        errors[rank] = std::current_exception();
      }
    });
  }
  for (auto& thread : threads) {
    thread.join();
  }
  for (const auto& error : errors) {
    if (error) {
      std::rethrow_exception(error);
    }
  }
}

}  // namespace dcpp::test
