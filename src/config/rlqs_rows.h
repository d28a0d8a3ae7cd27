// The rows of `rlqs:` (RlqsConfig, caudal/config/config.h): Envoy's rate limit quota service,
// its domains and how each maps a bucket to a policy and an identity.
#pragma once

#include "caudal/config/config.h"
#include "config/field_table.h"
#include "config/yaml_reader.h"

namespace caudal::config_internal {

const Table<RlqsConfig>& RlqsTable();

// The checks that need the policies: each bucket rule names a policy of `config`, that policy
// can be divided among Envoys (its limits all take leases, it is enforced, it takes no
// concurrency slots), and the rule's identity maps exactly the policy's identity descriptors.
// `node` is the `rlqs` node, for the errors' positions.
Status CheckRlqs(const YamlReader& r, const YAML::Node& node, const Config& config);

}  // namespace caudal::config_internal
