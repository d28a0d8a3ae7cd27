#include "cli/serve_test_hooks.h"
#include "support/manual_clock.h"

#include <charconv>
#include <string>

namespace caudal::cli {

void FaultInjectingStore::DecideAsync(std::span<const EntryRef> entries, DecideCallback done) {
  if (failing_.load()) {
    done(Status::Unavailable("store failing on demand (--test-hooks)"));
    return;
  }
  inner_->DecideAsync(entries, std::move(done));
}

Status FaultInjectingStore::Ping() {
  if (failing_.load()) return Status::Unavailable("store failing on demand (--test-hooks)");
  return inner_->Ping();
}

DebugHandler MakeDebugHandler(ManualClock& clock, FaultInjectingStore& store) {
  return [&clock, &store](std::string_view target, std::string_view) -> DebugReply {
    constexpr std::string_view kAdvance = "/debug/clock/advance?ms=";
    if (target.rfind(kAdvance, 0) == 0) {
      const std::string_view n = target.substr(kAdvance.size());
      int64_t ms = 0;
      const auto [ptr, ec] = std::from_chars(n.data(), n.data() + n.size(), ms);
      if (ec != std::errc() || ptr != n.data() + n.size() || ms < 0) {
        return {.status = 400, .body = "ms: expected a non-negative integer\n"};
      }
      clock.Advance(std::chrono::milliseconds(ms));
      return {.status = 200, .body = std::to_string(clock.Now().count() / 1000) + "\n"};
    }
    if (target == "/debug/store/fail") {
      store.SetFailing(true);
      return {.status = 200, .body = "failing\n"};
    }
    if (target == "/debug/store/recover") {
      store.SetFailing(false);
      return {.status = 200, .body = "recovered\n"};
    }
    return {.status = 404, .body = "unknown debug hook\n"};
  };
}

}  // namespace caudal::cli
