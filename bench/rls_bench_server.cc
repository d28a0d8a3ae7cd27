// rls_bench_server: the RLS gRPC service on the system clock, for bench/rls-bench.
//
//   rls_bench_server --config FILE [--address 127.0.0.1:0]
//
// Serves on the MemoryStore, prints "port N", and exits when stdin closes.
#include <iostream>
#include <string>

#include "caudal/envoy/grpc_server.h"
#include "caudal/memory_store.h"

int main(int argc, char** argv) {
  std::string config_path, address = "127.0.0.1:0";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--config") {
      config_path = argv[i + 1];
    } else if (flag == "--address") {
      address = argv[i + 1];
    } else {
      std::cerr << "rls_bench_server: unknown flag " << flag << "\n";
      return 2;
    }
  }
  auto config = caudal::envoy::RateLimitConfig::LoadPath(config_path);
  if (!config.ok()) {
    std::cerr << "rls_bench_server: " << config.status().ToString() << "\n";
    return 2;
  }
  caudal::MemoryStore store(caudal::SystemClock::Instance());
  caudal::envoy::RlsHandler handler(
      store, caudal::SystemClock::Instance(),
      std::make_shared<caudal::envoy::RateLimitConfig>(std::move(*config)));
  auto server = caudal::envoy::RlsGrpcServer::Start(handler, {.address = address});
  if (!server.ok()) {
    std::cerr << "rls_bench_server: " << server.status().ToString() << "\n";
    return 2;
  }
  std::cout << "port " << (*server)->port() << std::endl;
  std::string line;
  while (std::getline(std::cin, line)) {
  }
  (*server)->Shutdown();
  return 0;
}
