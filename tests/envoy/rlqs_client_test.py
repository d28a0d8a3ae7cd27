#!/usr/bin/env python3
"""The reference RLQS client (rlqs_client.py) against a fake RLQS server written here with grpcio.

The server takes each report as raw bytes and decodes it by hand, field by field, so that the
client's encoding is checked by code that shares nothing with it. The client runs on a
ManualClock wherever time matters; waits are for conditions, with deadlines. Paths arrive in the
environment as for rls_client_test.py: RLS_PROTO_ROOT, PROTOC, PROTOBUF_INCLUDE.
"""
import os
import queue
import socket
import sys
import threading
import time
import unittest
from concurrent import futures

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rlqs_client as rc  # noqa: E402

SERVICE = "envoy.service.rate_limit_quota.v3.RateLimitQuotaService"
WAIT = 5.0
B = {"name": "checkout"}
C = {"name": "search", "tenant": "a"}


# --- the wire, by hand ---

def read_varint(data, i):
    shift = value = 0
    while True:
        b = data[i]
        i += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, i
        shift += 7


def fields(data):
    """[(number, wire type, value)]: value an int for varints, bytes for length-delimited."""
    out, i = [], 0
    while i < len(data):
        key, i = read_varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = read_varint(data, i)
        elif wire == 2:
            n, i = read_varint(data, i)
            value = data[i:i + n]
            i += n
        else:
            raise AssertionError(f"unexpected wire type {wire} for field {number}")
        out.append((number, wire, value))
    return out


def decode_seconds(data):
    s = {n: v for n, _, v in fields(data)}
    return s.get(1, 0), s.get(2, 0)


def decode_usage(data):
    usage = {"fields": [n for n, _, _ in fields(data)], "bucket": {}, "elapsed": None,
             "allowed": 0, "denied": 0, "last_report": None}
    for number, wire, value in fields(data):
        if number == 1:
            assert wire == 2
            for n, w, entry in fields(value):
                assert (n, w) == (1, 2), (n, w)
                kv = {en: ev for en, _, ev in fields(entry)}
                usage["bucket"][kv[1].decode()] = kv[2].decode()
        elif number == 2:
            assert wire == 2
            usage["elapsed"] = decode_seconds(value)
        elif number == 3:
            usage["allowed"] = value
        elif number == 4:
            usage["denied"] = value
        elif number == 5:
            usage["last_report"] = decode_seconds(value)
    return usage


def decode_report(raw):
    """A report in either schema: the element's first field tells a map entry (a varint key)
    from a list element (the bucket id, length-delimited)."""
    report = {"top": [(n, w) for n, w, _ in fields(raw)], "domain": None, "usages": [],
              "keys": [], "form": None}
    for number, wire, value in fields(raw):
        if number == 1:
            report["domain"] = value.decode()
        elif number == 2:
            element = fields(value)
            if element and element[0][:2] == (1, 0):
                report["form"] = "map"
                report["keys"].append(element[0][2])
                (usage,) = [v for n, w, v in element if (n, w) == (2, 2)]
            else:
                report["form"] = "list"
                usage = value
            report["usages"].append(decode_usage(usage))
    return report


# --- the fake server ---

class FakeStream:
    def __init__(self, server, context):
        self.server = server
        self.metadata = dict(context.invocation_metadata())
        self.raw = []
        self.out = queue.Queue()
        self.client_done = False

    def send(self, *actions):
        self.out.put(("send", rc.response(*actions)))

    def end(self, code, details):
        self.out.put(("end", code, details))

    def report(self, index):
        """The index-th message of this stream, decoded; waits for it."""
        with self.server.cond:
            ok = self.server.cond.wait_for(lambda: len(self.raw) > index, WAIT)
        assert ok, f"no message {index} on the stream ({len(self.raw)} received)"
        return decode_report(self.raw[index])

    def wait_client_done(self):
        with self.server.cond:
            return self.server.cond.wait_for(lambda: self.client_done, WAIT)


