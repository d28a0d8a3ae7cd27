#include "envoy/grpc_server.h"

#include <absl/synchronization/mutex.h>
#include <grpc/support/time.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>
#include <grpcpp/support/proto_buffer_reader.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_set>

#include "common/utf8.h"
#include "envoy/grpc_tls_files.h"
#include "envoy/health_service.h"
#include "envoy/rlqs_service.h"
#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "observe/metrics.h"

namespace caudal::envoy {
namespace {

grpc::Status ToGrpc(const Status& s) {
  switch (s.code()) {
    case StatusCode::kOk:
      return grpc::Status::OK;
    case StatusCode::kInvalidArgument:
      return {grpc::StatusCode::INVALID_ARGUMENT, s.message()};
    case StatusCode::kUnavailable:
    case StatusCode::kDeadlineExceeded:
      return {grpc::StatusCode::UNAVAILABLE, s.message()};
    case StatusCode::kResourceExhausted:
      return {grpc::StatusCode::RESOURCE_EXHAUSTED, s.message()};
    case StatusCode::kNotFound:
    case StatusCode::kInternal:
      break;
  }
  return {grpc::StatusCode::INTERNAL, s.message()};
}

// The request's text fields are `bytes` in caudal's schema; they must still be UTF-8 text.
grpc::Status CheckUtf8(const RateLimitRequest& request) {
  const auto bad = [](std::string what) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, what + " is not valid UTF-8");
  };
  if (!IsValidUtf8(request.domain())) return bad("domain");
  for (int i = 0; i < request.descriptors_size(); ++i) {
    const auto& d = request.descriptors(i);
    for (int j = 0; j < d.entries_size(); ++j) {
      const std::string at = "descriptor " + std::to_string(i) + ": entry " + std::to_string(j);
      const auto& e = d.entries(j);
      if (!IsValidUtf8(e.key())) return bad(at + " key");
      if (!IsValidUtf8(e.value())) return bad(at + " (" + e.key() + ") value");
    }
  }
  return grpc::Status::OK;
}

// The identities of the call's verified client certificate: its CN and SANs.
std::vector<std::string> PeerIdentities(const grpc::CallbackServerContext& context) {
  std::vector<std::string> out;
  const std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (auth == nullptr || !auth->IsPeerAuthenticated()) return out;
  for (const char* name : {"x509_common_name", "x509_subject_alternative_name"}) {
    for (const grpc::string_ref& v : auth->FindPropertyValues(name)) {
      if (out.size() < 32) out.emplace_back(v.data(), v.size());
    }
  }
  return out;
}

grpc::Status CheckCaller(const CallerAuth& caller, const grpc::CallbackServerContext& context) {
  if (!caller.enabled()) return grpc::Status::OK;
  std::string_view authorization;
  const auto& metadata = context.client_metadata();
  // Two of them are ambiguous (which one did a proxy check?), as over HTTP.
  if (const size_t n = metadata.count("authorization"); n > 1) {
    return {grpc::StatusCode::INVALID_ARGUMENT,
            "authorization: given " + std::to_string(n) +
                " times (the caller's credentials must be given once)"};
  }
  if (auto it = metadata.find("authorization"); it != metadata.end()) {
    authorization = std::string_view(it->second.data(), it->second.size());
  }
  switch (caudal::CheckCaller(caller, authorization, PeerIdentities(context))) {
    case CallerVerdict::kAllowed:
      return grpc::Status::OK;
    case CallerVerdict::kNotAllowed:
      return {grpc::StatusCode::PERMISSION_DENIED,
              "the client certificate's identity is not allowed"};
    case CallerVerdict::kBadToken:
      return {grpc::StatusCode::UNAUTHENTICATED,
              "the authorization metadata does not hold the caller token"};
    case CallerVerdict::kNoCredentials:
      break;
  }
  return {grpc::StatusCode::UNAUTHENTICATED, "credentials needed: authorization: Bearer <token>"};
}

// TLS credentials reading `files` (see grpc_tls_files.h).
std::shared_ptr<grpc::ServerCredentials> Credentials(const GrpcServerOptions& options,
                                                     const internal::GrpcTlsFiles& files) {
  const ServerTlsConfig& tls = options.tls;
  const auto refresh = static_cast<unsigned>(std::max<int64_t>(1, options.tls_refresh.count()));
  const bool mtls = tls.client_cert != ClientCertMode::kNone;
  auto provider = std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(
      files.key_path(), files.cert_path(), mtls ? files.ca_path() : std::string(), refresh);
  grpc::experimental::TlsServerCredentialsOptions o(provider);
  o.watch_identity_key_cert_pairs();
  if (mtls) o.watch_root_certs();
  o.set_cert_request_type(tls.client_cert == ClientCertMode::kRequire
                              ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                              : (mtls ? GRPC_SSL_REQUEST_CLIENT_CERTIFICATE_AND_VERIFY
                                      : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE));
  return grpc::experimental::TlsServerCredentials(o);
}

}  // namespace

