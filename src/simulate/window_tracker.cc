#include "simulate/window_tracker.h"

#include <algorithm>
#include <cassert>

namespace caudal::simulate {

WindowTracker::WindowTracker(Micros window, size_t keys)
    : window_us_(window.count()), sums_(keys, 0), is_active_(keys, 0) {
  assert(window_us_ > 0);
}

void WindowTracker::AdvanceTo(Micros at) {
  // An admission at t has left the window (at − W, at] once t <= at − W.
  const int64_t oldest_inside = at.count() - window_us_;
  while (!live_.empty() && live_.front().at_us <= oldest_inside) {
    sums_[live_.front().key] -= live_.front().cost;
    live_.pop_front();
  }
}

int64_t WindowTracker::Admit(uint32_t key, Micros at, int64_t cost) {
  assert(key < sums_.size() && cost >= 0);
  assert(live_.empty() || live_.back().at_us <= at.count());
  AdvanceTo(at);
  if (cost > 0) {
    live_.push_back({at.count(), key, cost});
    sums_[key] += cost;
    if (!is_active_[key]) {
      is_active_[key] = 1;
      active_.push_back(key);
    }
  }
  max_ = std::max(max_, sums_[key]);
  return sums_[key];
}

int64_t WindowTracker::CurrentMax() {
  int64_t best = 0;
  // Scan the active keys, dropping those whose window emptied.
  size_t kept = 0;
  for (const uint32_t key : active_) {
    if (sums_[key] == 0) {
      is_active_[key] = 0;
      continue;
    }
    best = std::max(best, sums_[key]);
    active_[kept++] = key;
  }
  active_.resize(kept);
  return best;
}

}  // namespace caudal::simulate
