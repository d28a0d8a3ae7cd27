// Fuzzer for Envoy's ShouldRateLimit as caudal answers it (RlsHandler on the memory store): the
// domain, descriptors, entries, hits, refunds and limit overrides of a request are what Envoy
// builds from a client's headers, so anything may arrive.
//
// The input decodes into a few requests with clock steps between them, against a config that
// has every kind of rule (windows, a bucket, shadow mode, unlimited, blocking, replaces). Each
// call either is refused as a bad request (kInvalidArgument, with a reason) or answers one status
// per descriptor, OVER_LIMIT overall exactly when a status is, with sane durations and headers.
// A refused request without refunds consumes nothing: asked again at the same instant, it gets
// the same answer. Never a crash, an overflow or an exception.
#include <fuzzer/FuzzedDataProvider.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "caudal/common/clock.h"
#include "caudal/store/memory_store.h"
#include "config/ratelimit_config_yaml.h"
#include "envoy/rls_handler.h"
#include "fuzz_check.h"
#include "support/manual_clock.h"

namespace caudal::envoy {
namespace {

constexpr std::string_view kConfig = R"(
domain: test
descriptors:
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 10}
  - key: remote_address
    value: 50.0.0.5
    rate_limit: {unit: second, requests_per_unit: 0}
  - key: one
    rate_limit: {unit: minute, requests_per_unit: 1, name: one}
    descriptors:
      - key: nested
        rate_limit: {unit: hour, requests_per_unit: 3}
  - key: bucket
    rate_limit: {unit: second, requests_per_unit: 1, algorithm: token_bucket, capacity: 5}
  - key: shadow
    rate_limit: {unit: minute, requests_per_unit: 1}
    shadow_mode: true
  - key: ldap
    rate_limit: {unlimited: true}
  - key: path
    value: "/api*"
    rate_limit: {unit: minute, requests_per_unit: 2, name: specific, replaces: [{name: general}]}
  - key: general
    rate_limit: {unit: minute, requests_per_unit: 100, name: general}
)";

const RateLimitConfig& Config() {
  static const RateLimitConfig config = *ParseRateLimitConfigText(kConfig, "fuzz.yaml");
  return config;
}

std::string Pick(FuzzedDataProvider& in, std::initializer_list<const char*> words) {
  const size_t i = in.ConsumeIntegralInRange<size_t>(0, words.size());
  if (i == words.size()) return in.ConsumeRandomLengthString(24);
  return *(words.begin() + i);
}

RateLimitRequest DecodeRequest(FuzzedDataProvider& in, bool& refunds) {
  RateLimitRequest r;
  r.set_domain(in.ConsumeBool() ? "test" : Pick(in, {"other", ""}));
  r.set_hits_addend(in.ConsumeIntegralInRange<uint32_t>(0, 3) == 3
                        ? in.ConsumeIntegral<uint32_t>()
                        : in.ConsumeIntegralInRange<uint32_t>(0, 2));
  const int descriptors = in.ConsumeIntegralInRange(0, 5);
  for (int i = 0; i < descriptors; ++i) {
    auto* d = r.add_descriptors();
    const int entries = in.ConsumeIntegralInRange(0, 3);
    for (int j = 0; j < entries; ++j) {
      auto* e = d->add_entries();
      e->set_key(Pick(
          in, {"remote_address", "one", "nested", "bucket", "shadow", "ldap", "path", "general"}));
      e->set_value(Pick(in, {"10.0.0.1", "50.0.0.5", "/api/x", "/apix", "", "v"}));
    }
    if (in.ConsumeIntegralInRange(0, 7) == 0) {
      d->mutable_limit()->set_requests_per_unit(in.ConsumeIntegralInRange<uint32_t>(0, 20));
      d->mutable_limit()->set_unit(
          static_cast<::envoy::type::v3::RateLimitUnit>(in.ConsumeIntegralInRange(0, 7)));
    }
    if (in.ConsumeIntegralInRange(0, 3) == 0) {
      d->mutable_hits_addend()->set_value(in.ConsumeIntegralInRange(0, 3) == 0
                                              ? in.ConsumeIntegral<uint64_t>()
                                              : in.ConsumeIntegralInRange<uint64_t>(0, 6));
    }
    if (in.ConsumeIntegralInRange(0, 5) == 0) {
      d->set_is_negative_hits(true);
      refunds = true;
    }
  }
  return r;
}

void CheckResponse(const RateLimitRequest& request, const RateLimitResponse& r) {
  FUZZ_CHECK(r.statuses_size() == request.descriptors_size());
  bool any_over = false;
  for (const auto& s : r.statuses()) {
    FUZZ_CHECK(s.code() == RateLimitResponse::OK || s.code() == RateLimitResponse::OVER_LIMIT);
    any_over = any_over || s.code() == RateLimitResponse::OVER_LIMIT;
    if (s.has_duration_until_reset()) {
      FUZZ_CHECK(s.duration_until_reset().seconds() >= 0);
      FUZZ_CHECK(s.duration_until_reset().nanos() >= 0 &&
                 s.duration_until_reset().nanos() < 1'000'000'000);
    }
  }
  FUZZ_CHECK(r.overall_code() ==
             (any_over ? RateLimitResponse::OVER_LIMIT : RateLimitResponse::OK));
  for (const auto& h : r.response_headers_to_add()) {
    FUZZ_CHECK(!h.key().empty());
    FUZZ_CHECK(h.value().find_first_of("\r\n") == std::string::npos);
  }
}

void Run(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  ManualClock clock(std::chrono::seconds(1'699'999'980));
  MemoryStore store(clock, {.max_keys = 4096, .shards = 4});
  Engine engine(store, clock, {});
  FUZZ_CHECK(engine.SetDomains(std::make_shared<RateLimitConfig>(Config()), {}).ok());
  RlsHandler handler(engine, {});
  for (int i = 0; i < 6 && in.remaining_bytes() > 0; ++i) {
    bool refunds = false;
    const RateLimitRequest request = DecodeRequest(in, refunds);
    const Result<RateLimitResponse> r = handler.ShouldRateLimit(request);
    if (!r.ok()) {
      FUZZ_CHECK(r.status().code() == StatusCode::kInvalidArgument);
      FUZZ_CHECK(!r.status().message().empty());
    } else {
      CheckResponse(request, *r);
      if (r->overall_code() == RateLimitResponse::OVER_LIMIT && !refunds) {
        const Result<RateLimitResponse> again = handler.ShouldRateLimit(request);
        FUZZ_CHECK(again.ok());
        FUZZ_CHECK(again->SerializeAsString() == r->SerializeAsString());
      }
    }
    clock.Advance(std::chrono::milliseconds(in.ConsumeIntegralInRange(0, 90'000)));
  }
}

}  // namespace
}  // namespace caudal::envoy

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  caudal::envoy::Run(data, size);
  return 0;
}
