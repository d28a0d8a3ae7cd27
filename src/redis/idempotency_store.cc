#include <hiredis/hiredis.h>

#include "common/cat.h"
#include "redis/hash_slot.h"
#include "redis/redis_idempotency_store.h"
#include "redis/routed_call.h"
#include "redis/sentinel_protocol.h"

namespace caudal {
namespace {

// KEYS: the record. ARGV: db, op, fingerprint, claim id, then ttl in ms and the result. A record
// is "<P|D>\n<fingerprint>\n<claim id>\n<result>" (the three first have no newline: they are
// checked to be [0-9A-Za-z_-]). Replies: claim → {0 claimed | 1 done, result | 2 in progress |
// 3 mismatch}; complete and release → {1 changed | 0 not the caller's claim}.
constexpr std::string_view kIdempotencyScript = R"lua(
if ARGV[1] ~= '0' then redis.call('SELECT', ARGV[1]) end
local op, fp, claim = ARGV[2], ARGV[3], ARGV[4]
local v = redis.call('GET', KEYS[1])
local state, vfp, vclaim, result
if v then
  local a = string.find(v, '\n', 1, true)
  local b = a and string.find(v, '\n', a + 1, true)
  local c = b and string.find(v, '\n', b + 1, true)
  if not c then return redis.error_reply('caudal: not an idempotency record: ' .. KEYS[1]) end
  state, vfp = string.sub(v, 1, a - 1), string.sub(v, a + 1, b - 1)
  vclaim, result = string.sub(v, b + 1, c - 1), string.sub(v, c + 1)
end
if op == 'claim' then
  if not v then
    redis.call('SET', KEYS[1], 'P\n' .. fp .. '\n' .. claim .. '\n', 'PX', ARGV[5])
    return {0}
  end
  if vfp ~= fp then return {3} end
  if state == 'P' then return {2} end
  return {1, result}
end
local ours = v and state == 'P' and vfp == fp and vclaim == claim
if not ours then return {0} end
if op == 'complete' then
  redis.call('SET', KEYS[1], 'D\n' .. fp .. '\n' .. claim .. '\n' .. ARGV[6], 'PX', ARGV[5])
  return {1}
end
if op == 'release' then
  redis.call('DEL', KEYS[1])
  return {1}
end
return redis.error_reply('unknown op')
)lua";

Status MalformedIdempotencyReply() {
  return Status::Unavailable("redis: an unexpected reply to the idempotency script");
}

std::optional<int64_t> First(const redisReply& r) {
  if (r.type != REDIS_REPLY_ARRAY || r.elements < 1 || r.element[0]->type != REDIS_REPLY_INTEGER) {
    return std::nullopt;
  }
  return r.element[0]->integer;
}

std::string Millis(Micros ttl) {
  return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(ttl).count());
}

class RedisIdempotencyStore final : public IdempotencyStore {
 public:
  RedisIdempotencyStore(const Clock& clock, RedisStoreOptions options, redis::RedisUrl url,
                        std::optional<redis::ClusterUrl> cluster,
                        std::optional<redis::SentinelUrl> sentinel)
      : options_(std::move(options)),
        calls_(runner_, clock, std::move(url), std::move(cluster), std::move(sentinel),
               kIdempotencyScript, redis::RecordCallsOptions(options_)) {}
  ~RedisIdempotencyStore() override {
    runner_.Stop([this] { calls_.Shutdown(); });
  }

  Status Init(redis::Transport transport) {
    if (transport == redis::Transport::kTls) {
      if (Status s = runner_.InitTls(options_); !s.ok()) return s;
    }
    runner_.Start();
    return Status::Ok();
  }

  void Claim(std::string_view key, std::string_view fingerprint, std::string_view claim, Micros ttl,
             ClaimCallback done) override {
    if (Status s = ValidateIdempotencyCall(key, fingerprint, claim, {}, ttl); !s.ok()) {
      return done(std::move(s));
    }
    Eval(key, {"claim", std::string(fingerprint), std::string(claim), Millis(ttl)}, kNew,
         [done = std::move(done)](Result<redis::Reply> r) {
           if (!r.ok()) return done(r.status());
           const redisReply& a = **r;
           const auto code = First(a);
           if (!code || *code < 0 || *code > 3) return done(MalformedIdempotencyReply());
           if (*code == 1) {
             if (a.elements != 2 || a.element[1]->type != REDIS_REPLY_STRING) {
               return done(MalformedIdempotencyReply());
             }
             return done(
                 IdempotencyClaim{.outcome = ClaimOutcome::kDone,
                                  .result = std::string(a.element[1]->str, a.element[1]->len)});
           }
           constexpr ClaimOutcome kOutcomes[] = {ClaimOutcome::kClaimed, ClaimOutcome::kDone,
                                                 ClaimOutcome::kInProgress,
                                                 ClaimOutcome::kMismatch};
           done(IdempotencyClaim{.outcome = kOutcomes[*code], .result = {}});
         });
  }

