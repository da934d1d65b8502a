#include "drain_lease.h"
#include "host_name.h"

#include "checkpoint_lineage.h"
#include "core/logging.h"

#include <dcpp/core/checkpoint_error.h>
#include <dcpp/storage/s3_deadline.h>

#include <nlohmann/json.hpp>

#include <unistd.h>

#include <algorithm>
#include <optional>

namespace dcpp::detail {

namespace {

using nlohmann::json;

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

struct Holder {
  std::string owner, host, job;
  int64_t pid = 0;
  double expires_at = 0;
};

// The lease's holder, or nullopt when the text is not a lease (taken as expired).
std::optional<Holder> parse_holder(const std::string& text) {
  try {
    const json j = json::parse(text);
    return Holder{j.at("owner").get<std::string>(), j.value("host", std::string("?")),
                  j.value("job", std::string()), j.value("pid", int64_t{0}),
                  j.at("expires_at").get<double>()};
  } catch (const json::exception&) {
    return std::nullopt;
  }
}

std::string describe(const Holder& holder) {
  return "host " + holder.host + ", pid " + std::to_string(holder.pid) +
         (holder.job.empty() ? std::string() : ", job '" + holder.job + "'");
}

}  // namespace

DrainLease::DrainLease(S3Prefix& prefix, std::chrono::seconds ttl, std::string job_id)
    : prefix_(prefix),
      ttl_(ttl),
      job_id_(std::move(job_id)),
      owner_(new_save_id()),
      host_(host_name()) {}

DrainLease::~DrainLease() { release(); }

std::string DrainLease::lease_json(double expires_at) const {
  return json{{"owner", owner_},
              {"job", job_id_},
              {"host", host_},
              {"pid", static_cast<int64_t>(::getpid())},
              {"expires_at", expires_at}}
      .dump();
}

void DrainLease::hold() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (int attempt = 0; attempt < 3; ++attempt) {
    const std::optional<S3TaggedObject> lease = prefix_.read_tagged(kObjectName);
    const std::string mine = lease_json(unix_seconds() + static_cast<double>(ttl_.count()));
    if (!lease) {
      if (!prefix_.create(kObjectName, mine)) continue;  // another job created it: read whose
      const std::optional<S3TaggedObject> created = prefix_.read_tagged(kObjectName);
      const std::optional<Holder> holder = created ? parse_holder(created->bytes) : std::nullopt;
      if (!holder || holder->owner != owner_) continue;  // taken over meanwhile: read whose
      etag_ = created->etag;
    } else {
      const std::optional<Holder> holder = parse_holder(lease->bytes);
      const bool own = holder && holder->owner == owner_;
      // A process of this job that held the lease and lost it (to its successor) never takes it
      // back this way: two live processes of one job would take it from each other.
      const bool predecessor =
          holder && !own && !ever_held_ && !job_id_.empty() && holder->job == job_id_;
      if (holder && !own && !predecessor && holder->expires_at > unix_seconds()) {
        held_ = false;
        throw CheckpointError(
            ErrorKind::kUsage,
            prefix_.url() + " is drained by another job (" + describe(*holder) + "; its lease " +
                prefix_.url_of(kObjectName) + " good for " +
                std::to_string(static_cast<int64_t>(holder->expires_at - unix_seconds())) +
                " s more): two jobs must not drain one prefix, their retention and rollbacks "
                "would delete each other's steps; give this job a RemoteTierOptions::url of its "
                "own, or stop the other (its lease ends with it, or expires); a restart of the "
                "same job takes it over at once when both have the same RemoteTierOptions::job_id");
      }
      if (!own) {
        logger().warn("taking over the drain lease {} ({}): this job drains {} now",
                      prefix_.url_of(kObjectName),
                      !holder       ? std::string("unreadable")
                      : predecessor ? "held by this job's predecessor, " + describe(*holder)
                                    : "held by " + describe(*holder) + ", expired",
                      prefix_.url());
      }
      if (!prefix_.replace_if_unchanged(kObjectName, mine, lease->etag)) continue;
      const std::optional<S3TaggedObject> written = prefix_.read_tagged(kObjectName);
      const std::optional<Holder> now = written ? parse_holder(written->bytes) : std::nullopt;
      if (!now || now->owner != owner_) continue;
      etag_ = written->etag;
    }
    held_ = ever_held_ = true;
    if (!heartbeat_.joinable()) heartbeat_ = std::thread([this] { heartbeat(); });
    return;
  }
  held_ = false;
  throw CheckpointError(ErrorKind::kIo, "could not take the drain lease " +
                                            prefix_.url_of(kObjectName) +
                                            " in 3 tries: other jobs keep taking it");
}

bool DrainLease::renew() {
  const std::string mine = lease_json(unix_seconds() + static_cast<double>(ttl_.count()));
  if (!prefix_.replace_if_unchanged(kObjectName, mine, etag_)) return false;
  const std::optional<S3TaggedObject> written = prefix_.read_tagged(kObjectName);
  const std::optional<Holder> now = written ? parse_holder(written->bytes) : std::nullopt;
  if (!now || now->owner != owner_) return false;
  etag_ = written->etag;
  return true;
}

void DrainLease::heartbeat() {
  const auto period = std::max<std::chrono::milliseconds>(ttl_ / 3, std::chrono::seconds(1));
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    if (wake_.wait_for(lock, period, [this] { return stopping_; })) break;
    if (!held_) continue;  // lost: the next drain pass's hold() says to whom
    try {
      // A renewal that takes longer than this is pointless (and would hold release() up).
      const S3Deadline bound(std::min<std::chrono::milliseconds>(period, kLongestRenewal),
                             "a renewal of the drain lease");
      if (!renew()) {
        held_ = false;
        logger().error(
            "the drain lease {} was taken over by another job: this job's drain passes stop "
            "until it is free again",
            prefix_.url_of(kObjectName));
      }
    } catch (const std::exception& e) {
      logger().warn(
          "renewing the drain lease {} failed (tried again in {} s; it expires in {} s "
          "without a renewal): {}",
          prefix_.url_of(kObjectName),
          std::chrono::duration_cast<std::chrono::seconds>(period).count(), ttl_.count(), e.what());
    }
  }
}

void DrainLease::release() noexcept {
  {
    const std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (heartbeat_.joinable()) heartbeat_.join();
  const std::lock_guard<std::mutex> lock(mutex_);
  if (!held_) return;
  held_ = false;
  try {
    // Expired at once, by a compare-and-swap: a lease another job took over meanwhile stays its.
    // A store that does not answer soon gets no more time: the lease then expires on its own.
    const S3Deadline bound(kLongestRenewal, "the release of the drain lease");
    prefix_.replace_if_unchanged(kObjectName, lease_json(0), etag_);
  } catch (const std::exception& e) {
    logger().warn("releasing the drain lease {} failed (it expires in at most {} s): {}",
                  prefix_.url_of(kObjectName), ttl_.count(), e.what());
  }
}

}  // namespace dcpp::detail
