// The pure halves of RlsHandler: a RateLimitRequest becomes a Plan (one Slot per descriptor,
// validated, resolved against the config), the store fills the slots' decisions, and the Plan
// becomes a RateLimitResponse. No I/O, no clock reads: tested without a store.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "caudal/decision.h"
#include "caudal/envoy/ratelimit_config.h"
#include "caudal/envoy/rls_handler.h"

namespace caudal::envoy::internal {

enum class SlotKind : uint8_t {
  kNoLimit,    // no rule matched (or it was replaced): OK, nothing counted
  kUnlimited,  // rule says unlimited: OK
  kBlocked,    // requests_per_unit 0: always over the limit, nothing counted
  kLimited,    // decided by the store
};

struct Slot {
  SlotKind kind = SlotKind::kNoLimit;
  uint32_t requests_per_unit = 0;
  Unit unit = Unit::kSecond;
  std::string name;             // the rule's name ("" for overrides and unnamed rules)
  bool shadow = false;
  std::optional<Limit> limit;   // kLimited
  std::string key;              // kLimited: the store key
  int64_t cost = 0;             // kLimited: hits to add (or to give back, for a refund)
  bool refund = false;          // is_negative_hits with hits: give `cost` back
  Decision decision{};          // kLimited: filled from the store
};

struct Plan {
  std::vector<Slot> slots;  // one per descriptor, in request order
};

// Bad requests give kInvalidArgument with a message naming the descriptor and field.
Result<Plan> BuildPlan(const RateLimitRequest& request, const RateLimitConfig& config,
                       const RlsOptions& options);

// `store_failure` is Ok when every slot was decided; otherwise the failure mode answers.
// `degraded`: the decisions came from the local fallback store.
void BuildResponse(const Plan& plan, const RlsOptions& options, Nanos now,
                   const Status& store_failure, bool degraded, RateLimitResponse* response);

// Divides every limit among `instances` for the local fallback store; kInvalidArgument when a
// limit cannot be divided exactly.
Status MakeLocal(Plan& plan, int64_t instances);

}  // namespace caudal::envoy::internal