class FakeServer:
    def __init__(self, port=0):
        self.cond = threading.Condition()
        self.streams = []
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        handler = grpc.method_handlers_generic_handler(SERVICE, {
            "StreamRateLimitQuotas": grpc.stream_stream_rpc_method_handler(
                self._handle, request_deserializer=None,
                response_serializer=lambda m: m.SerializeToString())})
        self.server.add_generic_rpc_handlers((handler,))
        self.port = self.server.add_insecure_port(f"127.0.0.1:{port}")
        self.server.start()

    def _handle(self, requests, context):
        stream = FakeStream(self, context)
        with self.cond:
            self.streams.append(stream)
            self.cond.notify_all()

        def consume():
            try:
                for raw in requests:
                    with self.cond:
                        stream.raw.append(raw)
                        self.cond.notify_all()
                stream.out.put(("client_done",))
            except Exception:
                stream.out.put(("gone",))

        # Wakes the handler when the call ends from the client's side (a cancel), so that no
        # handler outlives its call.
        context.add_callback(lambda: stream.out.put(("gone",)))
        threading.Thread(target=consume, daemon=True).start()
        while True:
            item = stream.out.get()
            if item[0] == "send":
                yield item[1]
            elif item[0] == "end":
                context.set_code(item[1])
                context.set_details(item[2])
                return
            elif item[0] == "client_done":
                with self.cond:
                    stream.client_done = True
                    self.cond.notify_all()
                return
            else:
                return

    def stream(self, index):
        with self.cond:
            ok = self.cond.wait_for(lambda: len(self.streams) > index, WAIT)
        assert ok, f"no stream {index} ({len(self.streams)} opened)"
        return self.streams[index]

    def stop(self):
        self.server.stop(0)


class Base(unittest.TestCase):
    def setUp(self):
        self.servers = []
        self.clients = []
        self.fresh()

    def fresh(self):
        """A new server and clocks, for each case of a loop."""
        self.server = FakeServer()
        self.servers.append(self.server)
        self.clock = rc.ManualClock(start=1000.0)
        self.wall = rc.ManualClock(start=1_700_000_000.0)

    def tearDown(self):
        for c in self.clients:
            c.close()
        for server in self.servers:
            server.stop()

    def client(self, interval=5.0, **kw):
        kw.setdefault("clock", self.clock)
        kw.setdefault("wall_clock", self.wall)
        c = rc.RlqsClient(f"127.0.0.1:{self.server.port}", "dom", interval, **kw)
        self.clients.append(c)
        return c

    def advance(self, seconds):
        self.wall.advance(seconds)
        self.clock.advance(seconds)

    def applied(self, client, n):
        """Waits until client has received n responses."""
        self.assertTrue(client.wait_for(lambda: client.messages_received >= n, WAIT),
                        f"{client.messages_received} responses applied, {n} expected")

    def assign(self, client, stream, *actions):
        n = client.messages_received
        stream.send(*actions)
        self.applied(client, n + 1)

    def usage(self, report, bucket):
        (u,) = [u for u in report["usages"] if u["bucket"] == bucket]
        return u


