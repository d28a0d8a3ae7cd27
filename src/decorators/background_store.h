// BackgroundStore: a Store whose backend is opened in the background, so a service can start
// (and decide by its failure modes, and report not-ready) while its store is still down:
//
//   BackgroundStore store([&] { return OpenStore(config.store, clock, {}); }, clock,
//                         {.name = "redis", .log = &log});
//   store.Decide(...);  // kUnavailable "not connected yet: <why>" until the open succeeds
//
// A thread calls `open` until it succeeds, waiting between attempts with exponential backoff
// (backoff_min doubling up to backoff_max, on `clock`); then every call goes to the opened store,
// which from then on reconnects on its own. The first failure is logged, then each change of
// cause, then success. A kInvalidArgument from `open` (a configuration error that retrying
// cannot fix) is logged as an error and stops the retries; the store then stays unavailable.
//
// Thread-safety: every member is safe to call from any thread. The destructor stops the
// retries, waiting for an attempt in progress to return.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "caudal/common/clock.h"
#include "caudal/observe/log.h"
#include "caudal/store/store.h"

namespace caudal {

struct BackgroundStoreOptions {
  std::string name = "store";  // what Name() reports before the open succeeds
  std::chrono::milliseconds backoff_min = std::chrono::milliseconds(100);
  std::chrono::milliseconds backoff_max = std::chrono::seconds(5);
  const Logger* log = nullptr;  // optional
};

class BackgroundStore final : public Store {
 public:
  using Opener = std::function<Result<std::unique_ptr<Store>>()>;

  // Starts opening at once, on a thread of its own. `clock` must outlive this.
  BackgroundStore(Opener open, const Clock& clock, BackgroundStoreOptions options);
  ~BackgroundStore() override;
  BackgroundStore(const BackgroundStore&) = delete;
  BackgroundStore& operator=(const BackgroundStore&) = delete;

  Status Ping() override;
  std::string_view Name() const override;

  // True once the backend is open.
  bool opened() const { return store_.load(std::memory_order_acquire) != nullptr; }
  // Attempts made so far (the one in progress included).
  uint64_t attempts() const { return attempts_.load(std::memory_order_relaxed); }
  // True until the thread has stopped trying: the open succeeded, failed for good, or the store
  // is being destroyed.
  bool retrying() const { return retrying_.load(std::memory_order_acquire); }

 protected:
  void DecideBatchAsync(std::span<const EntryRef> entries, DecideCallback done) override;

 private:
  void Run();
  Status NotOpen() const;

  Opener open_;
  const Clock& clock_;
  const BackgroundStoreOptions options_;
  std::atomic<Store*> store_{nullptr};  // set once, to owned_.get()
  std::atomic<uint64_t> attempts_{0};
  std::atomic<bool> retrying_{true};
  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;                         // guarded by mu_
  std::string last_error_ = "not connected yet";  // guarded by mu_
  bool gave_up_ = false;                          // guarded by mu_
  std::unique_ptr<Store> owned_;                  // written once by the thread, before store_
  std::thread thread_;                            // last: starts after every member is ready
};

}  // namespace caudal
