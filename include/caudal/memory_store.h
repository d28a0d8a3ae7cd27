// MemoryStore: the embedded, in-process Store. Sharded, thread-safe, bounded.
//
// Decisions: time comes from the injected Clock (nanoseconds floored to µs), read once per
// request while the request's shards are locked. Each request is decided all-or-nothing under
// the locks of every shard it touches, taken in ascending shard order (no deadlock).
//
// Keys: the store keeps a 64-bit SipHash-2-4 fingerprint of (key, algorithm) under a random
// per-store secret, never the key itself. Two distinct keys could share a fingerprint (and so
// a state) only with probability about n²/2^65 for n keys — 2^-25 for a million — and a client
// cannot steer keys into collisions, into one shard or into one probe run without the secret.
// A key used with two different algorithms gets two independent states.
//
// Memory: at most `max_keys` keys, split evenly across the shards (each shard holds at most
// ceil(max_keys / shards)); small tables use fewer shards, at least 1024 keys each. Because
// keys spread uniformly, a shard fills when the whole table holds a little less than max_keys
// (within a few percent; about 2% for a million keys on 64 shards): size max_keys with that
// margin. A key costs a 36-byte slot at a load of at most 7/8 (about 41–48 bytes per key
// once the table has grown), plus, for sliding_window_log, its list of admitted requests.
//
// Eviction: when a shard has no room for a new key, entries whose state is fresh (their reset
// time has passed: full bucket, expired window; dropping them changes no decision) are
// reclaimed first, then the shard grows up to its share of max_keys. Freshness is tracked in
// whole seconds, rounded so an entry is only ever dropped after its reset time.
//
// Full of live entries: when a request needs a new key in a shard whose every entry is still
// live, Decide returns kResourceExhausted and consumes nothing — the store will not forget a
// live limit (which would admit more than the limit) nor refuse in the limit's name. The
// caller routes the error through its failure mode, like a Redis outage. Requests that need no
// new key are unaffected: known keys, peeks, and requests refused anyway store nothing.
// Such a refusal costs O(1) until some entry of the shard turns fresh.
//
// Thread-safety: all methods may be called from any number of threads. DecideAsync calls
// `done` inline, before it returns.
#pragma once

#include <cstddef>
#include <memory>

#include "caudal/clock.h"
#include "caudal/store.h"

namespace caudal {

struct MemoryStoreOptions {
  size_t max_keys = 1'000'000;  // at least 1
  size_t shards = 64;            // rounded up to a power of two, at most 4096
};

class MemoryStore final : public Store {
 public:
  explicit MemoryStore(const Clock& clock, MemoryStoreOptions options = {});
  ~MemoryStore() override;

  void DecideAsync(std::span<const EntryRef> entries, DecideCallback done) override;
  Result<StoreResponse> Decide(std::span<const EntryRef> entries) override;
  Status Ping() override { return Status::Ok(); }
  std::string_view Name() const override { return "memory"; }

  // Keys currently held (fresh ones not yet reclaimed included).
  size_t Size() const;
  // Bytes held by the tables, the sliding-window lists and the shard array.
  size_t MemoryUsage() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace caudal