class SubscriptionAndReportsTest(Base):
    def test_no_stream_before_the_first_request(self):
        c = self.client()
        self.advance(12)
        self.assertEqual((c.streams_opened, c.messages_sent), (0, 0))
        c.request(B)
        self.assertEqual(c.streams_opened, 1)

    def test_first_request_subscribes_at_once_then_reports_every_interval(self):
        c = self.client()
        self.assertTrue(c.request(B))
        s = self.server.stream(0)
        sub = s.report(0)
        self.assertEqual(sub["domain"], "dom")
        self.assertEqual(len(sub["usages"]), 1)
        u = sub["usages"][0]
        self.assertEqual((u["bucket"], u["allowed"], u["denied"], u["elapsed"]), (B, 1, 0, (0, 0)))
        # Later requests of the bucket send nothing: the next message is the periodic report.
        self.assertTrue(c.request(B))
        self.assertTrue(c.request(B))
        self.advance(5)
        rep = s.report(1)
        self.assertEqual(rep["domain"], "dom")
        u = self.usage(rep, B)
        self.assertEqual((u["allowed"], u["denied"], u["elapsed"]), (2, 0, (5, 0)))
        self.advance(5)
        u = self.usage(s.report(2), B)
        self.assertEqual((u["allowed"], u["denied"], u["elapsed"]), (0, 0, (5, 0)))
        self.assertEqual(c.messages_sent, 3)
        self.assertEqual([(m.direction, m.kind, m.count) for m in c.messages()],
                         [("sent", "subscribe", 1), ("sent", "report", 1), ("sent", "report", 1)])

    def test_no_assignment_deny_refuses_the_first_request_and_reports_it(self):
        c = self.client(no_assignment=rc.DENY)
        self.assertFalse(c.request(B))
        self.assertFalse(c.request(B))
        u = self.server.stream(0).report(0)["usages"][0]
        self.assertEqual((u["allowed"], u["denied"]), (0, 1))
        self.assertEqual((c.stats(B).allowed, c.stats(B).denied), (0, 2))

    def test_each_bucket_reports_the_time_since_its_own_last_report(self):
        for semantics, elapsed in (("envoy", (2, 0)), ("api", (2, 500_000_000))):
            with self.subTest(semantics=semantics):
                self.fresh()
                c = self.client(semantics=semantics)
                c.request(B)
                self.advance(2.5)
                c.request(C)
                c.request(C)
                s = self.server.stream(0)
                self.assertEqual(s.report(1)["usages"][0]["bucket"], C)
                self.advance(2.5)
                rep = s.report(2)
                self.assertEqual(self.usage(rep, B)["elapsed"], (5, 0))
                self.assertEqual(self.usage(rep, C)["elapsed"], elapsed)
                self.assertEqual((self.usage(rep, C)["allowed"], self.usage(rep, B)["allowed"]),
                                 (1, 0))

    def test_list_schema_bytes_field_by_field(self):
        c = self.client(schema="list")
        bucket = {"name": "a", "env": "x"}
        c.request(bucket)
        c.request(bucket)
        s = self.server.stream(0)
        s.report(0)
        self.advance(5)
        s.report(1)
        for raw, allowed, seconds in ((s.raw[0], 1, 0), (s.raw[1], 1, 5)):
            top = fields(raw)
            self.assertEqual([(n, w) for n, w, _ in top], [(1, 2), (2, 2)])
            self.assertEqual(top[0][2], b"dom")
            usage = fields(top[1][2])
            # Fields 1-4 only, in order; denied is 0 and so absent; time_elapsed always there.
            self.assertEqual([(n, w) for n, w, _ in usage], [(1, 2), (2, 2), (3, 0)])
            entries = fields(usage[0][2])
            self.assertEqual([(n, w) for n, w, _ in entries], [(1, 2), (1, 2)])
            pairs = {}
            for _, _, entry in entries:
                kv = fields(entry)
                self.assertEqual([(n, w) for n, w, _ in kv], [(1, 2), (2, 2)])
                pairs[kv[0][2].decode()] = kv[1][2].decode()
            self.assertEqual(pairs, bucket)
            duration = fields(usage[1][2])
            self.assertEqual(duration, [(1, 0, seconds)] if seconds else [])
            self.assertEqual(usage[2][2], allowed)

    def test_map_schema_key_and_last_report(self):
        c = self.client(schema="map")
        subscribed_at = self.wall.now()
        c.request(B)
        s = self.server.stream(0)
        sub = s.report(0)
        self.assertEqual(sub["form"], "map")
        self.assertEqual(sub["keys"], [rc.envoy_bucket_hash(B)])
        self.assertEqual(self.usage(sub, B)["allowed"], 1)
        self.assertEqual(self.usage(sub, B)["last_report"],
                         divmod(int(round(subscribed_at * 1e9)), 1_000_000_000))
        self.advance(5)
        first_tick = self.wall.now()
        u = self.usage(s.report(1), B)
        self.assertEqual(u["fields"], [1, 2, 5])
        self.assertEqual((u["elapsed"], u["last_report"]), ((5, 0), (int(subscribed_at), 0)))
        self.advance(5)
        u = self.usage(s.report(2), B)
        self.assertEqual(u["last_report"], (int(first_tick), 0))

    def test_envoy_hash(self):
        # HashUtil::xxHash64's values from Envoy's own tests (test/common/common/hash_test.cc).
        for text, value in ((b"foo", 3728699739546630719), (b"bar", 5234164152756840025),
                            (b"foo\nbar", 8917841378505826757), (b"lyft", 4400747396090729504),
                            (b"", 17241709254077376921)):
            self.assertEqual(rc.xxhash64(text), value)
        # Inputs of 32 bytes and more take XXH64's stripe loop: published reference values.
        for text, value in ((b"Nobody inspects the spammish repetition", 0xFBCEA83C8A378BF1),
                            (b"The quick brown fox jumps over the lazy dog", 0x0B242D361FDA71BC),
                            (b"a" * 32, 0x856E843298F99AD7)):
            self.assertEqual(rc.xxhash64(text), value)
        self.assertEqual(rc.bucket_text({"b": "2", "a": 'x"y\n\xe9'}),
                         '1 { 1: "a" 2: "x\\"y\\n\\303\\251" } 1 { 1: "b" 2: "2" } ')
        self.assertEqual(rc.envoy_bucket_hash({"b": "2", "a": "1"}),
                         rc.envoy_bucket_hash({"a": "1", "b": "2"}))


