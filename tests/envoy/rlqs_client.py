"""A reference RLQS client: the data plane of Envoy's rate limit quota filter, in Python.

Envoy's HTTP filter envoy.filters.http.rate_limit_quota is the client of
envoy.service.rate_limit_quota.v3.RateLimitQuotaService/StreamRateLimitQuotas. RlqsClient
behaves as that filter does once a request has been matched into a bucket (a BucketId), so that
tests can drive caudal's RLQS server as Envoy would: one bidirectional stream, usage reports,
and local decisions from the assignments the server sends back.

Usage:

    import rlqs_client as rc
    bucket = {"name": "checkout", "tenant": "a"}
    client = rc.RlqsClient("127.0.0.1:8081", "my-domain", 5.0,
                           no_assignment=rc.DENY,
                           expired=rc.ExpiredFallback(rc.deny_all(), timeout=10))
    allowed = client.request(bucket)            # one request, decided and counted
    client.wait_for(lambda: client.stats(bucket).assignments > 0, timeout=5)
    client.stats(bucket)    # BucketStats: allowed, denied, subscriptions, assignments,
                            # extensions, replacements, expiries, fallback_ends, abandons, ignored
    client.state(bucket)    # BucketState: source, strategy, expires_at, tokens, unreported counts
    client.log()            # LogEntry per applied or ignored action, expiry and subscription
    client.messages()       # MessageRecord per report sent or dropped and response received
    client.stream_ends      # StreamEnd per ended stream: grpc code and details
    client.messages_sent, client.messages_received, client.reports_dropped
    client.close()          # half-closes the stream; the server ends it

assignment(), abandon(), response(), token_bucket(), allow_all() and deny_all() build what a
server sends, for fake servers. Messages are generated at import by protoc --python_out from
caudal's proto/ into a temporary directory put on sys.path; the environment names protoc and
the proto paths as for rls_client_test.py: PROTOC (default `protoc`), RLS_PROTO_ROOT (default
the repository's proto/), PROTOBUF_INCLUDE (';'-separated include directories, optional).

Time: clock=MonotonicClock() (the default: a background thread runs the reporting timer) or a
ManualClock, whose advance() runs the client's due timer in the caller's thread; a timer that
fell due more than once in one advance fires once, as Envoy's timers do after a jump of their
simulated time. Expiries are applied when the client next looks at a bucket (a request, a
response, a report, an accessor), each at the time it fell due.

Envoy's behaviours followed, each with where Envoy has it (envoyproxy/envoy; files under
source/extensions/filters/http/rate_limit_quota/ unless named otherwise):

- One stream per client. Envoy has one per (RLQS server, domain) pair, shared by the filter
  configs that name it.
  Envoy: filter_persistence.cc, GlobalTlsStores::getTlsStore.
- The stream and the reporting timer start with the first request matched into a bucket.
  Envoy: global_client_impl.cc, createBucketImpl.
- A new bucket's first request is decided by no_assignment (allowed unless DENY_ALL) and
  subscribes the bucket at once: a report of that bucket alone, counting that request, with
  time_elapsed 0.
  Envoy: filter.cc, recordBucketUsage; global_client_impl.cc, createBucketImpl.
- One timer reports every bucket each interval: the allowed and denied counts since the bucket's
  last report (then reset to 0) and the time since it; with no bucket left, the domain alone.
  Envoy: global_client_impl.cc, getUsageFromBucket, buildReports, onSendReportsTimer.
- The interval is a parameter here; current Envoy fixes it at 5 s and does not read the
  buckets' reporting_interval.
  Envoy: filter_persistence.cc, initTlsStore.
- Every message carries the domain, not only the first.
  Envoy: global_client_impl.cc, buildReports.
- time_elapsed is whole seconds, truncated: with an interval under a second every report says
  0 s (semantics="api" keeps the nanoseconds).
  Envoy: global_client_impl.cc, getUsageFromBucket.
- Before any assignment, and after one has expired with no fallback: no_assignment.
  Envoy: filter.cc, shouldAllowRequest (default_action).
- A token bucket assignment starts full, refills continuously at tokens_per_fill per
  fill_interval up to max_tokens, and gives one token a request; the fill interval is read in
  whole seconds, an unset tokens_per_fill as 0.
  Envoy: global_client_impl.cc, createTokenBucketFromAction; source/common/common/
  token_bucket_impl.h, AtomicTokenBucketImpl.
- The same token bucket again keeps its tokens; Envoy calls two the same when max_tokens,
  tokens_per_fill and the nanos of fill_interval are equal. A different one starts at the old
  bucket's ratio of remaining to max tokens times its own max_tokens, truncated.
  Envoy: global_client_impl.cc, shouldReplaceTokenBucket, protoTokenBucketsEq,
  createTokenBucketFromAction.
- Every applied assignment, extension or not, runs its TTL from its receipt; the TTL is read in
  whole seconds, so an unset TTL is 0 and expires at once, as 0 does.
  Envoy: global_client_impl.cc, onQuotaResponseImpl, startActionExpirationTimer.
- On expiry: the expired_assignment_behavior fallback_rate_limit for its timeout (whole seconds,
  unset 0), then no_assignment. reuse_last_assignment is not read by Envoy (it behaves as
  unset) and is not offered here.
  Envoy: global_client_impl.cc, onActionExpirationTimer, onFallbackExpirationTimer; filter.cc,
  recordBucketUsage.
- Abandon erases the bucket and its unreported counts; the next request subscribes it again.
  Envoy: global_client_impl.cc, onQuotaResponseImpl.
- Ignored, the bucket left as it was: an action without a bucket id, one for a bucket not in
  the cache (never reported, or abandoned), requests_per_time_unit and unset strategies. An
  action with neither an assignment nor an abandon is cached with a TTL of 0: it expires at once.
  Envoy: global_client_impl.cc, onQuotaResponseImpl.
- A stream that ends, with any status, is dropped; the next report reopens it, carrying every
  bucket, which subscribes them all again; assignments stay until their TTL. A bucket subscribed
  while no stream is open loses its first report and that request's count.
  Envoy: global_client_impl.cc, onRemoteClose, onSendReportsTimer, sendUsageReportImpl.

semantics="api" reads the numbers as the API defines them instead: TTLs, fallback timeouts and
fill intervals exactly; an unset TTL never expires; tokens_per_fill defaults to 1; token buckets
are the same when wholly equal; time_elapsed keeps its nanoseconds. All else is as above.

Schemas: "list" (the default, what Envoy sends: repeated BucketQuotaUsage, fields 1-4, under
field 2; envoyproxy/data-plane-api has had only this form since the API's first commit) or
"map" (map<uint64, BucketQuotaUsage> under the same field number, with last_report, as caudal's
proto/ writes it). No Envoy release sends the map: it is in an unmerged draft of the API and of
the filter's first client (client_impl.cc, buildUsageReport), keyed by MessageUtil::hash of the
BucketId as it was then, xxHash64 of the BucketId's single-line text format with field numbers.
This client uses that key, and sets last_report to the wall-clock time of the bucket's previous
report (its subscription for the first): the start of the window time_elapsed measures.

Not modelled: request matching and BucketId building (the caller passes the BucketId), deny
responses, filter_enabled and filter_enforced, preview matchers, requests_per_time_unit and
token buckets as no_assignment (only ALLOW and DENY), worker threads racing on a new bucket,
Envoy's gRPC retries and keepalives, Envoy's division by zero for a fill interval under a second
(here the bucket is unlimited), and the exact rounding of the old bucket's remaining tokens in a
partial fill.
"""
import atexit
import math
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, replace
from typing import NamedTuple, Optional

