// ReferenceStore: the Store semantics computed by the C++ algorithms alone, in one thread, at a
// given time. It is what decide.lua must reproduce decision for decision: every entry decided at
// `now`; all consumed or none; a refused request writes nothing and reports each entry that
// would have passed as decided again with cost 0.
#pragma once

#include <map>
#include <span>
#include <string>

#include "caudal/algorithms/algorithm.h"
#include "caudal/algorithms/sliding_window_log.h"
#include "caudal/store.h"

namespace caudal::testing {

class ReferenceStore {
 public:
  StoreResponse Decide(std::span<const EntryRef> entries, Micros now) {
    struct Work {
      Step step;
      sliding_window_log::LogState log;
      bool had_state = false;
      CompactState before;
    };
    std::vector<Work> work(entries.size());
    StoreResponse resp;
    resp.allowed = true;
    for (size_t i = 0; i < entries.size(); ++i) {
      const EntryRef& e = entries[i];
      Work& w = work[i];
      if (e.limit->algorithm() == Algorithm::kSlidingWindowLog) {
        w.log = logs_[std::string(e.key)];
        sliding_window_log::LogState copy = w.log;
        w.step.decision = sliding_window_log::Evaluate(*e.limit, copy, now, e.cost);
        w.step.consumed = w.step.decision.allowed() && e.cost > 0;
      } else {
        auto it = compact_.find(std::string(e.key));
        w.had_state = it != compact_.end();
        if (w.had_state) w.before = it->second;
        w.step = DecideCompact(*e.limit, w.had_state ? &w.before : nullptr, now, e.cost);
      }
      if (!w.step.decision.allowed()) resp.allowed = false;
    }
    for (size_t i = 0; i < entries.size(); ++i) {
      const EntryRef& e = entries[i];
      Work& w = work[i];
      const bool log = e.limit->algorithm() == Algorithm::kSlidingWindowLog;
      if (resp.allowed && w.step.consumed) {
        if (log) {
          sliding_window_log::Evaluate(*e.limit, w.log, now, e.cost);
          sliding_window_log::Commit(w.log, now, e.cost);
          logs_[std::string(e.key)] = w.log;
        } else {
          compact_[std::string(e.key)] = w.step.next;
        }
      } else if (!resp.allowed && w.step.consumed) {  // would have passed: report a peek
        if (log) {
          w.step.decision = sliding_window_log::Evaluate(*e.limit, w.log, now, 0);
        } else {
          w.step = DecideCompact(*e.limit, w.had_state ? &w.before : nullptr, now, 0);
        }
      }
      resp.decisions.push_back(w.step.decision);
    }
    return resp;
  }

 private:
  std::map<std::string, CompactState> compact_;
  std::map<std::string, sliding_window_log::LogState> logs_;
};

}  // namespace caudal::testing