class AssignmentsTest(Base):
    def subscribed(self, **kw):
        c = self.client(**kw)
        c.request(B)
        s = self.server.stream(0)
        s.report(0)
        return c, s

    def test_token_bucket_starts_full_and_refills_continuously(self):
        c, s = self.subscribed()
        self.assign(c, s, rc.assignment(B, rc.token_bucket(3, 1, 1.0), ttl=60))
        self.assertEqual([c.request(B) for _ in range(4)], [True, True, True, False])
        self.advance(0.5)
        self.assertFalse(c.request(B))
        self.advance(0.5)
        self.assertEqual([c.request(B) for _ in range(2)], [True, False])
        self.advance(10)  # crosses the report at +5: counts up to here
        self.assertEqual([c.request(B) for _ in range(4)], [True, True, True, False])
        u = self.usage(s.report(1), B)
        self.assertEqual((u["allowed"], u["denied"], u["elapsed"]), (4, 3, (11, 0)))
        self.assertEqual(c.stats(B).assignments, 1)

    def test_unset_tokens_per_fill(self):
        for semantics, after in (("envoy", False), ("api", True)):
            with self.subTest(semantics=semantics):
                self.fresh()
                c, s = self.subscribed(semantics=semantics)
                self.assign(c, s, rc.assignment(B, rc.token_bucket(2, None, 1.0), ttl=60))
                self.assertEqual([c.request(B) for _ in range(3)], [True, True, False])
                self.advance(1)
                # Envoy reads an unset tokens_per_fill as 0: a token a year.
                self.assertEqual(c.request(B), after)

    def test_same_strategy_extends_the_ttl_and_keeps_the_tokens(self):
        c, s = self.subscribed()
        tb = rc.token_bucket(3, 1, 60.0)
        self.assign(c, s, rc.assignment(B, tb, ttl=10))
        self.assertEqual([c.request(B) for _ in range(4)], [True, True, True, False])
        self.advance(4)
        self.assign(c, s, rc.assignment(B, tb, ttl=10))
        self.assertFalse(c.request(B))  # no new tokens: the same bucket goes on
        self.assertEqual(c.state(B).expires_at, 1004.0 + 10)
        self.advance(8)  # past the first TTL
        self.assertEqual(c.state(B).source, "assignment")
        st = c.stats(B)
        self.assertEqual((st.assignments, st.extensions, st.replacements, st.expiries),
                         (2, 1, 0, 0))
        self.assertEqual([e.kind for e in c.log()], ["subscribe", "assign", "extend"])

    def test_another_strategy_replaces_starting_at_the_old_fill_ratio(self):
        c, s = self.subscribed()
        self.assign(c, s, rc.assignment(B, rc.token_bucket(4, 1, 3600.0), ttl=60))
        self.assertTrue(c.request(B))  # 3 of 4 left
        self.assign(c, s, rc.assignment(B, rc.token_bucket(8, 1, 3600.0), ttl=60))
        self.assertEqual([c.request(B) for _ in range(7)], [True] * 6 + [False])
        self.assign(c, s, rc.assignment(B, rc.deny_all(), ttl=60))
        self.assertFalse(c.request(B))
        st = c.stats(B)
        self.assertEqual((st.assignments, st.extensions, st.replacements), (3, 0, 2))
        log = c.log()
        self.assertEqual([e.kind for e in log], ["subscribe", "assign", "replace", "replace"])
        self.assertEqual(log[2].strategy["token_bucket"]["max_tokens"], 8)
        self.assertEqual(log[3].strategy, {"blanket_rule": "DENY_ALL"})

    def test_envoy_compares_token_buckets_without_the_fill_interval_seconds(self):
        # Envoy keeps the bucket, refilling a token a minute; the API's client starts a new
        # one (empty, as the old one was) refilling a token in two.
        for semantics, kind, after in (("envoy", "extend", True), ("api", "replace", False)):
            with self.subTest(semantics=semantics):
                self.fresh()
                c, s = self.subscribed(semantics=semantics)
                self.assign(c, s, rc.assignment(B, rc.token_bucket(1, 1, 60.0), ttl=600))
                self.assertTrue(c.request(B))
                self.assign(c, s, rc.assignment(B, rc.token_bucket(1, 1, 120.0), ttl=600))
                self.assertEqual(c.log()[-1].kind, kind)
                self.advance(60)
                self.assertEqual(c.request(B), after)

    def test_expiry_falls_back_for_its_timeout_then_to_no_assignment(self):
        c, s = self.subscribed(expired=rc.ExpiredFallback(rc.deny_all(), timeout=10))
        self.advance(1)
        self.assign(c, s, rc.assignment(B, rc.allow_all(), ttl=5))
        self.assertTrue(c.request(B))
        self.advance(7)  # past the TTL: the fallback runs from the expiry, not from now
        self.assertEqual(c.state(B).source, "fallback")
        self.assertFalse(c.request(B))
        self.advance(7.5)
        self.assertFalse(c.request(B))
        self.advance(0.5)
        self.assertEqual(c.state(B).source, "no_assignment")
        self.assertTrue(c.request(B))
        log = c.log()
        self.assertEqual([(e.kind, e.time, e.note) for e in log[2:]],
                         [("expire", 1006.0, "fallback"), ("fallback_end", 1016.0, "")])
        st = c.stats(B)
        self.assertEqual((st.expiries, st.fallback_ends), (1, 1))

    def test_expiry_without_fallback_is_no_assignment(self):
        c, s = self.subscribed(no_assignment=rc.DENY)
        self.assign(c, s, rc.assignment(B, rc.allow_all(), ttl=2))
        self.assertTrue(c.request(B))
        self.advance(2)
        self.assertFalse(c.request(B))
        self.assertEqual(c.stats(B).expiries, 1)

    def test_a_new_assignment_after_expiry_replaces(self):
        c, s = self.subscribed()
        tb = rc.token_bucket(2, 1, 3600.0)
        self.assign(c, s, rc.assignment(B, tb, ttl=1))
        self.assertEqual([c.request(B) for _ in range(3)], [True, True, False])
        self.advance(1)
        self.assign(c, s, rc.assignment(B, tb, ttl=60))
        self.assertEqual([c.request(B) for _ in range(3)], [True, True, False])  # full again
        self.assertEqual(c.stats(B).replacements, 1)

    def test_ttl_is_read_in_whole_seconds_by_envoy(self):
        for semantics, expires in (("envoy", 1001.0), ("api", 1001.9)):
            with self.subTest(semantics=semantics):
                self.fresh()
                c, s = self.subscribed(semantics=semantics)
                self.assign(c, s, rc.assignment(B, rc.deny_all(), ttl=1.9))
                self.assertAlmostEqual(c.state(B).expires_at, expires)

    def test_ttl_zero_expires_at_once(self):
        c, s = self.subscribed()
        self.assign(c, s, rc.assignment(B, rc.deny_all(), ttl=0))
        self.assertTrue(c.request(B))  # no_assignment again
        self.assertEqual([e.kind for e in c.log()], ["subscribe", "assign", "expire"])

    def test_unset_ttl(self):
        for semantics, source in (("envoy", "no_assignment"), ("api", "assignment")):
            with self.subTest(semantics=semantics):
                self.fresh()
                c, s = self.subscribed(semantics=semantics)
                self.assign(c, s, rc.assignment(B, rc.deny_all()))
                self.advance(100_000)
                self.assertEqual(c.state(B).source, source)
                self.assertEqual(c.request(B), source == "no_assignment")

    def test_abandon_forgets_the_bucket_and_the_next_request_subscribes_again(self):
        c, s = self.subscribed()
        self.assign(c, s, rc.assignment(B, rc.deny_all(), ttl=60))
        self.assertFalse(c.request(B))
        self.assign(c, s, rc.abandon(B))
        self.assertIsNone(c.state(B))
        self.assertTrue(c.request(B))  # no_assignment, not the abandoned DENY_ALL
        u = s.report(1)["usages"]
        # The denied request went unreported with the bucket.
        self.assertEqual([(x["bucket"], x["allowed"], x["denied"], x["elapsed"]) for x in u],
                         [(B, 1, 0, (0, 0))])
        st = c.stats(B)
        self.assertEqual((st.subscriptions, st.abandons, st.allowed, st.denied), (2, 1, 2, 1))
        # With every bucket abandoned, a report carries the domain alone.
        self.assign(c, s, rc.abandon(B))
        self.advance(5)
        rep = s.report(2)
        self.assertEqual((rep["domain"], rep["usages"], rep["top"]), ("dom", [], [(1, 2)]))

    def test_actions_envoy_does_not_apply(self):
        c, s = self.subscribed(expired=rc.ExpiredFallback(rc.deny_all(), timeout=10))
        rptu = rc.RateLimitStrategy()
        rptu.requests_per_time_unit.requests_per_time_unit = 1
        self.assign(c, s, rc.assignment(C, rc.deny_all(), ttl=60),  # never reported
                    rc.assignment(B, rptu, ttl=60),
                    rc.assignment(B, None, ttl=60),
                    rc.BucketAction())  # no bucket id
        self.assertEqual([(e.kind, e.note) for e in c.log()[1:]],
                         [("ignored", "not a bucket of this client"),
                          ("ignored", "unsupported strategy: requests_per_time_unit"),
                          ("ignored", "unsupported strategy: unset"),
                          ("ignored", "no bucket id")])
        self.assertEqual(c.stats(B).ignored, 2)
        self.assertEqual(c.state(B).source, "no_assignment")
        self.assertTrue(c.request(C))  # subscribes C under no_assignment, not DENY_ALL
        # An action with neither an assignment nor an abandon expires the bucket at once.
        self.assign(c, s, rc.BucketAction(bucket_id=rc.rlqs_pb2.BucketId(bucket=B)))
        self.assertEqual(c.state(B).source, "fallback")
        self.assertFalse(c.request(B))
        self.assertEqual([e.kind for e in c.log()[-2:]], ["empty", "expire"])


