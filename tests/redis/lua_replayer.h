// LuaReplayer: testing::Replayer's interface (algorithms/replayer.h), with every decision made by
// the Redis script (lua/*.lua) on a real redis-server, at the `now` the test gives. Compiled into
// the algorithm contract and property suites (CAUDAL_REPLAY_THROUGH_LUA), it holds the scripts
// to the same exact checks as the C++ algorithms: retry and reset to the µs, drift over millions
// of periods, refill carries at awkward rates, windows and periods met exactly at their edges.
//
// One redis-server per test process, one connection, one key per replayer. A peek copies the
// state to a scratch key (COPY), decides there and deletes it, in one pipelined round trip.
// A reply that is not a decision throws (gtest fails the test and goes on with the next one).
// Test-only; not thread-safe.
#pragma once

#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "algorithms/algorithm.h"
#include "caudal/algorithms/limit.h"
#include "caudal/store/store.h"
#include "common/cat.h"
#include "redis/lua_protocol.h"
#include "redis/script.h"
#include "support/redis_server.h"

namespace caudal::redis::testing {

// The process's redis-server and one blocking connection to it, the script loaded.
class LuaConnection {
 public:
  static LuaConnection& Get() {
    static LuaConnection connection;  // its redis-server stops when the process exits
    return connection;
  }

  // Sends every argv of `calls` in one write and returns their replies, in order.
  std::vector<std::unique_ptr<redisReply, void (*)(void*)>> Pipeline(
      const std::vector<std::vector<std::string_view>>& calls) {
    for (const std::vector<std::string_view>& argv : calls) {
      std::vector<const char*> ptrs;
      std::vector<size_t> lens;
      for (std::string_view a : argv) {
        ptrs.push_back(a.data());
        lens.push_back(a.size());
      }
      redisAppendCommandArgv(context_.get(), static_cast<int>(argv.size()), ptrs.data(),
                             lens.data());
    }
    std::vector<std::unique_ptr<redisReply, void (*)(void*)>> replies;
    for (size_t i = 0; i < calls.size(); ++i) {
      void* reply = nullptr;
      if (redisGetReply(context_.get(), &reply) != REDIS_OK || reply == nullptr) {
        ADD_FAILURE() << "redis: " << context_->errstr;
        std::abort();  // the connection is gone: nothing after this can be trusted
      }
      replies.emplace_back(static_cast<redisReply*>(reply), &freeReplyObject);
    }
    return replies;
  }

 private:
  LuaConnection() : context_(nullptr, &redisFree) {
    Result<std::unique_ptr<caudal::testing::RedisServer>> s = caudal::testing::RedisServer::Start();
    if (!s.ok()) {
      ADD_FAILURE() << s.status().ToString();
      std::abort();
    }
    server_ = std::move(*s);
    context_.reset(redisConnect("127.0.0.1", server_->port()));
    if (context_ == nullptr || context_->err != 0) std::abort();
    auto replies = Pipeline({{"SCRIPT", "LOAD", kDecideScript},
                             {"SCRIPT", "LOAD", kConsumeScript},
                             {"FUNCTION", "LOAD", kConsumeLibrary}});
    if (replies[0]->type != REDIS_REPLY_STRING ||
        std::string_view(replies[0]->str) != kDecideSha1 ||
        replies[1]->type != REDIS_REPLY_STRING ||
        std::string_view(replies[1]->str) != kConsumeSha1) {
      ADD_FAILURE() << "SCRIPT LOAD did not give the build's SHA1";
      std::abort();
    }
    if (replies[2]->type != REDIS_REPLY_STRING ||
        std::string_view(replies[2]->str) != kConsumeLibraryName) {
      ADD_FAILURE() << "FUNCTION LOAD refused the library: "
                    << std::string_view(replies[2]->str, replies[2]->len);
      std::abort();
    }
  }

  std::unique_ptr<caudal::testing::RedisServer> server_;
  std::unique_ptr<redisContext, void (*)(redisContext*)> context_;
};

class LuaReplayer {
 public:
  // What the suites ask of a state: whether one exists (compact().has_value(),
  // log().entries.empty()).
  struct StateView {
    bool exists = false;
    bool has_value() const { return exists; }
  };
  struct LogView {
    std::vector<int64_t> entries;  // one element per stored item; only its size means anything
  };

  explicit LuaReplayer(const Limit& limit)
      : limit_(limit), key_(Cat("r", NextId())), scratch_(Cat("p", NextId())) {}

  // A copy has its own key, holding a copy of the state: the two go their own ways from here.
  LuaReplayer(const LuaReplayer& other) : LuaReplayer(other.limit_) { CopyFrom(other); }
  LuaReplayer& operator=(const LuaReplayer& other) {
    if (this != &other) {
      limit_ = other.limit_;
      CopyFrom(other);
    }
    return *this;
  }

  Decision Decide(Micros now, int64_t cost) { return Call(key_, now, cost, EntryOp::kConsume); }

  Decision Refund(Micros now, int64_t units) { return Call(key_, now, units, EntryOp::kRefund); }