// ShouldRateLimit takes the message's bytes (a raw method) and parses them itself: for a typed
// method gRPC answers bytes that are no RateLimitRequest with UNIMPLEMENTED and no message,
// before any code of caudal's runs, so the client would not learn why and nothing would count it.
using RawRateLimitService =
    ::envoy::service::ratelimit::v3::RateLimitService::WithRawCallbackMethod_ShouldRateLimit<
        ::envoy::service::ratelimit::v3::RateLimitService::Service>;

struct RlsCall;

// The calls being decided, so that a shutdown can wait for them and answer those still
// undecided at its deadline. Shared with each call, since a store may answer one after the
// server is gone.
struct CallsInFlight {
  std::mutex mu;
  std::condition_variable drained;     // `calls` became empty
  std::unordered_set<RlsCall*> calls;  // guarded by mu

  // True when every call has been answered by `deadline` (on `clock`'s monotonic time).
  bool AwaitDrained(const Clock& clock, Nanos deadline) {
    std::unique_lock lock(mu);
    return clock.WaitUntil(drained, lock, deadline, [this] { return calls.empty(); });
  }
  // Answers every call still in flight with `status`; their decisions, when they land, are
  // dropped.
  void Abandon(const grpc::Status& status);
};

// What a call owns while the engine decides it; the decision's callback holds it alone (one
// pointer, kept inline by std::function) and frees it.
struct RlsCall {
  RateLimitRequest request;
  RateLimitResponse response;
  grpc::ServerUnaryReactor* reactor = nullptr;
  grpc::ByteBuffer* out = nullptr;  // gRPC's, for the serialized response
  std::atomic<size_t>* in_flight = nullptr;
  std::shared_ptr<CallsInFlight> registry;
  bool abandoned = false;  // guarded by registry->mu: answered by Abandon()

  // Leaves the registry; false when Abandon() has answered the call already.
  bool Land() {
    std::lock_guard lock(registry->mu);
    if (abandoned) return false;
    registry->calls.erase(this);
    in_flight->fetch_sub(1, std::memory_order_relaxed);
    if (registry->calls.empty()) registry->drained.notify_all();
    return true;
  }
};

void CallsInFlight::Abandon(const grpc::Status& status) {
  std::lock_guard lock(mu);
  for (RlsCall* c : calls) {
    c->abandoned = true;
    c->in_flight->fetch_sub(1, std::memory_order_relaxed);
    c->reactor->Finish(status);
  }
  calls.clear();
}

class RlsGrpcServer::Service final : public RawRateLimitService {
 public:
  Service(RlsHandler& handler, size_t max_calls, CallerAuth caller)
      : handler_(handler),
        max_calls_(max_calls),
        caller_(std::make_shared<const CallerAuth>(std::move(caller))) {}

  void SetCallerAuth(CallerAuth caller) {
    caller_.store(std::make_shared<const CallerAuth>(std::move(caller)));
  }

  CallsInFlight& calls() { return *calls_; }
  std::shared_ptr<const CallerAuth> caller() const { return caller_.load(); }

  grpc::ServerUnaryReactor* ShouldRateLimit(grpc::CallbackServerContext* context,
                                            const grpc::ByteBuffer* request,
                                            grpc::ByteBuffer* response) override {
    grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
    if (grpc::Status auth = CheckCaller(*caller_.load(), *context); !auth.ok()) {
      reactor->Finish(auth);
      return reactor;
    }
    if (in_flight_.fetch_add(1, std::memory_order_relaxed) >= max_calls_) {
      in_flight_.fetch_sub(1, std::memory_order_relaxed);
      reactor->Finish({grpc::StatusCode::RESOURCE_EXHAUSTED,
                       "more than " + std::to_string(max_calls_) + " calls in flight"});
      return reactor;
    }
    auto call = std::make_unique<RlsCall>();
    if (grpc::Status parsed = Parse(*request, call->request); !parsed.ok()) {
      in_flight_.fetch_sub(1, std::memory_order_relaxed);
      reactor->Finish(parsed);
      return reactor;
    }
    call->reactor = reactor;
    call->out = response;
    call->in_flight = &in_flight_;
    call->registry = calls_;
    RlsCall* c = call.release();
    {
      std::lock_guard lock(calls_->mu);
      calls_->calls.insert(c);
    }
    handler_.ShouldRateLimit(c->request, &c->response, [c](Status s) {
      const std::unique_ptr<RlsCall> done(c);
      if (!c->Land()) return;
      if (!s.ok()) return c->reactor->Finish(ToGrpc(s));
      bool own = false;
      c->reactor->Finish(
          grpc::SerializationTraits<RateLimitResponse>::Serialize(c->response, c->out, &own));
    });
    return reactor;
  }

 private:
  // The call's message, or INVALID_ARGUMENT saying why not: bytes that are no RateLimitRequest
  // (counted in /metrics), or text fields that are not UTF-8.
  grpc::Status Parse(const grpc::ByteBuffer& bytes, RateLimitRequest& out) {
    // The reader only reads the buffer (gRPC's typed methods also clear it, which is not needed
    // here): a copy would cost an allocation per call.
    grpc::ProtoBufferReader reader(const_cast<grpc::ByteBuffer*>(&bytes));
    if (!reader.status().ok() || !out.ParseFromZeroCopyStream(&reader)) {
      if (Metrics* metrics = handler_.engine().metrics()) metrics->CountMalformedRlsRequest();
      return {grpc::StatusCode::INVALID_ARGUMENT,
              "request: not a RateLimitRequest (malformed protobuf, " +
                  std::to_string(bytes.Length()) + " bytes)"};
    }
    return CheckUtf8(out);
  }

