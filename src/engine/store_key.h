// Store keys: the one place that spells them, builds them and reads them back.
//
// A key names its limit, so a changed limit gets fresh state, and puts one identity's (or one
// Envoy client's) limits in one Redis Cluster slot through a hash tag, "{...}". Every value in
// a key is length-prefixed ("2:k1"), so no two identities or descriptors share a key:
//   policy  caudal:<policy>:<limit index>:<fingerprint>:{<identity>}
//           (a token bucket of 100 per minute: tb100,1/600000)
//   grouped #<limit index>:<fingerprint>#caudal:<policy>:{<identity>}
//           a member of the group of the identity's limits (a grouped key, caudal/store/store.h),
//           for the compact limits of a limit set that counts more than one dimension
//   Envoy   rls|<Limit::ToString()>|{<domain><first entry's key and value>}<the other entries>
//   local   local|<the local limit's ToString()>|<the shared key>, in the local fallback store
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "caudal/algorithms/limit.h"

namespace caudal::store_key {

// Appends `value` length-prefixed: "<size>:<value>".
void AppendField(std::string& out, std::string_view value);

// Everything of a policy's key but its identity: "caudal:<policy>:<index>:<fingerprint>:", or
// with `grouped` "#<index>:<fingerprint>#caudal:<policy>:".
std::string PolicyPrefix(std::string_view policy, size_t index, const Limit& limit,
                         bool grouped = false);
// A policy key: `prefix` (PolicyPrefix) and the encoded identity as the hash tag.
std::string Policy(std::string_view prefix, std::string_view identity);

// A policy key read back: views into the key.
struct PolicyParts {
  std::string_view policy;    // its name
  std::string_view prefix;    // PolicyPrefix: names the policy, the limit's index and the limit
  std::string_view identity;  // as encoded, without its braces
};
// Nullopt when `key` is no policy key.
std::optional<PolicyParts> ReadPolicy(std::string_view key);

// An Envoy descriptor's key under `limit`: `fields` are its entries' keys and what each counts
// by, in order (key, value, key, value, ...; at least one entry).
std::string Domain(const Limit& limit, std::string_view domain,
                   std::span<const std::string_view> fields);

// The local fallback store's key for the shared `key`, under the local share of its limit.
std::string Local(const Limit& local, std::string_view key);

// The length-prefixed values a policy or Envoy key holds from its hash tag on: a policy's
// identity values; an Envoy key's domain, then each entry's key and value. They end at the first
// malformed field.
std::vector<std::string_view> ReadFields(std::string_view key);

// The key's hash tag, braces included ("{...}"), or "" when it has none.
std::string_view HashTag(std::string_view key);

}  // namespace caudal::store_key
