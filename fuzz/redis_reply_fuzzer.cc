// Fuzzer for what the Redis store reads back: RESP bytes (hiredis's reader, fed as reads arrive)
// and the decide script's integer reply (DecodeResponse). Redis, or whatever sits between caudal
// and it, may send anything.
//
// The first byte picks how many entries the request had and a chunk size; the rest is the byte
// stream. Every reply either fails cleanly (a malformed stream is kInternal, and the connection
// would be dropped) or decodes into decisions that keep the store contract: one per entry, each
// with 0 <= remaining <= limit, no negative durations, a wait exactly when denied, and the
// request allowed exactly when every entry is. Never a crash, an overflow or an exception.
#include <cstdint>
#include <string_view>
#include <vector>

#include "caudal/algorithms/limit.h"
#include "fuzz_check.h"
#include "redis/lua_protocol.h"
#include "redis/resp.h"

namespace caudal {
namespace {

void CheckDecoded(const StoreResponse& r, const redis::EncodedRequest& request) {
  FUZZ_CHECK(r.decisions.size() == request.limits.size());
  bool every_entry_allowed = true;
  for (size_t i = 0; i < r.decisions.size(); ++i) {
    const Decision& d = r.decisions[i];
    FUZZ_CHECK(d.limit == request.limits[i]);
    FUZZ_CHECK(d.remaining >= 0 && d.remaining <= d.limit);
    FUZZ_CHECK(d.reset_after.count() >= 0 && d.retry_after.count() >= 0);
    if (d.verdict == Verdict::kDenied) FUZZ_CHECK(d.retry_after.count() > 0);
    if (d.allowed()) FUZZ_CHECK(d.retry_after.count() == 0);
    every_entry_allowed = every_entry_allowed && d.allowed();
  }
  FUZZ_CHECK(r.allowed == every_entry_allowed);
}

void Run(const uint8_t* data, size_t size) {
  if (size == 0) return;
  static const Limit limit =
      *Limit::Create(LimitSpec::Window(Algorithm::kFixedWindow, 5, std::chrono::seconds(1)));
  const size_t entries = 1 + data[0] % 4;
  const size_t chunk = 1 + data[0] / 4 % 16;
  std::vector<EntryRef> refs(entries, EntryRef{.key = "k", .limit = &limit});
  const redis::EncodedRequest request = redis::EncodeRequest(refs, "");

  redis::ReplyParser parser;
  std::vector<int64_t> integers;
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  for (size_t at = 0; at < bytes.size(); at += chunk) {
    const std::string_view piece = bytes.substr(at, chunk);
    parser.Feed(piece.data(), piece.size());
    for (;;) {
      Result<std::optional<redis::Reply>> next = parser.Next();
      if (!next.ok()) {
        FUZZ_CHECK(next.status().code() == StatusCode::kInternal);
        return;  // the store drops the connection
      }
      if (!next->has_value()) break;
      const redisReply& reply = ***next;
      if (redis::IsError(reply)) continue;
      if (!redis::ToIntegers(reply, integers)) continue;
      size_t pos = 0;
      while (pos < integers.size()) {
        const size_t before = pos;
        const Result<StoreResponse> r = redis::DecodeResponse(integers, pos, request);
        if (!r.ok()) {
          FUZZ_CHECK(r.status().code() == StatusCode::kInternal);
          break;
        }
        FUZZ_CHECK(pos == before + 1 + 4 * entries);
        CheckDecoded(*r, request);
      }
    }
  }
}

}  // namespace
}  // namespace caudal

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  caudal::Run(data, size);
  return 0;
}
