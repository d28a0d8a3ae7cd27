// RedisStore against a real redis-server: time from Redis, handshake errors, TLS, TTLs.
// (Failure behaviour — restarts, SCRIPT FLUSH, DEBUG SLEEP — is in redis_failure_test.cc.)
#include "caudal/redis/redis_store.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <future>
#include <sstream>
#include <thread>

#include "observe/metrics.h"
#include "redis/lua_protocol.h"
#include "redis/redis_test_util.h"
#include "redis/script.h"
#include "support/manual_clock.h"
#include "support/redis_server.h"

namespace caudal {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;
using testing::RedisServer;

TEST(RedisStore, DecidesOnRedisTimeAndAnswersPing) {
  auto server = StartServer();
  auto store = MustOpen({.url = server->url()});
  EXPECT_EQ(store->Name(), "redis");
  EXPECT_TRUE(store->Ping().ok());
  const Limit limit = Window(Algorithm::kFixedWindow, 3, hours(1));
  for (int i = 0; i < 3; ++i) {
    const Decision d = DecideOne(*store, "user:1", limit, 1);
    EXPECT_TRUE(d.allowed());
    EXPECT_EQ(d.remaining, 2 - i);
    EXPECT_GT(d.reset_after, Micros(0));
    EXPECT_LE(d.reset_after, hours(1));
  }
  const Decision denied = DecideOne(*store, "user:1", limit, 1);
  EXPECT_EQ(denied.verdict, Verdict::kDenied);
  EXPECT_EQ(denied.retry_after, denied.reset_after);
  EXPECT_EQ(*server->Keys(), std::vector<std::string>{"caudal:{user:1}"});
}

TEST(RedisStore, BatchesConcurrentRequestsIntoFewerScriptCalls) {
  auto server = StartServer();
  auto store = MustOpen(
      {.url = server->url(), .deadline = seconds(5), .connections = 1, .max_calls_in_flight = 1});
  const Limit limit = Bucket(Algorithm::kGcra, 1'000'000, {1'000'000, seconds(1)});
  constexpr int kRequests = 2000;
  std::atomic<int> ok{0};
  std::atomic<bool> first_error{false};
  std::string error_text;  // written once, read after all callbacks ran
  std::vector<std::string> keys;
  for (int i = 0; i < kRequests; ++i) keys.push_back(std::string("k") + std::to_string(i % 50));
  std::promise<void> all_done;
  std::atomic<int> left{kRequests};
  for (int i = 0; i < kRequests; ++i) {
    const ConsumeEntry e{.key = keys[i], .limit = &limit, .cost = 1};
    store->DecideAsync({.consumes = {&e, 1}}, [&](Result<DecideResponse> r) {
      if (r.ok() && r->allowed) {
        ok.fetch_add(1);
      } else if (!first_error.exchange(true)) {
        error_text = r.ok() ? "refused" : r.status().ToString();
      }
      if (left.fetch_sub(1) == 1) all_done.set_value();
    });
  }
  all_done.get_future().wait();
  EXPECT_EQ(ok.load(), kRequests) << error_text;
  const RedisStoreStats stats = store->Stats();
  EXPECT_EQ(stats.requests, uint64_t{kRequests});
  EXPECT_LT(stats.calls, uint64_t{kRequests} / 4)
      << "requests waiting behind a call travel together";
}

TEST(RedisStore, ItsCountersAreRowsOfMetricsUntilItCloses) {
  auto server = StartServer();
  Metrics metrics;
  auto store = MustOpen({.url = server->url(), .metrics = &metrics});
  const Limit limit = Window(Algorithm::kFixedWindow, 3, hours(1));
  for (int i = 0; i < 5; ++i) DecideOne(*store, "user:1", limit, 1);
  const RedisStoreStats stats = store->Stats();
  EXPECT_EQ(stats.requests, 5u);
  EXPECT_EQ(metrics.Total(MetricId::kRedisRequests), stats.requests);
  EXPECT_EQ(metrics.Total(MetricId::kRedisCalls), stats.calls);
  const std::string text = metrics.RenderPrometheus();
  EXPECT_NE(text.find("\ncaudal_redis_requests_total 5\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\ncaudal_redis_moved_total 0\n"), std::string::npos) << text;
  store.reset();
  EXPECT_EQ(metrics.Total(MetricId::kRedisRequests), 0u) << "a closed store counts no more";
}

TEST(RedisStore, KeysUseThePrefixAndTheCallersHashTag) {
  auto server = StartServer();
  auto store = MustOpen({.url = server->url(), .key_prefix = "rl:"});
  const Limit log = Window(Algorithm::kSlidingWindowLog, 5, minutes(1));
  const Limit bucket = Bucket(Algorithm::kTokenBucket, 5, {1, seconds(1)});
  const ConsumeEntry entries[] = {{.key = "tenant:{7}:a", .limit = &log, .cost = 1},
                                  {.key = "b", .limit = &bucket, .cost = 1}};
  ASSERT_TRUE(store->Decide({.consumes = entries})->allowed);
  std::vector<std::string> keys = *server->Keys();
  std::sort(keys.begin(), keys.end());
  EXPECT_EQ(keys, (std::vector<std::string>{"rl:tenant:{7}:a:log", "rl:{b}"}));
}

TEST(RedisStore, ClearErrorsForBadUrlsAndUnreachableRedis) {
  Result<std::unique_ptr<RedisStore>> bad =
      RedisStore::Open(SystemClock::Instance(), {.url = "redis://host:99999"});
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("port"), std::string::npos);
  EXPECT_EQ(RedisStore::Open(SystemClock::Instance(), {.url = "http://x"}).status().code(),
            StatusCode::kInvalidArgument);
  // A batch's reply must fit the reply parser's bound on one array (2^20 integers).
  const Result<std::unique_ptr<RedisStore>> huge_batch =
      RedisStore::Open(SystemClock::Instance(), {.url = "redis://127.0.0.1:1", .max_batch = 5000});
  EXPECT_EQ(huge_batch.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(huge_batch.status().message().find("max_batch"), std::string::npos);

  uint16_t port = 0;
  {
    auto server = StartServer();
    port = server->port();
  }  // stopped: nothing listens there now
  Result<std::unique_ptr<RedisStore>> down = RedisStore::Open(
      SystemClock::Instance(), {.url = std::string("redis://127.0.0.1:") + std::to_string(port)});
  EXPECT_EQ(down.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(
      down.status().message().find("cannot connect to redis at 127.0.0.1:" + std::to_string(port)),
      std::string::npos)
      << down.status().message();
  EXPECT_NE(down.status().message().find("refused"), std::string::npos);

  Result<std::unique_ptr<RedisStore>> unknown =
      RedisStore::Open(SystemClock::Instance(), {.url = "redis://no-such-host.invalid:6379"});
  EXPECT_EQ(unknown.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(unknown.status().message().find("cannot resolve redis host \"no-such-host.invalid\""),
            std::string::npos)
      << unknown.status().message();
}

// A misbehaving server on a loopback port: it answers the first command it reads with a bulk
// string header declaring 100 MiB, then sends bytes of it until the client hangs up (or 128 MiB
// have gone). sent() says how many the client took in, its socket buffers included.
class HugeBulkServer {
 public:
  HugeBulkServer() {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    EXPECT_EQ(::bind(listener_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(::listen(listener_, 1), 0);
    EXPECT_EQ(::getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &len), 0);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { Serve(); });
  }
  ~HugeBulkServer() {
    if (thread_.joinable()) thread_.join();
    ::close(listener_);
  }
  uint16_t port() const { return port_; }
  uint64_t sent() {
    if (thread_.joinable()) thread_.join();
    return sent_;
  }

 private:
  void Serve() {
    const int c = ::accept(listener_, nullptr, nullptr);
    if (c < 0) return;
    const timeval patience{.tv_sec = 10, .tv_usec = 0};  // a client that neither reads nor leaves
    ::setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &patience, sizeof patience);
    char command[4096];
    if (::recv(c, command, sizeof command, 0) > 0) {
      const std::string head = "$104857600\r\n";
      const std::string chunk(64 * 1024, 'x');
      ssize_t n = ::send(c, head.data(), head.size(), MSG_NOSIGNAL);
      while (n > 0 && sent_ < (uint64_t{128} << 20)) {
        n = ::send(c, chunk.data(), chunk.size(), MSG_NOSIGNAL);
        if (n > 0) sent_ += static_cast<uint64_t>(n);
      }
    }
    ::close(c);
  }

  int listener_ = -1;
  uint16_t port_ = 0;
  uint64_t sent_ = 0;
  std::thread thread_;
};

// The reply is refused at its header, before its bytes: the connection is dropped having taken
// in what one read and the socket buffers hold, not the parser's 64 MiB bound on a reply.
TEST(RedisStore, RefusesAnOversizedReplyAtItsHeaderWithoutReadingIt) {
  HugeBulkServer server;
  const Status s = RedisStore::Open(SystemClock::Instance(),
                                    {.url = "redis://127.0.0.1:" + std::to_string(server.port()),
                                     .connections = 1})
                       .status();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("a bulk string of 104857600 bytes, more than 1048576"),
            std::string::npos)
      << s.message();
  EXPECT_LT(server.sent(), uint64_t{16} << 20);
}

TEST(RedisStore, AuthenticatesWithPasswordOrAclUserAndNamesWrongCredentials) {
  auto server = StartServer({.password = "s3cret", .acl_users = {"app on >apppw ~caudal:* +@all"}});
  const std::string hostport = std::string("127.0.0.1:") + std::to_string(server->port());
  const Limit limit = Window(Algorithm::kFixedWindow, 10, minutes(1));

  auto as_default = MustOpen({.url = "redis://:s3cret@" + hostport});
  EXPECT_TRUE(DecideOne(*as_default, "a", limit, 1).allowed());
  auto as_app = MustOpen({.url = "redis://app:apppw@" + hostport});
  EXPECT_TRUE(DecideOne(*as_app, "a", limit, 1).allowed());

  const Status wrong =
      RedisStore::Open(SystemClock::Instance(), {.url = "redis://:nope@" + hostport}).status();
  EXPECT_EQ(wrong.code(), StatusCode::kInvalidArgument);  // a mistake in the URL, not an outage
  EXPECT_NE(wrong.message().find("refused the credentials of user \"default\""), std::string::npos)
      << wrong.message();
  EXPECT_EQ(wrong.message().find("nope"), std::string::npos) << "never repeat a password";
  const Status wrong_user =
      RedisStore::Open(SystemClock::Instance(), {.url = "redis://app:nope@" + hostport}).status();
  EXPECT_NE(wrong_user.message().find("user \"app\""), std::string::npos) << wrong_user.message();
  const Status none =
      RedisStore::Open(SystemClock::Instance(), {.url = "redis://" + hostport}).status();
  EXPECT_EQ(none.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(none.message().find("requires a password"), std::string::npos) << none.message();
}

TEST(RedisStore, SelectsTheDatabaseAndNamesAWrongIndex) {
  auto server = StartServer();
  auto store = MustOpen({.url = server->url() + "/3"});
  ASSERT_TRUE(DecideOne(*store, "k", Window(Algorithm::kFixedWindow, 2, minutes(1)), 1).allowed());
  EXPECT_NE(server->Command({"INFO", "keyspace"})->find("db3:keys=1"), std::string::npos);
  EXPECT_TRUE(server->Keys()->empty()) << "nothing in db 0";

  const Status wrong =
      RedisStore::Open(SystemClock::Instance(), {.url = server->url() + "/99"}).status();
  EXPECT_EQ(wrong.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(wrong.message().find("refused database 99"), std::string::npos) << wrong.message();
  EXPECT_NE(wrong.message().find("out of range"), std::string::npos) << wrong.message();
}

TEST(RedisStore, SpeaksTlsAndVerifiesTheServer) {
  auto server = StartServer({.tls = true});
  auto store = MustOpen({.url = server->url(), .tls_ca_file = server->tls_ca_file()});
  EXPECT_TRUE(store->Ping().ok());
  EXPECT_TRUE(DecideOne(*store, "k", Bucket(Algorithm::kGcra, 5, {5, seconds(1)}), 1).allowed());

  // Without the test CA the certificate does not verify against the system's trust store.
  const Status untrusted =
      RedisStore::Open(SystemClock::Instance(), {.url = server->url()}).status();
  EXPECT_EQ(untrusted.code(), StatusCode::kInvalidArgument);  // a config mistake, not an outage
  EXPECT_NE(untrusted.message().find("TLS handshake"), std::string::npos) << untrusted.message();
  EXPECT_NE(untrusted.message().find("certificate verify failed"), std::string::npos)
      << untrusted.message();

  // Plain text to a TLS port fails rather than hangs.
  const Status plain =
      RedisStore::Open(SystemClock::Instance(),
                       {.url = "redis://127.0.0.1:" + std::to_string(server->port()),
                        .connect_timeout = seconds(2)})
          .status();
  EXPECT_EQ(plain.code(), StatusCode::kUnavailable);

  const Status no_ca =
      RedisStore::Open(SystemClock::Instance(),
                       {.url = server->url(), .tls_ca_file = "/nonexistent/ca.pem"})
          .status();
  EXPECT_EQ(no_ca.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(no_ca.message().find("/nonexistent/ca.pem"), std::string::npos);
}

// Instances whose local clocks disagree by minutes make the same decisions, because time comes
// from Redis. The contrast first: stores that used their own (skewed) clocks double the quota.
TEST(RedisStore, ClockSkewBetweenInstancesChangesNothing) {
  auto server = StartServer();
  const Limit limit = Window(Algorithm::kFixedWindow, 10, minutes(1));
  {
    ManualClock a_clock(seconds(1'800'000'000));
    ManualClock b_clock(seconds(1'800'000'000) + minutes(5));  // five minutes ahead
    auto a = MustOpen({.url = server->url(), .decision_clock = &a_clock});
    auto b = MustOpen({.url = server->url(), .decision_clock = &b_clock});
    int admitted = 0;
    for (int i = 0; i < 10; ++i) admitted += DecideOne(*a, "skewed", limit, 1).allowed();
    for (int i = 0; i < 10; ++i) admitted += DecideOne(*b, "skewed", limit, 1).allowed();
    EXPECT_EQ(admitted, 20) << "local clocks: B sees a new window and admits 10 more";
  }
  // Production mode: the store has no clock input; both read Redis's TIME inside the script.
  // (A bucket here, so that no window boundary can fall inside the loop.)
  const Limit bucket = Bucket(Algorithm::kTokenBucket, 10, {10, hours(1)});
  auto a = MustOpen({.url = server->url()});
  auto b = MustOpen({.url = server->url()});
  for (int i = 0; i < 10; ++i) {
    RedisStore& s = i % 2 == 0 ? *a : *b;
    const Decision d = DecideOne(s, "shared", bucket, 1);
    ASSERT_TRUE(d.allowed());
    EXPECT_EQ(d.remaining, 9 - i) << "each store sees the other's consumption";
  }
  const Decision da = DecideOne(*a, "shared", bucket, 1);
  const Decision db = DecideOne(*b, "shared", bucket, 1);
  EXPECT_EQ(da.verdict, Verdict::kDenied);
  EXPECT_EQ(db.verdict, Verdict::kDenied);
  // Same refill schedule on Redis's clock: b asked a little later, so it waits a little less.
  EXPECT_LE(db.retry_after, da.retry_after);
  EXPECT_GE(db.retry_after, da.retry_after - milliseconds(500));
}

// Only a commit trims a sliding log: a refusal leaves the list (and its TTL) as it was, even
// when entries in it have left the window.
TEST(RedisStore, ARefusedSlidingLogRequestWritesNothing) {
  auto server = StartServer();
  ManualClock clock(seconds(1'800'000'000));
  auto store = MustOpen({.url = server->url(), .decision_clock = &clock});
  const Limit log = Window(Algorithm::kSlidingWindowLog, 2, seconds(1));
  const std::string key = "caudal:{k}:log";
  ASSERT_TRUE(DecideOne(*store, "k", log, 1).allowed());
  clock.Advance(milliseconds(900));
  ASSERT_TRUE(DecideOne(*store, "k", log, 1).allowed());
  clock.Advance(milliseconds(600));  // the first entry has left the window, the second has not
  const std::string list = *server->Command({"LRANGE", key, "0", "-1"});
  const int64_t ttl = std::stoll(*server->Command({"PTTL", key}));
  ASSERT_EQ(std::count(list.begin(), list.end(), '\n'), 1) << list;  // two entries

  EXPECT_EQ(DecideOne(*store, "k", log, 2).verdict, Verdict::kDenied);
  EXPECT_EQ(*server->Command({"LRANGE", key, "0", "-1"}), list) << "nothing trimmed";
  EXPECT_LE(std::stoll(*server->Command({"PTTL", key})), ttl) << "nor the TTL extended";

  ASSERT_TRUE(DecideOne(*store, "k", log, 1).allowed());
  EXPECT_EQ(*server->Command({"LLEN", key}), "2") << "the commit dropped the entry that left";
}

// A compact state is 33 bytes of binary; the decimal text "w0 w1 w2" that earlier versions
// wrote is still read, so that an upgrade forgets no consumption, and is rewritten in binary.
TEST(RedisStore, ReadsTheTextStateOfEarlierVersionsAndWritesBinary) {
  auto server = StartServer();
  ManualClock clock(seconds(1'800'000'000));
  auto store = MustOpen({.url = server->url(), .decision_clock = &clock});
  const Limit bucket = Bucket(Algorithm::kTokenBucket, 10, {10, hours(1)});
  const std::string now = std::to_string(clock.Now().count() / 1000);
  // 4 tokens left and 3/10 of a refill period (in the rate's units) toward the next, at `now`.
  ASSERT_TRUE(server->Command({"SET", "caudal:{old}", "4 3 " + now, "PX", "60000"}).ok());
  Decision d = DecideOne(*store, "old", bucket, 1);
  ASSERT_TRUE(d.allowed());
  EXPECT_EQ(d.remaining, 3) << "the text state's tokens, less this request's";
  EXPECT_EQ(*server->Command({"STRLEN", "caudal:{old}"}), "33") << "rewritten as binary";
  d = DecideOne(*store, "old", bucket, 3);
  ASSERT_TRUE(d.allowed());
  EXPECT_EQ(d.remaining, 0) << "the binary state read back";
  EXPECT_EQ(DecideOne(*store, "old", bucket, 1).verdict, Verdict::kDenied);

  ASSERT_TRUE(DecideOne(*store, "new", bucket, 1).allowed());
  EXPECT_EQ(*server->Command({"STRLEN", "caudal:{new}"}), "33");
  // Text that is not a state (written by something else) still reads as absent.
  ASSERT_TRUE(server->Command({"SET", "caudal:{junk}", "not a state"}).ok());
  d = DecideOne(*store, "junk", bucket, 1);
  EXPECT_TRUE(d.allowed());
  EXPECT_EQ(d.remaining, 9);
}

// A write sets a key's TTL only when the one it has would end before the state is fresh, and
// then to an eighth more than needed; otherwise the TTL is kept. The key never expires early.
TEST(RedisStore, SetsATtlOnlyWhenTheKeysOwnWouldEndTooSoon) {
  auto server = StartServer();
  ManualClock clock(seconds(1'800'000'000));
  auto store = MustOpen({.url = server->url(), .decision_clock = &clock});
  // On a given clock every TTL carries the store's slack for Redis's own clock (lua_protocol.h).
  const auto pttl = [&](const std::string& key) {
    return std::stoll(*server->Command({"PTTL", key})) - redis::kGivenTimeTtlSlackMs;
  };
  // A bucket of 200 refilling 2 per second: each unit consumed is half a second more until full.
  const Limit bucket = Bucket(Algorithm::kTokenBucket, 200, {200, seconds(100)});
  Decision d = DecideOne(*store, "b", bucket, 16);  // fresh in 8 s
  ASSERT_TRUE(d.allowed());
  ASSERT_EQ(d.reset_after, seconds(8));
  int64_t ttl = pttl("caudal:{b}");
  EXPECT_GT(ttl, 8000) << "set to 9000 ms: an eighth beyond the need";
  EXPECT_LE(ttl, 9000);
  d = DecideOne(*store, "b", bucket, 1);  // fresh in 8.5 s: within the 9000 ms, kept
  ASSERT_EQ(d.reset_after, milliseconds(8500));
  EXPECT_LE(pttl("caudal:{b}"), ttl) << "kept, not set again";
  d = DecideOne(*store, "b", bucket, 2);  // fresh in 9.5 s: beyond it, set to 9500 + 1187 ms
  ASSERT_EQ(d.reset_after, milliseconds(9500));
  ttl = pttl("caudal:{b}");
  EXPECT_GT(ttl, 9500);
  EXPECT_LE(ttl, 10687);
  // Time passing shortens the need: 5 s later (10 units refilled, one consumed) the bucket is
  // fresh in 5 s, 10 s after the TTL was set, which its 10687 ms cover on the script's clock.
  clock.Advance(seconds(5));
  d = DecideOne(*store, "b", bucket, 1);
  ASSERT_EQ(d.reset_after, seconds(5));
  EXPECT_LE(pttl("caudal:{b}"), ttl) << "kept";
  // A refund needs less time; the longer TTL is kept, as the state records it.
  const RefundEntry refund{.key = "b", .limit = &bucket, .cost = 5};
  const Result<DecideResponse> refunded = store->Decide({.refunds = {&refund, 1}});
  ASSERT_TRUE(refunded.ok()) << refunded.status().ToString();
  EXPECT_EQ(refunded->decisions.at(0).reset_after, milliseconds(2500));
  EXPECT_LE(pttl("caudal:{b}"), ttl);
  EXPECT_GT(pttl("caudal:{b}"), 9000) << "not set to the refund's 2812 ms: the state's record read";
}

// The TTL is the need rounded up to a whole ms: the state's record of it (its fourth word) is at
// most 1 ms short of the need, for a need of less than a ms too.
TEST(RedisStore, TheTtlRecordedIsTheNeedRoundedUpToAWholeMillisecond) {
  auto server = StartServer();
  ManualClock clock(seconds(1'800'000'000));
  auto store = MustOpen({.url = server->url(), .decision_clock = &clock});
  const Limit bucket = Bucket(Algorithm::kTokenBucket, 2, {2, milliseconds(3)});
  const Decision d = DecideOne(*store, "sub", bucket, 1);  // fresh in 1.5 ms: a TTL of 2 ms
  ASSERT_TRUE(d.allowed());
  ASSERT_EQ(d.reset_after, std::chrono::microseconds(1500));
  const std::string state = *server->Command({"GET", "caudal:{sub}"});
  ASSERT_EQ(state.size(), 33u);
  double keep = 0;
  std::memcpy(&keep, state.data() + 25, sizeof keep);  // little-endian, as on this machine
  const int64_t now = std::chrono::duration_cast<std::chrono::microseconds>(clock.Now()).count();
  EXPECT_GE(static_cast<int64_t>(keep) - now, 1500 - 1000) << "recorded ms short by at most one";
}

// A reservation's records live in Redis as long as they are needed, on Redis's own clock (the
// TTL), whatever the script's: one kept at expiry for its ttl, one given back at expiry until
// its units no longer count (its grant's reset), so that the first operation after its expiry
// still finds it to give back.
TEST(RedisStore, AReservationsRecordsLiveUntilTheLastUseOfTheirExpiry) {
  auto server = StartServer();
  ManualClock clock(seconds(1'800'000'000));
  auto store = MustOpen({.url = server->url(), .decision_clock = &clock});
  const auto pttl = [&](const std::string& key) {
    return std::stoll(*server->Command({"PTTL", key})) - redis::kGivenTimeTtlSlackMs;
  };
  // 100 refilling 1 a second: 60 consumed are 60 s until they no longer count.
  const Limit bucket = Bucket(Algorithm::kTokenBucket, 100, {100, seconds(100)});
  for (const ExpiryOutcome outcome : {ExpiryOutcome::kKeep, ExpiryOutcome::kGiveBack}) {
    const bool gives = outcome == ExpiryOutcome::kGiveBack;
    SCOPED_TRACE(gives ? "give_back" : "keep");
    const std::string key = gives ? "given" : "kept";
    const ReservationTerms terms{.ttl = seconds(1), .on_expiry = outcome};
    const ReserveEntry reserve{
        .key = key, .limit = &bucket, .cost = 60, .id = {1, gives ? 2 : 3}, .terms = terms};
    const Result<DecideResponse> r = store->Decide({.reserves = {&reserve, 1}});
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    ASSERT_EQ(r->decisions.at(0).reservation, Reservation::kOpened);
    ASSERT_EQ(r->decisions.at(0).reset_after, seconds(60));
    for (const char* suffix : {":ro", ":rd"}) {
      const int64_t ttl = pttl("caudal:{" + key + "}" + suffix);
      if (gives) {
        EXPECT_GT(ttl, 59'000) << suffix << ": until its 60 units no longer count";
      } else {
        EXPECT_GT(ttl, 900) << suffix;  // read a moment after it was set
        EXPECT_LE(ttl, 1000) << suffix << ": its ttl, no more";
      }
    }
  }
}

// Redis's clock, in microseconds since the epoch.
Micros RedisNow(const RedisServer& server) {
  const Result<std::string> time = server.Command({"TIME"});
  EXPECT_TRUE(time.ok()) << time.status().ToString();
  if (!time.ok()) return Micros{0};
  const size_t newline = time->find('\n');
  return seconds(std::stoll(time->substr(0, newline))) +
         Micros{std::stoll(time->substr(newline + 1))};
}

// Returns just after a window of length `w` starts on Redis's clock, so that keys of
// epoch-aligned windows written next live for almost a whole window, whatever the moment the
// test happens to run.
void WaitForWindowStart(const RedisServer& server, Micros w) {
  const Micros into = RedisNow(server) % w;
  if (into < w / 10) return;
  std::this_thread::sleep_for(w - into + milliseconds(1));
}

TEST(RedisStore, KeysExpireOnceFreshAndRefusalsWriteNothing) {
  auto server = StartServer();
  auto store = MustOpen({.url = server->url(), .deadline = seconds(2)});
  const Micros window = milliseconds(1500);
  std::vector<Limit> limits;
  for (Algorithm a : kAllAlgorithms) {
    // Fresh again within a few seconds, long enough to look at every key first on a busy machine.
    limits.push_back(IsWindowAlgorithm(a) ? Window(a, 5, window) : Bucket(a, 5, {5, window}));
  }
  WaitForWindowStart(*server, window);
  Micros longest{0};
  for (int id = 0; id < 3; ++id) {
    for (const Limit& l : limits) {
      std::string key = std::string("id") + std::to_string(id) + ":";
      key += AlgorithmName(l.algorithm());
      const Decision d = DecideOne(*store, key, l, 2);
      ASSERT_TRUE(d.allowed());
      longest = std::max(longest, d.reset_after);
    }
  }
  EXPECT_EQ(server->Keys()->size(), 3 * kAllAlgorithms.size());
  ExpectEveryKeyHasATtl(*server, longest);

  // A refused request creates nothing: "fresh" would pass, "full" refuses.
  // (A bucket, not a window: no boundary can fall between the two calls.)
  const Limit one = Bucket(Algorithm::kTokenBucket, 1, {1, minutes(1)});
  ASSERT_TRUE(DecideOne(*store, "full", one, 1).allowed());
  const ConsumeEntry both[] = {{.key = "fresh", .limit = &one, .cost = 1},
                               {.key = "full", .limit = &one, .cost = 1}};
  EXPECT_FALSE(store->Decide({.consumes = both})->allowed);
  EXPECT_EQ(*server->Command({"EXISTS", "caudal:{fresh}"}), "0");
  const std::string ttl_before = *server->Command({"PTTL", "caudal:{full}"});
  EXPECT_FALSE(DecideOne(*store, "full", one, 1).allowed());
  EXPECT_LE(std::stoll(*server->Command({"PTTL", "caudal:{full}"})), std::stoll(ttl_before))
      << "a refusal does not extend the TTL";
  ASSERT_EQ(*server->Command({"DEL", "caudal:{full}"}), "1");

  // The identities stop: every key is gone once fresh (Redis expires them on its own clock).
  const auto until = std::chrono::steady_clock::now() + longest + seconds(2);
  while (!server->Keys()->empty() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(milliseconds(20));
  }
  EXPECT_TRUE(server->Keys()->empty());
}

// Grouped keys (caudal/store/store.h): the members of one group are one value under the group's
// key, read and written once per call, whatever path decides them.
TEST(RedisStore, AGroupsMembersAreOneValueDecidedAllOrNothing) {
  auto server = StartServer();
  ManualClock clock(seconds(1'800'000'000));
  auto store = MustOpen({.url = server->url(), .decision_clock = &clock});
  const Limit requests = Bucket(Algorithm::kTokenBucket, 60, {60, minutes(1)});
  const Limit input = Bucket(Algorithm::kTokenBucket, 1000, {1000, minutes(1)});
  const Limit money = Window(Algorithm::kFixedWindow, 500, hours(24));
  const Limit month = *Limit::Create(
      LimitSpec::CalendarWindow(5000, *Calendar::Create(CalendarUnit::kMonth, "Europe/Madrid")));
  const std::string keys[] = {"#r#gw:{k1}", "#i#gw:{k1}", "#m#gw:{k1}", "#c#gw:{k1}"};
  auto decide = [&](int64_t r, int64_t i, int64_t m, int64_t c) {
    const ConsumeEntry e[] = {{.key = keys[0], .limit = &requests, .cost = r},
                              {.key = keys[1], .limit = &input, .cost = i},
                              {.key = keys[2], .limit = &money, .cost = m},
                              {.key = keys[3], .limit = &month, .cost = c}};
    Result<DecideResponse> got = store->Decide({.consumes = e});
    EXPECT_TRUE(got.ok()) << got.status().ToString();
    // Four decisions whatever the script answered, so that a wrong answer fails the checks
    // below rather than reading past an empty response.
    DecideResponse d = got.ok() ? *got : DecideResponse{};
    d.decisions.resize(4);
    return d;
  };
  DecideResponse d = decide(1, 800, 300, 800);
  ASSERT_TRUE(d.allowed);
  EXPECT_EQ(*server->Keys(), std::vector<std::string>{"caudal:gw:{k1}"}) << "one value";
  const std::string value = *server->Command({"GET", "caudal:gw:{k1}"});
  EXPECT_EQ(value.size(), 17u + 4 * 40) << "a head and four members";
  // The input tokens refuse the next request: nothing of it is written, in any member.
  d = decide(1, 300, 100, 100);
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.decisions[1].verdict, Verdict::kDenied);
  EXPECT_EQ(d.decisions[0].remaining, 59) << "reported without the refused request's unit";
  EXPECT_EQ(*server->Command({"GET", "caudal:gw:{k1}"}), value) << "the value unchanged";
  // Each member counts its own: a request naming one member alone leaves the others.
  EXPECT_EQ(DecideOne(*store, keys[2], money, 150).remaining, 50);
  d = decide(0, 0, 0, 0);
  EXPECT_EQ(d.decisions[0].remaining, 59);
  EXPECT_EQ(d.decisions[1].remaining, 200);
  EXPECT_EQ(d.decisions[2].remaining, 50);
  EXPECT_EQ(d.decisions[3].remaining, 4200);
  // The same keys refund through the decide script, member by member.
  const RefundEntry refund[] = {{.key = keys[2], .limit = &money, .cost = 50},
                                {.key = keys[3], .limit = &month, .cost = 200}};
  ASSERT_TRUE(store->Decide({.refunds = refund}).ok());
  d = decide(0, 0, 0, 0);
  EXPECT_EQ(d.decisions[2].remaining, 100);
  EXPECT_EQ(d.decisions[3].remaining, 4400);
  EXPECT_EQ(d.decisions[1].remaining, 200) << "a member no refund names is kept";
}

// The group's value lives as long as its longest-lived member needs, whichever member a call
// writes: a write may lengthen its TTL, never shorten it.
TEST(RedisStore, AGroupsValueLivesAsLongAsItsLongestMemberNeeds) {
  auto server = StartServer();
  ManualClock clock(seconds(1'800'000'000));
  auto store = MustOpen({.url = server->url(), .decision_clock = &clock});
  const auto pttl = [&] {
    return std::stoll(*server->Command({"PTTL", "caudal:gw:{k}"})) - redis::kGivenTimeTtlSlackMs;
  };
  const Limit day = Window(Algorithm::kFixedWindow, 100, hours(24));
  const Limit bucket = Bucket(Algorithm::kTokenBucket, 200, {200, seconds(100)});
  const Micros into_day = std::chrono::duration_cast<Micros>(clock.Now() % hours(24));
  ASSERT_TRUE(DecideOne(*store, "#d#gw:{k}", day, 1).allowed());
  const int64_t day_left = (hours(24) - into_day).count() / 1000;
  EXPECT_GE(pttl(), day_left);
  // The bucket's 8 s, alone (the fast script's one-member write), with the window: kept.
  ASSERT_EQ(DecideOne(*store, "#b#gw:{k}", bucket, 16).reset_after, seconds(8));
  EXPECT_GE(pttl(), day_left) << "not shortened to the bucket's need";
  // Through the decide script (a refund) too.
  const RefundEntry refund{.key = "#b#gw:{k}", .limit = &bucket, .cost = 4};
  ASSERT_TRUE(store->Decide({.refunds = {&refund, 1}}).ok());
  EXPECT_GE(pttl(), day_left);
  // A member needing more lengthens it: in one call whose first member needs less, the call's
  // longest need counts.
  const Limit week = Window(Algorithm::kFixedWindow, 100, hours(24 * 7));
  const ConsumeEntry both[] = {{.key = "#b#gw:{k}", .limit = &bucket, .cost = 1},
                               {.key = "#w#gw:{k}", .limit = &week, .cost = 1}};
  const Result<DecideResponse> d = store->Decide({.consumes = both});
  ASSERT_TRUE(d.ok() && d->allowed);
  EXPECT_GE(pttl(), d->decisions[1].reset_after.count() / 1000);
  // Once every member is fresh the value expires with them: no key outlives its need by more
  // than an eighth.
  ExpectEveryKeyHasATtl(*server,
                        d->decisions[1].reset_after + milliseconds(redis::kGivenTimeTtlSlackMs));
}

// A request of exactly its group's members, in their order, is decided whole (the fast script's
// whole_group): its write lives as long as its longest member needs, the first or not, both when
// the group is new and when it is read.
TEST(RedisStore, AGroupDecidedWholeLivesAsLongAsItsLongestMemberNeeds) {
  auto server = StartServer();
  ManualClock clock(seconds(1'800'000'000));
  auto store = MustOpen({.url = server->url(), .decision_clock = &clock});
  const Limit bucket = Bucket(Algorithm::kTokenBucket, 200, {200, seconds(100)});
  const Limit week = Window(Algorithm::kFixedWindow, 100, hours(24 * 7));
  const ConsumeEntry both[] = {{.key = "#b#gy:{k}", .limit = &bucket, .cost = 1},
                               {.key = "#w#gy:{k}", .limit = &week, .cost = 1}};
  for (int round = 0; round < 2; ++round) {
    const Result<DecideResponse> d = store->Decide({.consumes = both});
    ASSERT_TRUE(d.ok() && d->allowed) << round;
    ASSERT_LT(d->decisions[0].reset_after, d->decisions[1].reset_after);
    EXPECT_GE(std::stoll(*server->Command({"PTTL", "caudal:gy:{k}"})) - redis::kGivenTimeTtlSlackMs,
              d->decisions[1].reset_after.count() / 1000)
        << round;
    clock.Advance(seconds(1));
  }
}

// A new group's request with a member that consumes nothing (a peek, as a dimension a request
// does not name) writes only the members that consumed: the one peeked at starts fresh, whatever
// the call's earlier groups held.
TEST(RedisStore, ANewGroupKeepsNoStateForAMemberThatConsumedNothing) {
  auto server = StartServer();
  ManualClock clock(seconds(1'800'000'000));
  auto store = MustOpen({.url = server->url(), .decision_clock = &clock});
  const Limit bucket = Bucket(Algorithm::kTokenBucket, 200, {200, seconds(100)});
  const ConsumeEntry drain[] = {{.key = "#x#ga:{k}", .limit = &bucket, .cost = 200},
                                {.key = "#y#ga:{k}", .limit = &bucket, .cost = 1}};
  ASSERT_TRUE(store->Decide({.consumes = drain}).value().allowed);
  const ConsumeEntry peek[] = {{.key = "#x#gb:{k}", .limit = &bucket, .cost = 0},
                               {.key = "#y#gb:{k}", .limit = &bucket, .cost = 1}};
  const Result<DecideResponse> d = store->Decide({.consumes = peek});
  ASSERT_TRUE(d.ok() && d->allowed);
  EXPECT_EQ(d->decisions[0].remaining, 200);
  // gb's x is fresh: its whole capacity fits (ga's x, drained, would refuse it).
  EXPECT_TRUE(DecideOne(*store, "#x#gb:{k}", bucket, 200).allowed());
  EXPECT_FALSE(DecideOne(*store, "#x#ga:{k}", bucket, 200).allowed());
}

// A request on one key sent with its costs apart (kCostsApart): each call's costs are its own, a
// costs argument that is missing, short or negative is refused with nothing written, and one
// refused part-way leaves none of its costs behind for the request's next call.
TEST(RedisStore, CostsSentApartAreEachCallsOwnAndCheckedBeforeUse) {
  auto server = StartServer();
  auto store = MustOpen({.url = server->url()});
  const Limit hour = Window(Algorithm::kFixedWindow, 100, hours(1));
  ASSERT_TRUE(DecideOne(*store, "load", hour, 1).allowed()) << "the function library loaded";
  const auto words = [](std::initializer_list<int64_t> numbers) {
    std::string out;
    for (const int64_t n : numbers) {
      for (int b = 0; b < 8; ++b) out += static_cast<char>((static_cast<uint64_t>(n) >> (8 * b)));
    }
    return out;
  };
  constexpr int64_t kMembers = 5;  // four costs read at once, then one
  std::string fixed = words({kMembers + redis::kOneKeyRequest + redis::kCostsApart});
  for (const std::string_view member : {"m0", "m1", "m2", "m3", "m4"}) {
    fixed += words({static_cast<int64_t>(Algorithm::kFixedWindow) + redis::kGroupFlag, 100, 100,
                    3'600'000'000, 0, redis::MemberId(member)});
  }
  const std::string key = "caudal:{raw}";
  const std::string now = "1800000000000000";
  const auto call = [&](std::vector<std::string> costs) {
    std::vector<std::string> argv = {
        "FCALL", std::string(redis::kConsumeFunction), "1", key, now, "0", fixed};
    argv.insert(argv.end(), costs.begin(), costs.end());
    return server->Command(argv);
  };
  // The brief reply's remainings: 3, then remaining and reset per member, then the time.
  const auto remainings = [](const Result<std::string>& reply) {
    std::vector<int64_t> out;
    if (!reply.ok()) return out;
    std::istringstream in(*reply);
    std::vector<int64_t> ints;
    for (std::string line; std::getline(in, line);) ints.push_back(std::stoll(line));
    if (ints.size() != 2 + 2 * kMembers || ints[0] != redis::kAllowedBrief) return out;
    for (int64_t i = 0; i < kMembers; ++i) out.push_back(ints[1 + 2 * i]);
    return out;
  };
  EXPECT_EQ(remainings(call({words({1, 2, 3, 4, 5})})), (std::vector<int64_t>{99, 98, 97, 96, 95}));
  const std::string value = *server->Command({"GET", key});
  for (const std::string& costs : {words({7, 7, 7, 7, -1}), words({7, 7, 7, -1, 7})}) {
    const Result<std::string> negative = call({costs});
    ASSERT_FALSE(negative.ok());
    EXPECT_NE(negative.status().message().find("not a plain consume"), std::string::npos)
        << negative.status().ToString();
  }
  const Result<std::string> shorter = call({words({1, 2, 3})});
  ASSERT_FALSE(shorter.ok());
  EXPECT_NE(shorter.status().message().find("costs are missing"), std::string::npos)
      << shorter.status().ToString();
  const Result<std::string> none = call({});
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("costs are missing"), std::string::npos)
      << none.status().ToString();
  EXPECT_EQ(*server->Command({"GET", key}), value) << "nothing written";
  // The first costs again, after a refusal that read four costs of its own: they count.
  EXPECT_EQ(remainings(call({words({1, 2, 3, 4, 5})})), (std::vector<int64_t>{98, 96, 94, 92, 90}));
  EXPECT_EQ(remainings(call({words({1, 2, 3, 4, 5})})), (std::vector<int64_t>{97, 94, 91, 88, 85}));
  EXPECT_EQ(remainings(call({words({0, 10, 0, 0, 1})})),
            (std::vector<int64_t>{97, 84, 91, 88, 84}));
}

// The decide script (leases, reservations, charges, refunds, undos) reads each group once per
// call and writes it once, at the call's end, as the fast script does: a later request of the
// call sees an earlier one's members as written, a refused request writes nothing, and the value
// lives as long as the longest-lived member written in the call needs, whichever wrote it.
TEST(RedisStore, TheDecideScriptReadsAndWritesAGroupOncePerCall) {
  auto server = StartServer();
  const auto words = [](std::initializer_list<int64_t> numbers) {
    std::string out;
    for (const int64_t n : numbers) {
      for (int b = 0; b < 8; ++b) out += static_cast<char>((static_cast<uint64_t>(n) >> (8 * b)));
    }
    return out;
  };
  constexpr int64_t kHour = 3'600'000'000, kWeek = 7 * 24 * kHour;
  const int64_t member = static_cast<int64_t>(Algorithm::kFixedWindow) + redis::kGroupFlag;
  // A request of two members of the group (kOneKeyRequest): window and cost each.
  const auto request = [&](std::string_view a, int64_t a_window, int64_t a_cost, std::string_view b,
                           int64_t b_window, int64_t b_cost) {
    return words({2 + redis::kOneKeyRequest, member, 100, 100, a_window, a_cost, redis::MemberId(a),
                  member, 100, 100, b_window, b_cost, redis::MemberId(b)});
  };
  const std::string key = "caudal:{once}";
  const std::string now = "1800000000000000";
  // Per request its verdict, then per entry verdict, remaining, reset, retry; then the time.
  const auto call = [&](std::vector<std::string> requests) {
    std::vector<std::string> argv = {"EVAL", std::string(redis::kDecideScript),
                                     std::to_string(requests.size())};
    for (size_t i = 0; i < requests.size(); ++i) argv.push_back(key);
    argv.push_back(now);
    argv.push_back("0");
    argv.insert(argv.end(), requests.begin(), requests.end());
    std::vector<int64_t> ints;
    const Result<std::string> reply = server->Command(argv);
    EXPECT_TRUE(reply.ok()) << reply.status().ToString();
    if (!reply.ok()) return ints;
    std::istringstream in(*reply);
    for (std::string line; std::getline(in, line);) ints.push_back(std::stoll(line));
    return ints;
  };
  const auto stat = [&](std::string_view command) {
    const std::string info = *server->Command({"INFO", "commandstats"});
    const std::string row = "cmdstat_" + std::string(command) + ":calls=";
    const size_t at = info.find(row);
    return at == std::string::npos ? 0 : std::stoll(info.substr(at + row.size()));
  };
  ASSERT_EQ(*server->Command({"CONFIG", "RESETSTAT"}), "OK");
  std::vector<int64_t> got =
      call({request("m0", kHour, 10, "m1", kHour, 20), request("m1", kHour, 30, "m2", kWeek, 5)});
  ASSERT_EQ(got.size(), 2u * (1 + 2 * 4) + 1);
  EXPECT_EQ(got[0], 1);
  EXPECT_EQ(got[2], 90);
  EXPECT_EQ(got[6], 80);
  EXPECT_EQ(got[9], 1);
  EXPECT_EQ(got[11], 50) << "the second request sees the first's units on m1";
  EXPECT_EQ(got[15], 95);
  EXPECT_EQ(stat("get"), 1) << "one read of the group for the call";
  EXPECT_EQ(stat("set"), 1) << "one write";
  // The value lives as long as m2, the last member written and the longest-lived, needs.
  const int64_t week_left_ms = got[16] / 1000;
  EXPECT_GE(std::stoll(*server->Command({"PTTL", key})), week_left_ms);
  // The first request's member with the longest need: its TTL kept, not shortened by the hour's.
  const std::string value = *server->Command({"GET", key});
  ASSERT_EQ(*server->Command({"CONFIG", "RESETSTAT"}), "OK");
  got = call({request("m2", kWeek, 1, "m0", kHour, 1), request("m0", kHour, 1, "m1", kHour, 1)});
  ASSERT_EQ(got.size(), 2u * (1 + 2 * 4) + 1);
  EXPECT_EQ(got[2], 94);
  EXPECT_EQ(got[6], 89);
  EXPECT_EQ(got[11], 88);
  EXPECT_EQ(got[15], 49);
  EXPECT_EQ(stat("get"), 1);
  EXPECT_EQ(stat("set"), 1);
  EXPECT_GE(std::stoll(*server->Command({"PTTL", key})), week_left_ms);
  // A refused request (m1 has 49 left) reads the group and writes nothing, in any member.
  const std::string before = *server->Command({"GET", key});
  EXPECT_NE(before, value);
  ASSERT_EQ(*server->Command({"CONFIG", "RESETSTAT"}), "OK");
  got = call({request("m0", kHour, 1, "m1", kHour, 50)});
  ASSERT_EQ(got.size(), 1u + 2 * 4 + 1);
  EXPECT_EQ(got[0], 0);
  EXPECT_EQ(got[2], 88) << "reported without its unit";
  EXPECT_EQ(stat("get"), 1);
  EXPECT_EQ(stat("set"), 0);
  EXPECT_EQ(*server->Command({"GET", key}), before);
}

// A group holds at most kMaxGroupMembers members: past them, a write drops the member nearest
// fresh, never the one it writes (whose state then counts on).
TEST(RedisStore, AFullGroupDropsTheMemberNearestFreshNeverTheOneWritten) {
  auto server = StartServer();
  ManualClock clock(seconds(1'800'000'000));
  auto store = MustOpen({.url = server->url(), .decision_clock = &clock});
  const Limit hour = Window(Algorithm::kFixedWindow, 100, hours(1));
  const Limit second = Window(Algorithm::kFixedWindow, 100, seconds(1));
  const auto member = [](int64_t i) { return "#m" + std::to_string(i) + "#gw:{k}"; };
  for (int64_t i = 0; i < redis::kMaxGroupMembers; ++i) {
    ASSERT_TRUE(DecideOne(*store, member(i), hour, 10).allowed());
  }
  const std::string key = "caudal:gw:{k}";
  EXPECT_EQ(server->Command({"GET", key})->size(), 17u + 40 * redis::kMaxGroupMembers);
  // One more, fresh soonest of all: kept; one of the hour's members goes instead.
  ASSERT_TRUE(DecideOne(*store, member(99), second, 30).allowed());
  EXPECT_EQ(server->Command({"GET", key})->size(), 17u + 40 * redis::kMaxGroupMembers);
  EXPECT_EQ(DecideOne(*store, member(99), second, 0).remaining, 70) << "its count kept";
  int64_t fresh = 0;
  for (int64_t i = 0; i < redis::kMaxGroupMembers; ++i) {
    fresh += DecideOne(*store, member(i), hour, 0).remaining == 100 ? 1 : 0;
  }
  EXPECT_EQ(fresh, 1) << "one of the others dropped";
}

}  // namespace
}  // namespace caudal
