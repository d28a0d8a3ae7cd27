#include "redis/lua_protocol.h"

#include <algorithm>
#include <charconv>

#include "algorithms/algorithm.h"
#include "store/siphash.h"

namespace caudal::redis {
namespace {

std::string Decimal(int64_t v) {
  char buf[24];
  const auto res = std::to_chars(buf, buf + sizeof(buf), v);
  return std::string(buf, res.ptr);
}

constexpr size_t kWord = 8;  // bytes per packed number ('<i8' in the script)

void Put(int64_t v, char* at) {
  auto u = static_cast<uint64_t>(v);
  for (size_t i = 0; i < kWord; ++i, u >>= 8) at[i] = static_cast<char>(u & 0xff);
}

void Pack(int64_t v, std::string& out) {
  char b[kWord];
  Put(v, b);
  out.append(b, kWord);
}

int64_t Unpack(std::string_view args, size_t index) {
  uint64_t u = 0;
  for (size_t i = kWord; i-- > 0;) {
    u = (u << 8) | static_cast<unsigned char>(args[index * kWord + i]);
  }
  return static_cast<int64_t>(u);
}

// The algorithm's number, capacity and rate (two): how every entry starts.
void AppendLimitArgs(int64_t algorithm, const Limit& l, std::string& args) {
  Pack(algorithm, args);
  Pack(l.capacity(), args);
  if (!FieldsOf(l.algorithm()).period_is_rate) {  // limit per window or hold
    Pack(l.capacity(), args);
    Pack(l.window().count(), args);
  } else {  // the reduced refill rate
    Pack(l.refill_count(), args);
    Pack(l.refill_period_us(), args);
  }
}

// An entry's grouped key, read back (nullopt: a key of its own).
std::optional<GroupedKey> GroupOf(const EntryRef& e) {
  if (e.key.empty() || e.key[0] != '#') return std::nullopt;
  return ReadGroupedKey(e.key);
}

// A calendar window's boundaries around `near` (kCalendarFlag).
void AppendCalendarBounds(const Calendar& calendar, Micros near, std::string& args) {
  for (const Micros b : calendar.BoundsAround(near)) Pack(b.count(), args);
}

// Appends one entry's numbers: algorithm, capacity, rate (two), cost, a calendar's boundaries,
// and the lease asked for when there is one; a give-back's are an undo entry's (units, the
// grant's time and reset_after, a calendar's boundaries). True when it is a group's member.
bool AppendEntryArgs(const EntryRef& e, Micros near, std::string& args) {
  const std::optional<Calendar>& calendar = e.limit->calendar();
  const std::optional<GroupedKey> group = GroupOf(e);
  const auto algorithm = static_cast<int64_t>(e.limit->algorithm()) +
                         (calendar ? kCalendarFlag : 0) + (group ? kGroupFlag : 0);
  if (e.op == EntryOp::kShare) {
    const ShareEntry& share = *e.share;
    AppendLimitArgs(algorithm, *e.limit, args);
    Pack(e.limit->rate().count, args);
    Pack(e.limit->rate().period.count(), args);
    Pack(share.demand, args);
    Pack(share.weight, args);
    Pack(share.ttl.count(), args);
    Pack(share.fairness == Fairness::kMaxMin ? 0 : 1, args);
    Pack(static_cast<int64_t>(share.consumer.size()), args);
    Pack(static_cast<int64_t>(share.group.size()), args);
    args += share.consumer;
    args += share.group;
    return false;
  }
  if (e.op == EntryOp::kGiveBack) {
    AppendLimitArgs(algorithm, *e.limit, args);
    Pack(e.cost, args);
    Pack(e.grant->at.count(), args);
    Pack(e.grant->reset_after.count(), args);
    if (group) Pack(MemberId(group->member), args);
    if (calendar) AppendCalendarBounds(*calendar, near, args);
    return false;  // (an undo request: its keys one per entry)
  }
  const int64_t flag = e.op == EntryOp::kCharge ? kChargeFlag : e.lease > 0 ? kLeaseFlag : 0;
  const bool reserving =
      (e.reservation != nullptr || e.forget_reservations) && SupportsReserve(e.limit->algorithm());
  AppendLimitArgs(algorithm + flag + (reserving ? kReserveFlag : 0), *e.limit, args);
  // A refund travels as a negative cost (a refund of 0 is a peek either way), a release as -1.
  Pack(e.op == EntryOp::kRefund ? -e.cost : e.op == EntryOp::kRelease ? -1 : e.cost, args);
  if (group) Pack(MemberId(group->member), args);
  if (calendar) AppendCalendarBounds(*calendar, near, args);
  if (flag == kLeaseFlag) Pack(e.lease, args);
  if (HasHolds(e.limit->algorithm())) {  // its hold's id
    Pack(e.hold != nullptr ? e.hold->hi : 0, args);
    Pack(e.hold != nullptr ? e.hold->lo : 0, args);
  }
  if (reserving) {
    const bool names = e.op == EntryOp::kReserve || e.op == EntryOp::kSettle;
    const ReservationTerms* t = e.reservation;
    Pack(e.forget_reservations       ? 3
         : e.op == EntryOp::kReserve ? 1
         : e.op == EntryOp::kSettle  ? 2
                                     : 0,
         args);
    Pack(names ? e.hold->hi : 0, args);
    Pack(names ? e.hold->lo : 0, args);
    Pack(t != nullptr ? t->ttl.count() : 0, args);
    Pack(t != nullptr && t->on_expiry == ExpiryOutcome::kGiveBack ? 1 : 0, args);
    Pack(t != nullptr ? t->max_open : 0, args);
  }
  return group.has_value();
}

constexpr size_t kArgsPerEntry = 5;
constexpr size_t kArgsPerUndoEntry = 7;  // 9 for a reserve's undo: + its id

constexpr auto kConcurrencyNumber = static_cast<int64_t>(Algorithm::kConcurrency);

constexpr size_t kCalendarBounds = 4;

// How many numbers an entry of a request (not an undo) takes, from its first one.
size_t EntryWidth(int64_t algorithm) {
  const size_t member = algorithm >= kGroupFlag ? 1 : 0;
  if (algorithm >= kGroupFlag) algorithm -= kGroupFlag;
  const size_t calendar = algorithm >= kCalendarFlag ? kCalendarBounds : 0;
  if (algorithm >= kCalendarFlag) algorithm -= kCalendarFlag;
  const size_t reservation = algorithm >= kReserveFlag ? 6 : 0;
  if (algorithm >= kReserveFlag) algorithm -= kReserveFlag;
  if (algorithm == kConcurrencyNumber) return kArgsPerEntry + 2;  // the hold id
  return (algorithm >= kLeaseFlag ? kArgsPerEntry + 1 : kArgsPerEntry) + member + calendar +
         reservation;
}

// Starts a request of `n` entries, the first of them `first`: its count (negative for
// give-backs, which travel as an undo request) and room for its numbers.
void StartRequest(EncodedRequest& r, const EntryRef& first, size_t n) {
  const bool give_backs = first.op == EntryOp::kGiveBack;
  r.args.reserve(kWord * (1 + (give_backs ? kArgsPerUndoEntry : kArgsPerEntry) * n));
  r.limits.reserve(n);
  const auto count = static_cast<int64_t>(n);
  r.shares = first.op == EntryOp::kShare;
  Pack(give_backs ? -count : r.shares ? kShareRequest + count : count, r.args);
}

// The consumers' hash of a share's state key.
std::string ShareKey(std::string_view state_key) { return std::string(state_key) + ":sh"; }

// True when the entry is a group's member (AppendEntryArgs).
bool AddEntry(EncodedRequest& r, const EntryRef& e, Micros near) {
  const bool member = AppendEntryArgs(e, near, r.args);
  if (e.lease > 0) r.leases.push_back(static_cast<uint16_t>(r.limits.size()));
  if (e.op == EntryOp::kRelease) r.releases.push_back(static_cast<uint16_t>(r.limits.size()));
  if (e.op == EntryOp::kReserve || e.op == EntryOp::kSettle) {
    r.reservations.push_back(static_cast<uint16_t>(r.limits.size()));
  }
  r.limits.push_back(e.limit->capacity());
  return member;
}

// Each entry's cost word in `args`, a request on one key (every entry a group's member).
template <typename F>
void ForEachCost(std::string_view args, F&& f) {
  const int64_t count = Unpack(args, 0) - kOneKeyRequest;
  const size_t words = args.size() / kWord;
  size_t at = 1;
  for (int64_t i = 0; i < count && at + kArgsPerEntry <= words; ++i) {
    const int64_t algorithm = Unpack(args, at) - kGroupFlag;
    f(at + 4);
    at += kArgsPerEntry + 1 + (algorithm >= kCalendarFlag ? kCalendarBounds : 0);
  }
}

// `args`, a request on one key, as kCostsApart sends it: its numbers, every cost 0 and the flag
// added to its count, into `fixed`; its costs into `costs`.
void SplitCosts(std::string_view args, std::string& fixed, std::string& costs) {
  fixed.assign(args);
  costs.clear();
  Put(Unpack(args, 0) + kCostsApart, fixed.data());
  ForEachCost(args, [&](size_t word) {
    Pack(Unpack(args, word), costs);
    Put(0, fixed.data() + word * kWord);
  });
}

// Marks `r` kOneKeyRequest when its entries, every one a group's member (`members`), are two or
// more on one key; and then costs_apart when one costs more than 1.
void MarkOneKey(EncodedRequest& r, bool members) {
  const size_t n = r.limits.size();
  if (!members || n < 2 || r.keys.size() != n) return;
  for (size_t i = 1; i < n; ++i) {
    if (r.keys[i] != r.keys[0]) return;
  }
  r.one_key = true;
  Put(static_cast<int64_t>(n) + kOneKeyRequest, r.args.data());
  ForEachCost(r.args,
              [&](size_t word) { r.costs_apart = r.costs_apart || Unpack(r.args, word) > 1; });
}

}  // namespace

int64_t MemberId(std::string_view member) {
  // A fixed key: every instance must name a member alike. Its names are the engine's, not a
  // client's choosing, and the hash only tells a group's few members apart.
  constexpr SipKey kMemberKey{.k0 = 0x63617564616c2d67, .k1 = 0x726f75702d6d656d};
  const auto id = static_cast<int64_t>(SipHash24(kMemberKey, member) >> 12);
  return id == 0 ? 1 : id;
}

std::vector<int64_t> UnpackArgs(std::string_view args) {
  std::vector<int64_t> out(args.size() / kWord);
  for (size_t i = 0; i < out.size(); ++i) out[i] = Unpack(args, i);
  return out;
}

bool IsPlainConsume(const EncodedRequest& request) {
  const std::string_view args = request.args;
  if (!request.native.empty() || args.size() < kWord) return false;
  int64_t count = Unpack(args, 0);
  if (request.one_key) count -= kOneKeyRequest;
  const size_t words = args.size() / kWord;
  if (count < 1 || args.size() % kWord != 0) return false;
  size_t at = 1;
  for (int64_t i = 0; i < count; ++i) {
    if (at + kArgsPerEntry > words) return false;
    int64_t algorithm = Unpack(args, at);
    size_t width = kArgsPerEntry;
    if (algorithm >= kGroupFlag) {
      algorithm -= kGroupFlag;
      width += 1;
    }
    if (algorithm >= kCalendarFlag) {
      algorithm -= kCalendarFlag;
      width += kCalendarBounds;
    }
    if (algorithm < 0 || algorithm >= static_cast<int64_t>(kAlgorithmCount) ||
        AlgorithmInfoOf(static_cast<Algorithm>(algorithm)).state != StateShape::kCompact ||
        Unpack(args, at + 4) < 0) {
      return false;
    }
    at += width;
  }
  return at == words;
}

bool ForConsumeScript(std::span<const EncodedRequest* const> requests, KeyPlacement placement) {
  return placement == KeyPlacement::kDeclared && !requests.empty() &&
         std::all_of(requests.begin(), requests.end(),
                     [](const EncodedRequest* r) { return IsPlainConsume(*r); });
}

std::string StateKey(std::string_view prefix, std::string_view key, Algorithm algorithm) {
  if (!key.empty() && key[0] == '#') {
    if (const std::optional<GroupedKey> group = ReadGroupedKey(key)) key = group->group;
  }
  std::string out;
  out.reserve(prefix.size() + key.size() + 6);
  out += prefix;
  if (HasHashTag(key)) {
    out += key;
  } else {
    out += '{';
    out += key;
    out += '}';
  }
  if (algorithm == Algorithm::kSlidingWindowLog) out += ":log";
  if (algorithm == Algorithm::kConcurrency) out += ":holds";
  return out;
}

EncodedRequest EncodeRequest(std::span<const EntryRef> entries, std::string_view prefix,
                             Micros near) {
  EncodedRequest r;
  r.keys.reserve(entries.size());
  StartRequest(r, entries[0], entries.size());
  bool members = true;
  for (const EntryRef& e : entries) {
    r.keys.push_back(StateKey(prefix, e.key, e.limit->algorithm()));
    if (r.shares) r.keys.push_back(ShareKey(r.keys.back()));
    members = AddEntry(r, e, near) && members;
    if (e.native_count) {
      r.native.push_back({.cost = e.cost,
                          .refund = e.op == EntryOp::kRefund,
                          .window_us = e.limit->window().count()});
    }
  }
  MarkOneKey(r, members);
  return r;
}

EncodedRequest EncodeSubset(std::span<const EntryRef> entries, std::span<const uint16_t> positions,
                            std::vector<std::string> keys, Micros near) {
  EncodedRequest r;
  r.keys = std::move(keys);
  StartRequest(r, entries[positions[0]], positions.size());
  if (r.shares) {
    std::vector<std::string> both;
    for (const std::string& k : r.keys) {
      both.push_back(k);
      both.push_back(ShareKey(k));
    }
    r.keys = std::move(both);
  }
  bool members = true;
  for (const uint16_t i : positions) members = AddEntry(r, entries[i], near) && members;
  MarkOneKey(r, members);
  return r;
}

EncodedRequest EncodeUndo(const EncodedRequest& reserved, const StoreResponse& got, int64_t now_us,
                          std::vector<uint16_t>& undone) {
  EncodedRequest r;
  undone.clear();
  Pack(0, r.args);  // the count, below
  // Give-backs and shares are never undone (they are never refused), and give-backs hold undo
  // entries already.
  if (reserved.shares || (reserved.args.size() >= kWord && Unpack(reserved.args, 0) < 0)) return r;
  size_t first = 1;  // one request's args hold each key's entry, in order
  for (size_t i = 0; i < reserved.keys.size() && i < got.decisions.size(); ++i) {
    int64_t algorithm = Unpack(reserved.args, first);
    const size_t at = first;
    first += EntryWidth(algorithm);
    const bool member = algorithm >= kGroupFlag;  // its id follows the first five
    if (member) algorithm -= kGroupFlag;
    const bool calendar = algorithm >= kCalendarFlag;
    if (calendar) algorithm -= kCalendarFlag;
    // A reserve's undo gives its units back and deletes its record (even of an estimate of 0):
    // its request was refused, so the reservation never opened.
    const size_t terms = first - 6;  // a reservation's six numbers end the entry
    const bool reserve = algorithm >= kReserveFlag && Unpack(reserved.args, terms) == 1;
    if (algorithm >= kReserveFlag) algorithm -= kReserveFlag;
    if (algorithm >= kLeaseFlag) {
      algorithm -= kLeaseFlag;
    } else if (algorithm >= kChargeFlag) {
      continue;  // a charge counts whatever
    }
    const int64_t units = Unpack(reserved.args, at + 4) + got.decisions[i].leased;
    if (Unpack(reserved.args, at + 4) < 0 || (units <= 0 && !reserve)) continue;  // refund, peek
    r.keys.push_back(reserved.keys[i]);
    Pack(algorithm + (reserve ? kReserveFlag : 0) + (calendar ? kCalendarFlag : 0) +
             (member ? kGroupFlag : 0),
         r.args);
    // capacity, rate (two)
    r.args.append(reserved.args, (at + 1) * kWord, 3 * kWord);
    if (algorithm == kConcurrencyNumber) {  // a slot taken: the undo releases its hold
      Pack(Unpack(reserved.args, at + 5), r.args);
      Pack(Unpack(reserved.args, at + 6), r.args);
      Pack(0, r.args);
    } else {
      Pack(units, r.args);
      Pack(now_us, r.args);
      Pack(got.decisions[i].reset_after.count(), r.args);
    }
    if (member) Pack(Unpack(reserved.args, at + 5), r.args);
    if (calendar) {
      r.args.append(reserved.args, (at + 5 + (member ? 1 : 0)) * kWord, kCalendarBounds * kWord);
    }
    if (reserve) {  // the reservation id
      Pack(Unpack(reserved.args, terms + 1), r.args);
      Pack(Unpack(reserved.args, terms + 2), r.args);
    }
    r.limits.push_back(reserved.limits[i]);
    undone.push_back(static_cast<uint16_t>(i));
  }
  Put(-static_cast<int64_t>(r.keys.size()), r.args.data());
  return r;
}

void BuildCall(std::string_view verb, std::string_view script_or_sha, TimeSource source,
               int64_t now_us, std::span<const EncodedRequest* const> requests, CallArgv& out,
               KeyPlacement placement, bool consume_script) {
  size_t keys = 0, apart = 0;
  for (const EncodedRequest* r : requests) {
    keys += r->one_key ? 1 : r->keys.size();
    if (consume_script && r->costs_apart) ++apart;
  }
  // Made before any view into them is taken: the vector does not move them after.
  out.apart.resize(2 * apart);
  for (size_t i = 0; const EncodedRequest* r : requests) {
    if (!consume_script || !r->costs_apart) continue;
    SplitCosts(r->args, out.apart[i], out.apart[i + 1]);
    i += 2;
  }
  const bool declared = placement == KeyPlacement::kDeclared;
  out.numkeys = declared ? Decimal(static_cast<int64_t>(keys)) : "0";
  out.nkeys = Decimal(static_cast<int64_t>(keys));
  out.now = source == TimeSource::kGiven ? Decimal(now_us) : std::string();
  out.slack = source == TimeSource::kGiven ? Decimal(kGivenTimeTtlSlackMs) : "0";
  out.argv.clear();
  out.argv.reserve(6 + keys + requests.size() + apart);
  out.argv.push_back(verb);
  out.argv.push_back(script_or_sha);
  out.argv.push_back(out.numkeys);
  auto push_keys = [&] {
    for (const EncodedRequest* r : requests) {
      if (r->one_key) {
        out.argv.push_back(r->keys[0]);
        continue;
      }
      for (const std::string& k : r->keys) out.argv.push_back(k);
    }
  };
  if (declared) push_keys();
  out.argv.push_back(out.now);
  out.argv.push_back(out.slack);
  if (!declared) {
    out.argv.push_back(out.nkeys);
    push_keys();
  }
  for (size_t i = 0; const EncodedRequest* r : requests) {
    if (consume_script && r->costs_apart) {
      out.argv.push_back(out.apart[i]);
      out.argv.push_back(out.apart[i + 1]);
      i += 2;
      continue;
    }
    out.argv.push_back(r->args);
  }
}

namespace {

// An entry's four integers at `pos` (verdict, remaining, reset_after, retry_after) into `d`.
Status DecodeDecision(std::span<const int64_t> reply, size_t& pos, int64_t limit, size_t i,
                      Decision& d) {
  const int64_t verdict = reply[pos++];
  if (verdict < 0 || verdict > static_cast<int64_t>(Verdict::kNeverFits)) {
    return Status::Internal("redis script returned verdict " + std::to_string(verdict));
  }
  d.verdict = static_cast<Verdict>(verdict);
  d.limit = limit;
  d.remaining = reply[pos++];
  if (d.remaining < 0 && d.remaining >= -kMaxCapacity) {  // a window a charge overdrew
    d.overdrawn = -d.remaining;
    d.remaining = 0;
  }
  d.reset_after = Micros(reply[pos++]);
  d.retry_after = Micros(reply[pos++]);
  // The contract every store keeps (decision.h); anything else came from a script or a hop
  // that is not ours, and must not reach a client as a negative remaining or Retry-After.
  const bool denied = d.verdict == Verdict::kDenied;
  if (d.remaining < 0 || d.remaining > d.limit || d.reset_after.count() < 0 ||
      d.retry_after.count() < 0 || (denied && d.retry_after.count() == 0) ||
      (d.allowed() && d.retry_after.count() != 0)) {
    return Status::Internal("redis script returned an impossible decision for entry " +
                            std::to_string(i) + ": verdict " + std::to_string(verdict) +
                            ", remaining " + std::to_string(d.remaining) + " of " +
                            std::to_string(d.limit) + ", reset_after " +
                            std::to_string(d.reset_after.count()) + "us, retry_after " +
                            std::to_string(d.retry_after.count()) + "us");
  }
  return Status::Ok();
}

// An allowed request's brief reply (kAllowedBrief): per entry its remaining and reset_after.
Result<StoreResponse> DecodeBrief(std::span<const int64_t> reply, size_t& pos,
                                  const EncodedRequest& request) {
  const size_t n = request.limits.size();
  if (!request.leases.empty() || !request.releases.empty() || !request.reservations.empty()) {
    return Status::Internal("redis script answered briefly a request with more to tell");
  }
  if (reply.size() - pos < 1 + 2 * n) return Status::Internal("redis script reply too short");
  ++pos;
  StoreResponse resp;
  resp.allowed = true;
  resp.decisions.resize(n);
  for (size_t i = 0; i < n; ++i) {
    // Checked as the four integers they stand for.
    const int64_t full[4] = {static_cast<int64_t>(Verdict::kAllowed), reply[pos], reply[pos + 1],
                             0};
    pos += 2;
    size_t at = 0;
    if (Status s = DecodeDecision(full, at, request.limits[i], i, resp.decisions[i]); !s.ok()) {
      return s;
    }
  }
  return resp;
}

// A request of shares' reply (kShareRequest).
Result<StoreResponse> DecodeShares(std::span<const int64_t> reply, size_t& pos,
                                   const EncodedRequest& request) {
  const size_t n = request.limits.size();
  if (pos < reply.size() && reply[pos] == kShareFull) {
    ++pos;
    return Status::ResourceExhausted("a share's key holds " + std::to_string(kMaxShareConsumers) +
                                     " live consumers already");
  }
  if (pos > reply.size() || reply.size() - pos < 1 + 8 * n) {
    return Status::Internal("redis script reply too short");
  }
  if (reply[pos++] != 1) return Status::Internal("redis script refused a request of shares");
  StoreResponse resp;
  resp.allowed = true;
  resp.decisions.resize(n);
  resp.shares.resize(n);
  for (size_t i = 0; i < n; ++i) {
    Decision& d = resp.decisions[i];
    if (Status s = DecodeDecision(reply, pos, request.limits[i], i, d); !s.ok()) return s;
    d.leased = reply[pos++];
    if (d.leased > 0) d.leased_at = Micros(reply.back());
    ShareState& share = resp.shares[i];
    share.allocation = reply[pos++];
    share.consumers = reply[pos++];
    share.demand_total = reply[pos++];
    if (!d.allowed() || d.leased < 0 || d.leased > d.limit || share.allocation < 0 ||
        share.consumers < 1 || share.consumers > static_cast<int64_t>(kMaxShareConsumers) ||
        share.demand_total < 0) {
      return Status::Internal("redis script answered an impossible share for entry " +
                              std::to_string(i));
    }
  }
  return resp;
}

}  // namespace

Result<StoreResponse> DecodeResponse(std::span<const int64_t> reply, size_t& pos,
                                     const EncodedRequest& request) {
  if (request.shares) return DecodeShares(reply, pos, request);
  const size_t n = request.limits.size();
  if (pos < reply.size() && reply[pos] == kAllowedBrief) return DecodeBrief(reply, pos, request);
  if (pos > reply.size() || reply.size() - pos < 1 + 4 * n) {
    return Status::Internal("redis script reply too short");
  }
  const int64_t allowed = reply[pos++];
  if (allowed != 0 && allowed != 1) {
    return Status::Internal("redis script returned allowed=" + std::to_string(allowed));
  }
  if (reply.size() - pos <
      4 * n + request.leases.size() + request.releases.size() + 2 * request.reservations.size()) {
    return Status::Internal("redis script reply too short");
  }
  StoreResponse resp;
  resp.allowed = allowed == 1;
  resp.decisions.resize(n);
  bool every_entry_allowed = true;
  size_t next_lease = 0;        // in request.leases
  size_t next_release = 0;      // in request.releases
  size_t next_reservation = 0;  // in request.reservations
  for (size_t i = 0; i < n; ++i) {
    Decision& d = resp.decisions[i];
    if (Status s = DecodeDecision(reply, pos, request.limits[i], i, d); !s.ok()) return s;
    if (next_lease < request.leases.size() && request.leases[next_lease] == i) {
      ++next_lease;
      d.leased = reply[pos++];
      // The reply ends with the call's time, when the lease was granted.
      if (d.leased > 0) d.leased_at = Micros(reply.back());
      if (d.leased < 0 || d.leased > d.limit || (d.leased > 0 && allowed != 1)) {
        return Status::Internal("redis script leased " + std::to_string(d.leased) +
                                " units for entry " + std::to_string(i));
      }
    }
    if (next_release < request.releases.size() && request.releases[next_release] == i) {
      ++next_release;
      const int64_t released = reply[pos++];
      if (released != 0 && released != 1) {
        return Status::Internal("redis script released " + std::to_string(released) +
                                " for entry " + std::to_string(i));
      }
      d.released = released == 1;
    }
    if (next_reservation < request.reservations.size() &&
        request.reservations[next_reservation] == i) {
      ++next_reservation;
      const int64_t code = reply[pos++];
      d.overrun = reply[pos++];
      if (code < 0 || code > static_cast<int64_t>(Reservation::kUnknown) || d.overrun < 0 ||
          d.overrun > kMaxCost) {
        return Status::Internal("redis script answered reservation " + std::to_string(code) +
                                " for entry " + std::to_string(i));
      }
      d.reservation = static_cast<Reservation>(code);
    }
    every_entry_allowed = every_entry_allowed && d.allowed();
  }
  if (resp.allowed != every_entry_allowed) {
    return Status::Internal(resp.allowed ? "redis script allowed a request it refused an entry of"
                                         : "redis script refused a request whose entries passed");
  }
  return resp;
}

bool NotServedHere(std::span<const int64_t> reply, size_t& pos, const EncodedRequest& request) {
  const size_t n = request.limits.size();
  if (pos >= reply.size() || reply[pos] != kNotServedHere || reply.size() - pos < 1 + 4 * n) {
    return false;
  }
  pos += 1 + 4 * n;
  return true;
}

Result<int64_t> DecodeCallTime(std::span<const int64_t> reply, size_t pos) {
  if (pos >= reply.size() || reply.size() - pos != 1) {
    return Status::Internal("redis script reply does not end with the call's time");
  }
  return reply[pos];
}

}  // namespace caudal::redis
