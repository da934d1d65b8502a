#pragma once
// What checkpoint traffic costs a rank: the bytes its saves and loads sent to and received from
// the other ranks over the process group (plans, write results, status, the committed Metadata).

#include <dcpp/core/export.h>

#include <cstdint>

namespace dcpp {

/// Counted as the messages carry them (payloads and their lengths), not what the transport adds.
/// An all-reduce counts its values once each way; a padded message counts its padding.
struct DCPP_API CheckpointTraffic {
  int64_t bytes_sent = 0;
  int64_t bytes_received = 0;
  int64_t messages_sent = 0;
  int64_t messages_received = 0;
};

/// This process's checkpoint traffic since it started, over every process group (thread-safe).
/// The difference of two readings is what the saves and loads between them cost.
DCPP_API CheckpointTraffic checkpoint_traffic();

}  // namespace dcpp
