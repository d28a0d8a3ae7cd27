// rls_bare_server: the gRPC framework's ceiling for ShouldRateLimit on this machine. A callback
// server, built like caudal's (grpc::ServerBuilder, the callback API, default threading), whose
// handler answers OK at once: no parsing of descriptors, no engine, no store. bench/compare
// measures caudal's RLS against it with the same load client (rls_load).
//
//   rls_bare_server [--port 0]      prints "listening on 127.0.0.1:PORT", serves until stdin closes
#include <absl/synchronization/mutex.h>
#include <grpcpp/grpcpp.h>

#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"

namespace {

using ::envoy::service::ratelimit::v3::RateLimitRequest;
using ::envoy::service::ratelimit::v3::RateLimitResponse;

class BareService final
    : public ::envoy::service::ratelimit::v3::RateLimitService::CallbackService {
 public:
  grpc::ServerUnaryReactor* ShouldRateLimit(grpc::CallbackServerContext* context,
                                            const RateLimitRequest* /*request*/,
                                            RateLimitResponse* response) override {
    response->set_overall_code(RateLimitResponse::OK);
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
};

}  // namespace

int main(int argc, char** argv) {
  int port = 0;
  if (argc == 3 && std::string(argv[1]) == "--port") {
    port = std::atoi(argv[2]);
  } else if (argc != 1) {
    std::fprintf(stderr, "usage: rls_bare_server [--port N]\n");
    return 2;
  }
  // As caudal's server sets it (src/envoy/grpc_server.cc): the same framework, configured alike.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  BareService service;
  grpc::ServerBuilder builder;
  int bound = 0;
  builder.AddListeningPort("127.0.0.1:" + std::to_string(port), grpc::InsecureServerCredentials(),
                           &bound);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || bound == 0) {
    std::fprintf(stderr, "rls_bare_server: cannot listen\n");
    return 1;
  }
  std::printf("listening on 127.0.0.1:%d\n", bound);
  std::fflush(stdout);
  std::string line;
  while (std::getline(std::cin, line)) {
  }
  server->Shutdown();
  return 0;
}
