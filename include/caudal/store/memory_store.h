// MemoryStore: the embedded, in-process Store. Sharded, thread-safe, bounded.
//
// Each request is decided all-or-nothing at one reading of the injected Clock (nanoseconds
// floored to µs; one reading per batch for DecideEach), taken before the locks of the shards it
// touches, which are taken in ascending order. Decide makes one heap allocation per call,
// DecideResponse's vector; DecideEach makes none.
//
// Keys: the store keeps a 64-bit SipHash-1-3 fingerprint of (key, algorithm) under a random
// per-store secret, never the key: distinct keys share a state with probability about n²/2^65
// for n keys, and a client cannot aim keys at one state or shard without the secret. A key used
// with two algorithms gets two states.
//
// Memory: at most `max_keys` keys, an even share per shard. A shard without room for a new key
// drops its fresh entries (full bucket, expired window: no decision changes), then grows, then
// evicts a sixteenth of its entries, those that had consumed least, never the request's own; a
// forgotten entry admits at most what it had consumed and not yet refilled (the bound, and why:
// docs/stores.md). evictions() counts them. A concurrency limit's holds live out of line like a
// sliding window log (each hold a fingerprint of its id and its expiry); a forgotten one frees
// its slots early. A key's share consumers (Store::Share) live in a table beside its state, at
// most a shard's share of max_keys such tables, those whose consumers all expired dropped first.
// kResourceExhausted only for a request needing more new keys in one shard than the shard holds
// (a max_keys below kMaxEntriesPerRequest), or a share's table more than that (or than its
// consumers).
//
// Thread-safety: all methods may be called from any number of threads. Every verb's async form
// calls `done` inline, before it returns.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "caudal/common/clock.h"
#include "caudal/store/store.h"

namespace caudal {

struct MemoryStoreOptions {
  size_t max_keys = 1'000'000;  // at least 1
  // Rounded up to a power of two, at most 4096; fewer when a shard would hold under 1024 keys.
  size_t shards = 64;
};

class MemoryStore final : public Store {
 public:
  explicit MemoryStore(const Clock& clock, MemoryStoreOptions options = {});
  ~MemoryStore() override;

  Status Ping() override { return Status::Ok(); }

  // Decides each consume as a request of its own (a one-entry Decide: duplicates allowed, each
  // sees the ones before it), in order, all at one clock reading, with no heap allocation; entry
  // i's decision goes to decisions[i], and whether it was allowed is decisions[i].allowed(). For
  // callers holding many independent decisions at once (an event-loop turn's worth).
  // Errors: kInvalidArgument (decisions.size() != entries.size(), or an entry Decide would
  // refuse), before anything is decided.
  Status DecideEach(std::span<const ConsumeEntry> entries, std::span<Decision> decisions);
  std::string_view Name() const override { return "memory"; }

  // Keys currently held (fresh ones not yet reclaimed included).
  size_t Size() const;
  // Live entries forgotten to make room for new keys, since the store was made.
  uint64_t evictions() const;
  // Bytes held by the tables, the sliding-window lists and the shard array.
  size_t MemoryUsage() const;

 protected:
  void DecideBatchAsync(std::span<const EntryRef> entries, DecideCallback done) override;
  Result<DecideResponse> DecideBatch(std::span<const EntryRef> entries) override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace caudal
