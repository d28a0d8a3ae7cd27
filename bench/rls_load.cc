// rls_load: an asynchronous gRPC load client for ShouldRateLimit.
//
//   rls_load --target 127.0.0.1:PORT [--concurrency 64] [--channels 4] [--duration 10s]
//            [--max-requests 5000000] [--domain bench] [--key client] [--values 1000]
//            [--values-dist uniform|zipf:S]
//
// Keeps `concurrency` calls in flight over `channels` HTTP/2 connections, each call for one of
// `values` descriptor values in turn (or drawn from Zipf(S) over them), until `duration` or
// `max-requests`. Prints one line of key=value figures: decisions per second, latency percentiles
// (µs), OK / OVER_LIMIT / errors. Targets loopback addresses only: it is a load generator.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <string>
#include <vector>

#include "caudal/common/clock.h"
#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "key_stream.h"

namespace {

using ::envoy::service::ratelimit::v3::RateLimitRequest;
using ::envoy::service::ratelimit::v3::RateLimitResponse;
using ::envoy::service::ratelimit::v3::RateLimitService;
using Clock = std::chrono::steady_clock;

struct Options {
  std::string target;
  int concurrency = 64;
  int channels = 4;
  caudal::Micros duration = std::chrono::seconds(10);
  int64_t max_requests = 5'000'000;
  std::string domain = "bench";
  std::string key = "client";
  int values = 1000;
  double zipf = 0;  // --values-dist zipf:S; 0: the values in turn
};

struct Totals {
  std::atomic<int64_t> started{0};
  std::atomic<int64_t> ok{0}, over{0}, errors{0};
};

// One in-flight slot: issues its next call when the previous one completes.
class Slot {
 public:
  Slot(RateLimitService::Stub& stub, const Options& o, Totals& t, Clock::time_point end, int id)
      : stub_(stub),
        options_(o),
        totals_(t),
        end_(end),
        values_(o.values, o.zipf, static_cast<uint64_t>(id) + 1, static_cast<uint64_t>(id)) {
    latencies_us_.reserve(1 << 16);
  }

  void Start(std::function<void()> on_stop) {
    on_stop_ = std::move(on_stop);
    Issue();
  }
  const std::vector<uint32_t>& latencies() const { return latencies_us_; }

 private:
  void Issue() {
    if (Clock::now() >= end_ || totals_.started.fetch_add(1) >= options_.max_requests) {
      return on_stop_();
    }
    request_.Clear();
    request_.set_domain(options_.domain);
    auto* e = request_.add_descriptors()->add_entries();
    e->set_key(options_.key);
    std::string value(1, 'v');  // appended, not "v" + ...: GCC 12 misreports that (-Wrestrict)
    value += std::to_string(values_.Next());
    e->set_value(std::move(value));
    context_ = std::make_unique<grpc::ClientContext>();
    context_->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    started_ = Clock::now();
    stub_.async()->ShouldRateLimit(context_.get(), &request_, &response_,
                                   [this](grpc::Status s) { Done(s); });
  }

  void Done(const grpc::Status& s) {
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - started_);
    latencies_us_.push_back(static_cast<uint32_t>(std::min<int64_t>(us.count(), UINT32_MAX)));
    if (!s.ok()) {
      totals_.errors.fetch_add(1);
    } else if (response_.overall_code() == RateLimitResponse::OK) {
      totals_.ok.fetch_add(1);
    } else {
      totals_.over.fetch_add(1);
    }
    Issue();
  }

  RateLimitService::Stub& stub_;
  const Options& options_;
  Totals& totals_;
  const Clock::time_point end_;
  caudal::bench::KeyStream values_;
  std::function<void()> on_stop_;
  std::unique_ptr<grpc::ClientContext> context_;
  RateLimitRequest request_;
  RateLimitResponse response_;
  Clock::time_point started_;
  std::vector<uint32_t> latencies_us_;
};