# Imported before the generated messages' directory is put on sys.path: a generated package
# must never shadow it.
import grpc

METHOD = "/envoy.service.rate_limit_quota.v3.RateLimitQuotaService/StreamRateLimitQuotas"

_PROTOS = ["envoy/service/rate_limit_quota/v3/rlqs.proto",
           "envoy/type/v3/ratelimit_strategy.proto",
           "envoy/type/v3/ratelimit_unit.proto",
           "envoy/type/v3/token_bucket.proto"]


def _generate_messages():
    root = os.environ.get("RLS_PROTO_ROOT") or os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "proto")
    out = tempfile.mkdtemp(prefix="caudal-rlqs-py-")
    atexit.register(shutil.rmtree, out, True)
    includes = [f"-I{root}"] + [f"-I{p}" for p in
                                os.environ.get("PROTOBUF_INCLUDE", "").split(";") if p]
    subprocess.run([os.environ.get("PROTOC", "protoc"), *includes, f"--python_out={out}",
                    *_PROTOS], check=True)
    sys.path.insert(0, out)


_generate_messages()
from google.protobuf import duration_pb2  # noqa: E402
from envoy.service.rate_limit_quota.v3 import rlqs_pb2  # noqa: E402
from envoy.type.v3 import ratelimit_strategy_pb2, token_bucket_pb2  # noqa: E402

RateLimitStrategy = ratelimit_strategy_pb2.RateLimitStrategy
BucketAction = rlqs_pb2.RateLimitQuotaResponse.BucketAction

