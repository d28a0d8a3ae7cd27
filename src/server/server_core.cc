#include "server/server_core.h"

#include <algorithm>
#include <boost/beast/http/error.hpp>

#include "common/cat.h"
#include "server/http_api.h"
#include "server/tls_context.h"

namespace caudal::http_server {

namespace beast = boost::beast;
namespace http = beast::http;

void StartParser(std::optional<RequestParser>& parser, ParsedRequest& request) {
  parser.emplace(request);
  parser->header_limit(kMaxHeaderBytes);
  parser->body_limit(http_api::kMaxBodyBytes);
  parser->eager(true);
}

Parsed ParseBuffered(beast::flat_buffer& buffer, RequestParser& parser, bool& in_body,
                     ConnectionDeadline& deadline, boost::system::error_code& ec) {
  while (buffer.size() > 0 && !parser.is_done()) {
    const size_t used = parser.Put(buffer.data(), ec);
    buffer.consume(used);
    if (ec == http::error::need_more) break;
    if (ec) return Parsed::kError;
    if (used == 0) break;
  }
  ec = {};
  if (parser.is_done()) return Parsed::kRequest;
  if (in_body) return Parsed::kNeedMore;
  if (!parser.is_header_done()) {
    if (buffer.size() > 0 || parser.got_some()) deadline.RequestStarted();
    return Parsed::kNeedMore;
  }
  in_body = true;
  const auto length = parser.content_length();
  if (length && *length > http_api::kMaxBodyBytes) {
    ec = http::error::body_limit;
    return Parsed::kError;
  }
  deadline.BodyStarted();
  return Parsed::kNeedMore;
}

routes::Request RoutesRequest(const ParsedRequest& request, std::string& forwarded_for,
                              const IpAddress& peer, std::span<const std::string> identities) {
  request.JoinFields("X-Forwarded-For", forwarded_for);
  return {.method = request.method(),
          .target = request.target(),
          .body = request.body(),
          .peer = peer,
          .header = [&request](std::string_view name) { return request.Field(name); },
          .header_count = [&request](std::string_view name) { return request.FieldCount(name); },
          .forwarded_for = forwarded_for,
          .identities = identities};
}

AdmittedPeer::AdmittedPeer(ServerCore& core, IpAddress address, bool counted)
    : core_(&core), address_(address), counted_(counted) {}

AdmittedPeer::AdmittedPeer(AdmittedPeer&& other) noexcept
    : core_(std::exchange(other.core_, nullptr)),
      address_(other.address_),
      counted_(other.counted_) {}

AdmittedPeer::~AdmittedPeer() {
  if (core_ != nullptr) core_->Release(address_, counted_);
}

namespace {
Nanos TickFor(const HttpServerOptions& o) {
  const Micros shortest = std::min({o.header_timeout, o.body_timeout, o.idle_timeout});
  return std::min<Micros>(shortest, std::max<Micros>(shortest / 2, std::chrono::milliseconds(5)));
}
}  // namespace

ServerCore::ServerCore(HttpServer::Deps deps, HttpServerOptions options, ForwardAuthOptions auth,
                       std::shared_ptr<boost::asio::ssl::context> tls)
    : deps_(std::move(deps)),
      options_(std::move(options)),
      tick_(TickFor(options_)),
      auth_(std::make_shared<const ForwardAuthOptions>(std::move(auth))),
      tls_(std::move(tls)),
      handshake_log_(deps_.clock, {.interval = std::chrono::minutes(1), .max_keys = 1}),
      clients_(options_.max_connections_per_client, options_.client_prefix) {}

void ServerCore::SetForwardAuth(ForwardAuthOptions auth) {
  auth_.store(std::make_shared<const ForwardAuthOptions>(std::move(auth)),
              std::memory_order_release);
}

void ServerCore::SetTls(std::shared_ptr<boost::asio::ssl::context> tls) {
  if (tls == nullptr || tls_.load() == nullptr) return;
  tls_.store(std::move(tls), std::memory_order_release);
}

void ServerCore::Decide(const routes::Request& r, routes::Responder& responder) {
  in_flight_.fetch_add(1, std::memory_order_relaxed);
  // Held for the call: a reload may swap the options meanwhile.
  const std::shared_ptr<const ForwardAuthOptions> a = auth_.load(std::memory_order_acquire);
  routes::Context ctx{.engine = deps_.engine,
                      .metrics = deps_.metrics,
                      .health = deps_.health,
                      .refusals = deps_.refusals,
                      .status = deps_.status,
                      .auth = *a,
                      .admin = deps_.admin,
                      .idempotency = deps_.idempotency,
                      .draining = draining()};
  routes::Dispatch(ctx, r, responder);
}

bool ServerCore::EndDecision() {
  const bool d = draining();
  if (in_flight_.fetch_sub(1, std::memory_order_acq_rel) == 1 && d) {
    std::lock_guard lock(drain_mu_);
    drained_.notify_all();
  }
  return d;
}

void ServerCore::WaitDrained(Nanos deadline) {
  std::unique_lock lock(drain_mu_);
  deps_.clock.WaitUntil(drained_, lock, deadline,
                        [this] { return in_flight_.load(std::memory_order_acquire) == 0; });
}

void ServerCore::HandshakeFailed(const IpAddress& peer, const boost::system::error_code& ec) {
  if (auto suppressed = handshake_log_.Admit("tls")) {
    deps_.log.Warning(Cat("TLS handshake with ", peer.ToString(), " failed: ", ec.message(),
                          " (logged once a minute at most",
                          *suppressed > 0 ? Cat("; ", *suppressed, " more since") : "", ')'));
  }
  deps_.metrics.CountTlsHandshakeFailure(server_tls::HandshakeFailure(ec));
}

// Out of descriptors (EMFILE, ENFILE) or similar. The connection stays queued in the backlog and
// a new accept would fail again at once, so the loop pauses, 10 ms doubling up to 1 s, and says
// so once per episode rather than once per attempt.
std::chrono::milliseconds ServerCore::AcceptFailure(const boost::system::error_code& ec) {
  using std::chrono::milliseconds;
  if (accept_failures_++ == 0) {
    deps_.log.Warning(Cat("accept failed: ", ec.message(), " (", ec.value(),
                          "); new connections wait in the backlog, retrying with backoff "
                          "(logged once until an accept succeeds)"));
    accept_pause_ = milliseconds(10);
  } else {
    accept_pause_ = std::min<milliseconds>(accept_pause_ * 2, milliseconds(1000));
  }
  return accept_pause_;
}

void ServerCore::AcceptSucceeded() {
  if (accept_failures_ == 0) return;
  deps_.log.Info(Cat("accepting connections again, after ", accept_failures_, " failed accepts"));
  accept_failures_ = 0;
}

bool ServerCore::Trusted(const IpAddress& peer) const {
  const std::shared_ptr<const ForwardAuthOptions> a = auth_.load(std::memory_order_acquire);
  for (const CidrBlock& b : a->trusted_proxies) {
    if (b.Contains(peer)) return true;
  }
  return false;
}

// Past max_connections, or past its client's share, a new connection is closed at once: the
// clients already in keep their connections, and other clients still get in.
std::optional<AdmittedPeer> ServerCore::AdmitPeer(const IpAddress& peer) {
  if (connections_.load(std::memory_order_relaxed) >= options_.max_connections) {
    if (!cap_logged_) {
      deps_.log.Warning(Cat("connection cap (", options_.max_connections,
                            ") reached: closing new connections until some end"));
      cap_logged_ = true;
    }
    return std::nullopt;
  }
  cap_logged_ = false;
  // Trusted proxies carry every client's connections: only the global cap applies to them.
  bool counted = false;
  if (!Trusted(peer)) {
    const auto admission = clients_.Admit(peer);
    if (admission == ClientConnections::Admission::kRefusedFirst) {
      deps_.log.Warning(Cat("per-client connection cap (", clients_.per_client(), ") reached by ",
                            clients_.Group(peer).ToString(),
                            ": closing its new connections (logged once until it holds none)"));
    }
    if (admission != ClientConnections::Admission::kAdmitted) return std::nullopt;
    counted = true;
  }
  connections_.fetch_add(1, std::memory_order_relaxed);
  return AdmittedPeer(*this, peer, counted);
}

void ServerCore::Release(const IpAddress& peer, bool counted) {
  if (counted) clients_.Release(peer);
  connections_.fetch_sub(1, std::memory_order_relaxed);
}

}  // namespace caudal::http_server
