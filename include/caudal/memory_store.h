// MemoryStore: the embedded, in-process Store. Sharded, thread-safe, bounded.
//
// Time comes from the injected Clock. Memory is bounded by `max_keys`; when the table is full,
// entries whose state is fresh (full bucket, expired window — dropping them changes no
// decision) are reclaimed first. See memory_store.cc for what happens when every entry is live.
#pragma once

#include <cstddef>
#include <memory>

#include "caudal/clock.h"
#include "caudal/store.h"

namespace caudal {

struct MemoryStoreOptions {
  size_t max_keys = 1'000'000;
  size_t shards = 64;  // rounded up to a power of two
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
  // Bytes held by the tables and their entries.
  size_t MemoryUsage() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace caudal