ALLOW = "allow"
DENY = "deny"

# Envoy's floor on a token bucket's fill rate: one token a year (token_bucket_impl.cc).
MIN_FILL_RATE = 1.0 / (365 * 24 * 60 * 60)


# --- building what a server sends (for fake servers and tests) ---

def _duration(seconds):
    d = duration_pb2.Duration()
    d.FromNanoseconds(int(round(seconds * 1e9)))
    return d


def allow_all():
    return RateLimitStrategy(blanket_rule=RateLimitStrategy.ALLOW_ALL)


def deny_all():
    return RateLimitStrategy(blanket_rule=RateLimitStrategy.DENY_ALL)


def token_bucket(max_tokens, tokens_per_fill=None, fill_interval=1.0):
    """A token bucket strategy; tokens_per_fill None leaves the field unset."""
    tb = token_bucket_pb2.TokenBucket(max_tokens=max_tokens,
                                      fill_interval=_duration(fill_interval))
    if tokens_per_fill is not None:
        tb.tokens_per_fill.value = tokens_per_fill
    return RateLimitStrategy(token_bucket=tb)


def assignment(bucket_id, strategy, ttl=None):
    """A QuotaAssignmentAction for bucket_id; ttl in seconds, None leaves it unset."""
    action = BucketAction(bucket_id=rlqs_pb2.BucketId(bucket=bucket_id))
    qa = action.quota_assignment_action
    qa.SetInParent()
    if strategy is not None:
        qa.rate_limit_strategy.CopyFrom(strategy)
    if ttl is not None:
        qa.assignment_time_to_live.CopyFrom(_duration(ttl))
    return action


def abandon(bucket_id):
    action = BucketAction(bucket_id=rlqs_pb2.BucketId(bucket=bucket_id))
    action.abandon_action.SetInParent()
    return action


def response(*actions):
    return rlqs_pb2.RateLimitQuotaResponse(bucket_action=list(actions))


def describe(strategy):
    """A strategy as a plain dict, for logs and assertions; None for none."""
    if strategy is None:
        return None
    case = strategy.WhichOneof("strategy")
    if case == "blanket_rule":
        return {"blanket_rule": RateLimitStrategy.BlanketRule.Name(strategy.blanket_rule)}
    if case == "token_bucket":
        tb = strategy.token_bucket
        return {"token_bucket": {
            "max_tokens": tb.max_tokens,
            "tokens_per_fill": tb.tokens_per_fill.value if tb.HasField("tokens_per_fill")
            else None,
            "fill_interval": tb.fill_interval.seconds + tb.fill_interval.nanos / 1e9}}
    if case == "requests_per_time_unit":
        r = strategy.requests_per_time_unit
        return {"requests_per_time_unit": {"requests_per_time_unit": r.requests_per_time_unit,
                                           "time_unit": r.time_unit}}
    return {}


# --- Envoy's key for a bucket in the map schema ---

_P1 = 0x9E3779B185EBCA87
_P2 = 0xC2B2AE3D27D4EB4F
_P3 = 0x165667B19E3779F9
_P4 = 0x85EBCA77C2B2AE63
_P5 = 0x27D4EB2F165667C5
_M64 = (1 << 64) - 1


def _rotl(x, r):
    return ((x << r) | (x >> (64 - r))) & _M64


def _round(acc, lane):
    acc = (acc + lane * _P2) & _M64
    return (_rotl(acc, 31) * _P1) & _M64


def xxhash64(data: bytes, seed: int = 0) -> int:
    """XXH64 of data, as Envoy's HashUtil::xxHash64 (seed 0)."""
    n = len(data)
    i = 0
    if n >= 32:
        v = [(seed + _P1 + _P2) & _M64, (seed + _P2) & _M64, seed & _M64, (seed - _P1) & _M64]
        while i + 32 <= n:
            for j in range(4):
                v[j] = _round(v[j], int.from_bytes(data[i + 8 * j:i + 8 * j + 8], "little"))
            i += 32
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M64
        for lane in v:
            h ^= _round(0, lane)
            h = (h * _P1 + _P4) & _M64
    else:
        h = (seed + _P5) & _M64
    h = (h + n) & _M64
    while i + 8 <= n:
        h ^= _round(0, int.from_bytes(data[i:i + 8], "little"))
        h = (_rotl(h, 27) * _P1 + _P4) & _M64
        i += 8
    if i + 4 <= n:
        h ^= (int.from_bytes(data[i:i + 4], "little") * _P1) & _M64
        h = (_rotl(h, 23) * _P2 + _P3) & _M64
        i += 4
    while i < n:
        h ^= (data[i] * _P5) & _M64
        h = (_rotl(h, 11) * _P1) & _M64
        i += 1
    h ^= h >> 33
    h = (h * _P2) & _M64
    h ^= h >> 29
    h = (h * _P3) & _M64
    h ^= h >> 32
    return h


