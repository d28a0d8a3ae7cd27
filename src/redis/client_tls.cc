// The Redis stores' TLS client context, and its renewal (redis/redis_tls.h).
#include <openssl/ssl.h>

#include <algorithm>
#include <boost/asio/ssl/context.hpp>

#include "redis/redis_tls.h"
#include "redis/store_support.h"

namespace caudal {

namespace asio = boost::asio;

Result<RedisTlsContext> RedisTlsReload::Load(const RedisStoreOptions& options) {
  const std::string& ca_file = options.tls_ca_file;
  asio::ssl::context tls(asio::ssl::context::tls_client);
  boost::system::error_code ec;
  tls.set_verify_mode(asio::ssl::verify_peer, ec);
  if (ca_file.empty()) {
    tls.set_default_verify_paths(ec);
  } else {
    tls.load_verify_file(ca_file, ec);
  }
  if (ec) {
    return Status::InvalidArgument("redis store: cannot load the TLS CA certificates \"" + ca_file +
                                   "\": " + ec.message());
  }
  if (options.tls_cert_file.empty() != options.tls_key_file.empty()) {
    return Status::InvalidArgument(
        "redis store: a TLS client certificate needs both its "
        "certificate and key files");
  }
  if (!options.tls_cert_file.empty()) {
    tls.use_certificate_chain_file(options.tls_cert_file, ec);
    if (ec) {
      return Status::InvalidArgument("redis store: cannot load the TLS client certificate \"" +
                                     options.tls_cert_file + "\": " + ec.message());
    }
    tls.use_private_key_file(options.tls_key_file, asio::ssl::context::pem, ec);
    if (!ec && SSL_CTX_check_private_key(tls.native_handle()) != 1) {
      return Status::InvalidArgument("redis store: \"" + options.tls_key_file +
                                     "\" is not the key of the TLS client certificate \"" +
                                     options.tls_cert_file + "\"");
    }
    if (ec) {
      return Status::InvalidArgument("redis store: cannot load the TLS client key \"" +
                                     options.tls_key_file + "\": " + ec.message());
    }
  }
  // The context outlives the asio wrapper: one reference for the result.
  SSL_CTX_up_ref(tls.native_handle());
  return RedisTlsContext(tls.native_handle(), SSL_CTX_free);
}

void RedisTlsReload::Use(const RedisTlsContext& context) {
  std::lock_guard<std::mutex> lock(mu_);
  for (redis::IoRunner* runner : runners_) runner->UseTls(context);
}

size_t RedisTlsReload::stores() const {
  std::lock_guard<std::mutex> lock(mu_);
  return runners_.size();
}

void RedisTlsReload::Register(redis::IoRunner* runner) {
  std::lock_guard<std::mutex> lock(mu_);
  runners_.push_back(runner);
}

void RedisTlsReload::Unregister(redis::IoRunner* runner) {
  std::lock_guard<std::mutex> lock(mu_);
  runners_.erase(std::remove(runners_.begin(), runners_.end(), runner), runners_.end());
}

}  // namespace caudal
