// A RateLimitQuotaUsageReports message read from its bytes, in either form of the schema:
//   list  bucket_quota_usages is repeated BucketQuotaUsage (each element's field 1 is its
//         bucket_id, length-delimited): what every released Envoy sends (proto/'s schema);
//   map   bucket_quota_usages is map<uint64, BucketQuotaUsage> (each element a map entry whose
//         field 1 is the key, a varint, the value's last_report ignored): a later form in
//         Envoy's repository (docs/envoy.md).
// Both use field number 2, so neither parses as the other; each element is told apart by the wire
// type of its first field. A message mixing the two is refused. The message is read by hand, not
// by protobuf's parser, which logs a line for each `string` that is not UTF-8 (a flood a client
// could cause); such text is refused here like any other malformed field.
//
// What is refused, with the field at fault (kInvalidArgument unless said): bytes that are no
// such message (or text that is not UTF-8, which protobuf refuses for `string`); an element
// without a BucketId or with an empty one; a BucketId key or value that is empty, or more than
// kMaxRlqsBucketEntries entries; a negative or out-of-range time_elapsed; one BucketId reported
// twice in a message; more than `max_usages` usages (kResourceExhausted).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "caudal/common/clock.h"
#include "caudal/common/status.h"

namespace caudal::envoy {

inline constexpr size_t kMaxRlqsBucketEntries = 32;
inline constexpr size_t kMaxRlqsBucketText = 256;  // bytes of one key or value

// A BucketId's entries, sorted by key (Envoy: their order does not matter).
using RlqsBucketId = std::vector<std::pair<std::string, std::string>>;

enum class RlqsSchema : uint8_t { kNone, kMap, kList };  // kNone: no usage in the message

struct RlqsUsage {
  RlqsBucketId bucket;
  Micros time_elapsed{0};  // 0 when not given
  uint64_t allowed = 0;
  uint64_t denied = 0;
};

struct RlqsReport {
  std::string domain;  // empty when not given
  RlqsSchema schema = RlqsSchema::kNone;
  std::vector<RlqsUsage> usages;
};

Result<RlqsReport> ParseRlqsReport(std::string_view bytes, size_t max_usages);

// "{name=per-tenant, tenant=acme}": a BucketId as logs and errors show it.
std::string RlqsBucketText(const RlqsBucketId& bucket);

}  // namespace caudal::envoy
