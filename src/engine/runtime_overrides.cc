#include "caudal/engine/runtime_overrides.h"

#include <charconv>

#include "common/cat.h"

namespace caudal {
namespace {

// The body's lines: "caudal-override 1", then "kind", "policy", "set_by", "key" (the identity
// key), one "id" per identity value (name TAB value) and one "limit" per limit (algorithm,
// capacity, rate count, rate period in µs, and its dimension when not requests), then a "weight"
// when it has one. Values hold no control
// characters (validated), so TAB and LF cannot occur in them; set_by is cleaned of them.
constexpr std::string_view kMagic = "caudal-override 1";

std::string Clean(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  }
  return out;
}

bool ParseInt(std::string_view s, int64_t& out) {
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size();
}

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  while (true) {
    const size_t at = s.find(sep);
    out.push_back(s.substr(0, at));
    if (at == std::string_view::npos) return out;
    s.remove_prefix(at + 1);
  }
}

Result<Limit> DecodeLimit(std::string_view text) {
  const std::vector<std::string_view> f = Split(text, ' ');
  int64_t capacity = 0, count = 0, period = 0;
  if ((f.size() != 4 && f.size() != 5) || !ParseInt(f[1], capacity) || !ParseInt(f[2], count) ||
      !ParseInt(f[3], period)) {
    return Status::InvalidArgument(Cat("override record: bad limit ", Quoted(text)));
  }
  auto algorithm = ParseAlgorithm(f[0]);
  if (!algorithm.ok()) return algorithm.status();
  LimitSpec spec{.algorithm = *algorithm, .capacity = capacity, .rate = {count, Micros(period)}};
  if (f.size() == 5) {  // its dimension, when not requests: "input_tokens+output_tokens"
    for (std::string_view name : Split(f[4], '+')) spec.dimension.emplace_back(name);
  }
  return Limit::Create(spec);
}

}  // namespace

std::string_view OverrideKindName(OverrideKind k) {
  return k == OverrideKind::kPolicy ? "policy" : "envoy_rule";
}

std::string OverrideId(const RuntimeOverride& o) {
  return Cat(o.kind == OverrideKind::kPolicy ? 'p' : 'r', '|', o.policy, '|', o.identity_key);
}

std::string EncodeOverride(const RuntimeOverride& o) {
  std::string out = Cat(kMagic, "\nkind ", OverrideKindName(o.kind), "\npolicy ", o.policy,
                        "\nset_by ", Clean(o.set_by), "\nkey ", o.identity_key);
  for (const auto& [name, value] : o.identity) out += Cat("\nid ", name, '\t', value);
  for (const Limit& l : o.limits) {
    out += Cat("\nlimit ", AlgorithmName(l.algorithm()), ' ', l.capacity(), ' ', l.rate().count,
               ' ', l.rate().period.count());
    if (!l.counts_requests()) out += Cat(' ', l.DimensionText());
  }
  if (o.weight) out += Cat("\nweight ", *o.weight);
  return out;
}

Result<RuntimeOverride> DecodeOverride(std::string_view body, std::optional<Micros> expires_at) {
  const std::vector<std::string_view> lines = Split(body, '\n');
  if (lines.empty() || lines[0] != kMagic) {
    return Status::InvalidArgument("override record: not written by this version of caudal");
  }
  RuntimeOverride o;
  o.expires_at = expires_at;
  bool kind = false;
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::string_view line = lines[i];
    const size_t sp = line.find(' ');
    const std::string_view tag = line.substr(0, sp);
    const std::string_view rest = sp == std::string_view::npos ? "" : line.substr(sp + 1);
    if (tag == "kind") {
      kind = rest == "policy" || rest == "envoy_rule";
      o.kind = rest == "policy" ? OverrideKind::kPolicy : OverrideKind::kEnvoyRule;
    } else if (tag == "policy") {
      o.policy = rest;
    } else if (tag == "set_by") {
      o.set_by = rest;
    } else if (tag == "key") {
      o.identity_key = rest;
    } else if (tag == "id") {
      const size_t tab = rest.find('\t');
      if (tab == std::string_view::npos) return Status::InvalidArgument("override record: bad id");
      o.identity.emplace_back(rest.substr(0, tab), rest.substr(tab + 1));
    } else if (tag == "limit") {
      auto limit = DecodeLimit(rest);
      if (!limit.ok()) return limit.status();
      o.limits.push_back(*limit);
    } else if (tag == "weight") {
      int64_t weight = 0;
      if (!ParseInt(rest, weight) || weight < 1 || weight > kMaxShareWeight) {
        return Status::InvalidArgument(Cat("override record: bad weight ", Quoted(rest)));
      }
      o.weight = weight;
    }  // other tags: written by a later version, ignored
  }
  if (!kind || o.policy.empty() || o.identity_key.empty() || (o.limits.empty() && !o.weight) ||
      o.limits.size() > kMaxLimitsPerPolicy) {
    return Status::InvalidArgument("override record: incomplete");
  }
  return o;
}

std::shared_ptr<const RuntimeOverrides> RuntimeOverrides::Create(
    std::vector<RuntimeOverride> overrides, int64_t instances) {
  auto out = std::make_shared<RuntimeOverrides>();
  out->entries_.reserve(overrides.size());
  for (RuntimeOverride& o : overrides) out->Add(std::move(o), instances);
  return out;
}

std::shared_ptr<const RuntimeOverrides> RuntimeOverrides::Refit(const Problem& problem,
                                                                int64_t instances) const {
  auto out = std::make_shared<RuntimeOverrides>();
  out->entries_.reserve(entries_.size() + not_applied_.size());
  const auto fit = [&](const RuntimeOverride& o) {
    if (auto reason = problem(o)) {
      out->not_applied_.push_back({.spec = o, .reason = std::move(*reason)});
    } else {
      out->Add(o, instances);
    }
  };
  for (const Entry& e : entries_) fit(e.spec);
  for (const NotApplied& n : not_applied_) fit(n.spec);
  return out;
}

void RuntimeOverrides::Add(RuntimeOverride o, int64_t instances) {
  auto& by_identity = index_[static_cast<size_t>(o.kind)][o.policy];
  if (by_identity.contains(o.identity_key)) return;
  by_identity.emplace(o.identity_key, entries_.size());
  LimitSet set = MakeLimitSet(o.policy, o.limits, instances);
  entries_.push_back({.spec = std::move(o), .set = std::move(set)});
}

const RuntimeOverrides::Entry* RuntimeOverrides::Find(OverrideKind kind, std::string_view policy,
                                                      std::string_view identity_key) const {
  const auto& by_policy = index_[static_cast<size_t>(kind)];
  const auto p = by_policy.find(policy);
  if (p == by_policy.end()) return nullptr;
  const auto i = p->second.find(identity_key);
  return i == p->second.end() ? nullptr : &entries_[i->second];
}

}  // namespace caudal
