// HealthService: grpc.health.v1.Health (Check, List, Watch) for the RLS gRPC server.
//
// Two services are known: "" (the server as a whole) and
// "envoy.service.ratelimit.v3.RateLimitService"; both are SERVING while `ready` returns true
// (always when it is unset) and NOT_SERVING otherwise, and NOT_SERVING for good once Shutdown
// began. Check on an unknown service fails with NOT_FOUND; Watch on one answers SERVICE_UNKNOWN
// and stays open, as gRPC's health-checking protocol says.
//
// Watch streams learn of a change from a poller thread that reads `ready` every poll_interval
// while any stream is open (at once after Notify()). A stream is sent the latest status only:
// while a write is in flight, newer statuses replace each other. At most max_watchers streams
// are open; more are refused with RESOURCE_EXHAUSTED.
//
// Thread-safety: `ready` is called from gRPC's threads and the poller and must not block (return
// a cached value). Notify may be called from any thread; Shutdown once, before the gRPC server's
// own Shutdown (so that it does not wait for the open Watch streams).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "caudal/common/clock.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace caudal::envoy::internal {

class HealthService final : public ::grpc::health::v1::Health::CallbackService {
 public:
  using ServingStatus = ::grpc::health::v1::HealthCheckResponse::ServingStatus;

  struct Options {
    const Clock* clock = nullptr;  // required: the poller waits poll_interval on it
    std::function<bool()> ready;   // unset: always ready
    std::chrono::milliseconds poll_interval{1000};
    size_t max_watchers = 100;
  };

  explicit HealthService(Options options);
  ~HealthService() override;

  // Makes the poller read `ready` now rather than at its next interval.
  void Notify();
  // Everything is NOT_SERVING from now on; every Watch stream is sent NOT_SERVING and finished.
  void Shutdown();

  grpc::ServerUnaryReactor* Check(grpc::CallbackServerContext* context,
                                  const ::grpc::health::v1::HealthCheckRequest* request,
                                  ::grpc::health::v1::HealthCheckResponse* response) override;
  grpc::ServerUnaryReactor* List(grpc::CallbackServerContext* context,
                                 const ::grpc::health::v1::HealthListRequest* request,
                                 ::grpc::health::v1::HealthListResponse* response) override;
  grpc::ServerWriteReactor<::grpc::health::v1::HealthCheckResponse>* Watch(
      grpc::CallbackServerContext* context,
      const ::grpc::health::v1::HealthCheckRequest* request) override;

 private:
  class Watcher;

  ServingStatus Current() const;
  void Remove(Watcher* w);
  void Poll();

  const Options options_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;  // guarded by mu_
  bool notified_ = false;  // guarded by mu_
  std::atomic<bool> shutting_down_{false};
  std::unordered_map<Watcher*, std::shared_ptr<Watcher>> watchers_;  // guarded by mu_
  std::thread poller_;
};

}  // namespace caudal::envoy::internal
