#include "drain_lease.h"
#include "host_name.h"

#include "checkpoint_lineage.h"
#include "core/logging.h"

#include <dcpp/core/checkpoint_error.h>

#include <nlohmann/json.hpp>

#include <optional>

namespace dcpp::detail {

namespace {

using nlohmann::json;

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

struct Holder {
  std::string owner, host;
  int64_t pid = 0;
  double expires_at = 0;
};

// The lease's holder, or nullopt when the text is not a lease (taken as expired).
std::optional<Holder> parse_holder(const std::string& text) {
  try {
    const json j = json::parse(text);
    return Holder{j.at("owner").get<std::string>(), j.value("host", std::string("?")),
                  j.value("pid", int64_t{0}), j.at("expires_at").get<double>()};
  } catch (const json::exception&) {
    return std::nullopt;
  }
}

}  // namespace

DrainLease::DrainLease(S3Prefix& prefix, std::chrono::seconds ttl)
    : prefix_(prefix), ttl_(ttl), owner_(new_save_id()), host_(host_name()) {}

std::string DrainLease::lease_json() const {
  return json{{"owner", owner_},
              {"host", host_},
              {"pid", static_cast<int64_t>(::getpid())},
              {"expires_at", unix_seconds() + static_cast<double>(ttl_.count())}}
      .dump();
}

void DrainLease::hold() {
  for (int attempt = 0; attempt < 3; ++attempt) {
    const std::optional<std::string> text = prefix_.read(kObjectName);
    if (!text) {
      if (prefix_.create(kObjectName, lease_json())) {
        held_ = true;
        return;
      }
      continue;  // another job created it meanwhile: read whose
    }
    const std::optional<Holder> holder = parse_holder(*text);
    if (holder && holder->owner == owner_) {
      prefix_.write(kObjectName, lease_json());  // renewed
      held_ = true;
      return;
    }
    if (holder && holder->expires_at > unix_seconds()) {
      held_ = false;
      throw CheckpointError(
          ErrorKind::kUsage,
          prefix_.url() + " is drained by another job (on host " + holder->host + ", pid " +
              std::to_string(holder->pid) + ", its lease " + prefix_.url_of(kObjectName) +
              " good for " +
              std::to_string(static_cast<int64_t>(holder->expires_at - unix_seconds())) +
              " s more): two jobs must not drain one prefix, their retention and rollbacks would "
              "delete each other's steps; give this job a RemoteTierOptions::url of its own, or "
              "stop the other (its lease ends with it, or expires)");
    }
    logger().warn(
        "taking over the drain lease {} ({}): this job drains {} now", prefix_.url_of(kObjectName),
        holder
            ? "held by host " + holder->host + ", pid " + std::to_string(holder->pid) + ", expired"
            : std::string("unreadable"),
        prefix_.url());
    prefix_.remove(kObjectName);
  }
  throw CheckpointError(ErrorKind::kIo, "could not take the drain lease " +
                                            prefix_.url_of(kObjectName) +
                                            " in 3 tries: other jobs keep taking it");
}

void DrainLease::release() noexcept {
  if (!held_) return;
  try {
    const std::optional<std::string> text = prefix_.read(kObjectName);
    const std::optional<Holder> holder = text ? parse_holder(*text) : std::nullopt;
    if (holder && holder->owner == owner_) prefix_.remove(kObjectName);
    held_ = false;
  } catch (const std::exception& e) {
    logger().warn("releasing the drain lease {} failed (it expires in at most {} s): {}",
                  prefix_.url_of(kObjectName), ttl_.count(), e.what());
  }
}

}  // namespace dcpp::detail
