#include "engine/store_key.h"

#include "common/cat.h"

namespace caudal::store_key {
namespace {

constexpr std::string_view kPolicyHead = "caudal:";
// Longer than any key (kMaxKeyLength): a length past it is malformed, and cannot overflow.
constexpr size_t kMaxFieldLength = size_t{1} << 20;

// A short, stable spelling of a limit: its algorithm, capacity and reduced rate (a calendar
// window's unit and time zone).
std::string Fingerprint(const Limit& l) {
  std::string_view a;
  switch (l.algorithm()) {
    case Algorithm::kFixedWindow:
      a = "fw";
      break;
    case Algorithm::kSlidingWindowLog:
      a = "swl";
      break;
    case Algorithm::kSlidingWindowCounter:
      a = "swc";
      break;
    case Algorithm::kTokenBucket:
      a = "tb";
      break;
    case Algorithm::kGcra:
      a = "gcra";
      break;
    case Algorithm::kConcurrency:
      a = "cc";
      break;
  }
  // A calendar window's count lives under its calendar: another unit or zone is another key;
  // and a count of another dimension than requests, under its dimension.
  std::string print = l.calendar()
                          ? Cat(a, l.capacity(), ',', CalendarUnitName(l.calendar()->unit()), '@',
                                l.calendar()->time_zone())
                          : Cat(a, l.capacity(), ',', l.refill_count(), '/', l.refill_period_us());
  if (!l.counts_requests()) print += Cat(',', l.DimensionText());
  return print;
}

}  // namespace

void AppendField(std::string& out, std::string_view value) {
  out += std::to_string(value.size());
  out += ':';
  out += value;
}

std::string PolicyPrefix(std::string_view policy, size_t index, const Limit& limit, bool grouped) {
  if (grouped) return Cat('#', index, ':', Fingerprint(limit), '#', kPolicyHead, policy, ':');
  return Cat(kPolicyHead, policy, ':', index, ':', Fingerprint(limit), ':');
}

std::string Policy(std::string_view prefix, std::string_view identity) {
  std::string key;
  key.reserve(prefix.size() + identity.size() + 2);  // one allocation, on every decision
  key.append(prefix).append(1, '{').append(identity).append(1, '}');
  return key;
}

std::optional<PolicyParts> ReadPolicy(std::string_view key) {
  size_t head = 0;  // where "caudal:" starts: after a grouped key's member
  if (key.starts_with('#')) {
    const size_t end = key.find('#', 1);
    if (end == std::string_view::npos) return std::nullopt;
    head = end + 1;
  }
  const size_t open = key.find('{', head);
  if (key.substr(head).substr(0, kPolicyHead.size()) != kPolicyHead ||
      open == std::string_view::npos || key.back() != '}') {
    return std::nullopt;
  }
  const size_t name_start = head + kPolicyHead.size();
  const size_t name_end = key.find(':', name_start);
  if (name_end == std::string_view::npos || name_end > open) return std::nullopt;
  return PolicyParts{.policy = key.substr(name_start, name_end - name_start),
                     .prefix = key.substr(0, open),
                     .identity = key.substr(open + 1, key.size() - open - 2)};
}

std::string Domain(const Limit& limit, std::string_view domain,
                   std::span<const std::string_view> fields) {
  std::string key = Cat("rls|", limit.ToString(), "|{");
  AppendField(key, domain);
  for (size_t i = 0; i < fields.size(); ++i) {
    AppendField(key, fields[i]);
    if (i == 1) key += '}';  // the first entry's key and value end the hash tag
  }
  return key;
}

std::string Local(const Limit& local, std::string_view key) {
  return Cat("local|", local.ToString(), '|', key);
}

std::vector<std::string_view> ReadFields(std::string_view key) {
  std::vector<std::string_view> fields;
  size_t pos = key.find('{');
  if (pos == std::string_view::npos) return fields;
  ++pos;
  while (pos < key.size()) {
    if (key[pos] == '}') ++pos;  // the hash tag's end, between two fields
    size_t n = 0;
    size_t i = pos;
    while (i < key.size() && key[i] >= '0' && key[i] <= '9' && n <= kMaxFieldLength) {
      n = n * 10 + static_cast<size_t>(key[i++] - '0');
    }
    if (i == pos || i >= key.size() || key[i] != ':' || key.size() - (i + 1) < n) break;
    fields.push_back(key.substr(i + 1, n));
    pos = i + 1 + n;
  }
  return fields;
}

std::string_view HashTag(std::string_view key) {
  const size_t open = key.find('{');
  if (open == std::string_view::npos) return {};
  const size_t close = key.find('}', open);
  if (close == std::string_view::npos) return {};
  return key.substr(open, close - open + 1);
}

}  // namespace caudal::store_key
