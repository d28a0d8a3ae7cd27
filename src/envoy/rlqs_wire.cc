#include "envoy/rlqs_wire.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include <algorithm>

#include "common/cat.h"
#include "common/utf8.h"

namespace caudal::envoy {
namespace {

using google::protobuf::internal::WireFormatLite;

Status Invalid(std::string message) { return Status::InvalidArgument(std::move(message)); }

// One field of a message: its number, and a varint's value or a length-delimited payload.
struct Field {
  int number = 0;
  bool delimited = false;
  uint64_t varint = 0;
  std::string_view bytes;
};

// Calls `each` on every field of the message `bytes`, in order; false when the bytes are no
// well-formed message or `each` says stop. Fixed-width and group fields are skipped. The
// message is read by hand rather than by protobuf's generated parser, which logs a line for
// every `string` that is not UTF-8: a client could flood the log.
template <typename Each>
bool ForEachField(std::string_view bytes, Each each) {
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                                            static_cast<int>(bytes.size()));
  while (const uint32_t tag = in.ReadTag()) {
    Field f;
    f.number = WireFormatLite::GetTagFieldNumber(tag);
    switch (WireFormatLite::GetTagWireType(tag)) {
      case WireFormatLite::WIRETYPE_VARINT:
        if (!in.ReadVarint64(&f.varint)) return false;
        break;
      case WireFormatLite::WIRETYPE_LENGTH_DELIMITED: {
        uint32_t length = 0;
        if (!in.ReadVarint32(&length) || length > bytes.size()) return false;
        const int at = in.CurrentPosition();
        if (!in.Skip(static_cast<int>(length))) return false;
        f.delimited = true;
        f.bytes = bytes.substr(static_cast<size_t>(at), length);
        break;
      }
      default:
        if (!WireFormatLite::SkipField(&in, tag)) return false;
        continue;
    }
    if (!each(f)) return false;
  }
  return in.ConsumedEntireMessage() && in.CurrentPosition() == static_cast<int>(bytes.size());
}

// A BucketId (map<string, string> bucket = 1: entries of key = 1, value = 2).
Status ReadBucketId(std::string_view bytes, const std::string& at, RlqsBucketId& out) {
  Status status = Status::Ok();
  const bool ok = ForEachField(bytes, [&](const Field& f) {
    if (f.number != 1) return true;
    if (!f.delimited) return false;
    std::string_view key, value;
    if (!ForEachField(f.bytes, [&](const Field& e) {
          if (e.number == 1 && e.delimited) key = e.bytes;
          if (e.number == 2 && e.delimited) value = e.bytes;
          return e.number > 2 || e.delimited;
        })) {
      return false;
    }
    if (key.empty() || value.empty() || key.size() > kMaxRlqsBucketText ||
        value.size() > kMaxRlqsBucketText) {
      status =
          Invalid(Cat(at, ": BucketId keys and values are 1 to ", kMaxRlqsBucketText, " bytes"));
      return false;
    }
    if (!IsValidUtf8(key) || !IsValidUtf8(value)) {
      status = Invalid(Cat(at, ": a BucketId key or value is not valid UTF-8"));
      return false;
    }
    if (out.size() == kMaxRlqsBucketEntries) {
      status = Invalid(Cat(at, ": a BucketId of more than ", kMaxRlqsBucketEntries, " entries"));
      return false;
    }
    // A map's key given twice keeps its last value, as protobuf parses a map.
    for (auto& [k, v] : out) {
      if (k == key) {
        v = std::string(value);
        return true;
      }
    }
    out.emplace_back(std::string(key), std::string(value));
    return true;
  });
  if (!status.ok()) return status;
  if (!ok) return Invalid(Cat(at, ": not a BucketId"));
  if (out.empty()) return Invalid(Cat(at, ": no BucketId (bucket_id.bucket must hold an entry)"));
  std::sort(out.begin(), out.end());
  return Status::Ok();
}

// A BucketQuotaUsage: bucket_id = 1, time_elapsed = 2 (Duration: seconds = 1, nanos = 2),
// num_requests_allowed = 3, num_requests_denied = 4 (last_report = 5 is not read).
Status ReadUsage(std::string_view bytes, const std::string& at, RlqsUsage& out) {
  std::string_view bucket;
  bool has_bucket = false;
  int64_t seconds = 0, nanos = 0;
  Status status = Status::Ok();
  const bool ok = ForEachField(bytes, [&](const Field& f) {
    switch (f.number) {
      case 1:
        bucket = f.bytes;
        has_bucket = f.delimited;
        return f.delimited;
      case 2:
        return f.delimited && ForEachField(f.bytes, [&](const Field& d) {
                 if (d.number == 1) seconds = static_cast<int64_t>(d.varint);
                 if (d.number == 2) nanos = static_cast<int32_t>(d.varint);
                 return d.number > 2 || !d.delimited;
               });
      case 3:
        out.allowed = f.varint;
        return !f.delimited;
      case 4:
        out.denied = f.varint;
        return !f.delimited;
      default:
        return true;
    }
  });
  if (!ok) return Invalid(Cat(at, ": not a BucketQuotaUsage"));
  if (!has_bucket) return Invalid(Cat(at, ": no BucketId (bucket_id.bucket must hold an entry)"));
  if (Status s = ReadBucketId(bucket, at, out.bucket); !s.ok()) return s;
  if (seconds < 0 || nanos < 0 || nanos > 999'999'999 || seconds > 315'576'000'000) {
    return Invalid(Cat(at, ": time_elapsed out of range"));
  }
  out.time_elapsed = Micros(seconds * 1'000'000 + nanos / 1'000);
  return status;
}

}  // namespace

Result<RlqsReport> ParseRlqsReport(std::string_view bytes, size_t max_usages) {
  RlqsReport report;
  std::string_view domain;
  std::vector<std::string_view> elements;
  Status status = Status::Ok();
  const bool ok = ForEachField(bytes, [&](const Field& f) {
    if (f.number == 1) {
      domain = f.bytes;
      return f.delimited;
    }
    if (f.number != 2) return true;
    if (!f.delimited) return false;
    if (elements.size() == max_usages) {
      status = Status::ResourceExhausted(
          Cat("bucket_quota_usages: more than ", max_usages, " buckets in one report"));
      return false;
    }
    elements.push_back(f.bytes);
    return true;
  });
  if (!status.ok()) return status;
  if (!ok) return Invalid("not a RateLimitQuotaUsageReports message");
  if (!IsValidUtf8(domain)) return Invalid("domain: not valid UTF-8");
  report.domain = std::string(domain);
  for (size_t i = 0; i < elements.size(); ++i) {
    // The schema of each element, by its first field: a map entry's key (field 1) is a varint,
    // a BucketQuotaUsage's bucket_id (field 1) a message; both are written first. An element
    // that starts otherwise reads as a map entry, which then has no BucketId and is refused.
    std::string_view e = elements[i];
    const bool list =
        !e.empty() && static_cast<uint8_t>(e[0]) ==
                          WireFormatLite::MakeTag(1, WireFormatLite::WIRETYPE_LENGTH_DELIMITED);
    const RlqsSchema schema = list ? RlqsSchema::kList : RlqsSchema::kMap;
    if (report.schema != RlqsSchema::kNone && schema != report.schema) {
      return Invalid(
          "bucket_quota_usages: a message mixes the map and the list forms of the schema");
    }
    report.schema = schema;
    RlqsUsage usage;
    if (list) {
      if (Status s = ReadUsage(e, Cat("bucket_quota_usages[", i, ']'), usage); !s.ok()) return s;
    } else {
      // A map entry: key = 1 (the bucket's id hash), value = 2 (the BucketQuotaUsage).
      uint64_t key = 0;
      bool has_key = false;
      std::string_view value;
      bool has_value = false;
      if (!ForEachField(e, [&](const Field& f) {
            if (f.number == 1) {
              key = f.varint;
              has_key = true;
            }
            if (f.number == 2) {
              value = f.bytes;
              has_value = f.delimited;
            }
            return f.number == 1 ? !f.delimited : (f.number != 2 || f.delimited);
          })) {
        return Invalid(Cat("bucket_quota_usages[", i, "]: not a map entry"));
      }
      // No key: a list's element that lacks its bucket_id (field 1) reads this way.
      if (!has_key) {
        return Invalid(
            Cat("bucket_quota_usages[", i, "]: no BucketId (bucket_id.bucket must hold an entry)"));
      }
      const std::string at = Cat("bucket_quota_usages[", key, ']');
      if (!has_value)
        return Invalid(Cat(at, ": no BucketId (bucket_id.bucket must hold an entry)"));
      if (Status s = ReadUsage(value, at, usage); !s.ok()) return s;
    }
    report.usages.push_back(std::move(usage));
  }
  // One BucketId twice in one message says two things of one bucket: refused, not guessed.
  std::vector<const RlqsBucketId*> ids;
  ids.reserve(report.usages.size());
  for (const RlqsUsage& u : report.usages) ids.push_back(&u.bucket);
  std::sort(ids.begin(), ids.end(), [](const auto* a, const auto* b) { return *a < *b; });
  for (size_t i = 1; i < ids.size(); ++i) {
    if (*ids[i] == *ids[i - 1]) {
      return Invalid(Cat("bucket_quota_usages: BucketId ", RlqsBucketText(*ids[i]),
                         " is reported twice in one message"));
    }
  }
  return report;
}

std::string RlqsBucketText(const RlqsBucketId& bucket) {
  std::string out = "{";
  for (const auto& [key, value] : bucket) {
    out += Cat(out.size() > 1 ? ", " : "", key, '=', value);
  }
  return out + '}';
}

}  // namespace caudal::envoy
