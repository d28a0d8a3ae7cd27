// MemoryStore: the embedded, in-process Store. Sharded, thread-safe, bounded.
//
// Decisions: time comes from the injected Clock (nanoseconds floored to µs), read once per
// request (once per batch for DecideEach) before the request's shards are locked; the locks
// guard only the table probe and the state update. Each request is decided all-or-nothing
// under the locks of every shard it touches, taken in ascending shard order (no deadlock).
// Decide makes one heap allocation per call, StoreResponse's vector; DecideEach makes none.
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
// Reclaiming: when a shard has no room for a new key, entries whose state is fresh (their reset
// time has passed: full bucket, expired window; dropping them changes no decision) are
// reclaimed first, then the shard grows up to its share of max_keys. Freshness is tracked in
// whole seconds, rounded so an entry is only ever dropped after its reset time.
//
// Eviction, when a shard holds its share of max_keys live entries and a request needs a new
// key there: rather than refuse the new key (which would lock every new client out for as long
// as a flood's entries stay live: a day, with a 1d window), one pass forgets a sixteenth of the
// shard's entries (or as many as the request needs, if more), those whose forgetting admits
// least, and never the request's own. The bound on what eviction admits beyond the limits:
//   - a forgotten entry admits at most what it had consumed and not yet refilled: at most
//     limit − remaining as of its last write (its recorded consumption), never more than its
//     limit's capacity, and only until its old state would have turned fresh;
//   - entries go in order of recorded consumption (to within 25%; exact below 8), then of fresh
//     time, so an entry is forgotten only when every entry kept (15/16 of the shard, unless one
//     request needs more room than a sixteenth) had recorded as much consumption or more, to
//     within that 25%. A key at its limit is forgotten only after every
//     key that consumed less: under a flood of keys that each spent a little, known keys keep
//     their state, and a new key gets its limit, no more.
// A pass costs a scan of the shard, so O(16) per new key; evictions() counts the entries
// forgotten. A request refused anyway, a peek, or one on known keys needs no new key and never
// evicts. kResourceExhausted remains only for a request needing more new keys in one shard than
// the shard holds (a max_keys below kMaxEntriesPerRequest).
//
// Thread-safety: all methods may be called from any number of threads. DecideAsync calls
// `done` inline, before it returns.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "caudal/clock.h"
#include "caudal/store.h"

namespace caudal {

struct MemoryStoreOptions {
  size_t max_keys = 1'000'000;  // at least 1
  size_t shards = 64;           // rounded up to a power of two, at most 4096
};

class MemoryStore final : public Store {
 public:
  explicit MemoryStore(const Clock& clock, MemoryStoreOptions options = {});
  ~MemoryStore() override;

  void DecideAsync(std::span<const EntryRef> entries, DecideCallback done) override;
  Result<StoreResponse> Decide(std::span<const EntryRef> entries) override;
  Status Ping() override { return Status::Ok(); }

  // Decides each entry as a request of its own (a one-entry Decide: duplicates allowed, each sees
  // the ones before it), in order, all at one clock reading, with no heap allocation; entry i's
  // decision goes to decisions[i], and whether it was allowed is decisions[i].allowed(). For
  // callers holding many independent decisions at once (an event-loop turn's worth).
  // Errors: kInvalidArgument (decisions.size() != entries.size(), or an entry Decide would
  // refuse), before anything is decided.
  Status DecideEach(std::span<const EntryRef> entries, std::span<Decision> decisions);
  std::string_view Name() const override { return "memory"; }

  // Keys currently held (fresh ones not yet reclaimed included).
  size_t Size() const;
  // Live entries forgotten to make room for new keys, since the store was made.
  uint64_t evictions() const;
  // Bytes held by the tables, the sliding-window lists and the shard array.
  size_t MemoryUsage() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace caudal
