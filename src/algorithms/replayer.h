// Replayer: one key's state driven through any algorithm, the way a store drives it.
// For tests, property checks and fuzzers (header-only, not part of the library).
//
// Decide() applies a decision (writes the state back when something was consumed), Refund() gives
// units back; Peek() answers the same question on a copy and changes nothing. Not thread-safe.
#pragma once

#include <cstdint>
#include <optional>

#include "algorithms/algorithm.h"
#include "algorithms/sliding_window_log.h"
#include "caudal/algorithms/limit.h"

namespace caudal::testing {

class Replayer {
 public:
  explicit Replayer(const Limit& limit) : limit_(limit) {}

  Decision Decide(Micros now, int64_t cost) {
    if (HasLogState(limit_.algorithm())) {
      const LogFunctions& log = LogFunctionsOf(limit_);
      const Decision d = log.evaluate(limit_, log_, now, cost);
      if (d.allowed()) log.commit(limit_, log_, now, cost);
      return d;
    }
    const Step step = DecideCompact(limit_, compact_ ? &*compact_ : nullptr, now, cost);
    if (step.changed) compact_ = step.next;
    return step.decision;
  }

  // Gives back up to `units` (see compact_state.h), writing the state when it changed.
  Decision Refund(Micros now, int64_t units) {
    if (HasLogState(limit_.algorithm())) {
      return LogFunctionsOf(limit_).refund(limit_, log_, now, units);
    }
    const Step step = RefundCompact(limit_, compact_ ? &*compact_ : nullptr, now, units);
    if (step.changed) compact_ = step.next;
    return step.decision;
  }

  Decision Peek(Micros now, int64_t cost) const {
    Replayer copy = *this;
    return copy.Decide(now, cost);
  }

  // What a fresh state (never seen) would decide.
  Decision DecideFresh(Micros now, int64_t cost) const {
    return Replayer(limit_).Decide(now, cost);
  }

  const Limit& limit() const { return limit_; }
  const std::optional<CompactState>& compact() const { return compact_; }
  const sliding_window_log::LogState& log() const { return log_; }

 private:
  Limit limit_;
  std::optional<CompactState> compact_;
  sliding_window_log::LogState log_;
};

}  // namespace caudal::testing
