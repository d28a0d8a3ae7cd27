// Fuzzer for Envoy's RLQS usage reports as caudal reads them (rlqs_wire.h): any bytes may arrive
// on a stream. Each input is refused with a reason, or read into a report whose every BucketId
// holds 1 to kMaxRlqsBucketEntries entries, sorted, of 1 to kMaxRlqsBucketText bytes of UTF-8,
// no BucketId twice, at most the usages asked for, in one schema form. A report read in the
// list form reads back the same when written again through the generated messages. Never a
// crash, an overflow or an exception.
#include <cstdint>
#include <string>
#include <string_view>

#include "common/utf8.h"
#include "envoy/rlqs_wire.h"
#include "envoy/service/rate_limit_quota/v3/rlqs.pb.h"
#include "fuzz_check.h"

namespace caudal::envoy {
namespace {

constexpr size_t kMaxUsages = 16;

void Check(std::string_view bytes) {
  const Result<RlqsReport> r = ParseRlqsReport(bytes, kMaxUsages);
  if (!r.ok()) {
    FUZZ_CHECK(r.status().code() == StatusCode::kInvalidArgument ||
               r.status().code() == StatusCode::kResourceExhausted);
    FUZZ_CHECK(!r.status().message().empty());
    return;
  }
  FUZZ_CHECK(IsValidUtf8(r->domain));
  FUZZ_CHECK(r->usages.size() <= kMaxUsages);
  FUZZ_CHECK((r->schema == RlqsSchema::kNone) == r->usages.empty());
  for (size_t i = 0; i < r->usages.size(); ++i) {
    const RlqsBucketId& b = r->usages[i].bucket;
    FUZZ_CHECK(!b.empty() && b.size() <= kMaxRlqsBucketEntries);
    for (size_t k = 0; k < b.size(); ++k) {
      FUZZ_CHECK(!b[k].first.empty() && b[k].first.size() <= kMaxRlqsBucketText);
      FUZZ_CHECK(!b[k].second.empty() && b[k].second.size() <= kMaxRlqsBucketText);
      FUZZ_CHECK(IsValidUtf8(b[k].first) && IsValidUtf8(b[k].second));
      if (k > 0) FUZZ_CHECK(b[k - 1].first < b[k].first);
    }
    FUZZ_CHECK(r->usages[i].time_elapsed.count() >= 0);
    for (size_t j = 0; j < i; ++j) FUZZ_CHECK(r->usages[j].bucket != b);
  }
  if (r->schema != RlqsSchema::kList) return;
  // Written again through the generated messages (the list form), it reads back the same.
  ::envoy::service::rate_limit_quota::v3::RateLimitQuotaUsageReports m;
  m.set_domain(r->domain);
  for (const RlqsUsage& u : r->usages) {
    auto* out = m.add_bucket_quota_usages();
    for (const auto& [k, v] : u.bucket) (*out->mutable_bucket_id()->mutable_bucket())[k] = v;
    out->mutable_time_elapsed()->set_seconds(u.time_elapsed.count() / 1'000'000);
    out->mutable_time_elapsed()->set_nanos(
        static_cast<int32_t>(u.time_elapsed.count() % 1'000'000 * 1'000));
    out->set_num_requests_allowed(u.allowed);
    out->set_num_requests_denied(u.denied);
  }
  const Result<RlqsReport> again = ParseRlqsReport(m.SerializeAsString(), kMaxUsages);
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(again->domain == r->domain);
  FUZZ_CHECK(again->usages.size() == r->usages.size());
  for (size_t i = 0; i < r->usages.size(); ++i) {
    FUZZ_CHECK(again->usages[i].bucket == r->usages[i].bucket);
    FUZZ_CHECK(again->usages[i].allowed == r->usages[i].allowed);
    FUZZ_CHECK(again->usages[i].denied == r->usages[i].denied);
    FUZZ_CHECK(again->usages[i].time_elapsed == r->usages[i].time_elapsed);
  }
}

}  // namespace
}  // namespace caudal::envoy

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  caudal::envoy::Check(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
