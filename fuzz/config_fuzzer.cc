// Fuzzer for the YAML config parser (a config file, or the new file a SIGHUP reloads, may be
// anything).
//
// Any text either parses into a config that could serve (a store URL, a server address, a policy
// set whose every policy has a name, an identity and at least one limit) or is refused with
// kInvalidArgument and a message that begins with the file's name, as `caudal validate` prints it.
// Never a crash, an overflow or an exception.
#include <cstdint>
#include <string_view>

#include "caudal/config/config.h"
#include "fuzz_check.h"

namespace caudal {
namespace {

constexpr std::string_view kFile = "fuzz.yaml";

void Run(std::string_view text) {
  const Result<Config> c = ParseConfig(text, kFile);
  if (!c.ok()) {
    FUZZ_CHECK(c.status().code() == StatusCode::kInvalidArgument);
    FUZZ_CHECK(c.status().message().rfind(kFile, 0) == 0);
    FUZZ_CHECK(c.status().message().size() > kFile.size() + 2);
    return;
  }
  FUZZ_CHECK(c->path == kFile);
  FUZZ_CHECK(!c->store.url.empty() && c->store.timeout.count() > 0);
  FUZZ_CHECK(c->store.instances >= 1 && c->store.max_keys >= 1);
  FUZZ_CHECK(ParseHostPort(c->server.http).ok());
  FUZZ_CHECK(c->policies != nullptr);
  for (const PolicySet::Policy& p : c->policies->policies()) {
    FUZZ_CHECK(!p.spec.name.empty());
    FUZZ_CHECK(!p.spec.identity.empty());
    FUZZ_CHECK(!p.spec.limits.empty());
    for (const Limit& l : p.spec.limits) FUZZ_CHECK(p.spec.cost <= l.capacity());
  }
}

}  // namespace
}  // namespace caudal

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  caudal::Run(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
