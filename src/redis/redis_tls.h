// RedisTlsReload: how `caudal serve` hands renewed TLS files (the CA, the client certificate and
// its key) to the Redis stores it opened, on SIGHUP, without dropping a decision.
//
// A store opened with RedisStoreOptions::tls_reload set registers with it for its life. Load()
// reads and checks the files as a store's start does; Use() then makes every registered store
// build its next connections with them. Connections already open keep the context they were
// made with, so nothing in flight is disturbed; a reconnection (after a loss, a stall, a
// failover) takes the renewed files.
//
//   RedisTlsReload reload;                       // outlives the stores registered with it
//   options.tls_reload = &reload;                // then open the store
//   auto files = RedisTlsReload::Load(renewed);  // on SIGHUP: check first, change nothing
//   if (files.ok()) reload.Use(*files);
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include "caudal/common/status.h"
#include "caudal/redis/redis_store.h"

struct ssl_ctx_st;  // OpenSSL's SSL_CTX

namespace caudal {
namespace redis {
class IoRunner;
}

// A TLS client context loaded from a store's files; immutable once made.
using RedisTlsContext = std::shared_ptr<ssl_ctx_st>;

class RedisTlsReload {
 public:
  RedisTlsReload() = default;
  RedisTlsReload(const RedisTlsReload&) = delete;
  RedisTlsReload& operator=(const RedisTlsReload&) = delete;

  // The context `options`' tls_ca_file (empty: the system's CAs), tls_cert_file and tls_key_file
  // make: kInvalidArgument naming the file that cannot be loaded, or a key that is not the
  // certificate's.
  static Result<RedisTlsContext> Load(const RedisStoreOptions& options);

  // Every registered store makes its next connections with `context`.
  void Use(const RedisTlsContext& context);

  // How many stores are registered: whether a reload has anything to renew.
  size_t stores() const;

 private:
  friend class redis::IoRunner;
  void Register(redis::IoRunner* runner);
  void Unregister(redis::IoRunner* runner);

  mutable std::mutex mu_;
  std::vector<redis::IoRunner*> runners_;  // guarded by mu_
};

}  // namespace caudal
