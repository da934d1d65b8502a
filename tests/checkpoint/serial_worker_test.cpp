// SerialWorker, the one background thread of queued tasks (core/serial_worker.h).

#include "dcpp_test.h"

#include "core/serial_worker.h"

#include <future>
#include <stdexcept>
#include <thread>
#include <vector>

TEST_CASE("a serial worker runs its tasks one at a time, in the order posted") {
  std::vector<int> order;  // touched by the worker only, read after wait_until_idle()
  dcpp::detail::SerialWorker worker;
  for (int i = 0; i < 100; ++i) {
    worker.post([&order, i] { order.push_back(i); });
  }
  worker.wait_until_idle();
  REQUIRE(order.size() == 100);
  for (int i = 0; i < 100; ++i) CHECK(order[static_cast<std::size_t>(i)] == i);
}

TEST_CASE("a serial worker goes on after a task that throws") {
  int ran = 0;
  dcpp::detail::SerialWorker worker;
  worker.post([] { throw std::runtime_error("a task that fails"); });
  worker.post([&ran] { ++ran; });
  worker.wait_until_idle();
  CHECK(ran == 1);
}

TEST_CASE("a serial worker's destructor runs the tasks still queued") {
  int ran = 0;
  std::promise<void> gate;
  std::shared_future<void> opened = gate.get_future().share();
  {
    dcpp::detail::SerialWorker worker;
    worker.post([opened] { opened.wait(); });
    for (int i = 0; i < 10; ++i) worker.post([&ran] { ++ran; });
    gate.set_value();
  }
  CHECK(ran == 10);
}

TEST_CASE("discard_pending drops the tasks not yet started and lets the running one finish") {
  int ran = 0;
  bool first_finished = false;
  std::promise<void> started;
  std::promise<void> gate;
  std::shared_future<void> opened = gate.get_future().share();
  dcpp::detail::SerialWorker worker;
  worker.post([&, opened] {
    started.set_value();
    opened.wait();
    first_finished = true;
  });
  for (int i = 0; i < 10; ++i) worker.post([&ran] { ++ran; });
  started.get_future().wait();
  worker.discard_pending();
  gate.set_value();
  worker.wait_until_idle();
  CHECK(first_finished);
  CHECK(ran == 0);
}

TEST_CASE("a serial worker runs its start function on its own thread before any task") {
  std::thread::id start_thread;
  std::thread::id task_thread;
  dcpp::detail::SerialWorker worker([&start_thread] { start_thread = std::this_thread::get_id(); });
  worker.post([&task_thread] { task_thread = std::this_thread::get_id(); });
  worker.wait_until_idle();
  CHECK(start_thread == task_thread);
  CHECK(start_thread != std::this_thread::get_id());
}