bool IsLoopback(const std::string& target) {
  return target.rfind("127.0.0.1:", 0) == 0 || target.rfind("localhost:", 0) == 0 ||
         target.rfind("[::1]:", 0) == 0;
}

int Usage(const std::string& why) {
  std::cerr << "rls_load: " << why << "\n"
            << "usage: rls_load --target 127.0.0.1:PORT [--concurrency N] [--channels N]\n"
            << "                [--duration D] [--max-requests N] [--domain D] [--key K]\n"
            << "                [--values N] [--values-dist uniform|zipf:S]\n";
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    const std::string v = argv[i + 1];
    if (flag == "--target") {
      o.target = v;
    } else if (flag == "--concurrency") {
      o.concurrency = std::stoi(v);
    } else if (flag == "--channels") {
      o.channels = std::stoi(v);
    } else if (flag == "--duration") {
      auto d = caudal::ParseDuration(v);
      if (!d.ok()) return Usage(d.status().message());
      o.duration = *d;
    } else if (flag == "--max-requests") {
      o.max_requests = std::stoll(v);
    } else if (flag == "--domain") {
      o.domain = v;
    } else if (flag == "--key") {
      o.key = v;
    } else if (flag == "--values") {
      o.values = std::stoi(v);
    } else if (flag == "--values-dist" && v == "uniform") {
      o.zipf = 0;
    } else if (flag == "--values-dist" && v.rfind("zipf:", 0) == 0 &&
               std::atof(v.c_str() + 5) > 0) {
      o.zipf = std::atof(v.c_str() + 5);
    } else {
      return Usage("unknown flag " + flag);
    }
  }
  if (argc % 2 == 0) return Usage("flags come in pairs");
  if (!IsLoopback(o.target)) return Usage("--target must be a loopback address with a port");
  if (o.concurrency < 1 || o.concurrency > 4096 || o.channels < 1 || o.channels > 64 ||
      o.values < 1 || o.max_requests < 1 || o.duration > std::chrono::minutes(10)) {
    return Usage("out of bounds: concurrency 1..4096, channels 1..64, duration <= 10m");
  }

  std::vector<std::unique_ptr<RateLimitService::Stub>> stubs;
  for (int c = 0; c < o.channels; ++c) {
    grpc::ChannelArguments args;
    args.SetInt("caudal.bench.channel", c);  // distinct arguments: a connection per channel
    stubs.push_back(RateLimitService::NewStub(
        grpc::CreateCustomChannel(o.target, grpc::InsecureChannelCredentials(), args)));
  }
  Totals totals;
  std::mutex mu;
  std::condition_variable cv;
  int running = o.concurrency;
  const auto begin = Clock::now();
  const auto end = begin + o.duration;
  std::vector<std::unique_ptr<Slot>> slots;
  for (int i = 0; i < o.concurrency; ++i) {
    slots.push_back(std::make_unique<Slot>(*stubs[i % o.channels], o, totals, end, i * 7919));
  }
  for (auto& s : slots) {
    s->Start([&] {
      std::lock_guard lock(mu);
      if (--running == 0) cv.notify_all();
    });
  }
  {
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return running == 0; });
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - begin).count();
  std::vector<uint32_t> all;
  for (const auto& s : slots) all.insert(all.end(), s->latencies().begin(), s->latencies().end());
  std::sort(all.begin(), all.end());
  const auto pct = [&](double p) {
    return all.empty() ? 0u : all[std::min(all.size() - 1, static_cast<size_t>(p * all.size()))];
  };
  std::printf(
      "decisions=%zu seconds=%.2f decisions_per_s=%.0f p50_us=%u p99_us=%u p999_us=%u "
      "ok=%lld over_limit=%lld errors=%lld\n",
      all.size(), seconds, static_cast<double>(all.size()) / seconds, pct(0.50), pct(0.99),
      pct(0.999), static_cast<long long>(totals.ok.load()),
      static_cast<long long>(totals.over.load()), static_cast<long long>(totals.errors.load()));
  return totals.errors.load() == 0 ? 0 : 1;
}
