#include "support/grouping_store.h"

#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "algorithms/algorithm.h"
#include "store/batch.h"

namespace caudal::testing {
namespace {

constexpr size_t kMembersPerGroup = 4;

class GroupingStore : public Store {
 public:
  explicit GroupingStore(std::unique_ptr<Store> inner) : inner_(std::move(inner)) {}

  Status Ping() override { return inner_->Ping(); }
  std::string_view Name() const override { return inner_->Name(); }

 protected:
  void DecideBatchAsync(std::span<const EntryRef> entries, DecideCallback done) override {
    std::vector<std::string> keys(entries.size());
    std::vector<EntryRef> grouped(entries.begin(), entries.end());
    for (size_t i = 0; i < entries.size(); ++i) {
      const EntryRef& e = entries[i];
      if (e.limit == nullptr || e.key.empty() || e.key.find('#') != std::string_view::npos ||
          AlgorithmInfoOf(e.limit->algorithm()).state != StateShape::kCompact || e.native_count ||
          e.share_of != nullptr || Shared(e)) {
        continue;
      }
      keys[i] = "#" + std::string(e.key) + "#" + GroupOf(e.key);
      if (keys[i].size() > kMaxKeyLength) continue;  // a suite's key at the bound stays as it is
      grouped[i].key = keys[i];
    }
    caudal::DecideBatchAsync(*inner_, grouped, std::move(done));
  }

 private:
  // Whether `e`'s key is a shared capacity's (a share's, from its first share on): a store
  // keeps those apart, as the engine never groups them.
  bool Shared(const EntryRef& e) {
    std::lock_guard lock(mu_);
    if (e.op == EntryOp::kShare) shared_.emplace(e.key);
    return shared_.contains(std::string(e.key));
  }

  // The group of `key`: the keys of one hash tag (or of none) in fours, in the order met, each
  // four named after its first key, which holds the suite's random tag (a fresh group per run)
  // and its hash tag as the group's (or, without one, is the group's).
  std::string GroupOf(std::string_view key) {
    std::lock_guard lock(mu_);
    auto it = groups_.find(std::string(key));
    if (it != groups_.end()) return it->second;
    const size_t open = key.find('{');
    const size_t close = open == std::string_view::npos ? open : key.find('}', open + 1);
    const bool tagged = close != std::string_view::npos && close > open + 1;
    const std::string tag(tagged ? key.substr(open, close - open + 1) : std::string_view());
    Four& four = open_[tag];
    if (four.members == 0) {
      four.name = "grouped:" + (tagged ? std::string(key) : "{" + std::string(key) + "}");
    }
    four.members = (four.members + 1) % kMembersPerGroup;
    return groups_.emplace(std::string(key), four.name).first->second;
  }

  struct Four {
    std::string name;
    size_t members = 0;  // in it so far; 0: the next key starts a new one
  };
  std::unique_ptr<Store> inner_;
  std::mutex mu_;
  std::unordered_map<std::string, std::string> groups_;  // guarded by mu_
  std::unordered_map<std::string, Four> open_;           // by hash tag; guarded by mu_
  std::unordered_set<std::string> shared_;               // guarded by mu_
};

}  // namespace

std::unique_ptr<Store> GroupKeys(std::unique_ptr<Store> inner) {
  return std::make_unique<GroupingStore>(std::move(inner));
}

}  // namespace caudal::testing
