// S3Deadline: a thread's deadline, read by S3Client's retry loop (s3_client.cpp).

#include <dcpp/storage/s3_deadline.h>

namespace dcpp {
namespace {

struct ThreadDeadline {
  std::optional<S3Deadline::Clock::time_point> at;
  std::string what;
};

ThreadDeadline& this_thread_deadline() {
  thread_local ThreadDeadline deadline;
  return deadline;
}

}  // namespace

S3Deadline::S3Deadline(Clock::duration budget, std::string what) {
  ThreadDeadline& current = this_thread_deadline();
  previous_ = current.at;
  previous_what_ = current.what;
  const Clock::time_point at = Clock::now() + budget;
  if (!current.at || at < *current.at) {
    current.at = at;
    current.what =
        std::move(what) + ", " +
        std::to_string(std::chrono::duration_cast<std::chrono::seconds>(budget).count()) + " s";
  }
}

S3Deadline::~S3Deadline() {
  ThreadDeadline& current = this_thread_deadline();
  current.at = previous_;
  current.what = std::move(previous_what_);
}

std::optional<S3Deadline::Clock::time_point> S3Deadline::current() {
  return this_thread_deadline().at;
}

std::string S3Deadline::current_what() { return this_thread_deadline().what; }

}  // namespace dcpp
