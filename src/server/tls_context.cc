#include "server/tls_context.h"

#include <openssl/err.h>
#include <openssl/x509v3.h>

#include "common/cat.h"

namespace caudal::server_tls {
namespace {

namespace ssl = boost::asio::ssl;

// OpenSSL's reason for the last failure, e.g. "no such file" or "key values mismatch".
std::string LastError() {
  unsigned long code = 0;
  unsigned long last = 0;
  while ((code = ERR_get_error()) != 0) last = code;  // the last is the most specific
  if (last == 0) return "unknown error";
  const char* reason = ERR_reason_error_string(last);
  return reason != nullptr ? reason : Cat("error ", last);
}

Status Bad(std::string_view field, const std::string& path, std::string_view what) {
  return Status::InvalidArgument(
      Cat("server.tls.", field, ": cannot load ", Quoted(path), ": ", what));
}

void AddIdentity(std::vector<std::string>& out, const unsigned char* data, int length) {
  if (data == nullptr || length <= 0 || out.size() >= kMaxIdentities) return;
  const auto n = static_cast<size_t>(length);
  if (n > kMaxIdentityBytes) return;
  out.emplace_back(reinterpret_cast<const char*>(data), n);
}

}  // namespace

Result<std::shared_ptr<ssl::context>> MakeServerContext(const ServerTlsConfig& c) {
  auto context = std::make_shared<ssl::context>(ssl::context::tls_server);
  SSL_CTX* ctx = context->native_handle();
  ERR_clear_error();
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  if (SSL_CTX_use_certificate_chain_file(ctx, c.cert_file.c_str()) != 1) {
    return Bad("cert_file", c.cert_file, LastError());
  }
  if (SSL_CTX_use_PrivateKey_file(ctx, c.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    return Bad("key_file", c.key_file, LastError());
  }
  if (SSL_CTX_check_private_key(ctx) != 1) {
    return Bad("key_file", c.key_file,
               Cat("not the key of ", Quoted(c.cert_file), " (", LastError(), ')'));
  }
  if (c.client_cert != ClientCertMode::kNone) {
    if (SSL_CTX_load_verify_locations(ctx, c.client_ca_file.c_str(), nullptr) != 1) {
      return Bad("client_ca_file", c.client_ca_file, LastError());
    }
    // The CAs named in the CertificateRequest, so that clients pick a matching certificate.
    if (STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(c.client_ca_file.c_str())) {
      SSL_CTX_set_client_CA_list(ctx, names);
    }
    int mode = SSL_VERIFY_PEER;
    if (c.client_cert == ClientCertMode::kRequire) mode |= SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
    SSL_CTX_set_verify(ctx, mode, nullptr);
    // Session resumption would skip the certificate; caudal's clients hold connections open.
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_num_tickets(ctx, 0);
  }
  ERR_clear_error();
  return context;
}

std::vector<std::string> PeerIdentities(SSL* ssl) {
  std::vector<std::string> out;
  if (ssl == nullptr || SSL_get_verify_result(ssl) != X509_V_OK) return out;
  X509* cert = SSL_get1_peer_certificate(ssl);
  if (cert == nullptr) return out;
  X509_NAME* subject = X509_get_subject_name(cert);
  for (int i = X509_NAME_get_index_by_NID(subject, NID_commonName, -1); i >= 0;
       i = X509_NAME_get_index_by_NID(subject, NID_commonName, i)) {
    ASN1_STRING* cn = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, i));
    unsigned char* utf8 = nullptr;
    const int n = ASN1_STRING_to_UTF8(&utf8, cn);
    AddIdentity(out, utf8, n);
    OPENSSL_free(utf8);
  }
  auto* names =
      static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  for (int i = 0; names != nullptr && i < sk_GENERAL_NAME_num(names); ++i) {
    const GENERAL_NAME* name = sk_GENERAL_NAME_value(names, i);
    if (name->type == GEN_DNS || name->type == GEN_URI || name->type == GEN_EMAIL) {
      const ASN1_IA5STRING* s = name->d.ia5;
      AddIdentity(out, ASN1_STRING_get0_data(s), ASN1_STRING_length(s));
    }
  }
  GENERAL_NAMES_free(names);
  X509_free(cert);
  return out;
}

TlsFailure HandshakeFailure(const boost::system::error_code& ec) {
  if (ec.category() != boost::asio::error::get_ssl_category()) {
    return TlsFailure::kClosed;  // EOF, a reset: the client went away
  }
  if (ec == ssl::error::stream_truncated) return TlsFailure::kClosed;
  const int reason = ERR_GET_REASON(static_cast<unsigned long>(ec.value()));
  if (reason == SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE) return TlsFailure::kNoClientCertificate;
  if (reason == SSL_R_CERTIFICATE_VERIFY_FAILED) return TlsFailure::kBadClientCertificate;
  // OpenSSL reports an alert the peer sent as SSL_AD_REASON_OFFSET + its code.
  if (reason >= SSL_AD_REASON_OFFSET && reason < SSL_AD_REASON_OFFSET + 256) {
    return TlsFailure::kRefusedByClient;
  }
  return TlsFailure::kProtocol;
}

}  // namespace caudal::server_tls
