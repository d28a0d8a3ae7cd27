// A blocking gRPC client for the RLS tests: one channel to a server on 127.0.0.1.
#pragma once

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <string>

#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"

namespace caudal::envoy::testing {

class RlsClient {
 public:
  explicit RlsClient(int port)
      : stub_(::envoy::service::ratelimit::v3::RateLimitService::NewStub(
            grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port),
                                      grpc::InsecureChannelCredentials(), Arguments()))) {}

  grpc::Status Call(const ::envoy::service::ratelimit::v3::RateLimitRequest& request,
                    ::envoy::service::ratelimit::v3::RateLimitResponse* response) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    return stub_->ShouldRateLimit(&context, request, response);
  }

  ::envoy::service::ratelimit::v3::RateLimitService::Stub& stub() { return *stub_; }

 private:
  static grpc::ChannelArguments Arguments() {
    grpc::ChannelArguments args;
    args.SetMaxSendMessageSize(8 << 20);  // so the server's own limit is what refuses
    return args;
  }
  std::unique_ptr<::envoy::service::ratelimit::v3::RateLimitService::Stub> stub_;
};

}  // namespace caudal::envoy::testing
