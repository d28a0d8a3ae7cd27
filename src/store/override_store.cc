#include "store/override_store.h"

#include <mutex>
#include <unordered_map>

namespace caudal {
namespace {

class MemoryOverrideStore final : public OverrideStore {
 public:
  explicit MemoryOverrideStore(const Clock& clock) : clock_(clock) {}

  Result<uint64_t> Version() override {
    std::lock_guard lock(mu_);
    return version_;
  }

  Result<OverrideList> List() override {
    std::lock_guard lock(mu_);
    OverrideList out{.version = version_, .now = Now(), .records = {}};
    DropExpired(out.now);
    out.records.reserve(records_.size());
    for (const auto& [id, r] : records_) out.records.push_back(r);
    return out;
  }

  Result<bool> Put(std::string_view id, std::string_view body, std::optional<Micros> expires_in,
                   size_t max_records) override {
    if (Status s = ValidateOverridePut(id, body, expires_in); !s.ok()) return s;
    std::lock_guard lock(mu_);
    const Micros now = Now();
    DropExpired(now);
    auto it = records_.find(std::string(id));
    const bool fresh = it == records_.end();
    if (fresh && records_.size() >= max_records) {
      return Status::ResourceExhausted("the store holds as many runtime overrides as allowed");
    }
    OverrideRecord r{.id = std::string(id), .body = std::string(body), .expires_at = {}};
    if (expires_in) r.expires_at = now + *expires_in;
    records_[r.id] = std::move(r);
    ++version_;
    return fresh;
  }

  Result<std::optional<OverrideRecord>> Delete(std::string_view id) override {
    std::lock_guard lock(mu_);
    DropExpired(Now());
    auto it = records_.find(std::string(id));
    if (it == records_.end()) return std::optional<OverrideRecord>();
    OverrideRecord r = std::move(it->second);
    records_.erase(it);
    ++version_;
    return std::optional<OverrideRecord>(std::move(r));
  }

  Status Touch() override {
    std::lock_guard lock(mu_);
    ++version_;
    return Status::Ok();
  }

 private:
  Micros Now() const { return std::chrono::duration_cast<Micros>(clock_.Now()); }
  void DropExpired(Micros now) {
    std::erase_if(records_, [now](const auto& kv) {
      return kv.second.expires_at && *kv.second.expires_at <= now;
    });
  }

  const Clock& clock_;
  std::mutex mu_;
  uint64_t version_ = 0;                                     // guarded by mu_
  std::unordered_map<std::string, OverrideRecord> records_;  // guarded by mu_
};

}  // namespace

std::unique_ptr<OverrideStore> MakeMemoryOverrideStore(const Clock& clock) {
  return std::make_unique<MemoryOverrideStore>(clock);
}

Status ValidateOverridePut(std::string_view id, std::string_view body,
                           std::optional<Micros> expires_in) {
  if (id.empty() || id.size() > kMaxOverrideIdBytes) {
    return Status::InvalidArgument("an override's id must be 1 to 2048 bytes");
  }
  if (body.empty() || body.size() > kMaxOverrideBodyBytes) {
    return Status::InvalidArgument("an override's body must be 1 to 8192 bytes");
  }
  if (expires_in && *expires_in < std::chrono::milliseconds(1)) {
    return Status::InvalidArgument("an override's expiry must be at least 1 ms away");
  }
  return Status::Ok();
}

}  // namespace caudal
