// The steps of save's and load's SPMD protocol (spmd_step.h). A rank's outcome travels as three
// strings (planner/'s string codec): the kind of its failure as a decimal ErrorKind ("" when it
// succeeded), the failure's message, and the payload. The kind travels so that every rank throws
// what the failed ranks threw: a corrupt file on one rank is kCorrupt on all, not merely "a rank
// failed". The ranks first agree, in one all-reduce of a flag, whether any failed; only then do
// the failed ranks' messages go to every rank.

#include "dist/spmd_step.h"

#include "core/exception_message.h"
#include "planner/plan_codec.h"

#include <optional>

namespace dcpp::detail {

namespace {

constexpr std::size_t kStepFields = 3;

// One rank's outcome of a step, as it travels.
struct StepMessage {
  std::optional<ErrorKind> failure;  // empty when the rank's part succeeded
  std::string error;                 // the failure's message
  std::string payload;
};

std::string encode_step_message(const std::optional<ErrorKind>& failure, const std::string& error,
                                const std::string& payload) {
  const std::string kind = failure ? std::to_string(static_cast<int>(*failure)) : std::string();
  return encode_strings({kind, error, payload});
}

// The ErrorKind a decimal code names, or none when it names none.
std::optional<ErrorKind> decode_kind(const std::string& code) {
  for (ErrorKind kind : {ErrorKind::kNotFound, ErrorKind::kCorrupt, ErrorKind::kIncompatible,
                         ErrorKind::kRankFailed, ErrorKind::kIo, ErrorKind::kUsage}) {
    if (code == std::to_string(static_cast<int>(kind))) return kind;
  }
  return std::nullopt;
}

StepMessage decode_step_message(const std::string& bytes, const char* operation, const char* step,
                                const std::string& sender) {
  std::vector<std::string> fields = decode_strings(bytes);
  std::optional<ErrorKind> failure;
  const bool kind_ok = fields.size() == kStepFields &&
                       (fields[0].empty() || (failure = decode_kind(fields[0])).has_value());
  if (!kind_ok) {
    throw CheckpointError(ErrorKind::kCorrupt,
                          std::string(operation) + " failed while " + step + ": the message from " +
                              sender + " is malformed (" + std::to_string(fields.size()) +
                              " fields, not " + std::to_string(kStepFields) +
                              ", or an unknown error kind); every rank must run the same dcpp "
                              "build");
  }
  return StepMessage{failure, std::move(fields[1]), std::move(fields[2])};
}

// The error of a step that failed on `failures` ("rank 1: ...; rank 3: ..."), the same on any
// number of ranks.
CheckpointError step_failed(ErrorKind kind, const char* operation, const char* step,
                            const std::string& failures) {
  return CheckpointError(kind,
                         std::string(operation) + " failed while " + step + " (" + failures + ")");
}

// `local()`'s outcome on this rank.
StepMessage run_local(const std::function<std::string()>& local) {
  try {
    return StepMessage{std::nullopt, "", local()};
  } catch (...) {
    const std::exception_ptr error = std::current_exception();
    return StepMessage{exception_kind(error), exception_message(error), ""};
  }
}

// Returns when no rank failed its part of `step`; else every rank learns every failed rank's
// message (an all-gather of the outcomes, without payloads) and throws the same error.
void agree_on_outcome(Collectives& ranks, const char* operation, const char* step,
                      const StepMessage& outcome) {
  if (ranks.max_over_ranks({outcome.failure ? 1 : 0}).at(0) == 0) return;
  const std::vector<std::string> replies =
      ranks.all_gather(encode_step_message(outcome.failure, outcome.error, ""));
  std::string failures;
  std::optional<ErrorKind> kind;  // the failed ranks' kind while they agree, else kRankFailed
  for (std::size_t rank = 0; rank < replies.size(); ++rank) {
    StepMessage reply =
        decode_step_message(replies[rank], operation, step, "rank " + std::to_string(rank));
    if (reply.failure) {
      failures += (failures.empty() ? "" : "; ") + std::string("rank ") + std::to_string(rank) +
                  ": " + reply.error;
      kind = !kind || *kind == *reply.failure ? *reply.failure : ErrorKind::kRankFailed;
    }
  }
  if (!kind) {
    throw step_failed(ErrorKind::kRankFailed, operation, step,
                      "the ranks disagree on whether one failed; every rank must run the same "
                      "dcpp build");
  }
  throw step_failed(*kind, operation, step, failures);
}

}  // namespace

void throw_foreign_failure(int rank, const char* operation, const char* step,
                           const std::exception_ptr& error) {
  throw step_failed(ErrorKind::kUsage, operation, step,
                    "rank " + std::to_string(rank) + ": " + exception_message(error));
}

std::vector<std::string> gather_at_coordinator(Collectives& ranks, int coordinator,
                                               const char* operation, const char* step,
                                               const std::function<std::string()>& local) {
  if (ranks.size() == 1) {
    return {run_alone(ranks.rank(), operation, step, local)};
  }
  const StepMessage outcome = run_local(local);
  agree_on_outcome(ranks, operation, step, outcome);
  return ranks.gather(outcome.payload, coordinator);
}

void agree(Collectives& ranks, const char* operation, const char* step,
           const std::function<void()>& local) {
  const auto run = [&] {
    local();
    return std::string();
  };
  if (ranks.size() == 1) {
    run_alone(ranks.rank(), operation, step, run);
    return;
  }
  agree_on_outcome(ranks, operation, step, run_local(run));
}

std::string scatter_from_coordinator(Collectives& ranks, int coordinator, const char* operation,
                                     const char* step,
                                     const std::function<std::vector<std::string>()>& global) {
  const auto size = static_cast<std::size_t>(ranks.size());
  const auto run = [&] {
    std::vector<std::string> payloads = global();
    if (payloads.size() != size) {
      throw CheckpointError(ErrorKind::kUsage, std::string(step) + " gave " +
                                                   std::to_string(payloads.size()) + " plans for " +
                                                   std::to_string(size) +
                                                   " ranks; a global plan has one per rank");
    }
    return payloads;
  };
  if (size == 1) {
    return run_alone(ranks.rank(), operation, step, run).front();
  }
  std::vector<std::string> messages;
  if (ranks.rank() == coordinator) {
    try {
      std::vector<std::string> payloads = run();
      messages.reserve(payloads.size());
      for (std::string& payload : payloads) {  // each freed once wrapped: held once, not twice
        messages.push_back(encode_step_message(std::nullopt, "", payload));
        std::string().swap(payload);
      }
    } catch (...) {
      const std::exception_ptr error = std::current_exception();
      messages.assign(size,
                      encode_step_message(exception_kind(error), exception_message(error), ""));
    }
  }
  const std::string sender = "the coordinator (rank " + std::to_string(coordinator) + ")";
  StepMessage reply =
      decode_step_message(ranks.scatter(messages, coordinator), operation, step, sender);
  if (reply.failure) {
    throw step_failed(*reply.failure, operation, step,
                      "rank " + std::to_string(coordinator) + ": " + reply.error);
  }
  return std::move(reply.payload);
}

std::string from_coordinator(Collectives& ranks, int coordinator, const char* operation,
                             const char* step, const std::function<std::string()>& local) {
  if (ranks.size() == 1) {
    return run_alone(ranks.rank(), operation, step, local);
  }
  std::string message;
  if (ranks.rank() == coordinator) {
    const StepMessage outcome = run_local(local);
    message = encode_step_message(outcome.failure, outcome.error, outcome.payload);
  }
  const std::string sender = "the coordinator (rank " + std::to_string(coordinator) + ")";
  StepMessage reply =
      decode_step_message(ranks.broadcast(message, coordinator), operation, step, sender);
  if (reply.failure) {
    throw step_failed(*reply.failure, operation, step,
                      "rank " + std::to_string(coordinator) + ": " + reply.error);
  }
  return std::move(reply.payload);
}

}  // namespace dcpp::detail
