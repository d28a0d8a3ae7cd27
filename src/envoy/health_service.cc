#include "envoy/health_service.h"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/utf8.h"

namespace caudal::envoy::internal {
namespace {

using ::grpc::health::v1::HealthCheckRequest;
using ::grpc::health::v1::HealthCheckResponse;
using Serving = HealthCheckResponse::ServingStatus;

constexpr std::string_view kKnown[] = {"", "envoy.service.ratelimit.v3.RateLimitService"};

bool Known(std::string_view service) {
  for (std::string_view k : kKnown) {
    if (service == k) return true;
  }
  return false;
}

std::string Shown(std::string_view service) {
  if (service.size() > 100 || !IsValidUtf8(service)) return "(a name that is not short UTF-8)";
  return "'" + std::string(service) + "'";
}

}  // namespace

// One Watch stream. Calls into gRPC (StartWrite, Finish) are made with no lock held, since gRPC
// may run the reactions (OnWriteDone, OnDone) on the calling thread before they return.
class HealthService::Watcher final : public grpc::ServerWriteReactor<HealthCheckResponse> {
 public:
  // `service` null: a refused stream, owned by nobody and deleted once done.
  Watcher(HealthService* service, bool known) : service_(service), known_(known) {}

  // Sends `s` (SERVICE_UNKNOWN for an unknown service) unless it is what was sent last.
  void Update(Serving s) {
    {
      std::lock_guard lock(mu_);
      if (closing_) return;
      want_ = known_ ? s : HealthCheckResponse::SERVICE_UNKNOWN;
    }
    Pump();
  }

  // Finishes the stream with `status`, after the status still to send if `drain`.
  void Close(grpc::Status status, bool drain) {
    {
      std::lock_guard lock(mu_);
      if (closing_) return;
      closing_ = true;
      final_ = std::move(status);
      if (!drain) want_ = sent_;
    }
    Pump();
  }

  void OnWriteDone(bool ok) override {
    {
      std::lock_guard lock(mu_);
      writing_ = false;
      if (!ok && !closing_) {  // the client is gone
        closing_ = true;
        final_ = grpc::Status(grpc::StatusCode::CANCELLED, "the client went away");
        want_ = sent_;
      }
    }
    Pump();
  }

