// Fuzzer for envoyproxy/ratelimit's YAML config format (RateLimitConfig), as caudal's RLS reads
// it, and for descriptor matching against what it loaded.
//
// The input is the file; lines of the form "#match <domain> <key>=<value>..." (YAML comments, so
// the parser sees them as nothing) are also requests to match. Every file either loads or is
// refused with kInvalidArgument and a message that begins with its name. Whatever a request
// matches is a coherent rule: unlimited or blocking rules carry no limit, every other one a limit
// of requests_per_unit per unit; MatchDetailed agrees with Match, its stats key starts with the
// domain, and it counts each entry by the request's value or by a wildcard pattern. Never a
// crash, an overflow or an exception.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "config/ratelimit_config_yaml.h"
#include "fuzz_check.h"

namespace caudal::envoy {
namespace {

constexpr std::string_view kFile = "fuzz.yaml";
constexpr std::string_view kMatch = "#match ";

std::vector<std::string_view> Words(std::string_view line) {
  std::vector<std::string_view> words;
  while (!line.empty()) {
    const size_t space = line.find(' ');
    if (space != 0) words.push_back(line.substr(0, space));
    if (space == std::string_view::npos) break;
    line.remove_prefix(space + 1);
  }
  return words;
}

void CheckRule(const RateLimitRule& rule) {
  if (rule.unlimited || rule.blocks_all()) {
    FUZZ_CHECK(!rule.limit.has_value());
    return;
  }
  FUZZ_CHECK(rule.limit.has_value());
  FUZZ_CHECK(rule.limit->refill_count() > 0 && rule.limit->capacity() > 0);
  FUZZ_CHECK(rule.limit->rate().count == rule.requests_per_unit);
  FUZZ_CHECK(rule.limit->rate().period == UnitDuration(rule.unit));
}

void Run(std::string_view text) {
  const Result<RateLimitConfig> config = ParseRateLimitConfigText(text, std::string(kFile));
  if (!config.ok()) {
    FUZZ_CHECK(config.status().code() == StatusCode::kInvalidArgument);
    FUZZ_CHECK(config.status().message().rfind(kFile, 0) == 0);
    return;
  }
  std::string_view rest = text;
  while (!rest.empty()) {
    const size_t eol = rest.find('\n');
    const std::string_view line = rest.substr(0, eol);
    rest = eol == std::string_view::npos ? std::string_view() : rest.substr(eol + 1);
    if (line.rfind(kMatch, 0) != 0) continue;
    const std::vector<std::string_view> words = Words(line.substr(kMatch.size()));
    if (words.empty()) continue;
    std::vector<DescriptorEntry> entries;
    for (size_t i = 1; i < words.size(); ++i) {
      const size_t eq = words[i].find('=');
      if (eq == std::string_view::npos) continue;
      entries.push_back({.key = words[i].substr(0, eq), .value = words[i].substr(eq + 1)});
    }
    const RateLimitRule* rule = config->Match(words[0], entries);
    const RuleMatch detailed = config->MatchDetailed(words[0], entries);
    FUZZ_CHECK(detailed.rule == rule);
    if (rule == nullptr) continue;
    FUZZ_CHECK(config->HasDomain(words[0]) && !entries.empty());
    CheckRule(*rule);
    FUZZ_CHECK(detailed.stats_key.rfind(words[0], 0) == 0);
    FUZZ_CHECK(detailed.counter_values.size() == entries.size());
    for (size_t i = 0; i < entries.size(); ++i) {
      const std::string_view v = detailed.counter_values[i];
      FUZZ_CHECK(v == entries[i].value || v.find('*') != std::string_view::npos);
    }
  }
}

}  // namespace
}  // namespace caudal::envoy

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  caudal::envoy::Run(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
