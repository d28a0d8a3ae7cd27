// The wire format between the store and the Lua script (lua/decide.lua), as pure functions:
// request -> script arguments, reply integers -> decisions. No I/O, so it is tested without a
// server.
//
// One script call carries several independent requests (each decided all-or-nothing within
// itself, in order), which is how a batch pays Redis's per-call Lua overhead once. Each
// request's numbers travel packed in one argument of little-endian 64-bit integers, since Redis
// pays for every argument before the script runs (docs/stores.md; lua/decide.lua has the
// layout). The reply is each request's decisions, then the call's own time (Redis's TIME, or
// the time passed in).
//
// An undo request (EncodeUndo) gives back what an admitted request consumed, for stores that
// split a request across Redis Cluster slots (see pipeline.h): lua/undo.lua says how exactly.
//
// Keys: a store key becomes "<prefix>{<key>}" so each key is its own Redis Cluster hash tag.
// A key that already holds a hash tag ("user:{42}:minute") is kept as "<prefix><key>", so a
// caller can put every key of one identity in the same slot. The sliding window log keeps a
// list under "<...>:log", and a concurrency limit its holds as a sorted set under "<...>:holds",
// so a key reused with a compact algorithm never meets a wrong type.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "caudal/algorithms/limit.h"
#include "caudal/common/status.h"
#include "caudal/store/store.h"
#include "store/batch.h"

