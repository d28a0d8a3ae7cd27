// The Lua script (src/redis/lua/) against the C++ algorithms: the same seeded random traces
// through both, with `now` passed in, must give identical decisions (verdict, remaining,
// reset_after, retry_after). The C++ side is the conformance suite's ReferenceModel (the pure
// algorithms under the Store contract: all-or-nothing, refused entries reported as peeks,
// refunds applied in any case), so Lua, MemoryStore and the model agree.
#include <gtest/gtest.h>

#include <sstream>

#include "algorithms/algorithm.h"
#include "redis/equivalence_replay.h"
#include "redis/lua_protocol.h"
#include "redis/script.h"
#include "support/redis_server.h"

namespace caudal::redis {
namespace {

using equivalence::kDecisionsPerAlgorithm;
using equivalence::Tracer;
using testing::RedisServer;

std::vector<int64_t> ParseIntegers(const std::string& text) {
  std::vector<int64_t> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(std::stoll(line));
  return out;
}

class LuaEquivalence : public ::testing::Test {
 protected:
  void SetUp() override {
    // The caudal module loaded, so that its CAUDAL.CONSUME takes its turn (Call); a sanitizer
    // build has none (src/redis/CMakeLists.txt).
#ifdef CAUDAL_REDIS_MODULE
    Result<std::unique_ptr<RedisServer>> s = RedisServer::Start({.extra_args = {
      "--loadmodule",
      CAUDAL_REDIS_MODULE
    }});
#else
    Result<std::unique_ptr<RedisServer>> s = RedisServer::Start();
    module_ = false;
#endif
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(*s);
    Result<std::string> sha = server_->Command({"SCRIPT", "LOAD", std::string(kDecideScript)});
    ASSERT_TRUE(sha.ok()) << sha.status().ToString();
    ASSERT_EQ(*sha, kDecideSha1);  // the build-time SHA1 is the name Redis uses
    sha = server_->Command({"SCRIPT", "LOAD", std::string(kConsumeScript)});
    ASSERT_TRUE(sha.ok()) << sha.status().ToString();
    ASSERT_EQ(*sha, kConsumeSha1);
    Result<std::string> library =
        server_->Command({"FUNCTION", "LOAD", std::string(kConsumeLibrary)});
    ASSERT_TRUE(library.ok()) << library.status().ToString();
    ASSERT_EQ(*library, kConsumeLibraryName);
  }

  // Runs one script call carrying `requests` at `now`; returns each request's response.
  std::vector<StoreResponse> Call(const std::vector<std::vector<EntryRef>>& requests, int64_t now) {
    std::vector<EncodedRequest> encoded;
    // The time calendar windows are encoded around: the call's own, or up to 12 hours from it
    // (the caller's clock against the store's; every calendar window is longer).
    constexpr int64_t kHour = 3'600'000'000;
    const Micros near(skewed_ ? now + now % (24 * kHour) - 12 * kHour : now);
    std::vector<std::string> names;  // grouped_: each entry's grouped key
    for (const auto& r : requests) {
      if (!grouped_) {
        encoded.push_back(EncodeRequest(r, "caudal:", near));
        continue;
      }
      // A trace's keys ("t<trace>:k<k>") of compact algorithms: members of the trace's group.
      std::vector<EntryRef> members(r.begin(), r.end());
      names.assign(r.size(), "");
      for (size_t i = 0; i < r.size(); ++i) {
        if (AlgorithmInfoOf(r[i].limit->algorithm()).state != StateShape::kCompact) continue;
        const std::string_view key = r[i].key;
        std::string& name = names[i];
        name.append(1, '#').append(key).append("#{").append(key.substr(0, key.find(':')));
        name.append(1, '}');
        members[i].key = names[i];
      }
      encoded.push_back(EncodeRequest(members, "caudal:", near));
    }
    std::vector<const EncodedRequest*> ptrs;
    for (const EncodedRequest& e : encoded) ptrs.push_back(&e);
    // Of the calls the store would send to the fast script, one in four goes to it as a
    // function (as the store sends it), one to it as a script, one to the decide script and one
    // to the caudal module: all decide the same keys in turn, and each must agree with the
    // model. The fast script and the module get the costs of a request on one key apart, as the
    // store sends them (kCostsApart).
    uint64_t turn = ForConsumeScript(ptrs, KeyPlacement::kDeclared) ? consume_calls_++ % 4 : 2;
    if (turn == 3 && !module_) turn = 0;
    CallArgv call;
    BuildCall(turn == 0 ? "FCALL" : (turn == 3 ? kModuleCommand : "EVALSHA"),
              turn == 0 || turn == 3 ? kConsumeFunction : (turn == 1 ? kConsumeSha1 : kDecideSha1),
              TimeSource::kGiven, now, ptrs, call, KeyPlacement::kDeclared,
              /*consume_script=*/turn != 2);
    module_calls_ += turn == 3 ? 1 : 0;
    Result<std::string> reply =
        server_->Command(std::vector<std::string>(call.argv.begin(), call.argv.end()));
    EXPECT_TRUE(reply.ok()) << reply.status().ToString();
    std::vector<StoreResponse> out;
    if (!reply.ok()) return out;
    const std::vector<int64_t> ints = ParseIntegers(*reply);
    size_t pos = 0;
    for (const EncodedRequest& e : encoded) {
      Result<StoreResponse> r = DecodeResponse(ints, pos, e);
      EXPECT_TRUE(r.ok()) << r.status().ToString();
      if (r.ok()) out.push_back(*r);
    }
    // The reply ends with the call's time: here the time passed in.
    const Result<int64_t> at = DecodeCallTime(ints, pos);
    EXPECT_TRUE(at.ok()) << at.status().ToString();
    if (at.ok()) {
      EXPECT_EQ(*at, now);
    }
    return out;
  }

