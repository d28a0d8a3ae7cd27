// OverrideStore: the records of runtime overrides, kept where the rate-limit state is, so that
// every instance sharing a store reads the same ones and a restart loses none.
//
// A record is an opaque body under an id, with an optional end measured on the store's own
// clock (the MemoryStore's Clock, Redis's TIME), so that instances whose clocks disagree end it
// alike. Every change (a put, a delete, a touch) raises the version, which instances poll to
// learn that they must list the records again; an expiry does not (List says when the next one
// ends). The number of records is bounded by the caller's `max_records` on each put.
//
// Thread-safety: every method may be called from any thread; each may block up to the store's
// deadline (kUnavailable / kDeadlineExceeded when it cannot answer in time).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "caudal/common/clock.h"
#include "caudal/common/status.h"

namespace caudal {

inline constexpr size_t kMaxOverrideIdBytes = 2048;
inline constexpr size_t kMaxOverrideBodyBytes = 8192;

struct OverrideRecord {
  std::string id;
  std::string body;
  std::optional<Micros> expires_at;  // the store's time since the epoch; none: never
};

// What a store that announces changes (Watch) tells its watcher. Each runs on a thread of the
// store's and must return at once: no store call, nothing that blocks.
struct OverrideFeed {
  // A change was announced (by any instance, this one included), with the version it names when
  // readable: a hint to read the records again, never trusted for what they hold.
  std::function<void(std::optional<uint64_t> version)> announced;
  // Subscribed: the first time (false), or again after a loss (true: announcements may have been
  // missed meanwhile).
  std::function<void(bool again)> subscribed;
  // The subscription was lost or could not be made; it is tried again with backoff.
  std::function<void(const Status& why)> lost;
};

// Watch's handle: once destroyed, no callback of its feed runs or is running.
class OverrideWatch {
 public:
  virtual ~OverrideWatch() = default;
};

struct OverrideList {
  uint64_t version = 0;
  Micros now{0};                        // the store's time when it listed
  std::vector<OverrideRecord> records;  // the unexpired ones, in no particular order
};

class OverrideStore {
 public:
  virtual ~OverrideStore() = default;

  virtual Result<uint64_t> Version() = 0;
  virtual Result<OverrideList> List() = 0;
  // Sets `id` to `body`, ending `expires_in` after the store's now (none: never); true when the
  // id was new. kResourceExhausted when the id is new and `max_records` unexpired records are
  // held; kInvalidArgument for an empty or oversize id or body, or an expires_in below 1 ms.
  virtual Result<bool> Put(std::string_view id, std::string_view body,
                           std::optional<Micros> expires_in, size_t max_records) = 0;
  // The record removed, or nullopt when there was none (nothing changes then).
  virtual Result<std::optional<OverrideRecord>> Delete(std::string_view id) = 0;
  // Raises the version alone: tells every instance to look again (an identity's state was reset).
  virtual Status Touch() = 0;
  // Announces every change any instance makes (a put, a delete, a touch, ended records dropped)
  // to `feed` until the handle goes: nullptr when the store announces none (the memory store:
  // every change is this process's own, applied by whoever made it). At most one watch per store.
  virtual std::unique_ptr<OverrideWatch> Watch(OverrideFeed feed) {
    (void)feed;
    return nullptr;
  }
};

// The memory store's: the records in this process, on `clock`'s Now().
std::unique_ptr<OverrideStore> MakeMemoryOverrideStore(const Clock& clock);

// Checks Put's arguments; shared by every implementation.
Status ValidateOverridePut(std::string_view id, std::string_view body,
                           std::optional<Micros> expires_in);

}  // namespace caudal
