#include "decorators/background_store.h"

#include <algorithm>

#include "store/batch.h"

namespace caudal {

BackgroundStore::BackgroundStore(Opener open, const Clock& clock, BackgroundStoreOptions options)
    : open_(std::move(open)), clock_(clock), options_(std::move(options)), thread_([this] {
        Run();
        retrying_.store(false, std::memory_order_release);
      }) {}

BackgroundStore::~BackgroundStore() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void BackgroundStore::Run() {
  auto backoff = options_.backoff_min;
  std::string logged;  // the cause last logged, so a store that stays down logs once
  for (;;) {
    attempts_.fetch_add(1, std::memory_order_relaxed);
    Result<std::unique_ptr<Store>> opened = open_();
    std::unique_lock<std::mutex> lock(mu_);
    if (opened.ok()) {
      owned_ = std::move(opened).value();
      store_.store(owned_.get(), std::memory_order_release);
      if (options_.log != nullptr) {
        options_.log->Info("store \"" + std::string(owned_->Name()) + "\" connected after " +
                           std::to_string(attempts()) + " attempts");
      }
      return;
    }
    const Status& s = opened.status();
    last_error_ = s.message();
    if (s.code() == StatusCode::kInvalidArgument) {
      gave_up_ = true;
      if (options_.log != nullptr) {
        options_.log->Error("store \"" + options_.name +
                            "\" cannot be opened, no more retries: " + s.message());
      }
      return;
    }
    if (options_.log != nullptr && s.message() != logged) {
      options_.log->Warning("store \"" + options_.name + "\" not connected (" + s.message() +
                            "); retrying in the background");
      logged = s.message();
    }
    const Nanos retry_at = clock_.Monotonic() + backoff;
    if (clock_.WaitUntil(wake_, lock, retry_at, [this] { return stopping_; })) return;
    backoff = std::min(backoff * 2, options_.backoff_max);
  }
}

Status BackgroundStore::NotOpen() const {
  std::lock_guard<std::mutex> lock(mu_);
  return Status::Unavailable("store \"" + options_.name + "\" " +
                             (gave_up_ ? "cannot be opened: " : "not connected yet: ") +
                             last_error_);
}

void BackgroundStore::DecideBatchAsync(std::span<const EntryRef> entries, DecideCallback done) {
  if (Store* s = store_.load(std::memory_order_acquire))
    return caudal::DecideBatchAsync(*s, entries, std::move(done));
  if (Status v = ValidateEntries(entries); !v.ok()) return done(std::move(v));  // as any store
  done(NotOpen());
}

Status BackgroundStore::Ping() {
  if (Store* s = store_.load(std::memory_order_acquire)) return s->Ping();
  return NotOpen();
}

std::string_view BackgroundStore::Name() const {
  if (const Store* s = store_.load(std::memory_order_acquire)) return s->Name();
  return options_.name;
}

}  // namespace caudal
