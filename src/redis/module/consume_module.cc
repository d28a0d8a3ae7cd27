// The caudal Redis module: CAUDAL.CONSUME decides a call of plain consumes natively, exactly as the
// fast script (src/redis/lua/consume.lua) decides it, on the same state and with the same reply,
// through the C++ algorithms themselves (src/algorithms/) rather than their Lua twins.
//
//   CAUDAL.CONSUME <protocol> <numkeys> <key>... <now> <slack> <request>...
//   CAUDAL.PROTOCOL  (the <protocol> it speaks)
//
// is FCALL's call of the fast script with the module's name in the function's place: <protocol>
// must be the fast script's function name (kConsumeFunction, which carries its content's hash),
// so an instance never speaks to a module of another build (it asks CAUDAL.PROTOCOL when it
// connects, and calls the script when it is not its own). The rest
// (keys, time, requests, costs apart, reply) is the fast script's (lua_protocol.h, decide.lua's
// header).
//
// Writes go through Redis's key API, in place, and are propagated to replicas and the AOF as the
// SETs a script's effects would be (with an absolute expiry), so a replica needs no module.
#include <algorithm>
#include <array>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "algorithms/algorithm.h"
#include "redis/lua_protocol.h"
#include "redis/module/module_api.h"
#include "redis/script.h"