  void Replay(uint64_t seed, const std::function<Algorithm(equivalence::Tracer&)>& pick,
              int64_t min_decisions, bool forward_only = false, bool calendars = false) {
    equivalence::Replay(
        seed, pick, min_decisions,
        [this](const std::vector<std::vector<EntryRef>>& requests, int64_t now) {
          return Call(requests, now);
        },
        "", forward_only, calendars);
    if (expect_module_ && module_) {
      EXPECT_GT(module_calls_, 0u) << "the module decided none of the calls";
    }
  }

  std::unique_ptr<RedisServer> server_;
  uint64_t consume_calls_ = 0;  // calls of plain consumes so far
  uint64_t module_calls_ = 0;   // of them, those sent to the module
  bool expect_module_ = true;   // a trace of compact algorithms: some calls go to the module
  bool module_ = true;          // the server loaded the module
  bool skewed_ = false;         // calendar boundaries encoded hours from the call's time
  bool grouped_ = false;        // the compact algorithms' keys members of one group per trace
};

// Every algorithm of the table on its own; the seed is the enum value + 1, so each one's traces
// stay the same when another is added.
class LuaEquivalenceOf : public LuaEquivalence, public ::testing::WithParamInterface<Algorithm> {};

TEST_P(LuaEquivalenceOf, DecidesAsTheReferenceModel) {
  const Algorithm a = GetParam();
  expect_module_ = AlgorithmInfoOf(a).state == StateShape::kCompact;
  Replay(
      static_cast<uint64_t>(a) + 1, [a](Tracer&) { return a; }, kDecisionsPerAlgorithm);
}

INSTANTIATE_TEST_SUITE_P(AllAlgorithms, LuaEquivalenceOf, ::testing::ValuesIn(kAllAlgorithms),
                         [](const ::testing::TestParamInfo<Algorithm>& param) {
                           return std::string(AlgorithmName(param.param));
                         });

TEST_F(LuaEquivalence, RequestsMixingAlgorithms) {
  Replay(
      6,
      [](Tracer& t) {
        return kAllAlgorithms[static_cast<size_t>(t.Uniform(0, std::ssize(kAllAlgorithms) - 1))];
      },
      kDecisionsPerAlgorithm);
}

// Fixed windows on calendars (most of them: a day, week, month or year in zones with
// daylight-saving changes and non-hour offsets), with steps on their boundaries: the script picks
// the window among the boundaries it is handed as the C++ computes it from the time zone.
TEST_F(LuaEquivalence, CalendarWindows) {
  Replay(
      21, [](Tracer&) { return Algorithm::kFixedWindow; }, kDecisionsPerAlgorithm,
      /*forward_only=*/false, /*calendars=*/true);
}

// The boundaries encoded up to 12 hours from the store's time: the script still picks the window
// holding its own time (and a clock gone back is judged in the stored window, whose end the state
// holds, wherever the boundaries lie).
TEST_F(LuaEquivalence, CalendarWindowsHandedBoundariesHoursFromTheStoreClock) {
  skewed_ = true;
  Replay(
      22, [](Tracer& t) { return t.Chance(80) ? Algorithm::kFixedWindow : Algorithm::kGcra; },
      kDecisionsPerAlgorithm, /*forward_only=*/false, /*calendars=*/true);
}

// Each trace's keys of compact algorithms as members of one group (grouped keys): their states in
// one value, read and written by both scripts' grouped paths, decide as the model decides keys of
// their own, every algorithm mixed in, calendar windows included.
TEST_F(LuaEquivalence, GroupedKeys) {
  grouped_ = true;
  Replay(
      23,
      [](Tracer& t) {
        return kAllAlgorithms[static_cast<size_t>(t.Uniform(0, std::ssize(kAllAlgorithms) - 1))];
      },
      kDecisionsPerAlgorithm);
}

TEST_F(LuaEquivalence, GroupedCalendarWindowsAndBuckets) {
  grouped_ = true;
  Replay(
      24,
      [](Tracer& t) { return t.Chance(50) ? Algorithm::kFixedWindow : Algorithm::kTokenBucket; },
      kDecisionsPerAlgorithm, /*forward_only=*/false, /*calendars=*/true);
}

}  // namespace
}  // namespace caudal::redis
