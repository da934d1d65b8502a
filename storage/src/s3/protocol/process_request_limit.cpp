#include "s3/protocol/process_request_limit.h"

#include <condition_variable>
#include <mutex>

namespace dcpp::detail {

namespace {

struct RequestsInFlight {
  std::mutex mutex;
  std::condition_variable freed;
  int count = 0;
};

RequestsInFlight& requests_in_flight() {
  static RequestsInFlight* requests = new RequestsInFlight;  // never destroyed: used at exit
  return *requests;
}

}  // namespace

ProcessRequestSlot::ProcessRequestSlot(int limit) {
  RequestsInFlight& requests = requests_in_flight();
  std::unique_lock<std::mutex> lock(requests.mutex);
  requests.freed.wait(lock, [&] { return requests.count < limit; });
  ++requests.count;
}

ProcessRequestSlot::~ProcessRequestSlot() {
  RequestsInFlight& requests = requests_in_flight();
  {
    const std::lock_guard<std::mutex> lock(requests.mutex);
    --requests.count;
  }
  requests.freed.notify_all();
}

}  // namespace dcpp::detail
