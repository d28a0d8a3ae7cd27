#include "support/redis_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

namespace caudal::testing {
namespace {

// A port the kernel just handed out for 127.0.0.1. Another process could take it before
// redis-server binds it; Start() retries with a new port when that happens.
Result<uint16_t> FreeLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return Status::Unavailable("socket() failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  // NOLINTNEXTLINE: the sockets API takes sockaddr*.
  auto* sa = reinterpret_cast<sockaddr*>(&addr);
  if (::bind(fd, sa, sizeof(addr)) != 0 || ::getsockname(fd, sa, &len) != 0) {
    ::close(fd);
    return Status::Unavailable("could not bind a loopback port");
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

bool CanBind(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return ok;
}

// A port P with P and P + 10000 free, P <= 55535, and both below the ephemeral range when it
// leaves room (ip_local_port_range starts at 32768 on Linux by default).
Result<uint16_t> FreeClusterPort() {
  int low = 32768;
  std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
  range >> low;
  int hi = std::min(55535, low - 10001);
  if (hi < 11000) hi = 55535;
  static std::mt19937 rng(std::random_device{}());
  for (int attempt = 0; attempt < 200; ++attempt) {
    const auto port = static_cast<uint16_t>(std::uniform_int_distribution<int>(10000, hi)(rng));
    if (CanBind(port) && CanBind(static_cast<uint16_t>(port + 10000))) return port;
  }
  return Status::Unavailable("no free loopback port with a free cluster bus port");
}

bool TcpAccepts(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return ok;
}

std::string ReadTail(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string s = ss.str();
  return s.size() > 2000 ? s.substr(s.size() - 2000) : s;
}

void Flatten(const redisReply* r, std::string& out) {
  switch (r->type) {
    case REDIS_REPLY_INTEGER:
      out += std::to_string(r->integer);
      break;
    case REDIS_REPLY_NIL:
      out += "(nil)";
      break;
    case REDIS_REPLY_ARRAY:
      for (size_t i = 0; i < r->elements; ++i) {
        if (i > 0) out += '\n';
        Flatten(r->element[i], out);
      }
      break;
    default:
      out.append(r->str, r->len);
  }
}

std::vector<std::string> SplitWords(const std::string& s) {
  std::vector<std::string> words;
  std::istringstream in(s);
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

// "redis" unless CAUDAL_TEST_REDIS names another server family ("valkey").
std::string ServerFamily() {
  const char* family = std::getenv("CAUDAL_TEST_REDIS");
  return family != nullptr && *family != '\0' ? family : "redis";
}

}  // namespace

std::string RedisServerBinary() { return ServerFamily() + "-server"; }
std::string RedisCliBinary() { return ServerFamily() + "-cli"; }

Result<std::unique_ptr<RedisServer>> RedisServer::Start(RedisServerOptions options) {
  std::unique_ptr<RedisServer> server(new RedisServer(std::move(options)));
  std::string tmpl = (std::filesystem::temp_directory_path() / "caudal-redis-XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) return Status::Unavailable("mkdtemp failed");
  server->dir_ = tmpl;
  if (server->options_.tls) {
    if (Status s = server->WriteTlsFiles(); !s.ok()) return s;
  }
  Status last;
  for (int attempt = 0; attempt < 5; ++attempt) {
    Result<uint16_t> port =
        server->options_.cluster_bus_port ? FreeClusterPort() : FreeLoopbackPort();
    if (!port.ok()) return port.status();
    server->port_ = *port;
    if (server->options_.tls && server->options_.tls_admin_port) {
      Result<uint16_t> tls_port = FreeClusterPort();  // below the ephemeral range too
      if (!tls_port.ok()) return tls_port.status();
      if (*tls_port == *port || *tls_port == *port + 10000) continue;
      server->tls_port_ = *tls_port;
    }
    last = server->Launch();
    if (last.ok()) return server;
  }
  return last;
}

RedisServer::~RedisServer() {
  Stop();
  std::error_code ec;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
}

std::string RedisServer::url() const {
  return std::string(options_.tls ? "rediss" : "redis") +
         "://127.0.0.1:" + std::to_string(client_port());
}

Status RedisServer::WriteTlsFiles() {
  if (!options_.tls_files_from.empty()) {
    std::error_code ec;
    for (const char* name : {"/ca.crt", "/server.crt", "/server.key"}) {
      std::filesystem::copy_file(options_.tls_files_from + name, dir_ + name, ec);
      if (ec) return Status::Unavailable("copying the TLS files failed: " + ec.message());
    }
    return Status::Ok();
  }
  // A throwaway CA and a server certificate for 127.0.0.1, valid for two days.
  const std::string cmd =
      "cd '" + dir_ +
      "' && "
      "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
      "-keyout ca.key -out ca.crt -days 2 -subj /CN=caudal-test-ca && "
      "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
      "-keyout server.key -out server.csr -subj /CN=127.0.0.1 && "
      "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n' > san.ext && "
      "openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial "
      "-out server.crt -days 2 -extfile san.ext";
  const std::string quiet = "(" + cmd + ") >'" + dir_ + "/openssl.log' 2>&1";
  if (std::system(quiet.c_str()) != 0) {
    return Status::Unavailable("generating TLS certificates failed: " +
                               ReadTail(dir_ + "/openssl.log"));
  }
  return Status::Ok();
}

Status RedisServer::Launch() {
  const std::string port = std::to_string(port_);
  std::vector<std::string> args = {RedisServerBinary()};
  if (!options_.config_lines.empty()) {
    const std::string conf = dir_ + "/redis.conf";
    if (!std::filesystem::exists(conf)) {  // a Sentinel rewrites it: keep it across restarts
      std::ofstream out(conf);
      for (const std::string& line : options_.config_lines) out << line << "\n";
    }
    args.push_back(conf);
  }
  if (options_.sentinel) args.emplace_back("--sentinel");
  for (const char* a : {"--bind", "127.0.0.1", "--daemonize", "no"}) {
    args.emplace_back(a);
  }
  args.emplace_back("--dir");
  args.push_back(dir_);
  args.emplace_back("--logfile");
  args.push_back(dir_ + "/redis.log");
  if (!options_.sentinel) {  // options a Sentinel does not know
    for (const char* a : {"--save", "", "--appendonly", "no", "--enable-debug-command", "local"}) {
      args.emplace_back(a);
    }
  }
  if (options_.tls) {
    const bool admin = options_.tls_admin_port;
    for (const char* a : {"--port", admin ? port.c_str() : "0", "--tls-port"}) args.emplace_back(a);
    args.push_back(admin ? std::to_string(tls_port_) : port);
    if (admin) {
      for (const char* a : {"--tls-replication", "yes"}) args.emplace_back(a);
      if (options_.cluster_bus_port) {
        for (const char* a : {"--tls-cluster", "yes", "--cluster-port"}) args.emplace_back(a);
        args.push_back(std::to_string(port_ + 10000));
      }
    }
    for (const char* a : {"--tls-cert-file", "/server.crt", "--tls-key-file", "/server.key",
                          "--tls-ca-cert-file", "/ca.crt"}) {
      args.emplace_back(a[0] == '/' ? dir_ + a : a);
    }
    args.emplace_back("--tls-auth-clients");
    args.emplace_back("no");
  } else {
    args.emplace_back("--port");
    args.push_back(port);
  }
  if (!options_.password.empty()) {
    args.emplace_back("--requirepass");
    args.push_back(options_.password);
  }
  for (const std::string& user : options_.acl_users) {
    args.emplace_back("--user");
    for (std::string& w : SplitWords(user)) args.push_back(std::move(w));
  }
  args.insert(args.end(), options_.extra_args.begin(), options_.extra_args.end());

  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) return Status::Unavailable("fork failed");
  if (pid == 0) {
    const int devnull = ::open("/dev/null", O_RDWR);
    ::dup2(devnull, STDIN_FILENO);
    ::dup2(devnull, STDOUT_FILENO);
    ::dup2(devnull, STDERR_FILENO);
    ::execvp(argv[0], argv.data());
    ::_exit(127);
  }
  pid_ = pid;
  return WaitReady(std::chrono::seconds(10));
}

Status RedisServer::WaitReady(std::chrono::milliseconds timeout) {
  const auto until = std::chrono::steady_clock::now() + timeout;
  // Polling for a child process to come up; no decision depends on this time.
  while (std::chrono::steady_clock::now() < until) {
    int wstatus = 0;
    if (::waitpid(pid_, &wstatus, WNOHANG) == pid_) {
      pid_ = -1;
      return Status::Unavailable(RedisServerBinary() + " exited at start (is it on PATH?): " +
                                 ReadTail(dir_ + "/redis.log"));
    }
    const bool ready =
        options_.tls && !options_.tls_admin_port ? TcpAccepts(port_) : Command({"PING"}).ok();
    if (ready) return Status::Ok();
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  Kill();
  return Status::Unavailable(RedisServerBinary() + " did not answer within " +
                             std::to_string(timeout.count()) +
                             "ms: " + ReadTail(dir_ + "/redis.log"));
}

void RedisServer::Stop() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

void RedisServer::Kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

Status RedisServer::Restart() {
  Stop();
  return Launch();
}

Result<std::string> RedisServer::Command(const std::vector<std::string>& argv) const {
  if (options_.tls && !options_.tls_admin_port) {
    return Status::InvalidArgument("Command() is not available over TLS");
  }
  const timeval tv{.tv_sec = 5, .tv_usec = 0};
  std::unique_ptr<redisContext, decltype(&redisFree)> c(
      redisConnectWithTimeout("127.0.0.1", port_, tv), &redisFree);
  if (c == nullptr || c->err != 0) {
    return Status::Unavailable(std::string("connect: ") + (c ? c->errstr : "out of memory"));
  }
  redisSetTimeout(c.get(), tv);
  auto run = [&](const std::vector<std::string>& args) -> Result<std::string> {
    std::vector<const char*> ptrs;
    std::vector<size_t> lens;
    for (const std::string& a : args) {
      ptrs.push_back(a.data());
      lens.push_back(a.size());
    }
    auto* reply = static_cast<redisReply*>(
        redisCommandArgv(c.get(), static_cast<int>(args.size()), ptrs.data(), lens.data()));
    if (reply == nullptr) return Status::Unavailable(std::string("redis: ") + c->errstr);
    std::unique_ptr<redisReply, decltype(&freeReplyObject)> owned(reply, &freeReplyObject);
    if (reply->type == REDIS_REPLY_ERROR) {
      return Status::Unavailable(std::string(reply->str, reply->len));
    }
    std::string out;
    Flatten(reply, out);
    return out;
  };
  if (!options_.password.empty()) {
    if (Result<std::string> r = run({"AUTH", options_.password}); !r.ok()) return r;
  }
  return run(argv);
}

Result<std::vector<std::string>> RedisServer::Keys(const std::string& pattern) const {
  std::vector<std::string> keys;
  std::string cursor = "0";
  do {
    Result<std::string> r = Command({"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"});
    if (!r.ok()) return r.status();
    std::istringstream lines(*r);
    std::getline(lines, cursor);
    for (std::string k; std::getline(lines, k);) {
      if (!k.empty()) keys.push_back(k);
    }
  } while (cursor != "0");
  return keys;
}

}  // namespace caudal::testing