namespace caudal::redis::module {
namespace {

Api api;

// The fast script's errors, word for word where it has them.
constexpr const char* kNoKeys = "ERR caudal consume: keys must be declared";
constexpr const char* kMalformed = "ERR caudal consume: a malformed request";
constexpr const char* kNotPlain = "ERR caudal consume: an entry that is not a plain consume";
constexpr const char* kNotDecision = "ERR caudal consume: a request that is not a decision";
constexpr const char* kCostsMissing = "ERR caudal consume: a request whose costs are missing";
constexpr const char* kNoKey = "ERR caudal consume: a request without its key";
constexpr const char* kBadLimit = "ERR caudal consume: a limit out of bounds";
constexpr const char* kBadTime = "ERR caudal consume: a malformed time";
constexpr const char* kBadGroup = "ERR caudal consume: a malformed group value";
constexpr const char* kBadState = "ERR caudal consume: a malformed state value";
constexpr const char* kWrongType =
    "WRONGTYPE Operation against a key holding the wrong kind of value";
constexpr const char* kWriteFailed = "ERR caudal consume: a write Redis refused";

constexpr size_t kWord = 8;
constexpr uint8_t kStateTag = 1, kGroupTag = 2;
constexpr size_t kStateBytes = 33, kGroupHead = 17, kMemberBytes = 40;

// A little-endian 64-bit word.
uint64_t ReadWord(const char* p) {
  uint64_t u = 0;
  for (size_t i = kWord; i-- > 0;) u = (u << 8) | static_cast<unsigned char>(p[i]);
  return u;
}
int64_t ReadInt(const char* p) { return static_cast<int64_t>(ReadWord(p)); }
// Every value the state holds is an integer below 2^53 in magnitude (compact_state.h), the
// bound the algorithms' arithmetic is exact within.
constexpr int64_t kExact = int64_t{1} << 53;
// The state's numbers are doubles holding exact integers (compact_state.lua). False for any
// other: a value caudal never wrote, which is refused rather than decided on.
bool ReadDouble(const char* p, int64_t& out) {
  const uint64_t u = ReadWord(p);
  double d;
  std::memcpy(&d, &u, sizeof d);
  if (!(d > -static_cast<double>(kExact) && d < static_cast<double>(kExact)) ||
      d != static_cast<double>(static_cast<int64_t>(d))) {
    return false;
  }
  out = static_cast<int64_t>(d);
  return true;
}
void PutDouble(int64_t v, std::string& out) {
  const double d = static_cast<double>(v);
  uint64_t u;
  std::memcpy(&u, &d, sizeof u);
  for (size_t i = 0; i < kWord; ++i) out += static_cast<char>((u >> (8 * i)) & 0xff);
}
// floor(x / y) and its ceiling, y > 0.
int64_t FloorDiv(int64_t x, int64_t y) { return x / y - (x % y != 0 && x < 0 ? 1 : 0); }
int64_t CeilDiv(int64_t x, int64_t y) { return -FloorDiv(-x, y); }

// One entry, decoded: its limit and decide function, its cost and its member id (0: a key of
// its own).
struct Entry {
  Limit limit;
  Step (*decide)(const Limit&, const CompactState*, Micros, int64_t);
  int64_t cost;
  int64_t id;
  // A fixed window counting calendar windows (CALENDAR_FLAG): the boundaries it is handed.
  bool calendar;
  CalendarBounds bounds;
};
struct Request {
  std::vector<Entry> entries;
  bool one = false;    // ONE_KEY: one key, the group's, for every entry
  bool apart = false;  // COSTS_APART: the costs follow in the next argument
};

// The requests already decoded, by their bytes, as the fast script remembers them: a policy's
// requests repeat. Bounded by the bytes held: it starts afresh past kDecodedBytesMax.
struct BytesHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
};
std::unordered_map<std::string, Request, BytesHash, std::equal_to<>> decoded;
size_t decoded_bytes = 0;
constexpr size_t kDecodedBytesMax = 262'144;

// The error, or nullptr, decoding `req` into `r`.
const char* Decode(std::string_view req, Request& r) {
  if (req.size() < kWord) return kMalformed;
  int64_t count = ReadInt(req.data());
  // The fast script's path of group members with no calendar window: every entry a member.
  bool members = false;
  if (req.size() == 6 * kWord) {  // one entry: the fast script's first path
    if (count != 1) return kMalformed;
  } else {
    r.apart = count > kCostsApart;
    if (r.apart) count -= kCostsApart;
    r.one = count > kOneKeyRequest;
    if (r.one) count -= kOneKeyRequest;
    if (count < 1) return kNotDecision;
    members = r.one && count <= kMaxGroupMembers &&
              req.size() == kWord + 6 * kWord * static_cast<size_t>(count);
  }
  size_t p = kWord;
  for (int64_t i = 0; i < count; ++i) {
    if (p + 5 * kWord > req.size()) return kMalformed;
    int64_t alg = ReadInt(req.data() + p);
    const int64_t cap = ReadInt(req.data() + p + kWord);
    const int64_t rn = ReadInt(req.data() + p + 2 * kWord);
    const int64_t rp = ReadInt(req.data() + p + 3 * kWord);
    const int64_t cost = ReadInt(req.data() + p + 4 * kWord);
    int64_t id = 0;
    p += 5 * kWord;
    if (members) {  // every entry a member: its id follows
      if (alg < kGroupFlag || alg >= kGroupFlag + kCalendarFlag) return kNotPlain;
      alg -= kGroupFlag;
    } else if (req.size() != 6 * kWord && alg >= kGroupFlag) {
      alg -= kGroupFlag;
      id = 1;  // (read below)
    }
    if (id != 0 || members) {
      if (p + kWord > req.size()) return kMalformed;
      id = ReadInt(req.data() + p);
      p += kWord;
    }
    bool calendar = false;
    CalendarBounds bounds{};
    if (alg >= kCalendarFlag && alg < kCalendarFlag + static_cast<int64_t>(kAlgorithmCount)) {
      alg -= kCalendarFlag;  // four consecutive boundaries, in [0, 2^52) µs
      if (alg != static_cast<int64_t>(Algorithm::kFixedWindow)) return kNotPlain;
      if (p + 4 * kWord > req.size()) return kMalformed;
      for (size_t b = 0; b < 4; ++b) {
        bounds[b] = Micros(ReadInt(req.data() + p + b * kWord));
        if (bounds[b].count() < 0 || bounds[b].count() >= kExact / 2 ||
            (b > 0 && bounds[b] <= bounds[b - 1])) {
          return kMalformed;
        }
      }
      p += 4 * kWord;
      calendar = true;
    }
    if (cost < 0 || alg < 0 || alg >= static_cast<int64_t>(kAlgorithmCount) ||
        kAlgorithmTable[alg].state != StateShape::kCompact) {
      return kNotPlain;
    }
    const Algorithm a = kAlgorithmTable[alg].algorithm;
    // A bucket's rate travels reduced (n/p in lowest terms), its period possibly below
    // kMinPeriod: scaled by the least k that brings it back, which Limit::Create reduces to the
    // same n/p (the rate as written was such a multiple, so n·k stays within bounds).
    if (rn < 0 || rn > kMaxRateCount) return kBadLimit;
    const int64_t k = rp > 0 && rp < kMinPeriod.count() ? CeilDiv(kMinPeriod.count(), rp) : 1;
    Result<Limit> limit = Limit::Create(
        IsWindowAlgorithm(a)
            ? LimitSpec::Window(a, cap, Micros(rp))
            : LimitSpec::Bucket(a, cap, Rate{.count = rn * k, .period = Micros(rp * k)}));
    if (!limit.ok()) return kBadLimit;
    r.entries.push_back(
        {*std::move(limit), kAlgorithmTable[alg].compact.decide, cost, id, calendar, bounds});
  }
  return nullptr;
}

// The call: its keys (argv), its time and slack, its reply.
struct Call {
  RedisModuleCtx* ctx;
  RedisModuleString** keys;
  int nkeys;
  int64_t now;
  int64_t slack;
  std::vector<long long> out;
};

// A key of its own's state (compact_state.lua's compact_parse): present or fresh, with `keep`
// when written in binary.
struct State {
  bool present = false;
  CompactState st;
  bool has_keep = false;
  int64_t keep = 0;
};

bool ParseText(std::string_view v, CompactState& st) {
  size_t p = 0;
  for (int i = 0; i < 3; ++i) {
    if (i > 0) {
      if (p >= v.size() || v[p] != ' ') return false;
      ++p;
    }
    const size_t start = p;
    if (p < v.size() && v[p] == '-') ++p;
    const size_t digits = p;
    while (p < v.size() && v[p] >= '0' && v[p] <= '9') ++p;
    if (p == digits) return false;
    const std::from_chars_result r = std::from_chars(v.data() + start, v.data() + p, st.w[i]);
    if (r.ec != std::errc() || st.w[i] <= -kExact || st.w[i] >= kExact) return false;
  }
  return p == v.size();
}

// A key of its own's value; false for a binary state holding numbers caudal never writes.
bool ParseState(std::string_view v, State& s) {
  s = State{};
  if (v.size() == kStateBytes && static_cast<uint8_t>(v[0]) == kStateTag) {
    for (size_t i = 0; i < 3; ++i) {
      if (!ReadDouble(v.data() + 1 + i * kWord, s.st.w[i])) return false;
    }
    if (!ReadDouble(v.data() + 1 + 3 * kWord, s.keep)) return false;
    s.present = s.has_keep = true;
  } else {
    s.present = ParseText(v, s.st);
  }
  return true;
}

struct Member {
  int64_t id, until;
  std::array<int64_t, 3> w;
};
struct Group {
  bool has_keep = false;
  int64_t keep = 0;
  std::vector<Member> members;
  int64_t need = -1;  // the general path's longest need of the members written (-1: none)
};

// A group's value (group_parse): a fresh group unless it is one. False when it claims more
// members than it holds, or holds numbers caudal never writes.
bool ParseGroup(std::string_view v, Group& g) {
  g.has_keep = false;
  g.members.clear();
  if (v.size() < kGroupHead || v.size() % kMemberBytes != kGroupHead ||
      static_cast<uint8_t>(v[0]) != kGroupTag) {
    return true;
  }
  g.has_keep = true;
  int64_t n = 0;
  if (!ReadDouble(v.data() + 1, g.keep) || !ReadDouble(v.data() + 1 + kWord, n) || n < 0 ||
      static_cast<size_t>(n) > (v.size() - kGroupHead) / kMemberBytes) {
    return false;
  }
  for (int64_t i = 0; i < n; ++i) {
    const char* q = v.data() + kGroupHead + i * kMemberBytes;
    Member m;
    if (!ReadDouble(q, m.id) || !ReadDouble(q + kWord, m.until)) return false;
    for (size_t w = 0; w < 3; ++w) {
      if (!ReadDouble(q + (2 + w) * kWord, m.w[w])) return false;
    }
    g.members.push_back(m);
  }
  return true;
}

int FindMember(const Group& g, int64_t id) {
  for (size_t j = 0; j < g.members.size(); ++j) {
    if (g.members[j].id == id) return static_cast<int>(j);
  }
  return -1;
}

// An open key: read once, written in place.
class Key {
 public:
  Key(Call& call, int k)
      : call_(call), name_(call.keys[k]), key_(api.OpenKey(call.ctx, name_, kRead | kWrite)) {}
  ~Key() { api.CloseKey(key_); }
  Key(const Key&) = delete;
  Key& operator=(const Key&) = delete;

