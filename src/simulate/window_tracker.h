// WindowTracker: how much each key has admitted within the trailing window (t − W, t], and the
// most any key ever had in one window — the number a bucket's B + r·t bound speaks about.
//
// It is fed admissions in time order (the order the simulator replays them) and keeps only the
// admissions still inside the window, in one FIFO shared by all keys, so memory follows the
// admitted rate, not the trace length or the number of keys. Every window of length W that holds
// admissions ends, at its most, on an admission, so checking the sum right after each admission
// finds the exact maximum over all windows.
//
// Not thread-safe (one per simulated algorithm).
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <vector>

#include "caudal/common/clock.h"

namespace caudal::simulate {

class WindowTracker {
 public:
  // Preconditions: window > 0; keys are indices below `keys`.
  WindowTracker(Micros window, size_t keys);

  // Records `cost` units admitted for `key` at `at` and returns the key's sum in (at − W, at].
  // Preconditions: `at` is not earlier than any earlier call's; cost >= 0.
  int64_t Admit(uint32_t key, Micros at, int64_t cost);

  // Forgets admissions that are no longer inside (at − W, at]. Same precondition on `at`.
  void AdvanceTo(Micros at);

  // The largest per-key sum in (at − W, at] at the last Admit/AdvanceTo time `at`. Costs
  // O(keys with admissions inside the window).
  int64_t CurrentMax();

  // The most any key admitted within any window of length W so far.
  int64_t max_in_window() const { return max_; }

 private:
  struct Admission {
    int64_t at_us;
    uint32_t key;
    int64_t cost;
  };
  int64_t window_us_;
  std::deque<Admission> live_;      // admissions inside the window, oldest first
  std::vector<int64_t> sums_;       // per key: cost inside the window
  std::vector<uint32_t> active_;    // keys whose sum may be non-zero (CurrentMax scans these)
  std::vector<uint8_t> is_active_;  // per key: listed in active_
  int64_t max_ = 0;
};

// Fills a run's series (see AlgorithmRun::series): before a request past the current interval's
// end, close the interval and carry what is still inside the window into the next one.
class SeriesRecorder {
 public:
  SeriesRecorder(const std::vector<Micros>& times, std::vector<int64_t>& series)
      : times_(times), series_(series) {
    series_.assign(times_.size(), 0);
  }

  void Before(Micros at, WindowTracker& tracker) {
    while (current_ < times_.size() && at > times_[current_]) {
      tracker.AdvanceTo(times_[current_]);
      ++current_;
      if (current_ < times_.size()) series_[current_] = tracker.CurrentMax();
    }
  }
  void Admitted(int64_t in_window) {
    if (current_ < series_.size()) series_[current_] = std::max(series_[current_], in_window);
  }
  void Finish(WindowTracker& tracker) { Before(Micros::max(), tracker); }

 private:
  const std::vector<Micros>& times_;
  std::vector<int64_t>& series_;
  size_t current_ = 0;
};

}  // namespace caudal::simulate
