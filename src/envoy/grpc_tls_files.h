// The certificate files gRPC's TLS stack reads, held in memory so that only checked ones reach it.
//
// gRPC's FileWatcherCertificateProvider re-reads its files by itself (why that matters:
// docs/operations.md, Security); it is pointed at anonymous in-memory files (memfd, reached as
// /proc/self/fd/N) holding copies of the configured ones. Update() replaces a copy whole, with
// one dup3() per file, only after the caller has checked the new files
// (server_tls::MakeServerContext), so gRPC sees either the old pair or the new one; the private
// key never lands on disk again.
//
// Thread-safety: Update() from one thread at a time; gRPC reads the paths from its own.
#pragma once

#include <string>

#include "caudal/common/status.h"
#include "caudal/config/config.h"

namespace caudal::envoy::internal {

class GrpcTlsFiles {
 public:
  GrpcTlsFiles() = default;
  ~GrpcTlsFiles();
  GrpcTlsFiles(const GrpcTlsFiles&) = delete;
  GrpcTlsFiles& operator=(const GrpcTlsFiles&) = delete;

  // Copies `tls`'s files into memory (the first call), or replaces the copies (later calls).
  // kInvalidArgument naming the file when one cannot be read or exceeds 1 MiB; the copies are
  // unchanged then.
  Status Update(const ServerTlsConfig& tls);

  std::string key_path() const { return Path(key_); }
  std::string cert_path() const { return Path(cert_); }
  std::string ca_path() const { return ca_ < 0 ? std::string() : Path(ca_); }

 private:
  static std::string Path(int fd) { return "/proc/self/fd/" + std::to_string(fd); }
  int key_ = -1;
  int cert_ = -1;
  int ca_ = -1;
};

}  // namespace caudal::envoy::internal
