// The planning steps of save() (cached_save_planning.h). Messages, each a list of strings
// (planner/'s string codec):
//   rank -> coordinator: {"plan", local plan} or {"token", token of the kept save}
//   coordinator -> rank: {"resend"}, or {"plan" | "same", token of this save, "1" when the
//                        merge was reused else "0", final plan or "" for "same", marks of the
//                        rank's replicated items or "" (replicated_items.h)}

#include "checkpoint/cached_save_planning.h"

#include "dist/spmd_step.h"
#include "planner/plan_codec.h"
#include "save_plan_cache_state.h"

#include <dcpp/core/checkpoint_error.h>

#include <algorithm>
#include <memory>
#include <random>

namespace dcpp::detail {

namespace {

constexpr const char* kOperation = "checkpoint save";
const std::string kPlan = "plan", kToken = "token", kResend = "resend", kSame = "same";

using Plans = SavePlanCache::State::Plans;

CheckpointError malformed(const std::string& what) {
  return CheckpointError(ErrorKind::kCorrupt, "checkpoint save: a malformed " + what +
                                                  "; every rank must run the same dcpp build");
}

// A message's fields: `count` of them, the first one of `kinds`.
std::vector<std::string> fields_of(std::vector<std::string> fields, std::size_t count,
                                   const std::vector<std::string>& kinds, const char* what) {
  if (fields.size() != count || std::find(kinds.begin(), kinds.end(), fields[0]) == kinds.end()) {
    throw malformed(what);
  }
  return fields;
}

uint64_t parse_token(const std::string& text) {
  std::size_t end = 0;
  try {
    const uint64_t token = std::stoull(text, &end);
    if (end == text.size()) {
      return token;
    }
  } catch (const std::exception&) {
  }
  throw malformed("plan token '" + text + "'");
}

uint64_t new_token() {
  std::random_device seed;
  std::mt19937_64 random((static_cast<uint64_t>(seed()) << 32) ^ seed());
  uint64_t token = 0;
  while (token == 0) {  // 0 means "nothing kept"
    token = random();
  }
  return token;
}

// Whether `plans` holds a committed save's plans for `context`.
bool holds(const Plans& plans, const std::string& context) {
  return plans.token != 0 && plans.context == context;
}

// The coordinator's part: every rank's offer in, every rank's reply out. Records in `pending`
// (when caching) the merge and the final plans sent; sets the global Metadata and the replicated
// items in `planning`.
std::vector<std::string> plan_globally(const std::vector<std::string>& offers,
                                       SavePlanCache::State* state, const std::string& context,
                                       const SavePlanningSteps& steps, SavePlanning& planning) {
  const std::size_t size = offers.size();
  std::vector<std::string> local_plans(size);
  std::size_t tokens = 0;
  bool tokens_name_the_kept_save = state != nullptr && holds(state->kept, context);
  for (std::size_t rank = 0; rank < size; ++rank) {
    std::vector<std::string> offer =
        fields_of(decode_strings(offers[rank]), 2, {kPlan, kToken}, "local plan");
    if (offer[0] == kToken) {
      ++tokens;
      tokens_name_the_kept_save =
          tokens_name_the_kept_save && offer[1] == std::to_string(state->kept.token);
    } else {
      local_plans[rank] = std::move(offer[1]);
    }
  }
  if (tokens > 0 && !(tokens == size && tokens_name_the_kept_save)) {
    return std::vector<std::string>(size, encode_strings({kResend}));
  }
  const bool reused = tokens == size;
  std::shared_ptr<const std::vector<SavePlan>> global_plans;
  std::shared_ptr<const Metadata> global_metadata;
  std::shared_ptr<const ReplicatedItems> replicated;
  if (reused) {
    global_plans = state->kept.global_plans;
    global_metadata = state->kept.metadata;
    replicated = state->kept.replicated;
  } else {
    std::vector<SavePlan> plans;
    plans.reserve(size);
    for (std::string& bytes : local_plans) {
      plans.push_back(decode_save_plan(bytes));
      std::string().swap(bytes);
    }
    if (steps.find_replicas) {
      replicated = std::make_shared<const ReplicatedItems>(find_replicated_items(plans));
    }
    auto [merged, merged_metadata] = steps.global(std::move(plans));
    global_plans = std::make_shared<const std::vector<SavePlan>>(std::move(merged));
    if (state != nullptr) {  // kept for the next save: the commit gets a copy
      global_metadata = std::make_shared<const Metadata>(std::move(merged_metadata));
    } else {
      planning.metadata = std::move(merged_metadata);
    }
  }
  std::vector<SavePlan> final_plans = steps.prepare_global(*global_plans);
  if (final_plans.size() != size) {
    throw CheckpointError(ErrorKind::kUsage, "the global plan has " +
                                                 std::to_string(final_plans.size()) +
                                                 " plans for " + std::to_string(size) +
                                                 " ranks; a global plan has one per rank");
  }
  const std::string token = std::to_string(state != nullptr ? state->pending.token : 0);
  std::vector<std::string> replies, sent;
  replies.reserve(size);
  if (state != nullptr) sent.reserve(size);
  for (std::size_t rank = 0; rank < size; ++rank) {
    std::string plan = encode_save_plan(final_plans[rank]);
    final_plans[rank] = SavePlan();  // held once, encoded: GiBs at 10,000 ranks
    const bool same =
        reused && rank < state->kept.final_plans.size() && state->kept.final_plans[rank] == plan;
    const std::string marks =
        replicated && rank < replicated->marks.size() ? replicated->marks[rank] : std::string();
    replies.push_back(
        encode_strings({same ? kSame : kPlan, token, reused ? "1" : "0", same ? "" : plan, marks}));
    if (state != nullptr) sent.push_back(std::move(plan));  // only a cache keeps them
  }
  if (global_metadata) planning.metadata = *global_metadata;
  planning.replicated = replicated;
  if (state != nullptr) {
    state->pending.global_plans = std::move(global_plans);
    state->pending.metadata = std::move(global_metadata);
    state->pending.final_plans = std::move(sent);
    state->pending.replicated = std::move(replicated);
  }
  return replies;
}

}  // namespace

std::string encode_full_plan_offer(std::string encoded_local_plan) {
  return encode_strings({kPlan, std::move(encoded_local_plan)});
}

SavePlanning plan_save(Collectives& ranks, int coordinator, SavePlanCache* cache,
                       const std::string& context, const SavePlanningSteps& steps) {
  SavePlanCache::State* state = cache != nullptr ? &cache->state() : nullptr;
  if (state != nullptr) {
    state->pending = Plans{};
    state->pending.token = ranks.rank() == coordinator ? new_token() : 0;
  }
  SavePlanning planning;
  bool planned = false;  // in the first round; a second one sends the same plan in full
  for (const bool offer_token : {true, false}) {
    const std::vector<std::string> offers =
        gather_at_coordinator(ranks, coordinator, kOperation, "planning", [&] {
          if (!planned) {
            planning.local = steps.local();
            planning.local_plan = encode_save_plan(planning.local);
            planned = true;
          }
          if (offer_token && state != nullptr && holds(state->kept, context) &&
              state->kept.local_plan == planning.local_plan) {
            return encode_strings({kToken, std::to_string(state->kept.token)});
          }
          return encode_full_plan_offer(planning.local_plan);
        });
    planning.reply = scatter_from_coordinator(
        ranks, coordinator, kOperation, "global planning",
        [&] { return plan_globally(offers, state, context, steps, planning); });
    if (planning.reply != encode_strings({kResend})) {
      return planning;
    }
  }
  throw CheckpointError(ErrorKind::kCorrupt,
                        "checkpoint save: the coordinator asked for the full plans twice; every "
                        "rank must run the same dcpp build");
}

SavePlan final_plan(SavePlanning& planning, SavePlanCache* cache, const std::string& context) {
  SavePlanCache::State* state = cache != nullptr ? &cache->state() : nullptr;
  const std::vector<std::string> reply =
      fields_of(decode_strings(planning.reply), 5, {kPlan, kSame}, "final plan");
  SavePlan plan;
  if (reply[0] == kSame) {
    if (state == nullptr || !holds(state->kept, context)) {
      throw malformed("final plan: a token for a plan this rank does not hold");
    }
    plan = state->kept.final_plan;
  } else {
    plan = decode_save_plan(reply[3]);
  }
  planning.replicated_positions = decode_marks(reply[4], planning.local.items.size());
  if (state != nullptr) {
    state->pending.context = context;
    state->pending.token = parse_token(reply[1]);
    state->pending.local_plan = std::move(planning.local_plan);
    state->pending.final_plan = plan;
    state->pending.reused = reply[2] == "1";
  }
  return plan;
}

void keep_save_plans(SavePlanCache* cache) {
  if (cache == nullptr) {
    return;
  }
  SavePlanCache::State& state = cache->state();
  state.kept = std::move(state.pending);
  state.pending = SavePlanCache::State::Plans{};
  ++(state.kept.reused ? state.reused_plans : state.full_plans);
}

}  // namespace dcpp::detail