namespace caudal::redis {

// The Redis key holding the state of store key `key` under `algorithm`: a grouped key's is its
// group's.
std::string StateKey(std::string_view prefix, std::string_view key, Algorithm algorithm);

// A charge (EntryOp::kCharge) travels as its algorithm's number plus this flag, so an entry keeps
// its five numbers (lua/decide.lua reads it as CHARGE_FLAG).
inline constexpr int64_t kChargeFlag = 64;
// A concurrency entry carries two more numbers, its hold id's words (0 for a peek); a release
// (EntryOp::kRelease) travels as a cost of -1, and its reply carries a fifth integer, 1 when the
// hold was live. Its undo is a release: the undo entry's units and time carry the hold id.
// An entry asking for a lease (EntryRef::lease) travels as its algorithm's number plus this flag,
// followed by a sixth number, the lease asked for; its reply carries a fifth integer, the units
// leased. A request of give-backs (EntryOp::kGiveBack) travels as an undo request: a give-back
// is an undo of the grant's unspent units (lua/undo.lua).
inline constexpr int64_t kLeaseFlag = 128;
// An entry carrying reservation terms (EntryRef::reservation, on an algorithm with
// SupportsReserve) travels as its algorithm's number plus this flag, followed, after the numbers
// above, by six more: its mode (0: its key's expired reservations only, 1: a reserve, 2: a
// settle, 3: a refund that forgets its key's reservations, EntryRef::forget_reservations), the
// reservation id's two words, the ttl (µs), 1 when it gives back at expiry, and the most open
// (0 for what the entry does not carry). A reserve's or a settle's reply carries two more integers:
// its Reservation code and the settle's overrun (lua/reservation.lua). A reserve's undo entry
// carries the flag too, and two more numbers, the reservation id's words: the undo also deletes the
// record.
inline constexpr int64_t kReserveFlag = 256;
// A fixed_window counting calendar windows (Limit::calendar) travels as its algorithm's number plus
// this flag, followed, right after its first five numbers (an undo entry's seven), by four more:
// the calendar's boundaries around the time the request was encoded at (Calendar::BoundsAround),
// among which the script picks the window holding its own time (lua/fixed_window.lua).
inline constexpr int64_t kCalendarFlag = 512;

// An entry on a grouped key (ReadGroupedKey, caudal/store/store.h) travels as its algorithm's
// number plus this flag, on its group's state key (StateKey), followed, right after its first five
// numbers (an undo entry's seven) and before any other, by its member's id (MemberId). The group's
// value holds every member's state (lua/compact_state.lua), at most kMaxGroupMembers of them: past
// them a write drops the members nearest fresh, never one it writes.
inline constexpr int64_t kGroupFlag = 1024;
inline constexpr int64_t kMaxGroupMembers = 64;
// A member's id in its group: a 52-bit hash of its name, never 0 (exact in the script's doubles).
int64_t MemberId(std::string_view member);

// A request of shares (EntryOp::kShare) travels with its entry count plus this, two keys per entry
// (the state's, then StateKey + ":sh", its consumers' hash: the same slot), and per entry its
// limit's numbers, the rate as written, the share's numbers and its consumer's and group's bytes
// (lua/decide.lua has the layout). Its reply is kShareFull alone when a new consumer finds its
// key full (kResourceExhausted, nothing written), else each entry's decision with four more
// integers: the units granted, the allocation, the live consumers and their demands' sum.
inline constexpr int64_t kShareRequest = 4096;
inline constexpr int64_t kShareFull = 3;

// One request's share of a script call. Its numbers travel as one argument of little-endian
// 64-bit integers, which the script reads with one struct.unpack per entry.
// An entry of a request of native counts (native_count.h): its cost and window, and the start
// of the window it was counted in, fixed when its call is sent.
struct NativeCount {
  int64_t cost = 0;
  bool refund = false;
  int64_t window_us = 0;
  int64_t start_us = 0;
};

// A request of two or more entries, all members of one group (kGroupFlag: one state key), travels
// with its entry count plus this flag and declares that key once (BuildCall), not once per entry.
inline constexpr int64_t kOneKeyRequest = 1024;
// A request on one key with a cost above 1, sent to the fast script (BuildCall,
// `consume_script`), travels as two arguments: its numbers with this flag added to its entry
// count and every entry's cost 0, then its entries' costs alone, one number each. Its first
// argument is then the same for every request of a policy whatever their costs (tokens and money
// vary per request), and the script finds it decoded, where a request whose costs are new would
// be decoded whole (lua/consume.lua). Costs of 0 and 1 are the same from request to request:
// such a request travels whole, one argument less.
inline constexpr int64_t kCostsApart = 2048;

struct EncodedRequest {
  std::vector<std::string> keys;   // one per entry
  bool one_key = false;            // kOneKeyRequest: its keys, all one, sent once
  bool costs_apart = false;        // one_key with a cost above 1: kCostsApart to the fast script
  std::string args;                // packed: entry count, then 5 numbers per entry (7 in an undo)
  std::vector<int64_t> limits;     // each entry's Decision::limit
  std::vector<uint16_t> leases;    // the entries that ask for a lease, ascending (usually none)
  std::vector<uint16_t> releases;  // the entries that release a hold, ascending (usually none)
  std::vector<uint16_t> reservations;  // the reserves and settles, ascending (usually none)
  bool shares = false;                 // a request of shares (two keys per entry)
  // A request of native counts: one per entry (the script decides it as charges where the node
  // sends no native calls). Set with `native_sent` when its call was a native one.
  std::vector<NativeCount> native;
  bool native_sent = false;
  int64_t native_now_us = 0;  // the store's time (given or estimated) its native call was sent at
};

// True when `request` is a decision whose entries are all plain consumes: a compact algorithm
// (StateShape::kCompact), no flag but kGroupFlag and kCalendarFlag (no charge, lease or
// reservation terms), a cost >= 0. A call
// of such requests only, on declared keys, goes to the fast script (lua/consume.lua), which
// decides them exactly as the decide script does.
bool IsPlainConsume(const EncodedRequest& request);

// The numbers packed in `args`, in order (for tests and the undo's encoding).
std::vector<int64_t> UnpackArgs(std::string_view args);

// `near`: a time within a window of the store's (the caller's clock), around which a calendar
// window's boundaries are computed. Preconditions: ValidateEntries(entries) is ok.
EncodedRequest EncodeRequest(std::span<const EntryRef> entries, std::string_view prefix,
                             Micros near);

// The part of `entries` at `positions` (ascending), as a request of its own; `keys` are the
// entries' state keys (StateKey), already computed.
EncodedRequest EncodeSubset(std::span<const EntryRef> entries, std::span<const uint16_t> positions,
                            std::vector<std::string> keys, Micros near);

// The undo of `reserved`, a request that was admitted at `now_us` (its call's time) with
// decisions `got`: one undo entry per entry that consumed (cost or lease > 0, not a refund, not
// a charge, which counts whatever the request decides; the units leased are undone with the
// cost), and per reserve (even of 0 units; its undo deletes its record), whose
// positions in `reserved` go to `undone`. Empty (no keys) when nothing consumed.
EncodedRequest EncodeUndo(const EncodedRequest& reserved, const StoreResponse& got, int64_t now_us,
                          std::vector<uint16_t>& undone);

// Where `now` comes from. kRedisTime in production; kGiven is for tests driving a ManualClock,
// whose time runs apart from Redis's expiry clock, so writes then get `kGivenTimeTtlSlack` of
// extra TTL to keep keys from expiring (in Redis's time) before they are fresh (in the test's).
enum class TimeSource : uint8_t { kRedisTime, kGiven };
inline constexpr int64_t kGivenTimeTtlSlackMs = 3'600'000;

// How a call passes its keys. kDeclared: as the script's KEYS, which Redis Cluster requires to
// share one hash slot and redirects (MOVED, ASK) by. kUndeclared: in the arguments, so one call
// can carry the requests of several slots of one node; the script then checks, request by
// request, that the node serves every key (a request it does not serve comes back
// kNotServedHere, untouched).
enum class KeyPlacement : uint8_t { kDeclared, kUndeclared };

// True when a call of `requests` with keys placed as `placement` goes to the fast script: keys
// declared, every request IsPlainConsume.
bool ForConsumeScript(std::span<const EncodedRequest* const> requests, KeyPlacement placement);
// Such a call may go to the caudal module's CAUDAL.CONSUME instead, where the server loaded it
// (module/): BuildCall(kModuleCommand, kConsumeFunction, ...).
inline constexpr std::string_view kModuleCommand = "CAUDAL.CONSUME";

// The first reply integer of a request the node did not serve (NOT_SERVED in the script).
inline constexpr int64_t kNotServedHere = 2;
// The first reply integer of an allowed request answered briefly (BRIEF in the fast script): per
// entry only its remaining and reset_after follow, every entry allowed with no retry_after. Only
// a request with no lease, release or reservation is answered so.
inline constexpr int64_t kAllowedBrief = 3;

// The full argv of one call: "EVALSHA <sha> <numkeys> keys... <now> <slack> args..." (or
// "EVAL <script> ...", or "FCALL <function> ..."); undeclared: "EVALSHA <sha> 0 <now> <slack>
// <nkeys> keys... args...";
// one `args` per request (two for one sent with its costs apart when `consume_script`:
// kCostsApart).
// The views point into `requests` and `out`.
struct CallArgv {
  std::vector<std::string_view> argv;
  std::string numkeys, now, slack, nkeys;  // storage the argv points into
  std::vector<std::string> apart;          // the requests sent with their costs apart
};
void BuildCall(std::string_view verb, std::string_view script_or_sha, TimeSource source,
               int64_t now_us, std::span<const EncodedRequest* const> requests, CallArgv& out,
               KeyPlacement placement = KeyPlacement::kDeclared, bool consume_script = false);

// True, and `pos` past the request, when the reply for `request` at `pos` says the node did not
// serve it (kNotServedHere); false, `pos` unchanged, otherwise (DecodeResponse decodes it).
bool NotServedHere(std::span<const int64_t> reply, size_t& pos, const EncodedRequest& request);

// Decodes one request's decisions from `reply` (the script's integers) starting at `pos`;
// advances `pos`. kInternal when the reply is too short or holds impossible values. An undo
// request decodes like any other (allowed, the state after the undo).
Result<StoreResponse> DecodeResponse(std::span<const int64_t> reply, size_t& pos,
                                     const EncodedRequest& request);

// The call's time, which ends the reply, once every request was decoded up to `pos`.
// kInternal unless exactly one integer is left.
Result<int64_t> DecodeCallTime(std::span<const int64_t> reply, size_t pos);

}  // namespace caudal::redis