  // The value (empty: absent); false for a key of another type.
  bool Read(std::string_view& value) {
    const int type = api.KeyType(key_);
    if (type == kKeyEmpty) {
      value = {};
      return true;
    }
    if (type != kKeyString) return false;
    size_t len = 0;
    const char* p = api.StringDMA(key_, &len, kRead);
    value = std::string_view(p, len);
    return true;
  }

  // SET key value KEEPTTL (px_ms < 0) or PX px_ms, and its propagation as the SET a script's
  // effects are (an absolute expiry).
  bool Write(const std::string& value, int64_t px_ms) {
    size_t len = 0;
    if (api.KeyType(key_) == kKeyString) api.StringDMA(key_, &len, kRead);
    if (len != value.size() && api.StringTruncate(key_, value.size()) != kOk) return false;
    char* p = api.StringDMA(key_, &len, kWrite);
    if (p == nullptr || len != value.size()) return false;
    std::memcpy(p, value.data(), len);
    if (px_ms < 0) {
      api.Replicate(call_.ctx, "SET", "sbc", name_, value.data(), value.size(), "KEEPTTL");
      return true;
    }
    if (api.SetExpire(key_, px_ms) != kOk) return false;
    api.Replicate(call_.ctx, "SET", "sbcl", name_, value.data(), value.size(), "PXAT",
                  static_cast<long long>(api.Milliseconds() + px_ms));
    return true;
  }

