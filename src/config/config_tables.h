// The tables of caudal's config file (see field_table.h): one row per field, read by
// ParseConfig and printed as docs/configuration.md's reference (config_reference.h).
#pragma once

#include <vector>

#include "caudal/config/config.h"
#include "caudal/engine/policy.h"
#include "config/field_table.h"
#include "config/field_values.h"

namespace caudal::config_internal {

// The whole file as its tables read it: the Config, and the policies and descriptor_mode that
// become its PolicySet once every field is read.
struct Document {
  Config config;
  DescriptorMode descriptor_mode = PolicySetOptions{}.mode;
  std::vector<PolicySpec> policies;
};

inline constexpr FailureMode kFailureModes[] = {FailureMode::kAllow, FailureMode::kDeny,
                                                FailureMode::kLocal};

// The top level; every other table is reached from it.
const Table<Document>& DocumentTable();

// policies[] (with its ip_prefix and limits[]), read before the PolicySet validates them.
const Table<PolicySpec>& PolicyTable();
// policies[].ip_prefix and server.client_prefix.
const Table<IpPrefix>& IpPrefixTable();

// The node of `policy` that a PolicyError's field ("identity[1]", "ip_prefix.v6") points at.
YAML::Node NodeForField(const YAML::Node& policy, const std::string& field);

}  // namespace caudal::config_internal
