// lua_constants <constants.lua> <algorithms.txt>
//
// Run at build time (src/redis/CMakeLists.txt). Writes the first part of the Redis script, the
// Lua constants for every algorithm and verdict, from the algorithm table and the Verdict enum,
// so the numbers the wire format carries cannot disagree between C++ and Lua; and the
// algorithms' names in table order, one per line, which embed_lua.cmake turns into the list of
// lua/<name>.lua parts.
#include <cctype>
#include <cstdio>
#include <fstream>
#include <string>
#include <string_view>

#include "algorithms/algorithm.h"
#include "algorithms/share.h"
#include "caudal/algorithms/limit.h"
#include "redis/lua_protocol.h"

namespace caudal {
namespace {

constexpr Verdict kVerdicts[] = {Verdict::kAllowed, Verdict::kDenied, Verdict::kNeverFits};

std::string Upper(std::string_view name) {
  std::string out(name);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

std::string Constants() {
  std::string out =
      "-- Generated at build time from the algorithm table (algorithms/algorithm.h) and\n"
      "-- the Verdict enum (caudal/algorithms/limit.h) by lua_constants_main.cc. Do not edit.\n";
  for (const AlgorithmInfo& e : kAlgorithmTable) {
    out += "local " + Upper(e.name) + " = " + std::to_string(static_cast<int>(e.algorithm)) + "\n";
  }
  for (const Verdict v : kVerdicts) {
    out += "local " + Upper(VerdictName(v)) + " = " + std::to_string(static_cast<int>(v)) + "\n";
  }
  out += "local CHARGE_FLAG = " + std::to_string(redis::kChargeFlag) + "\n";
  out += "local LEASE_FLAG = " + std::to_string(redis::kLeaseFlag) + "\n";
  out += "local NOT_SERVED = " + std::to_string(redis::kNotServedHere) + "\n";
  out += "local BRIEF = " + std::to_string(redis::kAllowedBrief) + "\n";
  out += "local MAX_CAPACITY = " + std::to_string(kMaxCapacity) + "\n";
  out += "local RESERVE_FLAG = " + std::to_string(redis::kReserveFlag) + "\n";
  out += "local CALENDAR_FLAG = " + std::to_string(redis::kCalendarFlag) + "\n";
  out += "local GROUP_FLAG = " + std::to_string(redis::kGroupFlag) + "\n";
  out += "local GROUP_MAX = " + std::to_string(redis::kMaxGroupMembers) + "\n";
  out += "local ONE_KEY = " + std::to_string(redis::kOneKeyRequest) + "\n";
  out += "local COSTS_APART = " + std::to_string(redis::kCostsApart) + "\n";
  out += "local MAX_DEBT_TIME = " + std::to_string(kMaxDebtTime.count()) + "\n";
  out += "local SHARE_REQUEST = " + std::to_string(redis::kShareRequest) + "\n";
  out += "local SHARE_FULL = " + std::to_string(redis::kShareFull) + "\n";
  out += "local SHARE_MAX = " + std::to_string(kMaxShareConsumers) + "\n";
  out += "local SHARE_UNITS = " + std::to_string(kShareUnits) + "\n";
  const std::pair<const char*, Reservation> codes[] = {
      {"RES_NONE", Reservation::kNone},         {"RES_OPENED", Reservation::kOpened},
      {"RES_FULL", Reservation::kFull},         {"RES_SETTLED", Reservation::kSettled},
      {"RES_REPEATED", Reservation::kRepeated}, {"RES_CONFLICT", Reservation::kConflict},
      {"RES_UNKNOWN", Reservation::kUnknown}};
  for (const auto& [name, code] : codes) {
    out += std::string("local ") + name + " = " + std::to_string(static_cast<int>(code)) + "\n";
  }
  return out;
}

std::string AlgorithmNames() {
  std::string out;
  for (const AlgorithmInfo& e : kAlgorithmTable) out += std::string(e.name) + "\n";
  return out;
}

bool Write(const char* path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
  f.close();
  if (!f) std::fprintf(stderr, "lua_constants: cannot write %s\n", path);
  return static_cast<bool>(f);
}

}  // namespace
}  // namespace caudal

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: lua_constants <constants.lua> <algorithms.txt>\n");
    return 2;
  }
  const bool ok = caudal::Write(argv[1], caudal::Constants()) &&
                  caudal::Write(argv[2], caudal::AlgorithmNames());
  return ok ? 0 : 1;
}