  RlsHandler& handler_;
  const size_t max_calls_;
  std::atomic<std::shared_ptr<const CallerAuth>> caller_;
  std::atomic<size_t> in_flight_{0};
  const std::shared_ptr<CallsInFlight> calls_ = std::make_shared<CallsInFlight>();
};

Result<std::unique_ptr<RlsGrpcServer>> RlsGrpcServer::Start(RlsHandler& handler,
                                                            const GrpcServerOptions& options) {
  // gRPC's locks are absl::Mutex, and Debian's abseil is built with lock-order (deadlock)
  // detection on: every acquisition then takes one process-wide lock and updates a graph, which
  // showed in the RLS profile (docs/benchmarks.md). caudal's own locks are std::mutex.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  if (options.clock == nullptr) return Status::InvalidArgument("RlsGrpcServer: no clock");
  std::unique_ptr<RlsGrpcServer> server(new RlsGrpcServer());
  server->clock_ = options.clock;
  server->shutdown_timeout_ = options.shutdown_timeout;
  server->service_ =
      std::make_unique<Service>(handler, options.max_concurrent_calls, options.caller);
  server->health_ = std::make_unique<internal::HealthService>(
      internal::HealthService::Options{.clock = options.clock,
                                       .ready = options.ready,
                                       .poll_interval = options.health_poll_interval,
                                       .max_watchers = options.max_health_watchers});
  grpc::ServerBuilder builder;
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::InsecureServerCredentials();
  if (options.tls.enabled() && options.tls.grpc) {
    server->tls_files_ = std::make_unique<internal::GrpcTlsFiles>();
    if (Status s = server->tls_files_->Update(options.tls); !s.ok()) return s;
    credentials = Credentials(options, *server->tls_files_);
  }
  builder.AddListeningPort(options.address, credentials, &server->port_);
  builder.SetMaxReceiveMessageSize(static_cast<int>(options.max_receive_bytes));
  builder.RegisterService(server->service_.get());
  builder.RegisterService(server->health_.get());
  if (options.rlqs != nullptr) {
    server->rlqs_ = options.rlqs;
    options.rlqs->SetCallerCheck(
        [service = server->service_.get()](const grpc::CallbackServerContext& context) {
          return CheckCaller(*service->caller(), context);
        });
    builder.RegisterService(options.rlqs->service());
  }
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || server->port_ == 0) {
    return Status::Unavailable("gRPC: cannot listen on " + options.address);
  }
  return server;
}

void RlsGrpcServer::NotifyReadinessChanged() {
  if (health_ != nullptr) health_->Notify();
}

Status RlsGrpcServer::ReloadTls(const ServerTlsConfig& tls) {
  if (tls_files_ == nullptr) return Status::Ok();
  return tls_files_->Update(tls);
}

void RlsGrpcServer::SetCallerAuth(CallerAuth caller) { service_->SetCallerAuth(std::move(caller)); }

void RlsGrpcServer::StopServingHealth() {
  if (health_stopped_ || health_ == nullptr) return;
  health_stopped_ = true;
  health_->Shutdown();
}

void RlsGrpcServer::Shutdown() {
  if (clock_ != nullptr) Shutdown(clock_->Monotonic() + shutdown_timeout_);
}

void RlsGrpcServer::Shutdown(Nanos deadline) {
  if (shut_down_ || server_ == nullptr) return;
  shut_down_ = true;
  // The Watch streams end first, or the server would wait for them until its deadline; so do the
  // quota streams, each told to expire its assignments.
  StopServingHealth();
  if (rlqs_ != nullptr) rlqs_->Shutdown(deadline);
  // gRPC's Shutdown closes the listener, refuses new calls, and blocks until every call has
  // been answered, so it runs beside the wait for our own calls. Those still at the store at
  // the deadline are answered UNAVAILABLE here; gRPC's own deadline, on its clock and a second
  // later, only backs that up (it cancels what is left, which the client sees as CANCELLED).
  const auto left = std::chrono::duration_cast<std::chrono::microseconds>(
      std::max(Nanos(0), deadline - clock_->Monotonic()) + std::chrono::seconds(1));
  std::thread closing(
      [this, left] { server_->Shutdown(gpr_time_from_micros(left.count(), GPR_TIMESPAN)); });
  if (!service_->calls().AwaitDrained(*clock_, deadline)) {
    service_->calls().Abandon({grpc::StatusCode::UNAVAILABLE,
                               "caudal is shutting down: not decided within "
                               "server.shutdown_timeout"});
  }
  closing.join();
  server_->Wait();
}

RlsGrpcServer::~RlsGrpcServer() { Shutdown(); }

}  // namespace caudal::envoy
