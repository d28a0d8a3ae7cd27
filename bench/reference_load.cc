// reference_load: envoyproxy/ratelimit's fixed-window command pattern against one redis-server,
// on the key streams redis_load draws: per decision `INCRBY <key>_<window start> 1` and `EXPIRE
// <key>_<window start> 60`, pipelined, with no script. The baseline behind bench/compare's
// "leases" rows: Redis CPU per decision, the reference's way, on the same traffic.
//
//   reference_load --port P [--seconds 5] [--in-flight 64] [--threads 2] [--keys 100000]
//                  [--keys-dist uniform|zipf:S] [--key-form reference|caudal]
//
// --key-form caudal sends the same counts in caudal's native form instead (RedisStore's
// consume_each, native_count.h): `INCRBY caudal:{<key>}|w<window start in µs> 1` and
// `PEXPIRE ... 60000`, so that the cost of the key's form is measured apart from the batch's.
//
// Each thread has its own connection and keeps in_flight/threads decisions outstanding, a batch
// at a time (write them all, read every reply), as redis-benchmark -P does. Prints one line:
//   decisions_per_s=... decisions_total=... errors=...
// (decisions_total counts the warm-up too: what Redis saw, for its CPU per decision.)
// Targets loopback only: it is a load generator.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "key_stream.h"
#include "redis/resp.h"

namespace {

using SteadyClock = std::chrono::steady_clock;

struct Args {
  int port = 6379;
  double seconds = 5;
  int in_flight = 64;
  int threads = 2;
  int keys = 100'000;
  double zipf = 0;
  bool caudal_keys = false;  // --key-form caudal
};

bool Parse(int argc, char** argv, Args& a) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const char* v = argv[i + 1];
    if (flag == "--port") {
      a.port = std::atoi(v);
    } else if (flag == "--seconds") {
      a.seconds = std::atof(v);
    } else if (flag == "--in-flight") {
      a.in_flight = std::atoi(v);
    } else if (flag == "--threads") {
      a.threads = std::atoi(v);
    } else if (flag == "--keys") {
      a.keys = std::atoi(v);
    } else if (flag == "--keys-dist" && std::strcmp(v, "uniform") == 0) {
      a.zipf = 0;
    } else if (flag == "--keys-dist" && std::strncmp(v, "zipf:", 5) == 0 && std::atof(v + 5) > 0) {
      a.zipf = std::atof(v + 5);
    } else if (flag == "--key-form" && std::strcmp(v, "reference") == 0) {
      a.caudal_keys = false;
    } else if (flag == "--key-form" && std::strcmp(v, "caudal") == 0) {
      a.caudal_keys = true;
    } else {
      return false;
    }
  }
  return argc % 2 == 1 && a.port > 0 && a.port < 65536 && a.seconds > 0 && a.threads > 0 &&
         a.in_flight >= a.threads && a.keys > 0;
}

int Connect(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return -1;
  }
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

bool WriteAll(int fd, const std::string& out) {
  for (size_t at = 0; at < out.size();) {
    const ssize_t n = ::write(fd, out.data() + at, out.size() - at);
    if (n <= 0) return false;
    at += static_cast<size_t>(n);
  }
  return true;
}

// Reads `count` replies; false when the connection fails or a reply is an error.
bool ReadReplies(int fd, caudal::redis::ReplyParser& parser, int count) {
  char buf[1 << 16];
  while (count > 0) {
    auto next = parser.Next();
    if (!next.ok()) return false;
    if (next->has_value()) {
      --count;
      continue;
    }
    const ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n <= 0) return false;
    parser.Feed(buf, static_cast<size_t>(n));
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  if (!Parse(argc, argv, a)) {
    std::fprintf(stderr,
                 "usage: reference_load --port P [--seconds S] [--in-flight N] [--threads T] "
                 "[--keys K] [--keys-dist uniform|zipf:S] [--key-form reference|caudal]\n");
    return 2;
  }
  const auto start = SteadyClock::now();
  const auto measure_from = start + std::chrono::milliseconds(500);
  const auto until = measure_from + std::chrono::duration_cast<SteadyClock::duration>(
                                        std::chrono::duration<double>(a.seconds));
  std::atomic<int64_t> total{0}, measured{0}, errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < a.threads; ++t) {
    threads.emplace_back([&, t] {
      const int fd = Connect(a.port);
      if (fd < 0) {
        errors.fetch_add(1);
        return;
      }
      const int batch = a.in_flight / a.threads + (t < a.in_flight % a.threads ? 1 : 0);
      caudal::bench::KeyStream stream(a.keys, a.zipf, static_cast<uint64_t>(t) + 1,
                                      static_cast<uint64_t>(t) * 7919);
      caudal::redis::ReplyParser parser;
      std::string out;
      while (SteadyClock::now() < until) {
        // The reference's key: the descriptor's, then the window's start in unix seconds.
        const int64_t unix_s = std::chrono::duration_cast<std::chrono::seconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count();
        const std::string window = a.caudal_keys ? std::to_string(unix_s / 60 * 60 * 1'000'000)
                                                 : std::to_string(unix_s / 60 * 60);
        out.clear();
        for (int i = 0; i < batch; ++i) {
          std::string key = a.caudal_keys ? "caudal:{bench:" : "bench:";
          key.append(std::to_string(stream.Next()))
              .append(a.caudal_keys ? ":0}|w" : ":0_")
              .append(window);
          const std::string_view incr[] = {"INCRBY", key, "1"};
          const std::string_view expire[] = {"EXPIRE", key, "60"};
          const std::string_view pexpire[] = {"PEXPIRE", key, "60000"};
          caudal::redis::AppendCommand(incr, out);
          if (a.caudal_keys) {
            caudal::redis::AppendCommand(pexpire, out);
          } else {
            caudal::redis::AppendCommand(expire, out);
          }
        }
        const auto sent = SteadyClock::now();
        if (!WriteAll(fd, out) || !ReadReplies(fd, parser, 2 * batch)) {
          errors.fetch_add(1);
          break;
        }
        total.fetch_add(batch);
        if (sent >= measure_from) measured.fetch_add(batch);
      }
      ::close(fd);
    });
  }
  for (std::thread& t : threads) t.join();
  std::printf("decisions_per_s=%.0f decisions_total=%lld errors=%lld\n",
              static_cast<double>(measured.load()) / a.seconds,
              static_cast<long long>(total.load()), static_cast<long long>(errors.load()));
  return errors.load() == 0 ? 0 : 1;
}
