#include "redis/slot_map.h"

#include <gtest/gtest.h>

#include <string>

#include "common/cat.h"
#include "redis/resp_test_util.h"

namespace caudal::redis {
namespace {

using testing::Bulk;
using testing::Parse;

std::string Int(int64_t v) { return Cat(':', v, "\r\n"); }
std::string Array(std::initializer_list<std::string> items) {
  std::string out = Cat('*', items.size(), "\r\n");
  for (const std::string& i : items) out += i;
  return out;
}

const Endpoint kAsked{.host = "10.0.0.1", .port = 7000};

Endpoint At(const SlotMap& map, int slot) {
  const Endpoint* e = map.PrimaryOf(slot);
  return e != nullptr ? *e : Endpoint{};
}

TEST(SlotMap, MapsEverySlotToItsPrimary) {
  const std::string node_id = Bulk("e7d1eecce10fd6bb5eb35b9f99a514335d9ba9ca");
  const Reply reply = Parse(Array({
      Array({Int(0), Int(5460), Array({Bulk("10.0.0.1"), Int(7000), node_id, Array({})}),
             Array({Bulk("10.0.0.4"), Int(7003), node_id, Array({})})}),  // a replica: ignored
      Array({Int(5461), Int(10922), Array({Bulk("10.0.0.2"), Int(7001), node_id})}),
      Array({Int(10923), Int(16383), Array({"$-1\r\n", Int(7002), node_id})}),  // NULL endpoint
  }));
  Result<SlotMap> map = SlotMap::FromClusterSlots(*reply, kAsked);
  ASSERT_TRUE(map.ok()) << map.status().ToString();
  EXPECT_EQ(map->covered(), kHashSlots);
  EXPECT_EQ(map->primaries().size(), 3u);
  EXPECT_EQ(At(*map, 0), (Endpoint{"10.0.0.1", 7000}));
  EXPECT_EQ(At(*map, 5460), (Endpoint{"10.0.0.1", 7000}));
  EXPECT_EQ(At(*map, 5461), (Endpoint{"10.0.0.2", 7001}));
  EXPECT_EQ(At(*map, 16383), (Endpoint{"10.0.0.1", 7002}));  // the asked node's host
}

TEST(SlotMap, LeavesUnknownAndMissingRangesUnassignedAndEmptyHostsOnTheAskedOne) {
  const Reply reply = Parse(Array({
      Array({Int(0), Int(99), Array({Bulk("?"), Int(7000)})}),
      Array({Int(100), Int(199), Array({Bulk(""), Int(7001)})}),  // a node alone: its own host
      Array({Int(200), Int(200), Array({Bulk("h"), Int(7000)})}),
  }));
  Result<SlotMap> map = SlotMap::FromClusterSlots(*reply, kAsked);
  ASSERT_TRUE(map.ok());
  EXPECT_EQ(map->covered(), 101);
  EXPECT_EQ(map->PrimaryOf(0), nullptr);
  EXPECT_EQ(At(*map, 150), (Endpoint{"10.0.0.1", 7001}));
  EXPECT_NE(map->PrimaryOf(200), nullptr);
  EXPECT_EQ(map->PrimaryOf(201), nullptr);
}

TEST(SlotMap, RefusesMalformedReplies) {
  for (const std::string& bad : {
           Bulk("not an array"),
           Array({Array({Int(0), Int(16384), Array({Bulk("h"), Int(1)})})}),  // slot too high
           Array({Array({Int(5), Int(4), Array({Bulk("h"), Int(1)})})}),      // first > last
           Array({Array({Int(0), Int(1)})}),                                  // no primary
           Array({Array({Int(0), Int(1), Array({Bulk("h"), Int(0)})})}),      // port 0
           Array({Array({Int(0), Int(1), Array({Int(3), Int(1)})})}),         // endpoint not text
           Array({Array({Int(0), Int(1), Array({Bulk(std::string(300, 'h')), Int(1)})})}),
       }) {
    const Reply reply = Parse(bad);
    EXPECT_EQ(SlotMap::FromClusterSlots(*reply, kAsked).status().code(), StatusCode::kInternal)
        << bad;
  }
}

TEST(Redirect, ParsesMovedAndAsk) {
  const std::optional<Redirect> moved = ParseRedirect("MOVED 3999 127.0.0.1:6381", kAsked);
  ASSERT_TRUE(moved.has_value());
  EXPECT_EQ(moved->kind, Redirect::Kind::kMoved);
  EXPECT_EQ(moved->slot, 3999);
  EXPECT_EQ(moved->to, (Endpoint{"127.0.0.1", 6381}));
  const std::optional<Redirect> ask = ParseRedirect("ASK 0 [::1]:7000", kAsked);
  ASSERT_TRUE(ask.has_value());
  EXPECT_EQ(ask->kind, Redirect::Kind::kAsk);
  EXPECT_EQ(ask->to, (Endpoint{"::1", 7000}));
  EXPECT_EQ(ParseRedirect("MOVED 12 :7005", kAsked)->to, (Endpoint{"10.0.0.1", 7005}));
  for (std::string_view bad :
       {"TRYAGAIN Multiple keys request during rehashing of slot", "MOVED", "MOVED 16384 h:1",
        "MOVED -1 h:1", "MOVED 1 h", "MOVED 1 h:x", "MOVED 1 h:70000", "ASK x h:1"}) {
    EXPECT_FALSE(ParseRedirect(bad, kAsked).has_value()) << bad;
  }
}

}  // namespace
}  // namespace caudal::redis
