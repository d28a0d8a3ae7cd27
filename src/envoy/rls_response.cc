// CheckResult -> RateLimitResponse: statuses, the overall code, the failure mode and the headers.
#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <variant>

#include "algorithms/exact_math.h"
#include "envoy/rls_handler.h"

namespace caudal::envoy {
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

// unit − now mod unit, in whole seconds of `now` (the reference's CalculateReset); on a calendar,
// until its window's real end.
int64_t WindowEndSeconds(const Limit& l, Nanos now) {
  const int64_t now_s = std::chrono::duration_cast<std::chrono::seconds>(now).count();
  if (l.calendar()) {
    const Micros end = l.calendar()->WindowAt(std::chrono::seconds(now_s)).end;
    return CeilSeconds(end - std::chrono::seconds(now_s));
  }
  const int64_t unit_s = std::max<int64_t>(1, CeilSeconds(l.window()));
  return unit_s - now_s % unit_s;
}

// A structured-field string: printable ASCII with " and \\ escaped; anything else is replaced.
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

// The limit a descriptor's status reports: the matched rule's, or the request's own override.
struct ShownLimit {
  uint32_t requests_per_unit = 0;
  Unit unit = Unit::kSecond;
};

ShownLimit ShownLimitOf(const RateLimitRequest& request, size_t i, const PolicyResult& p) {
  if (p.rule != nullptr) return {p.rule->requests_per_unit, p.rule->unit};
  const auto& d = request.descriptors(static_cast<int>(i));
  return {d.limit().requests_per_unit(), static_cast<Unit>(d.limit().unit())};
}

// What a limited slot advertises: quota q over w seconds, r remaining, t seconds to wait.
struct Advert {
  int64_t q = 0, w = 0, r = 0, t = 0;
};

Advert AdvertOf(const PolicyResult& p, ShownLimit shown, Nanos now) {
  const int64_t unit_s = CeilSeconds(UnitDuration(shown.unit));
  if (p.kind == CheckKind::kBlocked) {
    const int64_t now_s = std::chrono::duration_cast<std::chrono::seconds>(now).count();
    return {.q = 0, .w = unit_s, .r = 0, .t = unit_s - now_s % unit_s};
  }
  const Limit& l = *p.limits[0];
  const Decision& decision = p.decisions[0];
  Advert a{.q = l.capacity(), .w = unit_s, .r = decision.remaining};
  if (!IsWindowAlgorithm(l.algorithm())) {
    // A bucket's quota is its burst; it takes capacity / rate to refill from empty.
    const auto fill = exact::MulDiv(l.capacity(), l.refill_period_us(), l.refill_count());
    a.w = CeilSeconds(Micros(fill.quot + (fill.rem != 0 ? 1 : 0)));
  }
  a.t = CeilSeconds(decision.allowed() ? decision.reset_after : decision.retry_after);
  return a;
}

// Decided by a store (shared or local): has a decision to advertise.
bool Decided(const PolicyResult& p) {
  return p.kind == CheckKind::kLimited && !p.decisions.empty();
}

void AddRateLimitHeaders(const RateLimitRequest& request, const CheckResult& result,
                         HeaderMode mode, Nanos now, RateLimitResponse* r) {
  std::string policy, state;
  const PolicyResult* lowest = nullptr;
  Advert lowest_advert;
  for (size_t i = 0; i < result.results.size(); ++i) {
    const PolicyResult& s = result.results[i];
    if (!Decided(s) && s.kind != CheckKind::kBlocked) continue;
    const Advert a = AdvertOf(s, ShownLimitOf(request, i, s), now);
    const std::string id =
        SfString(s.name.empty() ? "descriptor-" + std::to_string(i) : std::string(s.name));
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

google::protobuf::Value ToValue(const MetadataValue& v) {
  google::protobuf::Value out;
  if (const auto* b = std::get_if<bool>(&v.kind)) {
    out.set_bool_value(*b);
  } else if (const auto* d = std::get_if<double>(&v.kind)) {
    out.set_number_value(*d);
  } else if (const auto* s = std::get_if<std::string>(&v.kind)) {
    out.set_string_value(*s);
  } else if (const auto* l = std::get_if<MetadataValue::List>(&v.kind)) {
    auto* list = out.mutable_list_value();
    for (const MetadataValue& item : *l) *list->add_values() = ToValue(item);
  } else if (const auto* st = std::get_if<MetadataValue::Struct>(&v.kind)) {
    auto* fields = out.mutable_struct_value()->mutable_fields();
    for (const auto& [k, item] : *st) (*fields)[k] = ToValue(item);
  } else {
    out.set_null_value(google::protobuf::NULL_VALUE);
  }
  return out;
}

// The reference's ratelimitToMetadata (RESPONSE_DYNAMIC_METADATA).
void AddDynamicMetadata(const RateLimitRequest& request, const CheckResult& result,
                        RateLimitResponse* r) {
  auto& fields = *r->mutable_dynamic_metadata()->mutable_fields();
  fields["domain"].set_string_value(request.domain());
  if (request.hits_addend() != 0) {
    fields["hitsAddend"].set_number_value(static_cast<double>(request.hits_addend()));
  }
  auto* descriptors = fields["descriptors"].mutable_list_value();
  for (const auto& d : request.descriptors()) {
    auto& out = *descriptors->add_values()->mutable_struct_value()->mutable_fields();
    auto* entries = out["entries"].mutable_list_value();
    for (const auto& e : d.entries())
      entries->add_values()->set_string_value(e.key() + "=" + e.value());
    if (d.has_hits_addend()) {
      out["hitsAddend"].set_number_value(static_cast<double>(d.hits_addend().value()));
    }
  }
  Metadata merged;
  for (size_t i = 0; i < result.results.size(); ++i) {
    const PolicyResult& p = result.results[i];
    if (p.rule == nullptr || p.rule->metadata.empty()) continue;
    if (r->statuses(static_cast<int>(i)).code() != RateLimitResponse::OK) continue;
    MergeMetadata(merged, p.rule->metadata);
  }
  if (!merged.empty()) fields["metadata"] = ToValue(MetadataValue{merged});
}

}  // namespace

void BuildResponse(const RateLimitRequest& request, const CheckResult& result,
                   const RlsOptions& options, Nanos now, RateLimitResponse* response) {
  response->Clear();
  Code overall = RateLimitResponse::OK;
  bool failed = false;  // a check had no store decision (failure mode allow or deny)
  for (size_t i = 0; i < result.results.size(); ++i) {
    const PolicyResult& p = result.results[i];
    auto* status = response->add_statuses();
    const bool refused = !p.shadow && !p.allowed;
    const Code code = refused ? RateLimitResponse::OVER_LIMIT : RateLimitResponse::OK;
    status->set_code(code);
    if (p.kind == CheckKind::kUnlimited) {
      status->set_limit_remaining(std::numeric_limits<uint32_t>::max());
    }
    if (p.kind != CheckKind::kLimited && p.kind != CheckKind::kBlocked) continue;
    const ShownLimit shown = ShownLimitOf(request, i, p);
    auto* limit = status->mutable_current_limit();
    limit->set_requests_per_unit(shown.requests_per_unit);
    limit->set_unit(static_cast<RateLimitResponse::RateLimit::Unit>(shown.unit));
    limit->set_name(std::string(p.name));
    if (Decided(p)) {
      status->set_limit_remaining(Clamp32(p.decisions[0].remaining));
      // Whole seconds, as Envoy reads them (x-ratelimit-reset takes the seconds). The
      // reference's fixed window answers its window's end, unit − now mod unit in whole seconds
      // of now, even for a counter nobody used; another algorithm, when it is fresh again.
      SetDuration(status->mutable_duration_until_reset(),
                  std::chrono::seconds(p.limits[0]->algorithm() == Algorithm::kFixedWindow
                                           ? WindowEndSeconds(*p.limits[0], now)
                                           : CeilSeconds(p.decisions[0].reset_after)));
    } else if (p.kind == CheckKind::kBlocked) {
      SetDuration(status->mutable_duration_until_reset(),
                  std::chrono::seconds(AdvertOf(p, shown, now).t));
    } else if (p.decided_by != DecidedBy::kSkipped) {
      failed = true;
    }
  }
  // OVER_LIMIT when the engine refused (a refused quota_mode descriptor alone may not).
  if (result.outcome != Outcome::kAllowed) overall = RateLimitResponse::OVER_LIMIT;
  response->set_overall_code(overall);
  if (!failed && options.headers != HeaderMode::kNone) {
    AddRateLimitHeaders(request, result, options.headers, now, response);
  }
  // The header and value `caudal serve` sends over HTTP for the same situation.
  if (result.degraded) AddHeader(response, "Caudal-Degraded", "store_unavailable");
  if (options.dynamic_metadata) AddDynamicMetadata(request, result, response);
}

}  // namespace caudal::envoy
