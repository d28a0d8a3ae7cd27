// A ShouldRateLimit server for tests in other languages, on a manual clock they drive.
//
//   rls_test_server --config FILE [--descriptor-mode M] [--failure-mode M] [--store-down]
//
// Listens on a free port of 127.0.0.1 and prints "port N". Then reads commands on stdin, one per
// line: "advance DURATION" moves the clock (caudal duration syntax) and prints "ok". Exits when
// stdin closes.
#include <iostream>
#include <string>

#include "caudal/common/clock.h"
#include "config/ratelimit_config_yaml.h"
#include "envoy/grpc_server.h"
#include "rls_stack.h"
#include "support/fake_store.h"
#include "support/manual_clock.h"

namespace {

int Fail(const caudal::Status& s) {
  std::cerr << "rls_test_server: " << s.ToString() << "\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace caudal;
  using namespace caudal::envoy;
  std::string config_path;
  caudal::envoy::testing::RlsSetup setup;
  bool store_down = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const std::string value = i + 1 < argc ? argv[i + 1] : "";
    if (arg == "--config") {
      config_path = value;
      ++i;
    } else if (arg == "--descriptor-mode") {
      auto m = ParseDescriptorMode(value);
      if (!m.ok()) return Fail(m.status());
      setup.domains.mode = *m;
      ++i;
    } else if (arg == "--failure-mode") {  // allow, deny, deny_unavailable
      const bool unavailable = value == "deny_unavailable";
      auto m = ParseFailureMode(unavailable ? "deny" : value);
      if (!m.ok()) return Fail(m.status());
      setup.domains.on_failure = *m;
      if (unavailable) setup.rls.deny_as = DenyAs::kUnavailable;
      ++i;
    } else if (arg == "--store-down") {
      store_down = true;
    } else {
      return Fail(Status::InvalidArgument("unknown argument " + arg));
    }
  }
  auto config = LoadRateLimitConfig(config_path);
  if (!config.ok()) return Fail(config.status());
  ManualClock clock(std::chrono::seconds(1'699'920'000));
  caudal::testing::FakeStore store(clock);
  if (store_down) store.FailWith(Status::Unavailable("store stopped"));
  caudal::envoy::testing::RlsStack stack(
      store, clock, std::make_shared<RateLimitConfig>(std::move(*config)), setup);
  if (!stack.status().ok()) return Fail(stack.status());
  auto server = RlsGrpcServer::Start(stack.handler(),
                                     {.address = "127.0.0.1:0", .clock = &SystemClock::Instance()});
  if (!server.ok()) return Fail(server.status());
  std::cout << "port " << (*server)->port() << std::endl;
  std::string line;
  while (std::getline(std::cin, line)) {
    if (line.rfind("advance ", 0) == 0) {
      auto d = ParseDuration(line.substr(8));
      if (!d.ok()) return Fail(d.status());
      clock.Advance(*d);
      std::cout << "ok" << std::endl;
    }
  }
  (*server)->Shutdown();
  return 0;
}