  void OnCancel() override {
    Close(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"), /*drain=*/false);
  }

  void OnDone() override {
    if (service_ != nullptr) {
      service_->Remove(this);  // may destroy this watcher: nothing after it
    } else {
      delete this;
    }
  }

 private:
  // Starts the next write or the finish, if any is due and no write is in flight.
  void Pump() {
    bool write = false;
    grpc::Status finish;
    {
      std::lock_guard lock(mu_);
      if (writing_ || finished_) return;
      if (want_ && want_ != sent_) {
        sent_ = want_;
        out_.set_status(*sent_);
        writing_ = true;
        write = true;
      } else if (closing_) {
        finished_ = true;
        finish = final_;
      } else {
        return;
      }
    }
    if (write) {
      StartWrite(&out_);
    } else {
      Finish(std::move(finish));
    }
  }

  HealthService* service_;
  const bool known_;
  std::mutex mu_;
  std::optional<Serving> want_;  // guarded by mu_
  std::optional<Serving> sent_;  // guarded by mu_
  bool writing_ = false;         // guarded by mu_
  bool closing_ = false;         // guarded by mu_
  bool finished_ = false;        // guarded by mu_
  grpc::Status final_;           // guarded by mu_
  HealthCheckResponse out_;      // written only while no write is in flight
};

HealthService::HealthService(Options options) : options_(std::move(options)) {
  poller_ = std::thread([this] { Poll(); });
}

HealthService::~HealthService() {
  Shutdown();
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (poller_.joinable()) poller_.join();
}

HealthService::ServingStatus HealthService::Current() const {
  if (shutting_down_.load()) return HealthCheckResponse::NOT_SERVING;
  if (!options_.ready || options_.ready()) return HealthCheckResponse::SERVING;
  return HealthCheckResponse::NOT_SERVING;
}

void HealthService::Notify() {
  {
    std::lock_guard lock(mu_);
    notified_ = true;
  }
  cv_.notify_all();
}

void HealthService::Shutdown() {
  std::vector<std::shared_ptr<Watcher>> open;
  {
    std::lock_guard lock(mu_);
    if (shutting_down_.exchange(true)) return;
    stopping_ = true;
    for (auto& [raw, w] : watchers_) open.push_back(w);
  }
  cv_.notify_all();
  for (auto& w : open) {
    w->Update(HealthCheckResponse::NOT_SERVING);
    w->Close(grpc::Status::OK, /*drain=*/true);
  }
}

void HealthService::Remove(Watcher* w) {
  std::shared_ptr<Watcher> last;
  {
    std::lock_guard lock(mu_);
    auto it = watchers_.find(w);
    if (it == watchers_.end()) return;
    last = std::move(it->second);
    watchers_.erase(it);
  }
  // `last` goes here, with no lock held: usually the final reference.
}

void HealthService::Poll() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    // Nobody to tell: sleep until a stream opens or someone asks.
    if (watchers_.empty()) {
      cv_.wait(lock, [&] { return stopping_ || notified_ || !watchers_.empty(); });
    } else {
      const Clock& clock = *options_.clock;
      clock.WaitUntil(cv_, lock, clock.Monotonic() + options_.poll_interval,
                      [&] { return stopping_ || notified_; });
    }
    if (stopping_) break;
    notified_ = false;
    std::vector<std::shared_ptr<Watcher>> open;
    for (auto& [raw, w] : watchers_) open.push_back(w);
    lock.unlock();
    // `ready` and the streams run with no lock held; a stream ignores a status it already sent.
    const Serving now = Current();
    for (auto& w : open) w->Update(now);
    open.clear();
    lock.lock();
  }
}

grpc::ServerUnaryReactor* HealthService::Check(grpc::CallbackServerContext* context,
                                               const HealthCheckRequest* request,
                                               HealthCheckResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (!Known(request->service())) {
    reactor->Finish(
        grpc::Status(grpc::StatusCode::NOT_FOUND, "unknown service " + Shown(request->service())));
    return reactor;
  }
  response->set_status(Current());
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerUnaryReactor* HealthService::List(grpc::CallbackServerContext* context,
                                              const ::grpc::health::v1::HealthListRequest*,
                                              ::grpc::health::v1::HealthListResponse* response) {
  const Serving now = Current();
  for (std::string_view k : kKnown) {
    (*response->mutable_statuses())[std::string(k)].set_status(now);
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

grpc::ServerWriteReactor<HealthCheckResponse>* HealthService::Watch(
    grpc::CallbackServerContext*, const HealthCheckRequest* request) {
  const bool known = Known(request->service());
  std::optional<grpc::Status> refusal;
  Watcher* raw = nullptr;
  {
    std::lock_guard lock(mu_);
    if (shutting_down_.load()) {
      refusal = grpc::Status(grpc::StatusCode::UNAVAILABLE, "the server is shutting down");
    } else if (watchers_.size() >= options_.max_watchers) {
      refusal = grpc::Status(
          grpc::StatusCode::RESOURCE_EXHAUSTED,
          "more than " + std::to_string(options_.max_watchers) + " health watches open");
    } else {
      auto w = std::make_shared<Watcher>(this, known);
      raw = w.get();
      watchers_.emplace(raw, std::move(w));
    }
  }
  if (refusal) {
    raw = new Watcher(nullptr, known);
    raw->Close(std::move(*refusal), /*drain=*/false);
    return raw;
  }
  cv_.notify_all();  // the poller may be waiting for a first stream
  // Writes and finishes started before gRPC holds the reactor wait for it (gRPC keeps them).
  raw->Update(Current());
  return raw;
}

}  // namespace caudal::envoy::internal
