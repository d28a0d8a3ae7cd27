// Admin's thread and the store's announcements (OverrideStore::Watch), on a manual clock that is
// never advanced to the poll: an announced change is read at once; announcements that come
// together are one read, at most one per min_reread; the version installed already is not read
// again; a resubscription reads.
#include <gtest/gtest.h>

#include <atomic>

#include "admin/admin.h"
#include "caudal/store/memory_store.h"
#include "observe/metrics.h"
#include "support/manual_clock.h"

namespace caudal {
namespace {

using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;

Limit FeedBucket(int64_t capacity) {
  return *Limit::Create(
      LimitSpec::Bucket(Algorithm::kTokenBucket, capacity, {capacity, minutes(1)}));
}

// The memory store's records, announcing as Redis does: the test calls Announce.
class AnnouncingStore final : public OverrideStore {
 public:
  explicit AnnouncingStore(const Clock& clock) : inner_(MakeMemoryOverrideStore(clock)) {}
  Result<uint64_t> Version() override { return inner_->Version(); }
  Result<OverrideList> List() override {
    lists.fetch_add(1);
    return inner_->List();
  }
  Result<bool> Put(std::string_view id, std::string_view body, std::optional<Micros> expires_in,
                   size_t max_records) override {
    return inner_->Put(id, body, expires_in, max_records);
  }
  Result<std::optional<OverrideRecord>> Delete(std::string_view id) override {
    return inner_->Delete(id);
  }
  Status Touch() override { return inner_->Touch(); }
  std::unique_ptr<OverrideWatch> Watch(OverrideFeed f) override {
    feed = std::move(f);
    return std::make_unique<OverrideWatch>();
  }

  OverrideFeed feed;  // set before the watcher's thread starts
  std::atomic<int> lists{0};

 private:
  std::unique_ptr<OverrideStore> inner_;
};

struct FeedInstance {
  FeedInstance(Store& store, OverrideStore& overrides, const Clock& clock, Metrics* metrics)
      : engine(store, clock, {.metrics = metrics, .over_limit_cache_keys = 1024}),
        admin(engine, overrides, clock, {.metrics = metrics, .max_overrides = 3}) {
    PolicySpec spec;
    spec.name = "per-tenant";
    spec.identity = {"tenant"};
    spec.limits = {FeedBucket(1)};
    EXPECT_TRUE(engine.SetPolicies(*PolicySet::Create({spec}, {})).ok());
  }
  bool Allowed() {
    auto r = engine.Check({.descriptors = {{"tenant", "acme"}}, .cost = std::nullopt});
    return r.ok() && r->allowed();
  }
  Engine engine;
  Admin admin;
};

class AdminFeedTest : public ::testing::Test {
 protected:
  AdminFeedTest()
      : store_(clock_),
        overrides_(clock_),
        a_(store_, overrides_, clock_, nullptr),
        b_(store_, overrides_, clock_, &metrics_) {
    b_.admin.Start();  // b watches; a changes
  }

  static AdminTarget Acme() { return {.policy = "per-tenant", .params = {{"tenant", "acme"}}}; }
  uint64_t Count(MetricId id) { return metrics_.Value(id); }
  // Until b's thread waits for `deadline` alone (nothing left to do before it).
  bool WaitsFor(Nanos deadline) {
    for (int i = 0; i < 30; ++i) {
      if (clock_.deadlines() == std::vector<Nanos>{deadline}) return true;
      clock_.AwaitWaits(clock_.waits() + 1, seconds(1));
    }
    return false;
  }
  bool Eventually(const std::function<bool()>& pred) {
    for (int i = 0; i < 30 && !pred(); ++i) clock_.AwaitWaits(clock_.waits() + 1, seconds(1));
    return pred();
  }

