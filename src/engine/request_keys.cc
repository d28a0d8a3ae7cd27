#include "engine/request_keys.h"

#include "caudal/ip.h"
#include "caudal/store.h"

namespace caudal {

Status ValidateDescriptors(const Descriptors& descriptors) {
  if (descriptors.empty()) {
    return Status::InvalidArgument("descriptors: at least one descriptor is required");
  }
  if (descriptors.size() > kMaxDescriptors) {
    return Status::InvalidArgument("descriptors: at most " + std::to_string(kMaxDescriptors) +
                                   " descriptors (got " + std::to_string(descriptors.size()) + ")");
  }
  for (size_t i = 0; i < descriptors.size(); ++i) {
    const Descriptor& d = descriptors[i];
    if (!IsValidName(d.name)) {
      return Status::InvalidArgument("descriptors: \"" + d.name.substr(0, kMaxNameLength) +
                                     "\" is not a descriptor name (expected 1 to 64 characters "
                                     "of [A-Za-z0-9_.-])");
    }
    // Built only for an error: this runs for every descriptor of every request.
    const auto field = [&d] { return "descriptors." + d.name; };
    if (d.value.empty() || d.value.size() > kMaxDescriptorValueLength) {
      return Status::InvalidArgument(field() + ": expected a string of 1 to " +
                                     std::to_string(kMaxDescriptorValueLength) + " bytes");
    }
    for (size_t j = 0; j < i; ++j) {
      if (descriptors[j].name == d.name) {
        return Status::InvalidArgument(field() + ": given twice");
      }
    }
    if (d.name == "ip") {  // well-known: an address whether or not a policy keys by it
      if (auto ip = IpAddress::Parse(d.value); !ip.ok()) {
        return Status::InvalidArgument(field() + ": " + ip.status().message());
      }
    }
  }
  return Status::Ok();
}

Result<std::optional<std::string>> EncodeIdentity(const PolicySet::Policy& policy,
                                                  const Descriptors& descriptors) {
  std::string out;
  for (const std::string& field : policy.spec.identity) {
    const Descriptor* found = nullptr;
    for (const Descriptor& d : descriptors) {
      if (d.name == field) {
        found = &d;
        break;
      }
    }
    if (found == nullptr) return std::optional<std::string>();
    std::string masked;  // only for ip
    std::string_view value = found->value;
    if (field == "ip") {
      auto ip = IpAddress::Parse(found->value);
      if (!ip.ok()) return Status::InvalidArgument("descriptors.ip: " + ip.status().message());
      const int prefix = ip->family == IpFamily::kV4 ? policy.spec.ip_prefix.v4
                                                     : policy.spec.ip_prefix.v6;
      masked = ip->Masked(prefix).ToString() + "/" + std::to_string(prefix);
      value = masked;
    }
    out += std::to_string(value.size());
    out += ':';
    out += value;
  }
  return std::optional<std::string>(std::move(out));
}

Result<std::vector<ApplicableItem>> ResolveApplicable(const PolicySet& set,
                                                      const CheckRequest& request) {
  if (Status s = ValidateDescriptors(request.descriptors); !s.ok()) return s;
  if (request.cost.has_value() && (*request.cost < 1 || *request.cost > kMaxCost)) {
    return Status::InvalidArgument("cost: expected a positive integer up to 2^40 (got " +
                                   std::to_string(*request.cost) + ")");
  }
  std::vector<ApplicableItem> items;
  const auto policies = set.policies();
  for (size_t i = 0; i < policies.size(); ++i) {
    const PolicySet::Policy& p = policies[i];
    auto identity = EncodeIdentity(p, request.descriptors);
    if (!identity.ok()) return identity.status();
    if (!identity->has_value()) continue;
    ApplicableItem it;
    it.index = i;
    it.policy = &p;
    it.cost = request.cost.value_or(p.spec.cost);
    for (size_t k = 0; k < p.spec.limits.size(); ++k) {
      const Limit& l = p.spec.limits[k];
      if (it.cost > l.capacity()) {
        return Status::InvalidArgument("cost: " + std::to_string(it.cost) +
                                       " exceeds the capacity " + std::to_string(l.capacity()) +
                                       " of policy \"" + p.spec.name + "\" (limits[" +
                                       std::to_string(k) + "]), so it could never pass");
      }
      std::string key = p.key_prefixes[k] + **identity;
      if (key.size() > kMaxKeyLength) {
        return Status::InvalidArgument("descriptors: the identity of policy \"" + p.spec.name +
                                       "\" is too long for a key (" + std::to_string(key.size()) +
                                       " bytes, at most " + std::to_string(kMaxKeyLength) + ")");
      }
      it.keys.push_back(std::move(key));
    }
    it.identity = std::move(**identity);
    it.result.policy = &p;
    it.result.cost = it.cost;
    items.push_back(std::move(it));
  }
  return items;
}

}  // namespace caudal