class StreamTest(Base):
    def test_stream_end_is_exposed_assignments_stay_and_the_next_report_reconnects(self):
        c = self.client(metadata=(("x-tenant", "a"),))
        c.request(B)
        s0 = self.server.stream(0)
        s0.report(0)
        self.assertEqual(s0.metadata.get("x-tenant"), "a")
        self.assign(c, s0, rc.assignment(B, rc.deny_all(), ttl=60))
        s0.end(grpc.StatusCode.RESOURCE_EXHAUSTED, "over capacity")
        self.assertTrue(c.wait_for(lambda: c.last_stream_end is not None, WAIT))
        end = c.last_stream_end
        self.assertEqual((end.stream, end.code, end.details),
                         (0, grpc.StatusCode.RESOURCE_EXHAUSTED, "over capacity"))
        self.assertFalse(c.stream_open)
        self.assertFalse(c.request(B))  # the assignment outlives the stream
        self.assertTrue(c.request(C))  # subscribed while down: its report is dropped
        self.assertTrue(c.request(C))
        self.assertEqual(c.reports_dropped, 1)
        self.assertEqual(c.log()[-1].note, "dropped: no stream")
        self.assertEqual(c.streams_opened, 1)  # no reconnection before the report
        self.advance(5)
        s1 = self.server.stream(1)
        rep = s1.report(0)
        self.assertEqual(rep["domain"], "dom")
        self.assertEqual(s1.metadata.get("x-tenant"), "a")
        self.assertEqual(sorted((tuple(sorted(u["bucket"].items())), u["allowed"], u["denied"])
                                for u in rep["usages"]),
                         sorted([(tuple(sorted(B.items())), 0, 1),
                                 (tuple(sorted(C.items())), 1, 0)]))
        self.assertEqual(c.streams_opened, 2)
        # Assignments on the new stream apply as before.
        self.assign(c, s1, rc.assignment(C, rc.deny_all(), ttl=60))
        self.assertFalse(c.request(C))

    def test_a_server_down_is_retried_at_each_report_and_reports_made_meanwhile_are_lost(self):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        c = rc.RlqsClient(f"127.0.0.1:{port}", "dom", 5.0, clock=self.clock, wall_clock=self.wall,
                          channel_options=[("grpc.initial_reconnect_backoff_ms", 50),
                                           ("grpc.min_reconnect_backoff_ms", 50),
                                           ("grpc.max_reconnect_backoff_ms", 100)])
        self.clients.append(c)
        self.assertTrue(c.request(B))
        self.assertTrue(c.wait_for(lambda: len(c.stream_ends) == 1, WAIT))
        self.assertEqual(c.stream_ends[0].code, grpc.StatusCode.UNAVAILABLE)
        c.request(B)
        self.advance(5)  # a second stream, which fails too, with this request's count
        self.assertTrue(c.wait_for(lambda: len(c.stream_ends) == 2, WAIT))
        server = FakeServer(port)
        self.servers.append(server)
        self.assertTrue(c.channel_ready(WAIT))
        c.request(B)
        c.request(B)
        self.advance(5)
        rep = server.stream(0).report(0)
        self.assertEqual(rep["domain"], "dom")
        u = self.usage(rep, B)
        self.assertEqual((u["allowed"], u["denied"], u["elapsed"]), (2, 0, (5, 0)))
        self.assertEqual(c.streams_opened, 3)

    def test_close_half_closes_and_the_server_ends_the_stream(self):
        c = self.client()
        c.request(B)
        s = self.server.stream(0)
        s.report(0)
        c.close()
        self.assertTrue(s.wait_client_done())
        self.assertEqual(c.last_stream_end.code, grpc.StatusCode.OK)
        with self.assertRaises(RuntimeError):
            c.request(B)

    def test_real_time_reports(self):
        c = self.client(0.1, clock=rc.MonotonicClock(), wall_clock=rc.WallClock(),
                        semantics="api")
        start = time.monotonic()
        c.request(B)
        s = self.server.stream(0)
        reports = [s.report(i) for i in range(3)]
        took = time.monotonic() - start
        for rep in reports[1:]:
            seconds, nanos = rep["usages"][0]["elapsed"]
            self.assertGreaterEqual(seconds + nanos / 1e9, 0.1)
        self.assertLess(took, 2.0)


if __name__ == "__main__":
    unittest.main()