_ESCAPES = {ord("\n"): "\\n", ord("\r"): "\\r", ord("\t"): "\\t", ord('"'): '\\"',
            ord("'"): "\\'", ord("\\"): "\\\\"}


def _c_escape(b: bytes) -> str:
    # protobuf's CEscape, as the text format printer uses for strings by default.
    return "".join(_ESCAPES.get(c) or (chr(c) if 0x20 <= c < 0x7F else "\\%03o" % c) for c in b)


def bucket_text(bucket_id: dict) -> str:
    """The BucketId in the text format the draft's MessageUtil::hash printed: single line, field
    numbers, map entries sorted by key, each field followed by a space."""
    items = sorted((k.encode(), v.encode()) for k, v in bucket_id.items())
    return "".join('1 { 1: "%s" 2: "%s" } ' % (_c_escape(k), _c_escape(v)) for k, v in items)


def envoy_bucket_hash(bucket_id: dict) -> int:
    return xxhash64(bucket_text(bucket_id).encode())


# --- the list schema on the wire ---

def _varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _len_field(number, payload):
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _varint_field(number, value):
    # proto3: a zero scalar is not written.
    return _varint(number << 3) + _varint(value) if value else b""


# --- clocks ---

class MonotonicClock:
    """Real time: time.monotonic()."""

    def now(self):
        return time.monotonic()


class ManualClock:
    """Time that moves only by advance(); advance() runs subscribed clients' due timers."""

    def __init__(self, start=1000.0):
        self._now = float(start)
        self._lock = threading.Lock()
        self._subscribers = []

    def now(self):
        with self._lock:
            return self._now

    def advance(self, seconds):
        with self._lock:
            self._now += seconds
            subscribers = list(self._subscribers)
        for callback in subscribers:
            callback()

    def subscribe(self, callback):
        with self._lock:
            self._subscribers.append(callback)

    def unsubscribe(self, callback):
        with self._lock:
            if callback in self._subscribers:
                self._subscribers.remove(callback)


class WallClock:
    def now(self):
        return time.time()


# --- records ---

class ExpiredFallback(NamedTuple):
    """expired_assignment_behavior with fallback_rate_limit; timeout in seconds, None unset."""
    strategy: object
    timeout: Optional[float] = None


class LogEntry(NamedTuple):
    time: float
    kind: str  # subscribe, assign, extend, replace, empty, expire, fallback_end, abandon, ignored
    bucket: Optional[dict]
    strategy: Optional[dict] = None
    ttl: Optional[float] = None  # as applied; None never expires
    note: str = ""


class MessageRecord(NamedTuple):
    time: float
    direction: str  # sent, dropped (no stream), received
    kind: str  # subscribe or report (sent, dropped); response (received)
    count: int  # usages in a report, actions in a response


class StreamEnd(NamedTuple):
    time: float
    stream: int  # index of the stream, from 0
    code: object  # grpc.StatusCode
    details: Optional[str]


@dataclass
class BucketStats:
    allowed: int = 0  # decisions over the client's life, across abandons
    denied: int = 0
    subscriptions: int = 0
    assignments: int = 0  # assignment actions applied (first, extensions and replacements)
    extensions: int = 0
    replacements: int = 0
    expiries: int = 0
    fallback_ends: int = 0
    abandons: int = 0
    ignored: int = 0  # actions for this bucket that were not applied


@dataclass
class BucketState:
    source: str  # no_assignment, assignment or fallback
    strategy: Optional[dict]
    expires_at: Optional[float]  # when the assignment or the fallback ends; None never
    tokens: Optional[float]  # a token bucket's tokens now
    unreported_allowed: int
    unreported_denied: int


# --- the client ---

class _TokenBucket:
    """Envoy's AtomicTokenBucketImpl. Envoy keeps the time since which tokens have accumulated;
    this keeps the tokens at a time, the same bucket without subtracting large times."""

    def __init__(self, max_tokens, rate, now, initial):
        self.max = float(max_tokens)
        self.rate = rate
        self.tokens = min(float(initial), self.max)
        self.at = now

    def remaining(self, now):
        if not math.isfinite(self.rate):
            return self.max
        return min(self.max, self.tokens + max(0.0, now - self.at) * self.rate)

    def consume(self, now):
        total = self.remaining(now)
        if total < 1:
            return False
        if math.isfinite(self.rate):
            self.tokens, self.at = total - 1, max(now, self.at)
        return True


