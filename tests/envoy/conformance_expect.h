// The pure half of the RLS conformance runner: a case file's shape, the requests it describes
// and the comparison of a reply with what it expects. The format: conformance/README.md.
#pragma once

#include <grpcpp/grpcpp.h>
#include <yaml-cpp/yaml.h>

#include <initializer_list>
#include <string>
#include <string_view>

#include "envoy/rls_handler.h"

namespace caudal::envoy::conformance {

// Fails the test for each key of `n` that is not in `allowed`: a case file must never say
// something the runner would silently skip.
void ExpectKeys(const YAML::Node& n, std::string_view where,
                std::initializer_list<std::string_view> allowed);

// Checks every key of a case file, at every level.
void ValidateFile(const YAML::Node& file);

// The request a case's `request` describes ("key=value" entries).
RateLimitRequest ToRequest(const YAML::Node& n);

// Compares a reply with an `expect` map. `repeated`: the request is sent several times, so
// counts that change between sends (remaining) must not be given.
void CheckReply(const YAML::Node& expect, const grpc::Status& status,
                const RateLimitResponse& response, bool repeated);

// Compares a `stats` map (the reference's stat names without their prefix,
// "domain.key_value.over_limit": count) with caudal's /metrics text, where each is the series
// caudal_rule_hits_total{api="rls",policy="domain.key_value",stat="over_limit"}.
void CheckStats(const YAML::Node& stats, std::string_view prometheus_text);

}  // namespace caudal::envoy::conformance
