// POST /v1/reserve and POST /v1/settle as pure translation (docs/http-api.md, Reservations). No
// sockets.
//
//   /v1/reserve {"descriptors": {...}, "cost": 800, "ttl": "60s"} → a check that reserves (the
//     same body as /v1/check's, without refund, and a ttl, default 60s, 1ms..24h); answered as
//     /v1/check is, with "reservation" and "expires_in_ms" when admitted.
//   /v1/settle {"reservation": "<id>", "cost": 731} → 200 with the policies' state after it.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "caudal/engine/engine.h"
#include "server/http_api.h"

namespace caudal::http_api {

// Every key and type is checked, as for /v1/check; nothing is reserved for a bad body.
ParsedCheck ParseReserveBody(std::string_view body);
// The same from a body ParseObjectBody has read (kCheckBodyDepth).
ParsedCheck ReadReserveBody(boost::json::object body);

// DecisionReply's; a reserve refused because the identity holds its most open reservations says
// so ("reason": "too_many_open_reservations").
Reply ReserveReply(const CheckResult& result);

struct ParsedSettle {
  std::string reservation;
  int64_t cost = 0;
  std::optional<Costs> costs = std::nullopt;  // given instead of cost: the actual per dimension
  std::optional<ApiError> error = std::nullopt;
};
// {"reservation": "<id>", "cost": N}, both required, cost an integer from 0 to 2^40; or
// "costs": {dimension: N, ...} instead of cost (ReadCosts).
inline constexpr size_t kSettleBodyDepth = 4;
ParsedSettle ParseSettleBody(std::string_view body);
ParsedSettle ReadSettleBody(const boost::json::object& body);  // from ParseObjectBody's read

// 200 {"outcome": "settled" | "repeated", "policies": [...]} (repeated: this cost had settled
// it already, and the state is the first settle's); 404 unknown_reservation (unknown, expired,
// or its limits changed since); 409 settled_with_another_cost; 400 invalid_reservation or
// invalid_cost; 503 with Retry-After when the store failed.
Reply SettleReply(const Result<SettleResult>& result);

}  // namespace caudal::http_api
