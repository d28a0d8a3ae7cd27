// Server TLS for the HTTP listener: an SSL context from server.tls's files, and the identities a
// verified client certificate carries (for server.auth.allowed_clients).
//
// A context is immutable once made: a reload makes a new one, and connections keep the one they
// started with, so a certificate swap never disturbs a connection already open.
//
// Thread-safety: functions of their arguments; a context is safe to share once made.
#pragma once

#include <openssl/ssl.h>

#include <boost/asio/ssl/context.hpp>
#include <memory>
#include <string>
#include <vector>

#include "caudal/common/status.h"
#include "caudal/config/config.h"
#include "observe/metrics.h"

namespace caudal::server_tls {

// TLS 1.2 and later, the certificate chain and its key (which must match), and with a
// client_ca_file, client certificates verified against it (required or optional as configured).
// kInvalidArgument naming the field, the file and OpenSSL's reason.
Result<std::shared_ptr<boost::asio::ssl::context>> MakeServerContext(const ServerTlsConfig& c);

inline constexpr size_t kMaxIdentities = 32;
inline constexpr size_t kMaxIdentityBytes = 1024;
// The identities of `ssl`'s peer certificate when it was sent and verified: its subject CN, then
// its DNS, URI and email SANs, each at most kMaxIdentityBytes, at most kMaxIdentities. Empty
// without a verified certificate.
std::vector<std::string> PeerIdentities(SSL* ssl);

// Why a server-side handshake ended with `ec` (never kTimeout: the deadline is the caller's).
TlsFailure HandshakeFailure(const boost::system::error_code& ec);

}  // namespace caudal::server_tls
