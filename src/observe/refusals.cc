#include "observe/refusals.h"

#include <algorithm>
#include <cstdio>

#include "common/cat.h"
#include "observe/log_throttle.h"

namespace caudal {
namespace {

uint64_t Fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ULL;
  }
  return h;
}

}  // namespace

std::string_view IdentityDisplayName(IdentityDisplay d) {
  return d == IdentityDisplay::kValue ? "value" : "hash";
}

Result<IdentityDisplay> ParseIdentityDisplay(std::string_view text) {
  if (text == "hash") return IdentityDisplay::kHash;
  if (text == "value") return IdentityDisplay::kValue;
  return Status::InvalidArgument(Cat("expected hash or value (got ", Quoted(text), ')'));
}

// Space-saving: kSketchSize counters, found by the identity's hash first.
struct Refusals::Sketch {
  struct Counter {
    uint64_t hash = 0;
    std::string identity;
    uint64_t count = 0;
    uint64_t error = 0;
  };
  std::array<Counter, kSketchSize> counters;
  size_t used = 0;
  uint64_t total = 0;

  void Add(std::string_view identity) {
    ++total;
    const uint64_t h = Fnv1a(identity);
    for (size_t i = 0; i < used; ++i) {
      if (counters[i].hash == h && counters[i].identity == identity) {
        ++counters[i].count;
        return;
      }
    }
    if (used < counters.size()) {
      counters[used++] = {h, std::string(identity), 1, 0};
      return;
    }
    Counter* min = &counters[0];
    for (Counter& c : counters) {
      if (c.count < min->count) min = &c;
    }
    *min = {h, std::string(identity), min->count + 1, min->count};
  }
};

Refusals::Refusals(const Clock& clock, const Logger* log, RefusalsOptions options)
    : clock_(clock),
      log_(log),
      options_(options),
      per_identity_(std::make_unique<LogThrottle>(
          clock, LogThrottleOptions{.interval = options.log_interval, .max_keys = 4096})) {}

Refusals::~Refusals() = default;

void Refusals::SetOptions(RefusalsOptions options) {
  std::lock_guard lock(mu_);
  options_ = options;
}

std::string Refusals::Display(std::string_view identity) const {
  IdentityDisplay d;
  {
    std::lock_guard lock(mu_);
    d = options_.identities;
  }
  if (d == IdentityDisplay::kValue) return std::string(identity);
  char buf[24];
  std::snprintf(buf, sizeof buf, "h:%016llx", static_cast<unsigned long long>(Fnv1a(identity)));
  return buf;
}

void Refusals::Record(Api api, std::string_view check, std::string_view identity,
                      std::string_view limit, Micros retry_after) {
  const std::string shown = Display(identity);
  bool log = false;
  {
    std::lock_guard lock(mu_);
    auto it = sketches_.find(std::make_pair(api, std::string(check)));
    if (it == sketches_.end()) {
      const bool room = sketches_.size() < kMaxChecks;
      it = sketches_
               .try_emplace(std::make_pair(api, room ? std::string(check) : "_other"),
                            std::make_unique<Sketch>())
               .first;
    }
    it->second->Add(shown);
    log = options_.log && log_ != nullptr;
  }
  if (log) Log(check, shown, limit, retry_after);
}

void Refusals::Log(std::string_view check, const std::string& shown, std::string_view limit,
                   Micros retry_after) {
  const std::optional<uint64_t> same = per_identity_->Admit(Cat(check, '|', shown));
  if (!same) return;
  uint64_t others = 0;
  {
    std::lock_guard lock(mu_);
    const int64_t second =
        std::chrono::duration_cast<std::chrono::seconds>(clock_.Monotonic()).count();
    if (second != second_) {
      second_ = second;
      lines_this_second_ = 0;
    }
    if (lines_this_second_ >= options_.log_per_second) {
      ++held_back_;
      return;
    }
    ++lines_this_second_;
    others = std::exchange(held_back_, 0);
  }
  log_->Info("refused", {{"check", std::string(check)},
                         {"identity", shown},
                         {"limit", std::string(limit)},
                         {"retry_after_ms", retry_after.count() / 1000},
                         {"held_back_same", *same},
                         {"held_back_others", others}});
}

std::vector<CheckRefusals> Refusals::Top(size_t top) const {
  std::vector<CheckRefusals> out;
  std::lock_guard lock(mu_);
  for (const auto& [key, sketch] : sketches_) {
    CheckRefusals c{.api = key.first, .check = key.second, .total = sketch->total, .top = {}};
    for (size_t i = 0; i < sketch->used; ++i) {
      const Sketch::Counter& k = sketch->counters[i];
      c.top.push_back({k.identity, k.count, k.error});
    }
    std::sort(c.top.begin(), c.top.end(),
              [](const HeavyHitter& a, const HeavyHitter& b) { return a.count > b.count; });
    if (c.top.size() > top) c.top.resize(top);
    out.push_back(std::move(c));
  }
  std::sort(out.begin(), out.end(),
            [](const CheckRefusals& a, const CheckRefusals& b) { return a.total > b.total; });
  return out;
}

}  // namespace caudal
