#include "store/store_reference_model.h"

#include "caudal/algorithms/algorithm.h"

namespace caudal {

Decision ReferenceModel::Evaluate(const EntryRef& e, Micros now, int64_t cost, Step* step) {
  if (e.limit->algorithm() == Algorithm::kSlidingWindowLog) {
    return sliding_window_log::Evaluate(*e.limit, logs_[std::string(e.key)], now, cost);
  }
  const auto it = compact_.find(e.key);
  *step = DecideCompact(*e.limit, it == compact_.end() ? nullptr : &it->second, now, cost);
  return step->decision;
}

StoreResponse ReferenceModel::Decide(std::span<const EntryRef> entries, Micros now) {
  StoreResponse response;
  response.allowed = true;
  std::vector<Step> steps(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    response.decisions.push_back(Evaluate(entries[i], now, entries[i].cost, &steps[i]));
    response.allowed = response.allowed && response.decisions.back().allowed();
  }
  for (size_t i = 0; i < entries.size(); ++i) {
    const EntryRef& e = entries[i];
    if (!response.allowed) {
      // Would-have-passed entries report their unchanged state; refusals keep their verdict.
      if (response.decisions[i].allowed()) response.decisions[i] = Evaluate(e, now, 0, &steps[i]);
    } else if (e.limit->algorithm() == Algorithm::kSlidingWindowLog) {
      sliding_window_log::Commit(logs_[std::string(e.key)], now, e.cost);
    } else if (steps[i].consumed) {
      compact_[std::string(e.key)] = steps[i].next;
    }
  }
  return response;
}

}  // namespace caudal
