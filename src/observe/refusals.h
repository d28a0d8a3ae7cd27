// Refusals: who is being refused, and by which check — the heaviest refused identities per
// policy (or Envoy rule), and a throttled log line per refused identity.
//
// Heavy hitters: each check keeps a space-saving sketch (Metwally, Agrawal, El Abbadi 2005) of
// kSketchSize counters. An identity refused more than 1/kSketchSize of the check's refusals is
// always in it; each reported count c with error e bounds the true count t as c − e ≤ t ≤ c.
// At most kMaxChecks checks are tracked (the rest are counted under "_other"), so memory is
// fixed whatever the traffic.
//
// Log: a refused identity gets a line at most once per `log_interval` (with the count held back
// since), and all identities together at most `log_per_second` lines a second (the rest are
// counted and said in the next line let through), so a flood of refusals — from one key or from
// many — cannot flood the log.
//
// Identities are shown as their values ("api_key=k1") or, by default, as a hash of them, since
// an identity may be a secret (an API key). The hash is a pseudonym (FNV-1a, 64 bits), not
// protection against someone who can guess the values.
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "caudal/common/clock.h"
#include "caudal/common/status.h"
#include "caudal/observe/log.h"
#include "observe/metrics.h"

namespace caudal {

class LogThrottle;

inline constexpr size_t kSketchSize = 32;
inline constexpr size_t kMaxChecks = 1024;

struct RefusalsOptions {
  IdentityDisplay identities = IdentityDisplay::kHash;
  bool log = true;  // a line per refused identity (throttled)
  Nanos log_interval = std::chrono::minutes(1);
  int log_per_second = 10;
};

struct HeavyHitter {
  std::string identity;  // as displayed
  uint64_t count = 0;    // an upper bound of the refusals
  uint64_t error = 0;    // count − error is a lower bound
};

struct CheckRefusals {
  Api api = Api::kHttp;
  std::string check;  // the policy's name, or the Envoy rule's stat key
  uint64_t total = 0;
  std::vector<HeavyHitter> top;  // by count, highest first
};

class Refusals {
 public:
  Refusals(const Clock& clock, const Logger* log, RefusalsOptions options);
  ~Refusals();

  // One refusal of `identity` (its values, "name=value,...") by `check`, refused by `limit`
  // (its spelling) with `retry_after`.
  void Record(Api api, std::string_view check, std::string_view identity, std::string_view limit,
              Micros retry_after);
  // Every tracked check, the most refused first; at most `top` hitters each.
  std::vector<CheckRefusals> Top(size_t top) const;
  std::string Display(std::string_view identity) const;
  void SetOptions(RefusalsOptions options);  // a reload

 private:
  struct Sketch;
  void Log(std::string_view check, const std::string& shown, std::string_view limit,
           Micros retry_after);

  const Clock& clock_;
  const Logger* log_;
  mutable std::mutex mu_;
  RefusalsOptions options_;  // guarded by mu_
  std::map<std::pair<Api, std::string>, std::unique_ptr<Sketch>, std::less<>> sketches_;  // mu_
  std::unique_ptr<LogThrottle> per_identity_;
  int64_t second_ = -1;        // guarded by mu_: the second lines are being counted in
  int lines_this_second_ = 0;  // guarded by mu_
  uint64_t held_back_ = 0;     // guarded by mu_: lines dropped by the global rate
};

}  // namespace caudal