  // The decision on a copy of the state, which is then dropped.
  Decision Peek(Micros now, int64_t cost) const {
    const std::string from = StateKey(kPrefix, key_, limit_.algorithm());
    const std::string to = StateKey(kPrefix, scratch_, limit_.algorithm());
    std::vector<std::vector<std::string_view>> calls;
    calls.push_back({"DEL", to});
    calls.push_back({"COPY", from, to});
    const EntryRef entry{.key = scratch_, .limit = &limit_, .cost = cost};
    const EncodedRequest request = EncodeRequest({&entry, 1}, kPrefix, now);
    const EncodedRequest* ptr = &request;
    CallArgv call;
    BuildFor(ptr, now, call);
    calls.push_back(call.argv);
    calls.push_back({"DEL", to});
    auto replies = LuaConnection::Get().Pipeline(calls);
    return Decode(*replies[2], request, now);
  }

  // What a state never seen would decide.
  Decision DecideFresh(Micros now, int64_t cost) const {
    LuaReplayer fresh(limit_);
    const Decision d = fresh.Decide(now, cost);
    fresh.Drop();
    return d;
  }

  const Limit& limit() const { return limit_; }
  StateView compact() const { return {.exists = Exists()}; }
  LogView log() const { return {.entries = std::vector<int64_t>(Exists() ? 1 : 0)}; }

 private:
  static constexpr std::string_view kPrefix = "caudal:";

  // Of the calls the store would send to the fast script, one in three goes to it as a
  // function (FCALL, as the store sends it), one to it as a script, and one to the decide
  // script, so that the suites hold all three to their contract on the same keys.
  static void BuildFor(const EncodedRequest* request, Micros now, CallArgv& call) {
    static std::atomic<uint64_t> consume_calls{0};
    const uint64_t turn =
        ForConsumeScript({&request, 1}, KeyPlacement::kDeclared) ? consume_calls++ % 3 : 2;
    BuildCall(turn == 0 ? "FCALL" : "EVALSHA",
              turn == 0 ? kConsumeFunction : (turn == 1 ? kConsumeSha1 : kDecideSha1),
              TimeSource::kGiven, now.count(), {&request, 1}, call);
  }

  static uint64_t NextId() {
    static std::atomic<uint64_t> next{0};
    return next++;
  }

  Decision Call(const std::string& key, Micros now, int64_t cost, EntryOp op) const {
    const EntryRef entry{.key = key, .limit = &limit_, .cost = cost, .op = op};
    const EncodedRequest request = EncodeRequest({&entry, 1}, kPrefix, now);
    const EncodedRequest* ptr = &request;
    CallArgv call;
    BuildFor(ptr, now, call);
    auto replies = LuaConnection::Get().Pipeline({call.argv});
    return Decode(*replies[0], request, now);
  }

  // A reply that is not a decision (a script error, a malformed or impossible one) fails the
  // test at once: the suites would otherwise go on with a made-up decision and judge it.
  static Decision Decode(const redisReply& reply, const EncodedRequest& request, Micros now) {
    if (reply.type == REDIS_REPLY_ERROR) {
      throw std::runtime_error(Cat("the script failed: ", std::string_view(reply.str, reply.len)));
    }
    if (reply.type != REDIS_REPLY_ARRAY) {
      throw std::runtime_error(Cat("the script answered with reply type ", reply.type));
    }
    std::vector<int64_t> ints;
    for (size_t i = 0; i < reply.elements; ++i) {
      if (reply.element[i]->type != REDIS_REPLY_INTEGER) {
        throw std::runtime_error(Cat("the script's reply holds a non-integer at ", i));
      }
      ints.push_back(reply.element[i]->integer);
    }
    size_t pos = 0;
    Result<StoreResponse> r = DecodeResponse(ints, pos, request);
    if (!r.ok()) throw std::runtime_error(r.status().ToString());
    if (r->decisions.size() != 1) throw std::runtime_error("not one decision");
    const Result<int64_t> at = DecodeCallTime(ints, pos);
    if (!at.ok()) throw std::runtime_error(at.status().ToString());
    if (*at != now.count()) {
      throw std::runtime_error(Cat("the script decided at ", *at, " instead of ", now.count()));
    }
    return r->decisions[0];
  }

  void CopyFrom(const LuaReplayer& other) {
    const std::string from = StateKey(kPrefix, other.key_, other.limit_.algorithm());
    const std::string to = StateKey(kPrefix, key_, limit_.algorithm());
    LuaConnection::Get().Pipeline({{"DEL", to}, {"COPY", from, to}});
  }

  bool Exists() const {
    const std::string state = StateKey(kPrefix, key_, limit_.algorithm());
    auto replies = LuaConnection::Get().Pipeline({{"EXISTS", state}});
    return replies[0]->type == REDIS_REPLY_INTEGER && replies[0]->integer == 1;
  }

  void Drop() const {
    const std::string state = StateKey(kPrefix, key_, limit_.algorithm());
    LuaConnection::Get().Pipeline({{"DEL", state}});
  }

  Limit limit_;
  std::string key_;      // this replayer's store key
  std::string scratch_;  // where a peek decides
};

}  // namespace caudal::redis::testing
