// Policies: which limits apply to which requests, and how their state is keyed.
//
// A policy names descriptor fields (its `identity`); it applies to a request when every one of
// them is present, and its limits are kept per distinct identity value. A PolicySet is the
// validated, immutable collection the limiter decides against; reloading a config builds a new
// PolicySet and swaps it in whole, so a request never sees half of one.
//
// A policy may give some requests other limits: its `overrides` (tiers), each a `match` on
// descriptor values, the identity's own ({tenant: acme}) or another of the request's ({plan:
// pro}). The first override whose every value the request holds gives its limits; a request no
// override matches gets the policy's own. Runtime overrides
// (caudal/engine/runtime_overrides.h) come before both.
//
// Thread-safety: a PolicySet is immutable once created; share it by shared_ptr.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "caudal/algorithms/fairness.h"
#include "caudal/algorithms/limit.h"
#include "caudal/common/status.h"
#include "caudal/decorators/lease_terms.h"
#include "caudal/engine/ip.h"
#include "caudal/store/store.h"

namespace caudal {

// What a policy does when the store errors or exceeds its timeout.
enum class FailureMode : uint8_t {
  kAllow,  // fail open: admit, mark degraded
  kDeny,   // fail closed: 503, the client did nothing wrong
  kLocal,  // decide in this instance's memory with the limits divided by the instance count
};
std::string_view FailureModeName(FailureMode m);
Result<FailureMode> ParseFailureMode(std::string_view text);

// How the checks of one request share a decision.
enum class DescriptorMode : uint8_t {
  kAllOrNothing,  // one refused check means no check consumes (the default)
  kConsumeEach,   // each check is decided on its own, like envoyproxy/ratelimit's descriptors
};
std::string_view DescriptorModeName(DescriptorMode m);
Result<DescriptorMode> ParseDescriptorMode(std::string_view text);

enum class Enforcement : uint8_t {
  kEnforce,
  kShadow,  // decide, count and report, but never refuse (dark launch)
};

enum class RejectedCounting : uint8_t {
  kNotCounted,  // all-or-nothing: a refused request consumes nothing here
  kCounted,     // a refused request is still charged here, when this policy has room for it
};

// How many leading bits of an `ip` descriptor form the key (IPv6 clients often own a /64).
struct IpPrefix {
  int v4 = 32;
  int v6 = 128;
  friend bool operator==(const IpPrefix&, const IpPrefix&) = default;
};

inline constexpr size_t kMaxPolicies = 256;
inline constexpr size_t kMaxLimitsPerPolicy = 8;
inline constexpr size_t kMaxIdentityFields = 8;
inline constexpr size_t kMaxNameLength = 64;  // policy and descriptor names
inline constexpr int64_t kMaxInstances = 1024;
inline constexpr size_t kMaxOverridesPerPolicy = 64;
inline constexpr size_t kMaxMatchValues = 8;         // descriptors one override matches on
inline constexpr size_t kMaxMatchValueLength = 256;  // as a descriptor value

// One descriptor value an override matches: the request's `descriptor` equals `value`; for
// `ip`, the value may be an address or a CIDR block ("10.0.0.0/8") that holds the request's.
struct MatchValue {
  std::string descriptor;
  std::string value;
  friend bool operator==(const MatchValue&, const MatchValue&) = default;
};

// A policy's static override (a tier): requests that hold every value of `match` get `limits`,
// or, in a policy with `share`, the weight of their identity's part (and the policy's limits).
struct OverrideSpec {
  std::vector<MatchValue> match;  // 1..kMaxMatchValues, each descriptor once
  std::vector<Limit> limits;      // 1..kMaxLimitsPerPolicy, each at least the policy's cost; none
                                  // with `share`
  std::optional<int64_t> weight = std::nullopt;  // 1..kMaxShareWeight, only and always with share
};

// A policy whose limits are one capacity shared by all its identities: each identity seen in the
// last `window` gets a part of it by `fairness`, weighted by its tier's or runtime override's
// weight (1 unless one gives another). Its limits are rates that can be divided: token_bucket,
// gcra or fixed_window.
inline constexpr Micros kMinShareWindow = std::chrono::milliseconds(100);
inline constexpr Micros kMaxShareWindow = std::chrono::hours(1);
struct ShareTerms {
  Fairness fairness = Fairness::kMaxMin;
  Micros window = std::chrono::seconds(2);  // kMinShareWindow..kMaxShareWindow
  friend bool operator==(const ShareTerms&, const ShareTerms&) = default;
};

struct PolicySpec {
  std::string name;                   // [A-Za-z0-9_.-]{1,64}, unique in a set
  std::vector<std::string> identity;  // descriptor names, 1..kMaxIdentityFields, no repeats
  IpPrefix ip_prefix{};
  std::vector<Limit> limits;  // 1..kMaxLimitsPerPolicy
  int64_t cost = 1;           // used when the request names no cost; ≤ every limit's capacity
  Enforcement enforcement = Enforcement::kEnforce;
  RejectedCounting count_rejected = RejectedCounting::kNotCounted;
  std::optional<FailureMode> on_failure;  // unset: the set's default
  std::vector<OverrideSpec> overrides;    // 0..kMaxOverridesPerPolicy; the first match wins
  std::optional<LeaseTerms> lease;        // unset: the set's default (store.lease)
  // How its reservations live (POST /v1/reserve); the ttl is each request's own.
  ReservationTerms reservations{};
  std::optional<ShareTerms> share;  // unset: each identity has the limits to itself
};

struct PolicySetOptions {
  FailureMode on_failure = FailureMode::kDeny;
  int64_t instances = 1;  // divides the limits of `local` failure mode, 1..kMaxInstances
  DescriptorMode mode = DescriptorMode::kAllOrNothing;
  LeaseTerms lease{};  // store.lease: the terms of policies that set none
};

// A policy's field that failed validation ("name", "identity[1]", "limits[0]", "cost", ...).
struct PolicyError {
  std::string field;
  Status status;
};

// Checks one policy on its own (not the uniqueness of its name). Returns the field at fault.
std::optional<PolicyError> ValidatePolicy(const PolicySpec& spec, const PolicySetOptions& options);
// kInvalidArgument unless enabled terms have a ttl within kMinLeaseTtl..kMaxLeaseTtl and a share
// above 0 and at most 1 (10^6 per million). Disabled terms are always valid.
Status ValidateLeaseTerms(const LeaseTerms& terms);
// True for names made of [A-Za-z0-9_.-], 1..kMaxNameLength long.
bool IsValidName(std::string_view name);
// The limit one of `instances` instances applies on its own in `local` failure mode: capacity
// divided (rounded down, at least 1) and the rate divided exactly.
Result<Limit> LocalLimit(const Limit& global, int64_t instances);
// Why `limit` cannot be one of `policy`'s limits under `options`, or nullopt: a concurrency limit
// where a refused request could take a slot (count_rejected, consume_each), a capacity below the
// policy's default cost, a limit that cannot be divided for its `local` failure mode, a limit
// that cannot be shared (a sliding window or concurrency) in a policy with `share`. The one
// check of a policy's limit, whichever way it arrives: its own and its tiers' (the file, a
// reload), a runtime override's (the admin API, and each held one again at every install).
std::optional<std::string> PolicyLimitProblem(const PolicySpec& policy,
                                              const PolicySetOptions& options, const Limit& limit);
// Checks limits that are to replace a policy's own (a tier's, a runtime override's):
// 1..kMaxLimitsPerPolicy, each by PolicyLimitProblem. The field at fault is "[i]" for the i-th
// limit, "" for the list.
std::optional<PolicyError> ValidateOverrideLimits(const PolicySpec& policy,
                                                  const PolicySetOptions& options,
                                                  const std::vector<Limit>& limits);
// Checks what an override (a tier, a runtime override) gives `policy`'s requests: without
// `share`, limits (ValidateOverrideLimits) and no weight, not even 1; with `share`, a weight of
// 1..kMaxShareWeight and no limits (its identities share the policy's own). The field at fault
// is "weight", "limits" or "limits[i]".
std::optional<PolicyError> ValidateOverrideTerms(const PolicySpec& policy,
                                                 const PolicySetOptions& options,
                                                 const std::vector<Limit>& limits,
                                                 std::optional<int64_t> weight);

// The limits a check applies, with what deciding them needs, parallel to them: the limits of
// `local` failure mode (divided by the instance count) and the store key prefix of each, which
// names the policy, the limit's index and the limit itself, so that other limits find other
// state.
struct LimitSet {
  std::vector<Limit> limits;
  std::vector<Limit> local_limits;
  std::vector<std::string> key_prefixes;
};
// `limits` of policy `policy`, for a set of `instances` instances. A limit that cannot be
// divided keeps its own value as local limit (only reported: validation refuses it where the
// local fallback can be used).
// A set counting more than one dimension (Limit::DimensionText; concurrency limits count none)
// keys its compact limits as members of one group per identity (store_key.h), unless
// `may_group` is false (a capacity shared among identities).
LimitSet MakeLimitSet(std::string_view policy, std::vector<Limit> limits, int64_t instances,
                      bool may_group = true);

class PolicySet {
 public:
  struct Policy {
    PolicySpec spec;
    FailureMode on_failure = FailureMode::kDeny;  // resolved
    std::vector<Limit> local_limits;              // one per spec.limits entry
    std::vector<std::string> key_prefixes;        // store key prefix per limit
    // One per spec.overrides entry: its limits (with `share`, the policy's own), its `ip` match
    // as a block (if it has one) and its identities' weight (1 without `share`).
    struct Tier {
      LimitSet set;
      std::optional<CidrBlock> ip;
      int64_t weight = 1;
    };
    std::vector<Tier> tiers;
    LeaseTerms lease;  // resolved: its own, or the set's

    bool shadow() const { return spec.enforcement == Enforcement::kShadow; }
    const std::optional<ShareTerms>& share() const { return spec.share; }
  };

  // kInvalidArgument naming the policy and field when a spec is invalid or a name repeats.
  static Result<std::shared_ptr<const PolicySet>> Create(std::vector<PolicySpec> specs,
                                                         PolicySetOptions options);

  std::span<const Policy> policies() const { return policies_; }
  const PolicySetOptions& options() const { return options_; }
  // The dimensions a request's costs may name: `requests`, and every one a limit of a policy or
  // of a tier counts, in ascending order.
  std::span<const std::string> dimensions() const { return dimensions_; }

 private:
  PolicySet() = default;
  std::vector<Policy> policies_;
  std::vector<std::string> dimensions_;
  PolicySetOptions options_;
};

}  // namespace caudal