@dataclass
class _Bucket:
    bucket_id: dict
    allowed: int
    denied: int
    last_report: float
    last_report_wall: float
    source: str = "no_assignment"
    strategy: object = None  # the assignment's or the fallback's RateLimitStrategy
    deadline: Optional[float] = None
    limiter: Optional[_TokenBucket] = None
    assigned: bool = False  # an assignment was applied since the subscription


class _Stream:
    def __init__(self, index):
        self.index = index
        self.queue = queue.Queue()
        self.call = None
        self.reader = None

    def requests(self):
        while True:
            item = self.queue.get()
            if item is None:
                return
            yield item


def _key(bucket_id):
    return tuple(sorted(bucket_id.items()))


class RlqsClient:
    """One RLQS stream and its buckets, as one of Envoy's global RLQS clients."""

    def __init__(self, target, domain, reporting_interval=5.0, *, clock=None, schema="list",
                 metadata=(), no_assignment=ALLOW, expired=None, semantics="envoy",
                 wall_clock=None, channel_options=()):
        if schema not in ("list", "map"):
            raise ValueError(f"schema must be 'list' or 'map', not {schema!r}")
        if no_assignment not in (ALLOW, DENY):
            raise ValueError("no_assignment must be ALLOW or DENY")
        if semantics not in ("envoy", "api"):
            raise ValueError(f"semantics must be 'envoy' or 'api', not {semantics!r}")
        if not domain:
            raise ValueError("domain must not be empty")
        if expired is not None and not isinstance(expired, ExpiredFallback):
            raise ValueError("expired must be None or an ExpiredFallback")
        self.domain = domain
        self.reporting_interval = float(reporting_interval)
        self.schema = schema
        self.semantics = semantics
        self.no_assignment = no_assignment
        self.expired = expired
        self._clock = clock or MonotonicClock()
        self._wall = wall_clock or WallClock()
        self._metadata = tuple(metadata)
        self._channel = grpc.insecure_channel(target, options=list(channel_options))
        self._method = self._channel.stream_stream(
            METHOD, request_serializer=lambda payload: payload,
            response_deserializer=rlqs_pb2.RateLimitQuotaResponse.FromString)

        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        self._buckets = {}
        self._stats = {}
        self._log = []
        self._messages = []
        self._stream = None
        self._streams = 0
        self._started = False
        self._closed = False
        self._next_report = None
        self.messages_sent = 0
        self.messages_received = 0
        self.reports_dropped = 0
        self.stream_ends = []
        self._readers = []

        self._timer = None
        if hasattr(self._clock, "subscribe"):
            self._clock.subscribe(self._on_clock)
        else:
            self._timer = threading.Thread(target=self._timer_loop, daemon=True,
                                           name="rlqs-client-timer")
            self._timer.start()

    # --- the filter's side ---

    def request(self, bucket_id: dict) -> bool:
        """Decides one request matched into bucket_id, as the filter does, and counts it."""
        if not bucket_id or not all(isinstance(k, str) and k and isinstance(v, str) and v
                                    for k, v in bucket_id.items()):
            raise ValueError("a BucketId is a non-empty map of non-empty strings")
        with self._cond:
            if self._closed:
                raise RuntimeError("the client is closed")
            now = self._clock.now()
            self._advance(now)
            key = _key(bucket_id)
            stats = self._stats.setdefault(key, BucketStats())
            bucket = self._buckets.get(key)
            if bucket is None:
                allowed = self.no_assignment == ALLOW
                self._subscribe(key, dict(bucket_id), allowed, now)
            else:
                allowed = self._decide(bucket, now)
                if allowed:
                    bucket.allowed += 1
                else:
                    bucket.denied += 1
            if allowed:
                stats.allowed += 1
            else:
                stats.denied += 1
            self._cond.notify_all()
            return allowed

    def _decide(self, bucket, now):
        if bucket.source == "no_assignment":
            return self.no_assignment == ALLOW
        case = bucket.strategy.WhichOneof("strategy") if bucket.strategy is not None else None
        if case == "blanket_rule":
            return bucket.strategy.blanket_rule == RateLimitStrategy.ALLOW_ALL
        if case == "token_bucket":
            return bucket.limiter.consume(now)
        # Envoy fails open on a cached action without a strategy (shouldAllowRequest).
        return True

    def _subscribe(self, key, bucket_id, allowed, now):
        if not self._started:
            self._started = True
            self._next_report = now + self.reporting_interval
            self._open_stream(now)
        bucket = _Bucket(bucket_id=bucket_id, allowed=1 if allowed else 0,
                         denied=0 if allowed else 1, last_report=now,
                         last_report_wall=self._wall.now())
        self._buckets[key] = bucket
        self._stats[key].subscriptions += 1
        sent = self._send([self._take_usage(bucket, now)], "subscribe", now)
        self._log.append(LogEntry(now, "subscribe", dict(bucket_id),
                                  note="sent" if sent else "dropped: no stream"))

    # --- reports ---

    def _take_usage(self, bucket, now):
        usage = (dict(bucket.bucket_id), now - bucket.last_report, bucket.allowed,
                 bucket.denied, bucket.last_report_wall)
        bucket.allowed = bucket.denied = 0
        bucket.last_report = now
        bucket.last_report_wall = self._wall.now()
        return usage

    def _elapsed(self, seconds):
        if self.semantics == "envoy":
            return duration_pb2.Duration(seconds=int(seconds))
        return _duration(seconds)

    def encode(self, usages):
        """The bytes of a report of usages: (bucket_id, elapsed, allowed, denied, last_wall)."""
        if self.schema == "list":
            msg = rlqs_pb2.RateLimitQuotaUsageReports(domain=self.domain)
            for bucket_id, elapsed, allowed, denied, _ in usages:
                usage = msg.bucket_quota_usages.add()
                usage.bucket_id.bucket.update(bucket_id)
                usage.time_elapsed.CopyFrom(self._elapsed(elapsed))
                usage.time_elapsed.SetInParent()
                usage.num_requests_allowed = allowed
                usage.num_requests_denied = denied
            return msg.SerializeToString(deterministic=True)
        # The map form is not in proto/ (no released Envoy sends it): each element is a map entry,
        # key (1, the BucketId's hash) then value (2, a BucketQuotaUsage with last_report, 5).
        out = [_len_field(1, self.domain.encode())]
        for bucket_id, elapsed, allowed, denied, last_wall in usages:
            value = rlqs_pb2.RateLimitQuotaUsageReports.BucketQuotaUsage(
                num_requests_allowed=allowed, num_requests_denied=denied)
            value.bucket_id.bucket.update(bucket_id)
            value.time_elapsed.CopyFrom(self._elapsed(elapsed))
            value.time_elapsed.SetInParent()
            nanos = int(round(last_wall * 1e9))
            timestamp = (_varint_field(1, nanos // 1_000_000_000)
                         + _varint_field(2, nanos % 1_000_000_000))
            inner = value.SerializeToString(deterministic=True) + _len_field(5, timestamp)
            entry = _varint_field(1, envoy_bucket_hash(bucket_id)) + _len_field(2, inner)
            out.append(_len_field(2, entry))
        return b"".join(out)

    def _report_tick(self, now):
        if self._closed:
            return
        usages = [self._take_usage(b, now) for b in self._buckets.values()]
        if self._stream is None:
            self._open_stream(now)
        self._send(usages, "report", now)
        self._next_report = now + self.reporting_interval

    def _send(self, usages, kind, now):
        payload = self.encode(usages)
        if self._stream is None:
            self.reports_dropped += 1
            self._messages.append(MessageRecord(now, "dropped", kind, len(usages)))
            return False
        self._stream.queue.put(payload)
        self.messages_sent += 1
        self._messages.append(MessageRecord(now, "sent", kind, len(usages)))
        self._cond.notify_all()
        return True

    # --- the stream ---

    def _open_stream(self, now):
        stream = _Stream(self._streams)
        self._streams += 1
        stream.call = self._method(stream.requests(), metadata=self._metadata or None)
        stream.reader = threading.Thread(target=self._read, args=(stream,), daemon=True,
                                         name=f"rlqs-client-stream-{stream.index}")
        self._stream = stream
        self._readers.append(stream.reader)
        stream.reader.start()

    def _read(self, stream):
        code = details = None
        try:
            for resp in stream.call:
                self._on_response(resp)
            code, details = stream.call.code(), stream.call.details()
        except grpc.RpcError as e:
            code, details = e.code(), e.details()
        finally:
            # Ends grpc's reading of stream.requests() when the server ended the call first.
            stream.queue.put(None)
            with self._cond:
                if self._stream is stream:
                    self._stream = None
                self.stream_ends.append(StreamEnd(self._clock.now(), stream.index, code, details))
                self._cond.notify_all()

    def _on_response(self, resp):
        with self._cond:
            now = self._clock.now()
            self._advance(now)
            self.messages_received += 1
            self._messages.append(MessageRecord(now, "received", "response",
                                                len(resp.bucket_action)))
            for action in resp.bucket_action:
                self._apply(action, now)
            self._cond.notify_all()

    def _ignore(self, key, bucket_id, now, note):
        if key in self._stats:
            self._stats[key].ignored += 1
        self._log.append(LogEntry(now, "ignored", bucket_id, note=note))

    def _apply(self, action, now):
        bucket_id = dict(action.bucket_id.bucket) if action.HasField("bucket_id") else {}
        if not bucket_id:
            self._ignore(None, None, now, "no bucket id")
            return
        key = _key(bucket_id)
        bucket = self._buckets.get(key)
        if bucket is None:
            self._ignore(key, bucket_id, now, "not a bucket of this client")
            return
        stats = self._stats[key]
        which = action.WhichOneof("bucket_action")
        if which == "abandon_action":
            del self._buckets[key]
            stats.abandons += 1
            self._log.append(LogEntry(now, "abandon", bucket_id))
            return
        if which is None:
            # Envoy caches it with a TTL of 0: it expires at once.
            bucket.source, bucket.strategy, bucket.limiter = "assignment", None, None
            bucket.deadline = now
            self._log.append(LogEntry(now, "empty", bucket_id, ttl=0.0))
            self._advance(now)
            return
        qa = action.quota_assignment_action
        strategy = qa.rate_limit_strategy
        case = strategy.WhichOneof("strategy")
        if case not in ("blanket_rule", "token_bucket"):
            self._ignore(key, bucket_id, now, f"unsupported strategy: {case or 'unset'}")
            return
        ttl = self._ttl(qa)
        extension = bucket.source == "assignment" and self._same(bucket.strategy, strategy)
        kind = "extend" if extension else ("replace" if bucket.assigned else "assign")
        limiter = None
        if case == "token_bucket":
            if bucket.strategy is not None and self._same_token_bucket(bucket.strategy, strategy):
                limiter = bucket.limiter
            else:
                limiter = self._new_limiter(strategy.token_bucket, bucket.limiter, now)
        bucket.source = "assignment"
        bucket.strategy = RateLimitStrategy()
        bucket.strategy.CopyFrom(strategy)
        bucket.limiter = limiter
        bucket.deadline = None if ttl is None else now + ttl
        bucket.assigned = True
        stats.assignments += 1
        if kind == "extend":
            stats.extensions += 1
        elif kind == "replace":
            stats.replacements += 1
        self._log.append(LogEntry(now, kind, bucket_id, describe(strategy), ttl))

    def _ttl(self, qa):
        if self.semantics == "envoy":
            # Envoy arms the timer with the Duration's seconds alone; unset reads as 0.
            return float(max(0, qa.assignment_time_to_live.seconds))
        if not qa.HasField("assignment_time_to_live"):
            return None
        d = qa.assignment_time_to_live
        return max(0.0, d.seconds + d.nanos / 1e9)

    def _fallback_timeout(self):
        timeout = self.expired.timeout or 0.0
        return float(int(timeout)) if self.semantics == "envoy" else float(timeout)

    def _same(self, old, new):
        if old is None or old.WhichOneof("strategy") != new.WhichOneof("strategy"):
            return False
        if new.WhichOneof("strategy") == "blanket_rule":
            return old.blanket_rule == new.blanket_rule
        return self._same_token_bucket(old, new)

    def _same_token_bucket(self, old, new):
        if old.WhichOneof("strategy") != "token_bucket" or \
                new.WhichOneof("strategy") != "token_bucket":
            return False
        a, b = old.token_bucket, new.token_bucket
        if self.semantics == "envoy":
            return (a.max_tokens == b.max_tokens
                    and a.tokens_per_fill.value == b.tokens_per_fill.value
                    and a.fill_interval.nanos == b.fill_interval.nanos)
        return (a.max_tokens == b.max_tokens and self._per_fill(a) == self._per_fill(b)
                and a.fill_interval == b.fill_interval)

    def _per_fill(self, tb):
        if self.semantics == "envoy" or tb.HasField("tokens_per_fill"):
            return tb.tokens_per_fill.value
        return 1

    def _rate(self, tb):
        if self.semantics == "envoy":
            interval = float(tb.fill_interval.seconds)
        else:
            interval = tb.fill_interval.seconds + tb.fill_interval.nanos / 1e9
        if interval <= 0:
            return math.inf
        return max(abs(self._per_fill(tb) / interval), MIN_FILL_RATE)

    def _new_limiter(self, tb, old, now):
        initial = tb.max_tokens
        if old is not None and old.max > 0:
            # Envoy's partial fill: the old bucket's ratio of remaining to max tokens.
            initial = int(tb.max_tokens * (old.remaining(now) / old.max))
        return _TokenBucket(tb.max_tokens, self._rate(tb), now, initial)

    # --- time ---

    def _advance(self, now):
        """Applies the expiries due by now, each at the time it fell due."""
        for key, bucket in self._buckets.items():
            while bucket.deadline is not None and bucket.deadline <= now:
                at = bucket.deadline
                stats = self._stats[key]
                if bucket.source == "assignment":
                    stats.expiries += 1
                    if self.expired is None:
                        bucket.source, bucket.strategy = "no_assignment", None
                        bucket.limiter, bucket.deadline = None, None
                        self._log.append(LogEntry(at, "expire", dict(bucket.bucket_id),
                                                  note="no_assignment"))
                        continue
                    fallback = self.expired.strategy
                    limiter = None
                    if fallback.WhichOneof("strategy") == "token_bucket":
                        if bucket.strategy is not None and \
                                self._same_token_bucket(bucket.strategy, fallback):
                            limiter = bucket.limiter
                        else:
                            limiter = self._new_limiter(fallback.token_bucket, bucket.limiter, at)
                    bucket.source = "fallback"
                    bucket.strategy = RateLimitStrategy()
                    bucket.strategy.CopyFrom(fallback)
                    bucket.limiter = limiter
                    bucket.deadline = at + self._fallback_timeout()
                    self._log.append(LogEntry(at, "expire", dict(bucket.bucket_id),
                                              describe(fallback), self._fallback_timeout(),
                                              note="fallback"))
                else:
                    stats.fallback_ends += 1
                    bucket.source, bucket.strategy = "no_assignment", None
                    bucket.limiter, bucket.deadline = None, None
                    self._log.append(LogEntry(at, "fallback_end", dict(bucket.bucket_id)))

    def _on_clock(self):
        with self._cond:
            if self._closed:
                return
            now = self._clock.now()
            self._advance(now)
            if self._started and now >= self._next_report:
                self._report_tick(now)
            self._cond.notify_all()

    def _timer_loop(self):
        with self._cond:
            while not self._closed:
                if not self._started:
                    self._cond.wait()
                    continue
                now = self._clock.now()
                if now >= self._next_report:
                    self._advance(now)
                    self._report_tick(now)
                    self._cond.notify_all()
                    continue
                self._cond.wait(self._next_report - now)

    # --- what tests read ---

    def stats(self, bucket_id) -> BucketStats:
        with self._cond:
            self._advance(self._clock.now())
            return replace(self._stats.get(_key(bucket_id), BucketStats()))

    def state(self, bucket_id) -> Optional[BucketState]:
        """The bucket now; None when it is not subscribed (never, or abandoned)."""
        with self._cond:
            now = self._clock.now()
            self._advance(now)
            b = self._buckets.get(_key(bucket_id))
            if b is None:
                return None
            return BucketState(b.source, describe(b.strategy), b.deadline,
                               b.limiter.remaining(now) if b.limiter else None,
                               b.allowed, b.denied)

    def log(self):
        with self._cond:
            self._advance(self._clock.now())
            return list(self._log)

    def messages(self):
        with self._cond:
            return list(self._messages)

    @property
    def stream_open(self):
        with self._cond:
            return self._stream is not None

    @property
    def streams_opened(self):
        with self._cond:
            return self._streams

    @property
    def last_stream_end(self) -> Optional[StreamEnd]:
        with self._cond:
            return self.stream_ends[-1] if self.stream_ends else None

    def channel_ready(self, timeout=5.0):
        """Waits, in real time, until the channel connects (not something Envoy does: tests use
        it to know that a server that was down can now be reached)."""
        try:
            grpc.channel_ready_future(self._channel).result(timeout=timeout)
            return True
        except grpc.FutureTimeoutError:
            return False

    def wait_for(self, predicate, timeout=5.0):
        """Waits, in real time, until predicate() holds; False if it did not by timeout."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not predicate():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(min(left, 0.05))
            return True

    def close(self, timeout=5.0):
        """Half-closes the stream, waits for the server to end it (cancels it after timeout),
        and stops the timer."""
        with self._cond:
            if self._closed:
                return
            self._closed = True
            stream = self._stream
            self._cond.notify_all()
        if hasattr(self._clock, "unsubscribe"):
            self._clock.unsubscribe(self._on_clock)
        if self._timer is not None:
            self._timer.join(timeout)
        if stream is not None:
            stream.queue.put(None)
            stream.reader.join(timeout)
            if stream.reader.is_alive():
                stream.call.cancel()
                stream.reader.join(timeout)
        with self._cond:
            readers = list(self._readers)
        for reader in readers:
            reader.join(timeout)
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
