// Plan -> RateLimitResponse: statuses, the overall code, the failure mode and the headers.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

#include "algorithms/exact_math.h"
#include "caudal/policy.h"
#include "rls_plan.h"

namespace caudal::envoy::internal {
namespace {

using Code = RateLimitResponse::Code;

uint32_t Clamp32(int64_t v) {
  return static_cast<uint32_t>(std::clamp<int64_t>(v, 0, std::numeric_limits<uint32_t>::max()));
}

int64_t CeilSeconds(Micros d) { return (std::max<int64_t>(d.count(), 0) + 999'999) / 1'000'000; }

void SetDuration(google::protobuf::Duration* out, Micros d) {
  const int64_t us = std::max<int64_t>(d.count(), 0);
  out->set_seconds(us / 1'000'000);
  out->set_nanos(static_cast<int32_t>(us % 1'000'000) * 1000);
}

// A structured-field string: printable ASCII with " and \ escaped; anything else is replaced.
std::string SfString(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += (c >= 0x20 && c < 0x7f) ? c : '_';
  }
  return out + "\"";
}

void AddHeader(RateLimitResponse* r, std::string key, std::string value) {
  auto* h = r->add_response_headers_to_add();
  h->set_key(std::move(key));
  h->set_value(std::move(value));
}

// What a limited slot advertises: quota q over w seconds, r remaining, t seconds to wait.
struct Advert {
  int64_t q = 0, w = 0, r = 0, t = 0;
};

Advert AdvertOf(const Slot& s, Nanos now) {
  const int64_t unit_s = CeilSeconds(UnitDuration(s.unit));
  if (s.kind == SlotKind::kBlocked) {
    const int64_t now_s = std::chrono::duration_cast<std::chrono::seconds>(now).count();
    return {.q = 0, .w = unit_s, .r = 0, .t = unit_s - now_s % unit_s};
  }
  const Limit& l = *s.limit;
  Advert a{.q = l.capacity(), .w = unit_s, .r = s.decision.remaining};
  if (!IsWindowAlgorithm(l.algorithm())) {
    // A bucket's quota is its burst; it takes capacity / rate to refill from empty.
    const auto fill = exact::MulDiv(l.capacity(), l.refill_period_us(), l.refill_count());
    a.w = CeilSeconds(Micros(fill.quot + (fill.rem != 0 ? 1 : 0)));
  }
  a.t = CeilSeconds(s.decision.allowed() ? s.decision.reset_after : s.decision.retry_after);
  return a;
}

void AddRateLimitHeaders(const Plan& plan, HeaderMode mode, Nanos now, RateLimitResponse* r) {
  std::string policy, state;
  const Slot* lowest = nullptr;
  Advert lowest_advert;
  for (size_t i = 0; i < plan.slots.size(); ++i) {
    const Slot& s = plan.slots[i];
    if (s.kind != SlotKind::kLimited && s.kind != SlotKind::kBlocked) continue;
    const Advert a = AdvertOf(s, now);
    const std::string id = SfString(s.name.empty() ? "descriptor-" + std::to_string(i) : s.name);
    policy += (policy.empty() ? "" : ", ") + id + ";q=" + std::to_string(a.q) +
              ";w=" + std::to_string(a.w);
    state += (state.empty() ? "" : ", ") + id + ";r=" + std::to_string(a.r) +
             ";t=" + std::to_string(a.t);
    if (lowest == nullptr || a.r < lowest_advert.r) {
      lowest = &s;
      lowest_advert = a;
    }
  }
  if (lowest == nullptr) return;
  AddHeader(r, "RateLimit-Policy", policy);
  AddHeader(r, "RateLimit", state);
  if (mode == HeaderMode::kIetfAndXRateLimit) {
    // The draft-03 trio Envoy's own filters emit, for the limit closest to refusing.
    const Advert& a = lowest_advert;
    AddHeader(r, "x-ratelimit-limit",
              std::to_string(a.q) + ", " + std::to_string(a.q) + ";w=" + std::to_string(a.w));
    AddHeader(r, "x-ratelimit-remaining", std::to_string(a.r));
    AddHeader(r, "x-ratelimit-reset", std::to_string(a.t));
  }
}

Code SlotCode(const Slot& s, const RlsOptions& options, const Status& failure) {
  if (s.kind == SlotKind::kNoLimit || s.kind == SlotKind::kUnlimited || s.shadow) {
    return RateLimitResponse::OK;
  }
  if (!failure.ok()) {
    // kLocal reaches here only when the local store could not decide either: deny.
    return options.failure_mode == FailureMode::kAllow ? RateLimitResponse::OK
                                                       : RateLimitResponse::OVER_LIMIT;
  }
  if (s.kind == SlotKind::kBlocked) return RateLimitResponse::OVER_LIMIT;
  return s.decision.allowed() ? RateLimitResponse::OK : RateLimitResponse::OVER_LIMIT;
}

}  // namespace

Status MakeLocal(Plan& plan, int64_t instances) {
  for (Slot& s : plan.slots) {
    if (s.kind != SlotKind::kLimited) continue;
    auto local = LocalLimit(*s.limit, instances);
    if (!local.ok()) return local.status();
    s.limit = *local;
  }
  return Status::Ok();
}

void BuildResponse(const Plan& plan, const RlsOptions& options, Nanos now,
                   const Status& store_failure, bool degraded, RateLimitResponse* response) {
  response->Clear();
  Code overall = RateLimitResponse::OK;
  for (const Slot& s : plan.slots) {
    auto* status = response->add_statuses();
    const Code code = SlotCode(s, options, store_failure);
    status->set_code(code);
    if (code == RateLimitResponse::OVER_LIMIT) overall = code;
    if (s.kind == SlotKind::kUnlimited) {
      status->set_limit_remaining(std::numeric_limits<uint32_t>::max());
    }
    if (s.kind != SlotKind::kLimited && s.kind != SlotKind::kBlocked) continue;
    auto* limit = status->mutable_current_limit();
    limit->set_requests_per_unit(s.requests_per_unit);
    limit->set_unit(static_cast<RateLimitResponse::RateLimit::Unit>(s.unit));
    limit->set_name(s.name);
    if (s.kind == SlotKind::kLimited && store_failure.ok()) {
      status->set_limit_remaining(Clamp32(s.decision.remaining));
      SetDuration(status->mutable_duration_until_reset(), s.decision.reset_after);
    } else if (s.kind == SlotKind::kBlocked) {
      SetDuration(status->mutable_duration_until_reset(),
                  std::chrono::seconds(AdvertOf(s, now).t));
    }
  }
  response->set_overall_code(overall);
  if (!store_failure.ok()) {
    // The header and value `caudal serve` sends over HTTP for the same situation.
    AddHeader(response, "Caudal-Degraded", "store_unavailable");
    return;
  }
  if (options.headers != HeaderMode::kNone) AddRateLimitHeaders(plan, options.headers, now, response);
  if (degraded) AddHeader(response, "Caudal-Degraded", "store_unavailable");
}

}  // namespace caudal::envoy::internal