  void Complete(std::string_view key, std::string_view fingerprint, std::string_view claim,
                std::string_view result, Micros ttl, ChangeCallback done) override {
    if (Status s = ValidateIdempotencyCall(key, fingerprint, claim, result, ttl); !s.ok()) {
      return done(std::move(s));
    }
    Eval(key,
         {"complete", std::string(fingerprint), std::string(claim), Millis(ttl),
          std::string(result)},
         kFollowUp, Changed(std::move(done)));
  }

  void Release(std::string_view key, std::string_view fingerprint, std::string_view claim,
               ChangeCallback done) override {
    if (Status s = ValidateIdempotencyCall(key, fingerprint, claim, {}, Micros(1000)); !s.ok()) {
      return done(std::move(s));
    }
    Eval(key, {"release", std::string(fingerprint), std::string(claim)}, kFollowUp,
         Changed(std::move(done)));
  }

 private:
  static redis::RoutedCalls::Done Changed(ChangeCallback done) {
    return [done = std::move(done)](Result<redis::Reply> r) {
      if (!r.ok()) return done(r.status());
      const auto code = First(**r);
      if (!code || (*code != 0 && *code != 1)) return done(MalformedIdempotencyReply());
      done(*code == 1);
    };
  }

  // Complete and release end a claim already made (and charged for): they may pass the bound
  // that refuses new claims (routed_call.h), so that a flood of new keys does not leave the
  // decided ones in progress.
  static constexpr auto kNew = redis::RoutedCalls::Admission::kNew;
  static constexpr auto kFollowUp = redis::RoutedCalls::Admission::kFollowUp;

  void Eval(std::string_view key, std::vector<std::string> args,
            redis::RoutedCalls::Admission admission, redis::RoutedCalls::Done done) {
    std::string full = Cat(options_.key_prefix, "idempotency:", key);
    const int slot = redis::HashSlot(full);
    std::vector<std::string> argv = {"1", std::move(full), std::to_string(calls_.db())};
    for (std::string& a : args) argv.push_back(std::move(a));
    calls_.Ask(std::move(argv), slot, std::move(done), admission);
  }

  RedisStoreOptions options_;
  redis::IoRunner runner_;  // stopped first: no call runs while calls_ goes
  redis::RoutedCalls calls_;
};

}  // namespace

Result<std::unique_ptr<IdempotencyStore>> OpenRedisIdempotencyStore(const Clock& clock,
                                                                    RedisStoreOptions options) {
  redis::RedisUrl url;
  std::optional<redis::ClusterUrl> cluster;
  std::optional<redis::SentinelUrl> sentinel;
  redis::Transport transport = redis::Transport::kPlain;
  if (options.url.starts_with("redis-sentinel://")) {
    auto parsed = redis::ParseSentinelUrl(options.url);
    if (!parsed.ok()) return parsed.status();
    if (Status s = redis::ApplyUrlOptions(options, *parsed); !s.ok()) return s;
    transport = parsed->transport;
    sentinel = std::move(*parsed);
  } else if (options.url.starts_with("redis-cluster://")) {
    auto parsed = redis::ParseClusterUrl(options.url);
    if (!parsed.ok()) return parsed.status();
    if (Status s = redis::ApplyUrlOptions(options, *parsed); !s.ok()) return s;
    transport = parsed->transport;
    url = parsed->Node(parsed->seeds.front());
    cluster = std::move(*parsed);
  } else {
    auto parsed = redis::ParseRedisUrl(options.url);
    if (!parsed.ok()) return parsed.status();
    if (Status s = redis::ApplyUrlOptions(options, *parsed); !s.ok()) return s;
    transport = parsed->transport;
    url = std::move(*parsed);
  }
  auto store = std::make_unique<RedisIdempotencyStore>(clock, std::move(options), std::move(url),
                                                       std::move(cluster), std::move(sentinel));
  if (Status s = store->Init(transport); !s.ok()) return s;
  return std::unique_ptr<IdempotencyStore>(std::move(store));
}

}  // namespace caudal
