// A calendar window on the wire (lua_protocol.h, kCalendarFlag): its boundaries follow an entry's
// first five numbers, an undo entry's seven, and the request goes to the decide script.
#include <gtest/gtest.h>

#include <chrono>
#include <vector>

#include "redis/lua_protocol.h"

namespace caudal::redis {
namespace {

constexpr int64_t kFixedWindow = static_cast<int64_t>(Algorithm::kFixedWindow);

TEST(LuaProtocolCalendar, AnEntryCarriesItsBoundariesAroundTheGivenTime) {
  const Calendar month = *Calendar::Create(CalendarUnit::kMonth, "Europe/Madrid");
  const Limit l = *Limit::Create(LimitSpec::CalendarWindow(100, month));
  const Micros near = std::chrono::seconds(1'773'576'000);  // 2026-03-15 12:00 UTC
  const CalendarBounds b = month.BoundsAround(near);
  const EntryRef entries[] = {{.key = "k", .limit = &l, .cost = 3, .lease = 5}};
  const EncodedRequest r = EncodeRequest(entries, "p:", near);
  const int64_t nominal = int64_t{30} * 86'400'000'000;
  EXPECT_EQ(UnpackArgs(r.args),
            (std::vector<int64_t>{1, kFixedWindow + kCalendarFlag + kLeaseFlag, 100, 100, nominal,
                                  3, b[0].count(), b[1].count(), b[2].count(), b[3].count(), 5}));
  EXPECT_EQ(b[1], std::chrono::seconds(1'772'319'600)) << "March 1, 00:00 in Madrid";
  const EntryRef plain[] = {{.key = "k", .limit = &l, .cost = 1}};
  EXPECT_TRUE(IsPlainConsume(EncodeRequest(plain, "p:", near)))
      << "the fast script reads a calendar's boundaries too";
}

TEST(LuaProtocolCalendar, AnUndoCarriesTheBoundariesOfItsEntry) {
  const Calendar day = Calendar::Utc(CalendarUnit::kDay);
  const Limit cal = *Limit::Create(LimitSpec::CalendarWindow(10, day));
  const Limit plain =
      *Limit::Create(LimitSpec::Window(Algorithm::kFixedWindow, 10, std::chrono::hours(24)));
  const Micros near = std::chrono::seconds(1'700'000'000);
  const CalendarBounds b = day.BoundsAround(near);
  const EntryRef entries[] = {{.key = "c", .limit = &cal, .cost = 2},
                              {.key = "p", .limit = &plain, .cost = 1}};
  const EncodedRequest reserved = EncodeRequest(entries, "p:", near);
  StoreResponse got{.allowed = true, .decisions = {}};
  for (int64_t reset : {300'000, 400'000}) {
    got.decisions.push_back({.verdict = Verdict::kAllowed,
                             .limit = 10,
                             .remaining = 8,
                             .reset_after = Micros(reset),
                             .retry_after = Micros(0)});
  }
  std::vector<uint16_t> undone;
  const EncodedRequest undo = EncodeUndo(reserved, got, 1'700'000'000'000'000, undone);
  EXPECT_EQ(undone, (std::vector<uint16_t>{0, 1}));
  const int64_t w = 86'400'000'000;
  EXPECT_EQ(UnpackArgs(undo.args),
            (std::vector<int64_t>{-2,                                                      //
                                  kFixedWindow + kCalendarFlag, 10, 10, w, 2,              //
                                  1'700'000'000'000'000, 300'000,                          //
                                  b[0].count(), b[1].count(), b[2].count(), b[3].count(),  //
                                  kFixedWindow, 10, 10, w, 1, 1'700'000'000'000'000, 400'000}));
}

}  // namespace
}  // namespace caudal::redis
