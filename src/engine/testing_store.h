// Test-only stores for the limiter's unit tests.
//
// MapStore: a small all-or-nothing store over the compact algorithms (no sliding_window_log),
// deciding at an injected clock; it records every request so tests can assert what was sent.
// It also fails on demand with a chosen Status, like a store that is down.
#pragma once

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "caudal/algorithms/algorithm.h"
#include "caudal/store.h"

namespace caudal::testing {

class MapStore final : public Store {
 public:
  explicit MapStore(const Clock& clock) : clock_(clock) {}

  void DecideAsync(std::span<const EntryRef> entries, DecideCallback done) override {
    done(DecideNow(entries));
  }
  Status Ping() override {
    std::lock_guard<std::mutex> lock(mu_);
    return failure_;
  }
  std::string_view Name() const override { return "map"; }

  void FailWith(Status s) {
    std::lock_guard<std::mutex> lock(mu_);
    failure_ = std::move(s);
  }
  void Recover() { FailWith(Status::Ok()); }
  size_t requests() const {
    std::lock_guard<std::mutex> lock(mu_);
    return requests_;
  }
  std::vector<std::string> Keys() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<std::string> out;
    for (const auto& [k, v] : state_) out.push_back(k);
    return out;
  }

 private:
  Result<StoreResponse> DecideNow(std::span<const EntryRef> entries) {
    std::lock_guard<std::mutex> lock(mu_);
    ++requests_;
    if (!failure_.ok()) return failure_;
    if (Status s = ValidateEntries(entries); !s.ok()) return s;
    const Micros now = std::chrono::duration_cast<Micros>(clock_.Now());
    StoreResponse resp;
    resp.allowed = true;
    std::vector<Step> steps;
    for (const EntryRef& e : entries) {
      auto it = state_.find(std::string(e.key));
      steps.push_back(
          DecideCompact(*e.limit, it == state_.end() ? nullptr : &it->second, now, e.cost));
      resp.allowed = resp.allowed && steps.back().decision.allowed();
    }
    for (size_t i = 0; i < entries.size(); ++i) {
      if (resp.allowed) {
        if (steps[i].changed) state_[std::string(entries[i].key)] = steps[i].next;
        resp.decisions.push_back(steps[i].decision);
      } else {
        // Refused: report the entries that passed without their consumption.
        auto it = state_.find(std::string(entries[i].key));
        const Step peek =
            DecideCompact(*entries[i].limit, it == state_.end() ? nullptr : &it->second, now, 0);
        resp.decisions.push_back(steps[i].decision.allowed() ? peek.decision : steps[i].decision);
      }
    }
    return resp;
  }

  const Clock& clock_;
  mutable std::mutex mu_;
  std::map<std::string, CompactState> state_;  // guarded by mu_
  Status failure_;                             // guarded by mu_
  size_t requests_ = 0;                        // guarded by mu_
};

}  // namespace caudal::testing