 private:
  Call& call_;
  RedisModuleString* name_;
  RedisModuleKey* key_;
};

// compact_write: a key of its own's state, which must live until fresh, `reset` µs after now.
bool WriteState(Key& key, const State& read, const CompactState& next, const Call& c,
                int64_t reset) {
  int64_t ttl = CeilDiv(reset, 1000);
  if (ttl < 1) ttl = 1;
  std::string v(1, static_cast<char>(kStateTag));
  v.reserve(kStateBytes);
  for (const int64_t w : next.w) PutDouble(w, v);
  if (read.present && read.has_keep && read.keep >= c.now + ttl * 1000) {
    PutDouble(read.keep, v);
    return key.Write(v, -1);
  }
  ttl += ttl / 8;
  PutDouble(c.now + (ttl - 1) * 1000, v);
  return key.Write(v, ttl + c.slack);
}

// group_write: past kMaxGroupMembers, the members nearest fresh go first, never one written in
// the call; the TTL from the value's `keep`.
bool WriteGroup(Key& key, Group& g, const Call& c, int64_t reset,
                const std::unordered_set<int64_t>& written) {
  while (g.members.size() > static_cast<size_t>(kMaxGroupMembers)) {
    int near = -1;
    for (size_t j = 0; j < g.members.size(); ++j) {
      if (!written.contains(g.members[j].id) &&
          (near < 0 || g.members[j].until < g.members[near].until)) {
        near = static_cast<int>(j);
      }
    }
    if (near < 0) break;
    g.members[near] = g.members.back();
    g.members.pop_back();
  }
  int64_t ttl = CeilDiv(reset, 1000);
  if (ttl < 1) ttl = 1;
  int64_t px = -1;
  if (!(g.has_keep && c.now + ttl * 1000 <= g.keep)) {
    ttl = ttl * 9 / 8;
    if (g.has_keep && c.now + (ttl - 1) * 1000 < g.keep) ttl = CeilDiv(g.keep - c.now, 1000) + 1;
    g.keep = c.now + (ttl - 1) * 1000;
    g.has_keep = true;
    px = ttl + c.slack;
  }
  std::string v(1, static_cast<char>(kGroupTag));
  v.reserve(kGroupHead + kMemberBytes * g.members.size());
  PutDouble(g.keep, v);
  PutDouble(static_cast<int64_t>(g.members.size()), v);
  for (const Member& m : g.members) {
    PutDouble(m.id, v);
    PutDouble(m.until, v);
    for (const int64_t w : m.w) PutDouble(w, v);
  }
  return key.Write(v, px);
}

// One decision: the reply's four integers and what to write.
struct Decided {
  int64_t verdict, remaining, reset, retry;
  bool consumed;
  CompactState next;
};
Decided DecideEntry(const Entry& e, const CompactState* st, int64_t now, int64_t cost) {
  const Step s = e.calendar ? fixed_window::DecideOnBounds(e.limit, e.bounds, st, Micros(now), cost)
                            : e.decide(e.limit, st, Micros(now), cost);
  const Decision& d = s.decision;
  return {static_cast<int64_t>(d.verdict),
          d.overdrawn > 0 ? -d.overdrawn : d.remaining,
          d.reset_after.count(),
          d.retry_after.count(),
          s.changed,
          s.next};
}
void Append(std::vector<long long>& out, const Decided& d) {
  out.insert(out.end(), {d.verdict, d.remaining, d.reset, d.retry});
}

int Error(RedisModuleCtx* ctx, const char* message) { return api.ReplyWithError(ctx, message); }

std::string_view View(RedisModuleString* s) {
  size_t len = 0;
  const char* p = api.StringPtrLen(s, &len);
  return {p, len};
}

bool ParseInt(std::string_view s, int64_t& v) {
  const std::from_chars_result r = std::from_chars(s.data(), s.data() + s.size(), v);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

// The store's time: Redis's TIME (µs), as the script reads it.
bool RedisTime(RedisModuleCtx* ctx, int64_t& now) {
  RedisModuleCallReply* reply = api.Call(ctx, "TIME", "");
  if (reply == nullptr) return false;
  int64_t parts[2] = {0, 0};
  bool ok = true;
  for (size_t i = 0; i < 2 && ok; ++i) {
    RedisModuleCallReply* e = api.CallReplyArrayElement(reply, i);
    size_t len = 0;
    const char* p = e ? api.CallReplyStringPtr(e, &len) : nullptr;
    ok = p != nullptr && ParseInt({p, len}, parts[i]);
  }
  api.FreeCallReply(reply);
  now = parts[0] * 1'000'000 + parts[1];
  return ok;
}

int Consume(RedisModuleCtx* ctx, RedisModuleString** argv, int argc) {
  if (argc < 3) return api.WrongArity(ctx);
  int64_t nkeys = 0;
  if (!ParseInt(View(argv[2]), nkeys) || nkeys < 0 || nkeys > argc - 3) {
    return Error(ctx, "ERR caudal consume: a malformed key count");
  }
  if (api.IsKeysPositionRequest(ctx)) {
    for (int i = 0; i < nkeys; ++i) api.KeyAtPos(ctx, 3 + i);
    return kOk;
  }
  if (View(argv[1]) != kConsumeFunction) {
    return Error(ctx, "ERR caudal consume: another build's protocol");
  }
  if (nkeys == 0) return Error(ctx, kNoKeys);
  int a = 3 + static_cast<int>(nkeys);
  if (argc < a + 2) return api.WrongArity(ctx);
  Call c{.ctx = ctx,
         .keys = argv + 3,
         .nkeys = static_cast<int>(nkeys),
         .now = 0,
         .slack = 0,
         .out = {}};
  const std::string_view given = View(argv[a]);
  // Times are µs in [0, 2^52) (compact_state.h); the slack a TTL's ms, at most a year.
  if ((given.empty() ? !RedisTime(ctx, c.now) : !ParseInt(given, c.now)) || c.now < 0 ||
      c.now >= kExact / 2) {
    return Error(ctx, kBadTime);
  }
  if (!ParseInt(View(argv[a + 1]), c.slack) || c.slack < 0 || c.slack > 365LL * 86'400'000) {
    return Error(ctx, kBadTime);
  }
  a += 2;

  // The general path's groups of the call, by key index, in the order read, written at its end.
  std::vector<std::pair<int, Group>> groups;
  std::unordered_set<int64_t> written;  // member ids the call wrote (group_put's GROUP_WRITTEN)
  const auto group_of = [&](int k) -> Group* {
    for (auto& [key, g] : groups) {
      if (key == k || View(c.keys[key]) == View(c.keys[k])) return &g;
    }
    return nullptr;
  };
  int k = 0;
  std::vector<int64_t> costs;
  std::vector<Decided> ds;
  std::vector<State> states;
  std::vector<int> at;
  std::vector<CompactState> words;  // whole_group's members as read
  while (a < argc) {
    const std::string_view bytes = View(argv[a++]);
    auto found = decoded.find(bytes);
    if (found == decoded.end()) {
      Request r;
      if (const char* err = Decode(bytes, r)) return Error(ctx, err);
      if (decoded_bytes + bytes.size() > kDecodedBytesMax) {
        decoded.clear();
        decoded_bytes = 0;
      }
      decoded_bytes += bytes.size();
      found = decoded.emplace(std::string(bytes), std::move(r)).first;
    }
    const Request& r = found->second;
    const size_t count = r.entries.size();
    costs.resize(count);
    for (size_t i = 0; i < count; ++i) costs[i] = r.entries[i].cost;
    if (r.apart) {  // its costs: the next argument
      if (a >= argc) return Error(ctx, kCostsMissing);
      const std::string_view cs = View(argv[a++]);
      if (cs.size() != kWord * count) return Error(ctx, kCostsMissing);
      for (size_t i = 0; i < count; ++i) {
        costs[i] = ReadInt(cs.data() + kWord * i);
        if (costs[i] < 0) return Error(ctx, kNotPlain);
      }
    }
    if (k >= c.nkeys) return Error(ctx, kNoKey);

    if (count == 1 && !r.one && bytes.size() == 6 * kWord) {  // one entry
      Key key(c, k++);
      std::string_view v;
      if (!key.Read(v)) return Error(ctx, kWrongType);
      State s;
      if (!ParseState(v, s)) return Error(ctx, kBadState);
      const Decided d = DecideEntry(r.entries[0], s.present ? &s.st : nullptr, c.now, costs[0]);
      if (d.consumed && !WriteState(key, s, d.next, c, d.reset)) return Error(ctx, kWriteFailed);
      c.out.push_back(d.verdict == static_cast<int64_t>(Verdict::kAllowed) ? 1 : 0);
      Append(c.out, d);
      continue;
    }

    // A request of one group's members, in the order its value holds them (whole_group).
    if (r.one && count <= static_cast<size_t>(kMaxGroupMembers) && group_of(k) == nullptr) {
      Key key(c, k);
      std::string_view v;
      if (!key.Read(v)) return Error(ctx, kWrongType);
      Group g;
      if (!ParseGroup(v, g)) return Error(ctx, kBadGroup);
      const size_t n = g.members.size();
      bool whole = n == 0 || n == count;
      for (size_t i = 0; whole && n != 0 && i < count; ++i) {
        whole = g.members[i].id == r.entries[i].id;
      }
      ds.clear();
      words.clear();
      bool all = true, changed = false;
      int64_t need = -1;
      for (size_t i = 0; whole && i < count; ++i) {
        CompactState st;
        if (n != 0) st.w = g.members[i].w;
        words.push_back(st);
        const Decided d = DecideEntry(r.entries[i], n != 0 ? &st : nullptr, c.now, costs[i]);
        all = all && d.verdict == static_cast<int64_t>(Verdict::kAllowed);
        if (d.consumed) {
          changed = true;
          if (n == 0) g.members.resize(count);
          g.members[i] = {r.entries[i].id, c.now + d.reset, d.next.w};
          need = std::max(need, d.reset);
        } else if (n == 0) {
          whole = false;
        }
        ds.push_back(d);
      }
      if (whole) {
        ++k;
        if (all) {
          if (changed && !WriteGroup(key, g, c, need, written)) return Error(ctx, kWriteFailed);
          c.out.push_back(kAllowedBrief);
          for (const Decided& d : ds) c.out.insert(c.out.end(), {d.remaining, d.reset});
        } else {  // refused whole: those that consumed decided again without their consumption
          c.out.push_back(0);
          for (size_t i = 0; i < count; ++i) {
            if (ds[i].consumed) {
              Append(c.out, DecideEntry(r.entries[i], n != 0 ? &words[i] : nullptr, c.now, 0));
            } else {
              Append(c.out, ds[i]);
            }
          }
        }
        continue;
      }
    }

    // The general path: each group read once per call, each key of its own read and written.
    ds.assign(count, {});
    states.assign(count, {});
    at.assign(count, -1);
    std::vector<int> kk(count);
    bool all = true;
    for (size_t i = 0; i < count; ++i) {
      if (k >= c.nkeys) return Error(ctx, kNoKey);
      kk[i] = k;
      if (!r.one || i + 1 == count) ++k;
      const Entry& e = r.entries[i];
      if (e.id != 0) {
        Group* g = group_of(kk[i]);
        if (g == nullptr) {
          Key key(c, kk[i]);
          std::string_view v;
          if (!key.Read(v)) return Error(ctx, kWrongType);
          groups.emplace_back(kk[i], Group{});
          g = &groups.back().second;
          if (!ParseGroup(v, *g)) return Error(ctx, kBadGroup);
        }
        at[i] = FindMember(*g, e.id);
        if (at[i] >= 0) {
          states[i].present = true;
          states[i].st.w = g->members[at[i]].w;
        }
      } else {
        Key key(c, kk[i]);
        std::string_view v;
        if (!key.Read(v)) return Error(ctx, kWrongType);
        if (!ParseState(v, states[i])) return Error(ctx, kBadState);
      }
      ds[i] = DecideEntry(e, states[i].present ? &states[i].st : nullptr, c.now, costs[i]);
      if (ds[i].verdict != static_cast<int64_t>(Verdict::kAllowed)) all = false;
    }
    c.out.push_back(all ? 1 : 0);
    for (size_t i = 0; i < count; ++i) {
      const Entry& e = r.entries[i];
      if (ds[i].consumed) {
        if (!all) {
          ds[i] = DecideEntry(e, states[i].present ? &states[i].st : nullptr, c.now, 0);
        } else if (e.id != 0) {
          Group* g = group_of(kk[i]);
          int j = at[i] >= 0 ? at[i] : FindMember(*g, e.id);
          if (j < 0) {
            g->members.push_back({});
            j = static_cast<int>(g->members.size()) - 1;
          }
          g->members[j] = {e.id, c.now + ds[i].reset, ds[i].next.w};
          written.insert(e.id);
          g->need = std::max(g->need, ds[i].reset);
        } else {
          Key key(c, kk[i]);
          if (!WriteState(key, states[i], ds[i].next, c, ds[i].reset)) {
            return Error(ctx, kWriteFailed);
          }
        }
      }
      Append(c.out, ds[i]);
    }
  }
  for (auto& [index, g] : groups) {  // each group read: written once, when a member changed
    if (g.need < 0) continue;
    Key key(c, index);
    if (!WriteGroup(key, g, c, g.need, written)) return Error(ctx, kWriteFailed);
  }
  c.out.push_back(c.now);
  api.ReplyWithArray(ctx, static_cast<long>(c.out.size()));
  for (const long long v : c.out) api.ReplyWithLongLong(ctx, v);
  return kOk;
}

// CAUDAL.PROTOCOL: the protocol CAUDAL.CONSUME speaks (kConsumeFunction), which a store asks
// for when it connects: it sends its calls to the module only when it is its own.
int Protocol(RedisModuleCtx* ctx, RedisModuleString**, int argc) {
  if (argc != 1) return api.WrongArity(ctx);
  return api.ReplyWithStringBuffer(ctx, kConsumeFunction.data(), kConsumeFunction.size());
}

}  // namespace
}  // namespace caudal::redis::module

extern "C" __attribute__((visibility("default"))) int RedisModule_OnLoad(RedisModuleCtx* ctx,
                                                                         RedisModuleString**, int) {
  using namespace caudal::redis::module;
  if (!LoadApi(ctx, api)) return kErr;
  if (api.IsModuleNameBusy("caudal")) return kErr;
  api.SetModuleAttribs(ctx, "caudal", 1, kApiVersion1);
  if (api.CreateCommand(ctx, "caudal.protocol", Protocol, "readonly fast", 0, 0, 0) != kOk) {
    return kErr;
  }
  return api.CreateCommand(ctx, "caudal.consume", Consume, "write deny-oom getkeys-api", 0, 0, 0);
}