  ManualClock clock_;
  MemoryStore store_;
  AnnouncingStore overrides_;
  Metrics metrics_;
  FeedInstance a_;
  FeedInstance b_;
};

TEST_F(AdminFeedTest, AnAnnouncedChangeIsReadAtOnceAndABurstIsOneRead) {
  const Nanos poll = clock_.Monotonic() + seconds(1);
  ASSERT_TRUE(WaitsFor(poll));
  ASSERT_TRUE(b_.Allowed());
  ASSERT_FALSE(b_.Allowed());  // remembered by b's over-limit cache
  ASSERT_TRUE(a_.admin.SetOverride(Acme(), {FeedBucket(5)}, std::nullopt, "x").ok());
  const uint64_t version = *overrides_.Version();
  const int lists = overrides_.lists.load();
  overrides_.feed.announced(version);
  ASSERT_TRUE(Eventually([&] { return Count(MetricId::kOverrideFeedRereads) == 1; }));
  ASSERT_TRUE(WaitsFor(poll)) << "read without the poll";
  EXPECT_EQ(overrides_.lists.load(), lists + 1) << "a new version is listed at once";
  EXPECT_TRUE(b_.Allowed()) << "the override applies, the cache forgot its refusal";
  EXPECT_EQ(Count(MetricId::kOverrideFeedMessages), 1u);

  // Five more at once (forged versions: each only prompts a read), within min_reread of the
  // last read: one read, when min_reread has passed.
  for (uint64_t v = 100; v < 105; ++v) overrides_.feed.announced(v);
  const Nanos next = clock_.Monotonic() + milliseconds(10);
  ASSERT_TRUE(Eventually([&] { return clock_.deadlines() == std::vector<Nanos>{next}; }))
      << "the read waits for min_reread";
  EXPECT_EQ(overrides_.lists.load(), lists + 1);
  clock_.Advance(milliseconds(10));
  ASSERT_TRUE(WaitsFor(poll));
  EXPECT_EQ(Count(MetricId::kOverrideFeedRereads), 2u);
  EXPECT_EQ(overrides_.lists.load(), lists + 2) << "five announcements, one read";
  EXPECT_EQ(Count(MetricId::kOverrideFeedMessages), 6u);
}

// An override's end wakes the thread (not the next poll after it), polls before it or not.
TEST_F(AdminFeedTest, AnOverrideEndsWhenItEndsNotAtTheNextPoll) {
  const Nanos poll = clock_.Monotonic() + seconds(1);
  ASSERT_TRUE(WaitsFor(poll));
  ASSERT_TRUE(b_.Allowed());
  ASSERT_FALSE(b_.Allowed());
  ASSERT_TRUE(a_.admin.SetOverride(Acme(), {FeedBucket(5)}, milliseconds(1500), "x").ok());
  overrides_.feed.announced(*overrides_.Version());
  ASSERT_TRUE(Eventually([&] { return Count(MetricId::kOverrideFeedRereads) == 1; }));
  ASSERT_TRUE(WaitsFor(poll));
  ASSERT_TRUE(b_.Allowed());
  clock_.Advance(seconds(1));  // a poll, before the end
  const Nanos end = poll + milliseconds(500);
  ASSERT_TRUE(WaitsFor(end)) << "the next wait ends with the override, before the next poll";
  clock_.Advance(milliseconds(500));
  ASSERT_TRUE(WaitsFor(end + seconds(1))) << "read at the end; the poll a second after";
  EXPECT_EQ(Count(MetricId::kRuntimeOverrides), 0u);
  EXPECT_FALSE(b_.Allowed()) << "the policy's limit again, its state as it was left";
}

TEST_F(AdminFeedTest, TheVersionInstalledAlreadyIsNotReadAgain) {
  const Nanos poll = clock_.Monotonic() + seconds(1);
  ASSERT_TRUE(WaitsFor(poll));
  const int lists = overrides_.lists.load();
  overrides_.feed.announced(*overrides_.Version());  // as b's own change would be announced
  ASSERT_TRUE(Eventually([&] { return Count(MetricId::kOverrideFeedMessages) == 1; }));
  ASSERT_TRUE(WaitsFor(poll));
  EXPECT_EQ(Count(MetricId::kOverrideFeedRereads), 0u);
  EXPECT_EQ(overrides_.lists.load(), lists);
}

TEST_F(AdminFeedTest, AResubscriptionReadsWhatWasMissedMeanwhile) {
  const Nanos poll = clock_.Monotonic() + seconds(1);
  ASSERT_TRUE(WaitsFor(poll));
  ASSERT_TRUE(b_.Allowed());
  ASSERT_FALSE(b_.Allowed());
  overrides_.feed.lost(Status::Unavailable("killed"));
  ASSERT_TRUE(a_.admin.ResetState(Acme(), "x").ok());  // its announcement lost
  overrides_.feed.subscribed(/*again=*/true);
  ASSERT_TRUE(Eventually([&] { return Count(MetricId::kOverrideFeedRereads) == 1; }));
  ASSERT_TRUE(WaitsFor(poll));
  EXPECT_EQ(Count(MetricId::kOverrideFeedReconnects), 1u);
  EXPECT_TRUE(b_.Allowed()) << "the reset's touch was read: b forgot its refusal";
}

}  // namespace
}  // namespace caudal
