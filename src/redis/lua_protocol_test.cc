#include "redis/lua_protocol.h"

#include <gtest/gtest.h>

#include <chrono>

#include "store/batch.h"

namespace caudal::redis {
namespace {

using std::chrono::minutes;
using std::chrono::seconds;

TEST(LuaProtocol, NamespacesKeysWithOneHashTagEach) {
  EXPECT_EQ(StateKey("caudal:", "user:42", Algorithm::kGcra), "caudal:{user:42}");
  EXPECT_EQ(StateKey("p:", "ip", Algorithm::kSlidingWindowLog), "p:{ip}:log");
  // A caller-chosen hash tag is kept, so keys of one identity share a cluster slot.
  EXPECT_EQ(StateKey("caudal:", "u:{42}:min", Algorithm::kFixedWindow), "caudal:u:{42}:min");
  EXPECT_TRUE(HasHashTag("{a}"));
  EXPECT_FALSE(HasHashTag("{}"));
  EXPECT_FALSE(HasHashTag("}a{"));
  EXPECT_FALSE(HasHashTag("a{b"));
}

TEST(LuaProtocol, EncodesReducedBucketRatesAndRawWindows) {
  const Limit bucket =
      *Limit::Create(LimitSpec::Bucket(Algorithm::kTokenBucket, 100, {100, minutes(1)}));
  const Limit window = *Limit::Create(LimitSpec::Window(Algorithm::kFixedWindow, 10, seconds(2)));
  const EntryRef entries[] = {{.key = "a", .limit = &bucket, .cost = 3},
                              {.key = "b", .limit = &window, .cost = 0}};
  const EncodedRequest r = EncodeRequest(entries, "c:", Micros(0));
  EXPECT_EQ(r.keys, (std::vector<std::string>{"c:{a}", "c:{b}"}));
  EXPECT_EQ(r.args.size(), 11u * 8);  // little-endian 64-bit words, as the script unpacks them
  EXPECT_EQ(r.args.substr(0, 16), std::string("\x02\0\0\0\0\0\0\0\x03\0\0\0\0\0\0\0", 16));
  EXPECT_EQ(UnpackArgs(r.args), (std::vector<int64_t>{2, 3, 100, 1, 600000, 3,  //
                                                      0, 10, 10, 2000000, 0}));
  EXPECT_EQ(r.limits, (std::vector<int64_t>{100, 10}));
}

// A charge is its algorithm's number plus the flag, and an undo leaves it alone: it counts
// whatever the request (or a split request's other slots) decided.
TEST(LuaProtocol, EncodesAChargeByItsAlgorithmAndNeverUndoesIt) {
  const Limit window = *Limit::Create(LimitSpec::Window(Algorithm::kFixedWindow, 10, seconds(2)));
  const EntryRef entries[] = {{.key = "c", .limit = &window, .cost = 3, .op = EntryOp::kCharge},
                              {.key = "k", .limit = &window, .cost = 2}};
  const EncodedRequest r = EncodeRequest(entries, "p:", Micros(0));
  const std::vector<int64_t> args = UnpackArgs(r.args);
  EXPECT_EQ(args[1], kChargeFlag);
  EXPECT_EQ(args[5], 3);
  EXPECT_EQ(args[6], 0);
  StoreResponse got{.allowed = true, .decisions = {}};
  for (int i = 0; i < 2; ++i) {
    got.decisions.push_back({.verdict = Verdict::kAllowed,
                             .limit = 10,
                             .remaining = 5,
                             .reset_after = Micros(1'000'000),
                             .retry_after = Micros(0)});
  }
  std::vector<uint16_t> undone;
  const EncodedRequest undo = EncodeUndo(r, got, 1'700'000'000'000'000, undone);
  EXPECT_EQ(undone, (std::vector<uint16_t>{1}));
  EXPECT_EQ(undo.keys, (std::vector<std::string>{"p:{k}"}));
}

// A lease ask is its algorithm's number plus the flag and a sixth number; its reply carries a
// fifth integer, the units leased, granted at the call's time (the reply's last integer).
TEST(LuaProtocol, EncodesALeaseAskAndDecodesTheUnitsLeased) {
  const Limit bucket =
      *Limit::Create(LimitSpec::Bucket(Algorithm::kTokenBucket, 100, {100, minutes(1)}));
  const EntryRef entries[] = {{.key = "a", .limit = &bucket, .cost = 2},
                              {.key = "b", .limit = &bucket, .cost = 1, .lease = 30}};
  const EncodedRequest r = EncodeRequest(entries, "p:", Micros(0));
  EXPECT_EQ(UnpackArgs(r.args), (std::vector<int64_t>{2, 3, 100, 1, 600000, 2,  //
                                                      3 + kLeaseFlag, 100, 1, 600000, 1, 30}));
  EXPECT_EQ(r.leases, (std::vector<uint16_t>{1}));
  const std::vector<int64_t> reply = {1, 0, 98, 1200000, 0, 0, 69, 18600000, 0, 30, 1'700'000};
  size_t pos = 0;
  const Result<StoreResponse> got = DecodeResponse(reply, pos, r);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->decisions[0].leased, 0);
  EXPECT_EQ(got->decisions[1].leased, 30);
  EXPECT_EQ(got->decisions[1].leased_at.count(), 1'700'000);
  EXPECT_EQ(got->decisions[1].remaining, 69);
  EXPECT_EQ(pos, reply.size() - 1);
  // The undo of an admitted lease gives back its cost and the units leased.
  std::vector<uint16_t> undone;
  const EncodedRequest undo = EncodeUndo(r, *got, 1'700'000, undone);
  EXPECT_EQ(undone, (std::vector<uint16_t>{0, 1}));
  EXPECT_EQ(UnpackArgs(undo.args),
            (std::vector<int64_t>{-2, 3, 100, 1, 600000, 2, 1'700'000, 1200000, 3, 100, 1, 600000,
                                  31, 1'700'000, 18600000}));
  // A lease granted in a refused request, or more units than the limit, is not ours.
  const std::vector<int64_t> refused = {0, 1, 0, 0, 600000, 0, 69, 0, 0, 30, 1'700'000};
  pos = 0;
  EXPECT_FALSE(DecodeResponse(refused, pos, r).ok());
  const std::vector<int64_t> too_many = {1, 0, 98, 1, 0, 0, 69, 1, 0, 101, 1'700'000};
  pos = 0;
  EXPECT_FALSE(DecodeResponse(too_many, pos, r).ok());
}

// Give-backs travel as an undo request, and are never undone themselves.
TEST(LuaProtocol, EncodesGiveBacksAsAnUndoRequest) {
  const Limit window = *Limit::Create(LimitSpec::Window(Algorithm::kFixedWindow, 10, seconds(2)));
  const LeaseGrant grant{.at = Micros(1'700'000), .reset_after = Micros(300'000)};
  const EntryRef back{
      .key = "w", .limit = &window, .cost = 4, .op = EntryOp::kGiveBack, .grant = &grant};
  const EncodedRequest r = EncodeRequest({&back, 1}, "p:", Micros(0));
  EXPECT_EQ(UnpackArgs(r.args),
            (std::vector<int64_t>{-1, 0, 10, 10, 2000000, 4, 1'700'000, 300'000}));
  StoreResponse got{.allowed = true, .decisions = {Decision{.limit = 10, .remaining = 9}}};
  std::vector<uint16_t> undone;
  EXPECT_TRUE(EncodeUndo(r, got, 1'700'001, undone).keys.empty());
  EXPECT_TRUE(undone.empty());
}

TEST(LuaProtocol, BuildsOneCallForSeveralRequests) {
  const Limit l = *Limit::Create(LimitSpec::Window(Algorithm::kFixedWindow, 5, seconds(1)));
  const EntryRef e1[] = {{.key = "x", .limit = &l, .cost = 1}};
  const EntryRef e2[] = {{.key = "y", .limit = &l, .cost = 2}, {.key = "z", .limit = &l}};
  const EncodedRequest r1 = EncodeRequest(e1, "", Micros(0));
  const EncodedRequest r2 = EncodeRequest(e2, "", Micros(0));
  const EncodedRequest* batch[] = {&r1, &r2};
  CallArgv call;
  BuildCall("EVALSHA", "abc", TimeSource::kRedisTime, 123, batch, call);
  // One packed argument per request, after the keys, the time and the slack.
  const std::vector<std::string_view> expected = {"EVALSHA", "abc", "3", "{x}",   "{y}",
                                                  "{z}",     "",    "0", r1.args, r2.args};
  EXPECT_EQ(call.argv, expected);
  EXPECT_EQ(UnpackArgs(call.argv[9]),
            (std::vector<int64_t>{2, 0, 5, 5, 1000000, 2, 0, 5, 5, 1000000, 1}));
  BuildCall("EVAL", "body", TimeSource::kGiven, 123, batch, call);
  EXPECT_EQ(call.argv[6], "123");
  EXPECT_EQ(call.argv[7], std::to_string(kGivenTimeTtlSlackMs));
}

// A request whose entries are all members of one group names its key once (kOneKeyRequest), in
// either placement; members of two groups, or a member beside a key of its own, name a key each.
TEST(LuaProtocol, SendsTheKeyOfOneGroupsMembersOnce) {
  const Limit l = *Limit::Create(LimitSpec::Window(Algorithm::kFixedWindow, 5, seconds(1)));
  const EntryRef one[] = {{.key = "#a#{g}", .limit = &l, .cost = 1},
                          {.key = "#b#{g}", .limit = &l, .cost = 2}};
  const EntryRef two[] = {{.key = "#a#{g}", .limit = &l}, {.key = "#b#{h}", .limit = &l}};
  const EntryRef mixed[] = {{.key = "#a#{g}", .limit = &l}, {.key = "{g}", .limit = &l}};
  const EncodedRequest r1 = EncodeRequest(one, "p:", Micros(0));
  const EncodedRequest r2 = EncodeRequest(two, "p:", Micros(0));
  const EncodedRequest r3 = EncodeRequest(mixed, "p:", Micros(0));
  EXPECT_TRUE(r1.one_key);
  EXPECT_EQ(r1.keys, (std::vector<std::string>{"p:{g}", "p:{g}"}));  // still one per entry
  EXPECT_EQ(UnpackArgs(r1.args)[0], kOneKeyRequest + 2);
  EXPECT_TRUE(IsPlainConsume(r1));
  EXPECT_FALSE(r2.one_key);
  EXPECT_EQ(UnpackArgs(r2.args)[0], 2);
  EXPECT_FALSE(r3.one_key);
  EXPECT_EQ(UnpackArgs(r3.args)[0], 2);
  const EncodedRequest* batch[] = {&r1, &r2, &r3};
  CallArgv call;
  BuildCall("FCALL", "f", TimeSource::kRedisTime, 123, batch, call);
  const std::vector<std::string_view> expected = {"FCALL", "f",     "5",     "p:{g}", "p:{g}",
                                                  "p:{h}", "p:{g}", "p:{g}", "",      "0",
                                                  r1.args, r2.args, r3.args};
  EXPECT_EQ(call.argv, expected);
  BuildCall("EVALSHA", "abc", TimeSource::kRedisTime, 123, batch, call, KeyPlacement::kUndeclared);
  EXPECT_EQ(call.argv[5], "5");
  EXPECT_EQ(call.argv[6], "p:{g}");
  EXPECT_EQ(call.argv[7], "p:{g}");
  // A part of it, as a Cluster splits a request, is marked anew.
  const uint16_t both[] = {0, 1};
  const uint16_t first[] = {0};
  EXPECT_TRUE(EncodeSubset(one, both, {"p:{g}", "p:{g}"}, Micros(0)).one_key);
  const EncodedRequest part = EncodeSubset(one, first, {"p:{g}"}, Micros(0));
  EXPECT_FALSE(part.one_key);
  EXPECT_EQ(UnpackArgs(part.args)[0], 1);
}

// To the fast script, a request on one key with a cost above 1 travels as two arguments: its
// numbers with every cost 0, and its costs (kCostsApart); to the decide script, whole.
TEST(LuaProtocol, SendsTheCostsOfAOneKeyRequestApartToTheFastScript) {
  const Limit l = *Limit::Create(LimitSpec::Window(Algorithm::kFixedWindow, 5, seconds(1)));
  const Calendar day = Calendar::Utc(CalendarUnit::kDay);
  const Limit cal = *Limit::Create(LimitSpec::CalendarWindow(900, day));
  const EntryRef costly[] = {{.key = "#a#{g}", .limit = &l, .cost = 1},
                             {.key = "#b#{g}", .limit = &cal, .cost = 812},
                             {.key = "#c#{g}", .limit = &l, .cost = 0}};
  const EntryRef ones[] = {{.key = "#a#{h}", .limit = &l, .cost = 1},
                           {.key = "#b#{h}", .limit = &l, .cost = 0}};
  const EntryRef apart[] = {{.key = "x", .limit = &l, .cost = 7}};
  const Micros near = seconds(1'700'000'000);
  const EncodedRequest r1 = EncodeRequest(costly, "p:", near);
  const EncodedRequest r2 = EncodeRequest(ones, "p:", near);
  const EncodedRequest r3 = EncodeRequest(apart, "p:", near);
  ASSERT_TRUE(r1.one_key);
  ASSERT_TRUE(r2.one_key);
  EXPECT_TRUE(r1.costs_apart);
  EXPECT_FALSE(r2.costs_apart);
  EXPECT_FALSE(r3.costs_apart) << "a key of its own";
  const EncodedRequest* batch[] = {&r1, &r2, &r3};
  CallArgv call;
  BuildCall("FCALL", "f", TimeSource::kRedisTime, 123, batch, call, KeyPlacement::kDeclared,
            /*consume_script=*/true);
  ASSERT_EQ(call.argv.size(), 12u);  // FCALL f 3, three keys, now, slack, four arguments
  EXPECT_EQ(call.argv[2], "3");
  std::vector<int64_t> fixed = UnpackArgs(r1.args);
  EXPECT_EQ(fixed[0], 3 + kOneKeyRequest);
  fixed[0] += kCostsApart;
  // Each entry's fifth word, a member's id after it, and the calendar's four boundaries after
  // that: entries at 1, 7 and 17.
  EXPECT_EQ(fixed[5], 1);
  EXPECT_EQ(fixed[11], 812);
  EXPECT_EQ(fixed[21], 0);
  fixed[5] = fixed[11] = fixed[21] = 0;
  EXPECT_EQ(UnpackArgs(call.argv[8]), fixed);
  EXPECT_EQ(UnpackArgs(call.argv[9]), (std::vector<int64_t>{1, 812, 0}));
  EXPECT_EQ(call.argv[10], r2.args) << "costs of 0 and 1 travel whole";
  EXPECT_EQ(call.argv[11], r3.args) << "a request of keys of their own travels whole";
  // The decide script reads every request whole.
  BuildCall("FCALL", "f", TimeSource::kRedisTime, 123, batch, call);
  ASSERT_EQ(call.argv.size(), 11u);
  EXPECT_EQ(call.argv[8], r1.args);
  EXPECT_TRUE(call.apart.empty());
}

// Keys of several slots travel in the arguments, after their count: Redis Cluster routes by
// declared keys and refuses declared keys that span slots.
TEST(LuaProtocol, BuildsACallWithUndeclaredKeys) {
  const Limit l = *Limit::Create(LimitSpec::Window(Algorithm::kFixedWindow, 5, seconds(1)));
  const EntryRef e1[] = {{.key = "x", .limit = &l, .cost = 1}};
  const EntryRef e2[] = {{.key = "y", .limit = &l, .cost = 2}};
  const EncodedRequest r1 = EncodeRequest(e1, "", Micros(0));
  const EncodedRequest r2 = EncodeRequest(e2, "", Micros(0));
  const EncodedRequest* batch[] = {&r1, &r2};
  CallArgv call;
  BuildCall("EVALSHA", "abc", TimeSource::kRedisTime, 123, batch, call, KeyPlacement::kUndeclared);
  const std::vector<std::string_view> expected = {"EVALSHA", "abc", "0",   "",      "0",
                                                  "2",       "{x}", "{y}", r1.args, r2.args};
  EXPECT_EQ(call.argv, expected);
}

// A request the node did not serve is skipped by its size, and only such a request.
TEST(LuaProtocol, SkipsARequestTheNodeDidNotServe) {
  const Limit l = *Limit::Create(LimitSpec::Window(Algorithm::kFixedWindow, 5, seconds(1)));
  const EntryRef e1[] = {{.key = "x", .limit = &l}, {.key = "w", .limit = &l}};
  const EntryRef e2[] = {{.key = "y", .limit = &l}};
  const EncodedRequest r1 = EncodeRequest(e1, "", Micros(0));
  const EncodedRequest r2 = EncodeRequest(e2, "", Micros(0));
  // r1 not served (its two entries skipped), then r2 decided, then the call's time.
  const std::vector<int64_t> reply = {kNotServedHere, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 4, 900, 0, 77};
  size_t pos = 0;
  EXPECT_TRUE(NotServedHere(reply, pos, r1));
  EXPECT_EQ(pos, 9u);
  EXPECT_FALSE(NotServedHere(reply, pos, r2));
  EXPECT_EQ(pos, 9u);
  ASSERT_TRUE(DecodeResponse(reply, pos, r2).ok());
  EXPECT_EQ(*DecodeCallTime(reply, pos), 77);
  // Too short to hold the request: not a skip (and DecodeResponse refuses it).
  const std::vector<int64_t> cut = {kNotServedHere, 0, 0};
  pos = 0;
  EXPECT_FALSE(NotServedHere(cut, pos, r1));
  EXPECT_EQ(DecodeResponse(cut, pos, r1).status().code(), StatusCode::kInternal);
}

TEST(LuaProtocol, DecodesEachRequestInTurn) {
  const Limit l = *Limit::Create(LimitSpec::Window(Algorithm::kFixedWindow, 5, seconds(1)));
  const EntryRef e1[] = {{.key = "x", .limit = &l}};
  const EntryRef e2[] = {{.key = "y", .limit = &l}, {.key = "z", .limit = &l}};
  const EncodedRequest r1 = EncodeRequest(e1, "", Micros(0));
  const EncodedRequest r2 = EncodeRequest(e2, "", Micros(0));
  const std::vector<int64_t> reply = {1, 0, 4, 900, 0,  //
                                      0, 0, 5, 0,   0, 1, 0, 300, 250};
  size_t pos = 0;
  Result<StoreResponse> a = DecodeResponse(reply, pos, r1);
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(a->allowed);
  EXPECT_EQ(
      a->decisions[0],
      (Decision{
          .verdict = Verdict::kAllowed, .limit = 5, .remaining = 4, .reset_after = Micros(900)}));
  Result<StoreResponse> b = DecodeResponse(reply, pos, r2);
  ASSERT_TRUE(b.ok());
  EXPECT_FALSE(b->allowed);
  EXPECT_EQ(b->decisions[1].verdict, Verdict::kDenied);
  EXPECT_EQ(b->decisions[1].retry_after, Micros(250));
  EXPECT_EQ(pos, reply.size());
  EXPECT_EQ(DecodeResponse(reply, pos, r1).status().code(), StatusCode::kInternal);
  const std::vector<int64_t> bad = {1, 9, 0, 0, 0};
  pos = 0;
  EXPECT_EQ(DecodeResponse(bad, pos, r1).status().code(), StatusCode::kInternal);
}

// An allowed request answered briefly (kAllowedBrief): each entry's remaining and reset_after,
// allowed with no wait; checked as a full answer is, and refused for a request that asks more.
TEST(LuaProtocol, DecodesABriefReply) {
  const Limit l = *Limit::Create(LimitSpec::Window(Algorithm::kFixedWindow, 5, seconds(1)));
  const EntryRef e[] = {{.key = "x", .limit = &l}, {.key = "y", .limit = &l, .cost = 2}};
  const EncodedRequest r = EncodeRequest(e, "", Micros(0));
  const std::vector<int64_t> reply = {kAllowedBrief,
                                      4,
                                      900,
                                      3,
                                      800,  //
                                      1,
                                      0,
                                      4,
                                      900,
                                      0,
                                      0,
                                      3,
                                      800,
                                      0,
                                      77};
  size_t pos = 0;
  const Result<StoreResponse> a = DecodeResponse(reply, pos, r);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(pos, 5u);
  EXPECT_TRUE(a->allowed);
  EXPECT_EQ(
      a->decisions[0],
      (Decision{
          .verdict = Verdict::kAllowed, .limit = 5, .remaining = 4, .reset_after = Micros(900)}));
  EXPECT_EQ(
      a->decisions[1],
      (Decision{
          .verdict = Verdict::kAllowed, .limit = 5, .remaining = 3, .reset_after = Micros(800)}));
  // The next request's full answer follows it.
  const Result<StoreResponse> b = DecodeResponse(reply, pos, r);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(*DecodeCallTime(reply, pos), 77);
  for (const std::vector<int64_t>& bad : std::vector<std::vector<int64_t>>{
           {kAllowedBrief, 4, 900, 3},     // too short
           {kAllowedBrief, 6, 900, 3, 0},  // remaining above the limit
           {kAllowedBrief, 4, -1, 3, 0},   // reset_after below 0
       }) {
    pos = 0;
    EXPECT_EQ(DecodeResponse(bad, pos, r).status().code(), StatusCode::kInternal)
        << ::testing::PrintToString(bad);
  }
  // A lease's units are never left out.
  const Limit bucket =
      *Limit::Create(LimitSpec::Bucket(Algorithm::kTokenBucket, 100, {100, minutes(1)}));
  const EntryRef leasing[] = {{.key = "a", .limit = &bucket, .cost = 1, .lease = 30}};
  const EncodedRequest lease = EncodeRequest(leasing, "", Micros(0));
  const std::vector<int64_t> brief = {kAllowedBrief, 99, 600000, 1'700'000};
  pos = 0;
  EXPECT_EQ(DecodeResponse(brief, pos, lease).status().code(), StatusCode::kInternal);
}

// A fixed window that a charge overdrew comes back as a negative remaining: nothing left, and
// the overdraft kept, so that what the window counts is known exactly.
TEST(LuaProtocol, DecodesAnOverdrawnWindow) {
  const Limit l = *Limit::Create(LimitSpec::Window(Algorithm::kFixedWindow, 10, seconds(60)));
  const EntryRef e[] = {{.key = "x", .limit = &l, .cost = 5, .op = EntryOp::kCharge}};
  const EncodedRequest r = EncodeRequest(e, "", Micros(0));
  const std::vector<int64_t> reply = {0, 1, -1, 30'000'000, 30'000'000};
  size_t pos = 0;
  const Result<StoreResponse> d = DecodeResponse(reply, pos, r);
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(d->decisions[0].remaining, 0);
  EXPECT_EQ(d->decisions[0].overdrawn, 1);
}

// A reply that breaks the decision contract is the store's fault (a wrong script version, a proxy
// that mangles replies): kInternal, never a header with a negative remaining or Retry-After.
TEST(LuaProtocol, RefusesRepliesThatBreakTheDecisionContract) {
  const Limit l = *Limit::Create(LimitSpec::Window(Algorithm::kFixedWindow, 5, seconds(1)));
  const EntryRef e[] = {{.key = "x", .limit = &l}, {.key = "y", .limit = &l}};
  const EncodedRequest r = EncodeRequest(e, "", Micros(0));
  const std::vector<int64_t> good = {0, 0, 5, 0, 0, 1, 0, 300, 250};
  size_t pos = 0;
  ASSERT_TRUE(DecodeResponse(good, pos, r).ok());
  const std::vector<std::vector<int64_t>> bad = {
      {2, 0, 5, 0, 0, 0, 4, 0, 0},                    // allowed is 0 or 1
      {1, 0, 5, 0, 0, 1, 0, 300, 250},                // allowed, yet an entry was denied
      {0, 0, 5, 0, 0, 0, 4, 0, 0},                    // refused, yet every entry was allowed
      {1, 0, -(kMaxCapacity + 1), 0, 0, 0, 4, 0, 0},  // overdrawn beyond what a charge can
      {1, 0, 6, 0, 0, 0, 4, 0, 0},                    // remaining above the limit
      {1, 0, 4, -1, 0, 0, 4, 0, 0},                   // reset_after below 0
      {1, 0, 4, 0, 7, 0, 4, 0, 0},                    // retry_after on an allowed entry
      {0, 0, 5, 0, 0, 1, 0, 300, 0},                  // denied with no wait
      {0, 0, 5, 0, 0, 1, 0, 300, -5},                 // denied with a negative wait
  };
  for (const auto& reply : bad) {
    pos = 0;
    const Result<StoreResponse> d = DecodeResponse(reply, pos, r);
    EXPECT_EQ(d.status().code(), StatusCode::kInternal) << ::testing::PrintToString(reply);
  }
}

TEST(LuaProtocol, EncodesASubsetWithTheKeysGiven) {
  const Limit l = *Limit::Create(LimitSpec::Window(Algorithm::kFixedWindow, 5, seconds(1)));
  const EntryRef entries[] = {{.key = "a", .limit = &l, .cost = 1},
                              {.key = "b", .limit = &l, .cost = 2},
                              {.key = "c", .limit = &l, .cost = 3}};
  const uint16_t positions[] = {0, 2};
  const EncodedRequest r = EncodeSubset(entries, positions, {"k:{a}", "k:{c}"}, Micros(0));
  EXPECT_EQ(r.keys, (std::vector<std::string>{"k:{a}", "k:{c}"}));
  EXPECT_EQ(UnpackArgs(r.args), (std::vector<int64_t>{2, 0, 5, 5, 1000000, 1,  //
                                                      0, 5, 5, 1000000, 3}));
  EXPECT_EQ(r.limits, (std::vector<int64_t>{5, 5}));
}

TEST(LuaProtocol, UndoesOnlyTheEntriesThatConsumed) {
  const Limit bucket =
      *Limit::Create(LimitSpec::Bucket(Algorithm::kGcra, 10, {10, std::chrono::seconds(1)}));
  const EntryRef entries[] = {
      {.key = "consumed", .limit = &bucket, .cost = 2},
      {.key = "peek", .limit = &bucket, .cost = 0},
      {.key = "refund", .limit = &bucket, .cost = 4, .op = EntryOp::kRefund},
      {.key = "also", .limit = &bucket, .cost = 1}};
  const EncodedRequest reserved = EncodeRequest(entries, "p:", Micros(0));
  StoreResponse got{.allowed = true, .decisions = {}};
  for (int64_t reset : {200'000, 0, 0, 100'000}) {
    got.decisions.push_back({.verdict = Verdict::kAllowed,
                             .limit = 10,
                             .remaining = 8,
                             .reset_after = Micros(reset),
                             .retry_after = Micros(0)});
  }
  std::vector<uint16_t> undone;
  const EncodedRequest undo = EncodeUndo(reserved, got, 1'700'000'000'000'000, undone);
  EXPECT_EQ(undone, (std::vector<uint16_t>{0, 3}));
  EXPECT_EQ(undo.keys, (std::vector<std::string>{"p:{consumed}", "p:{also}"}));
  // A negative count marks an undo; per entry: the limit, the units, and when the reservation
  // was made with the reset_after it reported.
  EXPECT_EQ(UnpackArgs(undo.args),
            (std::vector<int64_t>{-2,                                             //
                                  4, 10, 1, 100000, 2, 1700000000000000, 200000,  //
                                  4, 10, 1, 100000, 1, 1700000000000000, 100000}));
  EXPECT_EQ(undo.limits, (std::vector<int64_t>{10, 10}));

  got.decisions[0].reset_after = Micros(0);
  const EntryRef nothing[] = {{.key = "p", .limit = &bucket, .cost = 0}};
  EXPECT_TRUE(EncodeUndo(EncodeRequest(nothing, "", Micros(0)), got, 1, undone).keys.empty());
  EXPECT_TRUE(undone.empty());
}

TEST(LuaProtocol, AReservesUndoCarriesItsIdEvenForNoUnits) {
  const Limit bucket =
      *Limit::Create(LimitSpec::Bucket(Algorithm::kGcra, 10, {10, std::chrono::seconds(1)}));
  const HoldId id{7, 9};
  const ReservationTerms terms{
      .ttl = std::chrono::seconds(5), .on_expiry = ExpiryOutcome::kGiveBack, .max_open = 3};
  const EntryRef entries[] = {
      {.key = "r",
       .limit = &bucket,
       .cost = 3,
       .op = EntryOp::kReserve,
       .hold = &id,
       .reservation = &terms},
      {.key = "zero",
       .limit = &bucket,
       .cost = 0,
       .op = EntryOp::kReserve,
       .hold = &id,
       .reservation = &terms},
      {.key = "plain", .limit = &bucket, .cost = 2, .reservation = &terms}};  // expires only
  const EncodedRequest reserved = EncodeRequest(entries, "p:", Micros(0));
  StoreResponse got{.allowed = true, .decisions = {}};
  for (int i = 0; i < 3; ++i) {
    got.decisions.push_back({.verdict = Verdict::kAllowed,
                             .limit = 10,
                             .remaining = 5,
                             .reset_after = Micros(300'000),
                             .retry_after = Micros(0)});
  }
  std::vector<uint16_t> undone;
  const EncodedRequest undo = EncodeUndo(reserved, got, 1'000, undone);
  EXPECT_EQ(undone, (std::vector<uint16_t>{0, 1, 2}));
  // A reserve's undo carries the flag and its id, so the script deletes the record; an entry
  // that only expires a key's reservations is undone as any consume.
  EXPECT_EQ(UnpackArgs(undo.args),
            (std::vector<int64_t>{-3,  //
                                  4 + kReserveFlag,
                                  10,
                                  1,
                                  100000,
                                  3,
                                  1000,
                                  300000,
                                  7,
                                  9,  //
                                  4 + kReserveFlag,
                                  10,
                                  1,
                                  100000,
                                  0,
                                  1000,
                                  300000,
                                  7,
                                  9,  //
                                  4,
                                  10,
                                  1,
                                  100000,
                                  2,
                                  1000,
                                  300000}));
}

// A reset's refund forgets its key's reservations: mode 3, with no id and no terms; a limit
// that takes no reservations has none to forget, and its refund travels as any other.
TEST(LuaProtocol, EncodesARefundThatForgetsReservationsAsModeThree) {
  const Limit bucket =
      *Limit::Create(LimitSpec::Bucket(Algorithm::kGcra, 10, {10, std::chrono::seconds(1)}));
  const Limit log =
      *Limit::Create(LimitSpec::Window(Algorithm::kSlidingWindowLog, 5, std::chrono::seconds(1)));
  const EntryRef entries[] = {
      {.key = "r",
       .limit = &bucket,
       .cost = 7,
       .op = EntryOp::kRefund,
       .forget_reservations = true},
      {.key = "l", .limit = &log, .cost = 7, .op = EntryOp::kRefund, .forget_reservations = true}};
  EXPECT_EQ(UnpackArgs(EncodeRequest(entries, "p:", Micros(0)).args),
            (std::vector<int64_t>{2,                                                      //
                                  4 + kReserveFlag, 10, 1, 100000, -7, 3, 0, 0, 0, 0, 0,  //
                                  1, 5, 5, 1000000, -7}));
}

// A request of shares: its count past kShareRequest, two keys per entry (the consumers' hash
// beside the state, in its slot), the rate as written after the reduced one, the names' bytes
// last; never undone; its reply carries four more integers per entry, or kShareFull alone.
TEST(LuaProtocol, EncodesSharesAndDecodesTheirGrants) {
  const Limit bucket =
      *Limit::Create(LimitSpec::Bucket(Algorithm::kGcra, 50, {100, std::chrono::seconds(2)}));
  const ShareEntry shares[] = {{.key = "a",
                                .limit = &bucket,
                                .consumer = "me",
                                .group = "g1",
                                .demand = 30,
                                .weight = 2,
                                .ttl = seconds(1),
                                .fairness = Fairness::kProportional},
                               {.key = "u:{7}", .limit = &bucket, .consumer = "x", .demand = 5}};
  const EncodedBatch batch(shares);
  const EncodedRequest r = EncodeRequest(batch.entries(), "p:", Micros(0));
  EXPECT_TRUE(r.shares);
  EXPECT_EQ(r.keys, (std::vector<std::string>{"p:{a}", "p:{a}:sh", "p:u:{7}", "p:u:{7}:sh"}));
  EXPECT_EQ(UnpackArgs(r.args.substr(0, 13 * 8)),
            (std::vector<int64_t>{kShareRequest + 2, 4, 50, 1, 20000, 100, 2000000, 30, 2, 1000000,
                                  1, 2, 2}));
  EXPECT_EQ(r.args.substr(13 * 8, 4), "meg1");
  EXPECT_EQ(r.args.size(), (13 + 12) * 8 + 4 + 1);
  EXPECT_EQ(r.args.back(), 'x');
  // A subset (a slot of a Cluster) gets each entry's hash beside its state key.
  const uint16_t second[] = {1};
  EXPECT_EQ(EncodeSubset(batch.entries(), second, {"p:u:{7}"}, Micros(0)).keys,
            (std::vector<std::string>{"p:u:{7}", "p:u:{7}:sh"}));
  std::vector<uint16_t> undone;
  StoreResponse got{.allowed = true, .decisions = std::vector<Decision>(2)};
  EXPECT_TRUE(EncodeUndo(r, got, 1, undone).keys.empty());

  const std::vector<int64_t> reply = {1, 0,  40, 100, 0, 10, 60, 2,  35,  //
                                      0, 50, 0,  0,   0, 40, 2,  35, 1'000};
  size_t pos = 0;
  Result<StoreResponse> decoded = DecodeResponse(reply, pos, r);
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_EQ(pos, reply.size() - 1);
  ASSERT_EQ(decoded->shares.size(), 2u);
  EXPECT_EQ(decoded->decisions[0].leased, 10);
  EXPECT_EQ(decoded->decisions[0].leased_at, Micros(1'000));
  EXPECT_EQ(decoded->decisions[0].remaining, 40);
  EXPECT_EQ(decoded->shares[0], (ShareState{.allocation = 60, .consumers = 2, .demand_total = 35}));
  EXPECT_EQ(decoded->decisions[1].leased, 0);
  EXPECT_EQ(decoded->decisions[1].leased_at, Micros(0));
  EXPECT_EQ(decoded->shares[1].allocation, 40);

  const std::vector<int64_t> full = {kShareFull, 1'000};
  pos = 0;
  decoded = DecodeResponse(full, pos, r);
  EXPECT_EQ(decoded.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(pos, 1u) << "past the request, for the next one";
  for (const size_t at : {size_t{5}, size_t{7}}) {  // a grant past the limit, no consumer
    std::vector<int64_t> bad = reply;
    bad[at] = at == 5 ? 51 : 0;
    pos = 0;
    EXPECT_EQ(DecodeResponse(bad, pos, r).status().code(), StatusCode::kInternal) << at;
  }
}

TEST(LuaProtocol, TheCallTimeEndsTheReply) {
  const std::vector<int64_t> reply = {1, 0, 4, 0, 0, 1'700'000'000'000'000};
  EXPECT_EQ(*DecodeCallTime(reply, 5), 1'700'000'000'000'000);
  EXPECT_EQ(DecodeCallTime(reply, 4).status().code(), StatusCode::kInternal);  // two left
  EXPECT_EQ(DecodeCallTime(reply, 6).status().code(), StatusCode::kInternal);  // none left
}

}  // namespace
}  // namespace caudal::redis
