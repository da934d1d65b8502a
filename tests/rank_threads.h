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

/// Runs `body(rank, store)` on `ranks` threads sharing one in-memory store, from which each makes
/// the groups it needs (make_gloo_process_group, a name per group); waits for all and rethrows
/// the first failure (assertions belong after it, on the main thread).
template <typename Body>
void on_rank_threads(int ranks, Body body) {
  c10::intrusive_ptr<c10d::Store> store = c10::make_intrusive<c10d::HashStore>();
  std::vector<std::exception_ptr> errors(ranks);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < ranks; ++rank) {
    threads.emplace_back([&, rank] {
      try {
        body(rank, store);
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

/// A Gloo group on loopback named `name`, of `size` ranks, over `store`.
inline c10::intrusive_ptr<c10d::ProcessGroup> loopback_group(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, const std::string& name) {
  return make_gloo_process_group(
      store, rank, size,
      ProcessGroupOptions().with_group_name(name).with_gloo_hostname("127.0.0.1"));
}

/// Runs `body(rank, group)` on `ranks` threads, each with its rank's Gloo group named `name`;
/// waits for all and rethrows the first failure (assertions belong after it, on the main thread).
template <typename Body>
void on_ranks(int ranks, const std::string& name, Body body) {
  on_rank_threads(ranks, [&](int rank, const c10::intrusive_ptr<c10d::Store>& store) {
    body(rank, loopback_group(store, rank, ranks, name));
  });
}

}  // namespace dcpp::test
