#include "envoy/grpc_tls_files.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

namespace caudal::envoy::internal {
namespace {

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

void Write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

TEST(GrpcTlsFiles, CopiesAreReplacedAtTheSamePathsAndKeptOnAnError) {
  const std::string dir = ::testing::TempDir();
  const ServerTlsConfig tls{.cert_file = dir + "/grpc_tls_files_test.crt",
                            .key_file = dir + "/grpc_tls_files_test.key",
                            .client_ca_file = dir + "/grpc_tls_files_test.ca"};
  Write(tls.cert_file, "cert one");
  Write(tls.key_file, "key one");
  Write(tls.client_ca_file, "ca one");
  GrpcTlsFiles files;
  ASSERT_TRUE(files.Update(tls).ok());
  const std::string cert = files.cert_path();
  const std::string key = files.key_path();
  EXPECT_TRUE(cert.starts_with("/proc/self/fd/")) << cert;
  EXPECT_EQ(Read(cert), "cert one");
  EXPECT_EQ(Read(key), "key one");
  EXPECT_EQ(Read(files.ca_path()), "ca one");

  // The configured files change; the copies do not until Update.
  Write(tls.cert_file, "cert two");
  Write(tls.key_file, "key two");
  EXPECT_EQ(Read(cert), "cert one");
  ASSERT_TRUE(files.Update(tls).ok());
  EXPECT_EQ(files.cert_path(), cert);
  EXPECT_EQ(Read(cert), "cert two");
  EXPECT_EQ(Read(key), "key two");

  // A file that cannot be read changes nothing.
  ServerTlsConfig missing = tls;
  missing.cert_file = dir + "/grpc_tls_files_test.absent";
  const Status s = files.Update(missing);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("server.tls.cert_file"), std::string::npos) << s.message();
  EXPECT_EQ(Read(cert), "cert two");
  EXPECT_EQ(Read(key), "key two");
}

TEST(GrpcTlsFiles, NoClientCaWithoutMtls) {
  const std::string dir = ::testing::TempDir();
  const ServerTlsConfig tls{.cert_file = dir + "/grpc_tls_files_test2.crt",
                            .key_file = dir + "/grpc_tls_files_test2.key",
                            .client_ca_file = {}};
  Write(tls.cert_file, "c");
  Write(tls.key_file, "k");
  GrpcTlsFiles files;
  ASSERT_TRUE(files.Update(tls).ok());
  EXPECT_EQ(files.ca_path(), "");
}

}  // namespace
}  // namespace caudal::envoy::internal
