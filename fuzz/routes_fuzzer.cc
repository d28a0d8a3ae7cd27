// Fuzzer for what the HTTP front end does with a parsed request (routes::Dispatch over an engine
// on the memory store): the caller check (the Authorization header, certificate identities),
// forward-auth's identity headers, the query strings of /v1/auth, /v1/top-refused and the status
// page's charts, and the /v1/check body.
//
// The first byte picks the configuration (a caller token or an identity allow-list, protected
// metrics, the status page on or off); the rest is split at '\n' into the method, the target,
// the Authorization value, an X-API-Key value, a certificate identity and the body. Checked:
// exactly one reply, inline, with a status from 200 to 599 and a body of valid JSON when JSON is
// its type; a decision endpoint, or protected data, answered with anything but 401 or 403 only
// for a caller with the token or an allowed identity; and the configured token never in a reply
// unless the input spelled it. Never a crash, an overflow or an exception.
#include <boost/json.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "caudal/store/memory_store.h"
#include "fuzz_check.h"
#include "server/routes.h"
#include "server/status_page.h"
#include "support/manual_clock.h"

namespace caudal {
namespace {

constexpr std::string_view kToken = "fuzz-caller-token-4f1c";
constexpr std::string_view kAllowed = "spiffe://caudal/envoy";

class Capture final : public routes::Responder {
 public:
  void Reply(http_api::Reply reply) override {
    ++calls;
    last = std::move(reply);
  }
  int calls = 0;
  http_api::Reply last;
};

struct World {
  World()
      : store(clock, {.max_keys = 4096, .shards = 4}),
        refusals(clock, nullptr, {.log = false}),
        engine(store, clock, {.metrics = &metrics, .refusals = &refusals}),
        health(store, clock, {}),
        page({.engine = engine,
              .metrics = metrics,
              .health = health,
              .refusals = &refusals,
              .store_url = "redis://user:store-password@10.0.0.1:6379"},
             true) {
    PolicySpec spec;
    spec.name = "per-key";
    spec.identity = {"api_key"};
    spec.limits = {*Limit::Create(
        LimitSpec::Bucket(Algorithm::kTokenBucket, 3, {3, std::chrono::minutes(1)}))};
    FUZZ_CHECK(engine.SetPolicies(*PolicySet::Create({spec}, {})).ok());
    health.ProbeOnce();
  }
  ManualClock clock;
  MemoryStore store;
  Metrics metrics;
  Refusals refusals;
  Engine engine;
  StoreHealth health;
  StatusPage page;
};

// Splits `data` at '\n' into at most `n` pieces; the last one keeps the rest.
std::vector<std::string_view> Split(std::string_view data, size_t n) {
  std::vector<std::string_view> out;
  while (out.size() + 1 < n) {
    const size_t nl = data.find('\n');
    if (nl == std::string_view::npos) break;
    out.push_back(data.substr(0, nl));
    data.remove_prefix(nl + 1);
  }
  out.push_back(data);
  out.resize(n);
  return out;
}

bool Protected(std::string_view path, bool protect_metrics) {
  if (path == "/v1/check" || path == "/v1/auth") return true;
  return protect_metrics && (path == "/metrics" || path == "/v1/top-refused" ||
                             path == "/v1/status" || path == "/v1/status/chart");
}

}  // namespace
}  // namespace caudal

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace caudal;
  if (size < 1 || size > 8192) return 0;
  static World* world = new World();
  const uint8_t flags = data[0];
  const std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  const std::vector<std::string_view> p = Split(input, 6);
  const std::string_view method = p[0], target = p[1], authorization = p[2], api_key = p[3],
                         identity = p[4], body = p[5];

  ForwardAuthOptions auth{
      .trusted_proxies = {}, .descriptor_headers = {{"api_key", "X-API-Key"}}, .caller = {}};
  if (flags & 1) auth.caller.token = std::string(kToken);
  if (flags & 2) auth.caller.allowed = {std::string(kAllowed)};
  auth.caller.protect_metrics = (flags & 4) != 0;
  world->page.SetEnabled((flags & 8) != 0);
  std::vector<std::string> identities;
  if (flags & 16) identities.emplace_back(identity);

  const routes::Context ctx{.engine = world->engine,
                            .metrics = world->metrics,
                            .health = world->health,
                            .refusals = &world->refusals,
                            .status = &world->page,
                            .auth = auth};
  const auto header = [&](std::string_view name) -> std::string_view {
    if (name == "Authorization") return authorization;
    if (name == "X-API-Key") return api_key;
    return {};
  };
  const auto count = [&](std::string_view name) -> size_t {
    return name == "Authorization" || name == "X-API-Key" ? 1 : 0;
  };
  const routes::Request request{.method = method,
                                .target = target,
                                .body = body,
                                .peer = *IpAddress::Parse("192.0.2.1"),
                                .header = header,
                                .header_count = count,
                                .forwarded_for = "",
                                .identities = identities};
  Capture capture;
  routes::Dispatch(ctx, request, capture);
  world->clock.Advance(std::chrono::milliseconds(7));

  FUZZ_CHECK(capture.calls == 1);  // the memory store decides inline
  const http_api::Reply& reply = capture.last;
  FUZZ_CHECK(reply.status >= 200 && reply.status <= 599);
  if (reply.content_type == "application/json") {
    boost::system::error_code ec;
    (void)boost::json::parse(reply.body, ec);
    FUZZ_CHECK(!ec);
  }
  std::string_view path = target.substr(0, target.find('?'));
  const bool has_token = authorization.find(kToken) != std::string_view::npos;
  const bool has_identity = (flags & 16) && identity == kAllowed;
  const bool credentials = ((flags & 1) && has_token) || ((flags & 2) && has_identity);
  if (auth.caller.enabled() && Protected(path, auth.caller.protect_metrics) && !credentials) {
    FUZZ_CHECK(reply.status == 401 || reply.status == 403);
  }
  if (input.find(kToken) == std::string_view::npos) {
    FUZZ_CHECK(reply.body.find(kToken) == std::string::npos);
    FUZZ_CHECK(reply.headers.lines().find(kToken) == std::string_view::npos);
  }
  FUZZ_CHECK(reply.body.find("store-password") == std::string::npos ||
             input.find("store-password") != std::string_view::npos);
  return 0;
}
