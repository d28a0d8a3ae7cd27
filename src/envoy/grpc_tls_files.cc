#include "envoy/grpc_tls_files.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <fstream>
#include <iterator>

#include "common/cat.h"

namespace caudal::envoy::internal {
namespace {

constexpr size_t kMaxFileBytes = 1 << 20;

Result<std::string> ReadPem(const std::string& path, std::string_view field) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return Status::InvalidArgument(Cat("server.tls.", field, ": cannot read ", Quoted(path)));
  std::string text(kMaxFileBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxFileBytes) {
    return Status::InvalidArgument(
        Cat("server.tls.", field, ": ", Quoted(path), " is larger than ", kMaxFileBytes, " bytes"));
  }
  return text;
}

// A new anonymous file holding `text`; -1 on failure.
int MemoryFile(const char* name, const std::string& text) {
  const int fd = memfd_create(name, MFD_CLOEXEC);
  if (fd < 0) return -1;
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n <= 0) {
      close(fd);
      return -1;
    }
    done += static_cast<size_t>(n);
  }
  return fd;
}

// Puts `fresh` in `slot`'s place: the first time it becomes the slot, later it replaces the open
// file behind the slot's number at once (dup3), so its /proc path now reads the new content.
void Install(int& slot, int fresh) {
  if (slot < 0) {
    slot = fresh;
    return;
  }
  dup3(fresh, slot, O_CLOEXEC);
  close(fresh);
}

}  // namespace

GrpcTlsFiles::~GrpcTlsFiles() {
  for (int fd : {key_, cert_, ca_}) {
    if (fd >= 0) close(fd);
  }
}

Status GrpcTlsFiles::Update(const ServerTlsConfig& tls) {
  auto key = ReadPem(tls.key_file, "key_file");
  if (!key.ok()) return key.status();
  auto cert = ReadPem(tls.cert_file, "cert_file");
  if (!cert.ok()) return cert.status();
  std::string ca_text;
  if (!tls.client_ca_file.empty()) {
    auto ca = ReadPem(tls.client_ca_file, "client_ca_file");
    if (!ca.ok()) return ca.status();
    ca_text = std::move(*ca);
  }
  const int k = MemoryFile("caudal-grpc-key", *key);
  const int c = MemoryFile("caudal-grpc-cert", *cert);
  const int a = tls.client_ca_file.empty() ? -1 : MemoryFile("caudal-grpc-ca", ca_text);
  if (k < 0 || c < 0 || (!tls.client_ca_file.empty() && a < 0)) {
    for (int fd : {k, c, a}) {
      if (fd >= 0) close(fd);
    }
    return Status::Internal("gRPC TLS: cannot make in-memory copies of the certificate files");
  }
  Install(key_, k);
  Install(cert_, c);
  if (a >= 0) Install(ca_, a);
  return Status::Ok();
}

}  // namespace caudal::envoy::internal
