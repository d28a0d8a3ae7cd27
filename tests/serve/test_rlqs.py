"""Envoy's rate limit quota service (RLQS) across processes: three reference clients that behave
as Envoy's rate_limit_quota filter (tests/envoy/rlqs_client.py) against two `caudal serve` on one
redis-server, one hot bucket offered ten times its limit. Everything the clients admit stays
within the policy's bound, at least 90% of the ideal; each client's share follows its offered
rate within two reporting intervals. Then: a graceful shutdown expires every assignment (time to
live 0) before the stream ends; a killed instance's clients keep their assignment until its time
to live; a stopped store gives the policy's failure mode; malformed streams are refused with a
clear status and charge nothing. The first run again on a Redis Cluster.

The figures of each three-client run are printed (admitted, bound, ideal, share per client per
interval, messages per second per client)."""
import json
import os
import re
import signal
import struct
import sys
import threading
import time
import unittest

import grpc

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "envoy"))
import harness  # noqa: E402
import rlqs_client as rc  # noqa: E402

RATE = 60          # per second, the policy's refill
CAPACITY = 60      # its burst
INTERVAL = 1.0     # the clients' reporting interval (Envoy's is 5 s; shorter keeps this quick)
TTL = 4            # rlqs.assignment_ttl, seconds
CONFIG = """
store: {url: '%s', timeout: 500ms, on_failure: %s}
server: {grpc: '127.0.0.1:0'}
policies:
  - name: per-tenant
    identity: [tenant]
    limits: [{algorithm: token_bucket, capacity: %d, refill: %d/1s}]
rlqs:
  assignment_ttl: %ds
  abandon_after: %ds
  max_buckets: 8
  domains:
    - domain: envoy
      buckets:
        - match: {name: per-tenant}
          policy: per-tenant
          identity: {tenant: tenant}
      no_match: deny_all
"""
HOT = {"name": "per-tenant", "tenant": "hot"}
TOKEN = "admin-token-for-rlqs"
DOMAIN = "envoy"


def kind(client, bucket):
    """The bucket's active assignment: "token_bucket", "allow_all", "deny_all", or None."""
    st = client.state(bucket)
    if st is None or st.source != "assignment" or st.strategy is None:
        return None
    if "token_bucket" in st.strategy:
        return "token_bucket"
    return st.strategy["blanket_rule"].lower()


def start(url, on_failure="deny", test_hooks=False, abandon_after=30):
    """caudal serve with RLQS; (Serve, its gRPC target). With test_hooks, on the real clock
    still: only its store's failure is scripted."""
    s = harness.Serve(CONFIG % (url, on_failure, CAPACITY, RATE, TTL, abandon_after),
                      test_hooks=test_hooks,
                      env={"CAUDAL_TESTING_CLOCK": "real", "CAUDAL_ADMIN_TOKEN": TOKEN})
    line = s.proc.stdout.readline().decode()
    m = re.search(r"gRPC\) on 127\.0\.0\.1:(\d+)", line)
    if not m:
        s.close()
        raise AssertionError("no gRPC line: %r\n%s" % (line, s.log()))
    return s, "127.0.0.1:%s" % m.group(1)


class Offered(threading.Thread):
    """Requests into `bucket` at `rates(t)` per second (t: seconds since start), each decided
    by `client`; counts per whole second of what was admitted."""

    def __init__(self, client, bucket, rates, seconds):
        super().__init__(daemon=True)
        self.client, self.bucket, self.rates, self.seconds = client, bucket, rates, seconds
        self.admitted = [0] * (int(seconds) + 1)
        self.offered = 0

    def run(self):
        t0 = time.monotonic()
        sent = 0.0
        while True:
            t = time.monotonic() - t0
            if t >= self.seconds:
                return
            sent += self.rates(t) * 0.005
            while sent >= 1:
                sent -= 1
                self.offered += 1
                if self.client.request(self.bucket):
                    self.admitted[int(t)] += 1
            time.sleep(0.005)


def run_three(test, targets, seconds, rates):
    """Three clients on `targets` (one each), offering `rates[i](t)`; returns (clients, loads,
    elapsed seconds)."""
    clients = [rc.RlqsClient(t, DOMAIN, INTERVAL, no_assignment=rc.DENY) for t in targets]
    for c in clients:
        test.addCleanup(c.close)
    loads = [Offered(c, HOT, r, seconds) for c, r in zip(clients, rates)]
    t0 = time.monotonic()
    for load in loads:
        load.start()
    for load in loads:
        load.join()
    elapsed = time.monotonic() - t0
    return clients, loads, elapsed


def report(name, loads, clients, elapsed, bound, ideal):
    admitted = sum(sum(l.admitted) for l in loads)
    print("\n%s: %.1fs, offered %d, admitted %d, bound %d, ideal %d (%.1f%% of ideal)" % (
        name, elapsed, sum(l.offered for l in loads), admitted, bound, ideal,
        100.0 * admitted / ideal))
    for i, (l, c) in enumerate(zip(loads, clients)):
        print("  client %d: admitted/s %s; messages/s sent %.2f received %.2f" % (
            i, l.admitted, c.messages_sent / elapsed, c.messages_received / elapsed))
    return admitted


class ThreeEnvoys(unittest.TestCase):
    """Two instances on one store; three clients, one hot bucket."""
    STORE = "redis"

    @classmethod
    def setUpClass(cls):
        if cls.STORE == "cluster":
            cls.store = harness.RedisCluster()
        else:
            cls.store = harness.Redis()
        cls.a, cls.a_target = start(cls.store.url)
        cls.b, cls.b_target = start(cls.store.url)

    @classmethod
    def tearDownClass(cls):
        cls.a.close()
        cls.b.close()
        cls.store.close()

    def test_three_envoys_share_one_limit_within_its_bound(self):
        seconds = 14
        # Ten times the limit in all; client 2 asks less than its fair part for the first half,
        # then as much as the others.
        rates = [lambda t: 270, lambda t: 270, lambda t: 6 if t < seconds / 2 else 270]
        t0 = time.time()
        clients, loads, elapsed = run_three(
            self, [self.a_target, self.a_target, self.b_target], seconds, rates)
        # What the bound allows over the run and the time to live after it, and what a perfect
        # limiter would admit over the run (it stays saturated).
        bound = CAPACITY + RATE * (elapsed + TTL)
        ideal = CAPACITY + RATE * elapsed
        admitted = report("RLQS, %s" % self.STORE, loads, clients, elapsed, bound, ideal)
        self.assertLessEqual(admitted, bound)
        self.assertGreaterEqual(admitted, 0.9 * ideal)
        if self.STORE == "redis":
            # Every unit admitted was consumed in the store first: the bucket's state (its tokens,
            # below 0 in debt) says the store consumed B + r·(time since the first request) −
            # tokens, at least what the clients admitted.
            (key,) = [k for k in self.store.command("KEYS", "*per-tenant*", whole=True).split(
                b"\r\n") if k.endswith(b"}")]
            value = self.store.command("GET", key, whole=True).split(b"\r\n", 1)[1][:33]
            _, tokens, _, last, _ = struct.unpack("<Bdddd", value)
            consumed = CAPACITY + RATE * (last / 1e6 - t0) - tokens
            print("  store: tokens %.0f, consumed %.0f since the first request" % (tokens, consumed))
            self.assertGreaterEqual(consumed + RATE * 0.1, admitted)
        for c in clients:
            self.assertEqual(c.stream_ends, [], "no stream may end in a healthy run")
            self.assertGreater(c.stats(HOT).assignments, 0)
        # Shares follow demand within two intervals. In the first half, client 2 is under its
        # fair part (6/s of 20/s): it is allotted all it asks; in the second half all three ask
        # more than a third, and each gets about a third.
        half = seconds // 2
        steady_first = range(3, half)                        # after two intervals
        steady_second = range(half + 2 + 1, seconds - 1)     # two intervals after the change
        for i in (0, 1):
            got = sum(loads[i].admitted[s] for s in steady_first) / len(steady_first)
            self.assertGreater(got, 0.7 * (RATE - 6) / 2, "client %d in the first half" % i)
        got = sum(loads[2].admitted[s] for s in steady_first) / len(steady_first)
        self.assertGreater(got, 0.7 * 6, "client 2 is allotted what it asks")
        for i in range(3):
            got = sum(loads[i].admitted[s] for s in steady_second) / len(steady_second)
            self.assertGreater(got, 0.6 * RATE / 3, "client %d in the second half" % i)
            self.assertLess(got, 1.5 * RATE / 3, "client %d in the second half" % i)
        # The traffic shows beside HTTP's: /metrics and the status page count the reports.
        allowed = self.a.metric(
            'caudal_decisions_total{api="rlqs",policy="per-tenant",outcome="allowed"}') + \
            self.b.metric('caudal_decisions_total{api="rlqs",policy="per-tenant",outcome="allowed"}')
        self.assertGreater(allowed, 0.5 * admitted)
        status, _, body = self.a.request("GET", "/v1/status")
        self.assertEqual(status, 200)
        (policy,) = [p for p in json.loads(body)["policies"] if p["name"] == "per-tenant"]
        self.assertGreater(policy["rlqs"]["allowed"] + policy["rlqs"]["denied"], 0)
        # The admin state of the identity: its buckets at each instance, and their rates, which
        # add up to at most the limit's.
        assigned = 0.0
        for server, buckets in ((self.a, 2), (self.b, 1)):
            status, _, body = server.request(
                "GET", "/v1/admin/policies/per-tenant/state?tenant=hot", None,
                {"Authorization": "Bearer " + TOKEN})
            self.assertEqual(status, 200, body)
            held = json.loads(body)["rlqs"]
            self.assertEqual(held["buckets"], buckets)
            self.assertGreater(held["allowed"], 0)
            assigned += held["assigned_per_second"]
        self.assertGreater(assigned, 0)
        self.assertLessEqual(assigned, RATE * 1.05)
        status, _, body = self.a.request("GET", "/v1/admin/policies/per-tenant/state?tenant=cold",
                                         None, {"Authorization": "Bearer " + TOKEN})
        self.assertEqual(status, 200, body)
        self.assertNotIn("rlqs", json.loads(body))


class ThreeEnvoysOnACluster(ThreeEnvoys):
    STORE = "cluster"


def raw_stream(target, messages):
    """Sends `messages` (bytes) on one stream; the stream's end (code, details) and the
    responses received before it."""
    channel = grpc.insecure_channel(target)
    call = channel.stream_stream(rc.METHOD, request_serializer=lambda b: b,
                                 response_deserializer=rc.rlqs_pb2.RateLimitQuotaResponse.FromString)
    responses = []
    try:
        for r in call(iter(messages), timeout=10):
            responses.append(r)
        return grpc.StatusCode.OK, "", responses
    except grpc.RpcError as e:
        return e.code(), e.details(), responses
    finally:
        channel.close()


def usage(bucket, allowed=1, domain=DOMAIN):
    m = rc.rlqs_pb2.RateLimitQuotaUsageReports(domain=domain)
    u = m.bucket_quota_usages.add()
    u.bucket_id.bucket.update(bucket)
    u.num_requests_allowed = allowed
    return m.SerializeToString()


class Refusals(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.store = harness.Redis()
        cls.serve, cls.target = start(cls.store.url)

    @classmethod
    def tearDownClass(cls):
        cls.serve.close()
        cls.store.close()

    def remaining(self, tenant):
        status, _, body = self.serve.check({"tenant": tenant})
        self.assertEqual(status, 200)
        return body["policies"][0]["limits"][0]["remaining"]

    def test_malformed_streams_are_refused_and_charge_nothing(self):
        cases = [
            ("no domain", [usage({"name": "per-tenant", "tenant": "m1"}, domain="")],
             grpc.StatusCode.INVALID_ARGUMENT, "first report of a stream must name its domain"),
            ("unknown domain", [usage({"name": "per-tenant", "tenant": "m2"}, domain="other")],
             grpc.StatusCode.INVALID_ARGUMENT, "is not served"),
            ("empty BucketId", [rc.rlqs_pb2.RateLimitQuotaUsageReports(
                domain=DOMAIN, bucket_quota_usages=[{}]).SerializeToString()],
             grpc.StatusCode.INVALID_ARGUMENT, "no BucketId"),
            ("not a message", [b"\x0a\xff\xff"], grpc.StatusCode.INVALID_ARGUMENT,
             "not a RateLimitQuotaUsageReports"),
            ("a huge map", [rc.rlqs_pb2.RateLimitQuotaUsageReports(
                domain=DOMAIN, bucket_quota_usages=[
                    {"bucket_id": {"bucket": {"name": "per-tenant", "tenant": "m5-%d" % i}}}
                    for i in range(9)]).SerializeToString()],
             grpc.StatusCode.RESOURCE_EXHAUSTED, "more than 8 buckets"),
            ("domain changed", [usage({"name": "x", "tenant": "m6"}),
                                usage({"name": "x", "tenant": "m6"}, domain="second")],
             grpc.StatusCode.INVALID_ARGUMENT, "a stream keeps one domain"),
        ]
        for name, messages, code, says in cases:
            with self.subTest(name):
                got, details, _ = raw_stream(self.target, messages)
                self.assertEqual(got, code, details)
                self.assertIn(says, details)
        # Nothing was charged: each tenant's bucket is full (one HTTP check takes one).
        for tenant in ("m1", "m2", "m5-0", "m5-8"):
            self.assertEqual(self.remaining(tenant), CAPACITY - 1, tenant)
        self.assertGreaterEqual(self.serve.metric(
            'caudal_rlqs_streams_refused_total{reason="malformed"}'), 3)
        # The service is still there.
        c = rc.RlqsClient(self.target, DOMAIN, INTERVAL, no_assignment=rc.DENY)
        self.addCleanup(c.close)
        c.request({"name": "per-tenant", "tenant": "after"})
        self.assertTrue(c.wait_for(lambda: c.stats({"name": "per-tenant", "tenant": "after"})
                                   .assignments > 0, timeout=5))

    def test_a_flood_of_reports_costs_the_store_one_renewal_per_gap(self):
        """A caller with valid credentials that sends reports as fast as it can: each bucket is
        renewed at most every assignment_ttl/20, and the service keeps serving others."""
        def actions():
            return sum(self.serve.metric('caudal_rlqs_actions_total{action="%s"}' % a)
                       for a in ("token_bucket", "extend", "deny_all", "allow_all"))
        before = actions()
        flood = [usage({"name": "per-tenant", "tenant": "flood"}, allowed=1000)] * 3000
        t0 = time.monotonic()
        code, details, _ = raw_stream(self.target, flood)
        elapsed = time.monotonic() - t0
        self.assertEqual(code, grpc.StatusCode.OK, details)
        renewals = actions() - before
        print("\nflood: 3000 reports in %.2fs, %d renewals" % (elapsed, renewals))
        self.assertLessEqual(renewals, 2 + elapsed / (TTL / 20.0))
        # Others are served meanwhile and after.
        c = rc.RlqsClient(self.target, DOMAIN, INTERVAL, no_assignment=rc.DENY)
        self.addCleanup(c.close)
        other = {"name": "per-tenant", "tenant": "bystander"}
        c.request(other)
        self.assertTrue(c.wait_for(lambda: kind(c, other) == "token_bucket", timeout=5))

    def test_a_bucket_no_rule_maps_gets_the_domains_no_match(self):
        c = rc.RlqsClient(self.target, DOMAIN, INTERVAL, no_assignment=rc.ALLOW)
        self.addCleanup(c.close)
        other = {"name": "unknown-bucket", "tenant": "z"}
        c.request(other)
        self.assertTrue(c.wait_for(lambda: c.stats(other).assignments > 0, timeout=5))
        self.assertEqual(kind(c, other), "deny_all")
        self.assertFalse(c.request(other))


class Lifecycle(unittest.TestCase):
    """Shutdown, a killed instance, a stopped store: each on instances of its own."""

    def setUp(self):
        self.store = harness.Redis()
        self.addCleanup(self.store.close)

    def subscribed(self, target, tenant, expired=None):
        bucket = {"name": "per-tenant", "tenant": tenant}
        c = rc.RlqsClient(target, DOMAIN, INTERVAL, no_assignment=rc.DENY, expired=expired)
        self.addCleanup(c.close)
        c.request(bucket)
        self.assertTrue(c.wait_for(lambda: kind(c, bucket) == "token_bucket", timeout=8), c.log())
        return c, bucket

    def test_shutdown_expires_every_assignment_before_the_stream_ends(self):
        s, target = start(self.store.url)
        clients = [self.subscribed(target, t) for t in ("s1", "s2")]
        s.signal(signal.SIGTERM)
        s.proc.wait(timeout=15)
        s.close()
        for c, bucket in clients:
            self.assertTrue(c.wait_for(lambda: c.stream_ends, timeout=5))
            self.assertEqual(c.stream_ends[0].code, grpc.StatusCode.UNAVAILABLE)
            # The last action before the end: the active strategy with a time to live of 0.
            self.assertGreaterEqual(c.stats(bucket).expiries, 1, c.log())
            self.assertFalse(c.request(bucket), "expired: back to no_assignment (deny)")

    def test_a_killed_instance_leaves_its_clients_on_their_assignment_until_its_ttl(self):
        s, target = start(self.store.url)
        c, bucket = self.subscribed(target, "k1")
        expires_at = c.state(bucket).expires_at
        s.signal(signal.SIGKILL)
        s.proc.wait(timeout=5)
        s.close()
        self.assertTrue(c.wait_for(lambda: c.stream_ends, timeout=5))
        self.assertEqual(c.stats(bucket).expiries, 0)
        # Still the token bucket until its end, then back to no_assignment (deny).
        self.assertEqual(kind(c, bucket), "token_bucket")
        self.assertLessEqual(expires_at - time.monotonic(), TTL + 0.5)
        self.assertTrue(c.wait_for(lambda: c.stats(bucket).expiries >= 1, timeout=TTL + 3),
                        c.log())
        self.assertFalse(c.request(bucket))

    def test_an_idle_bucket_is_abandoned_and_subscribes_again(self):
        s, target = start(self.store.url, abandon_after=2)
        self.addCleanup(s.close)
        c, bucket = self.subscribed(target, "idle")
        # Reported every interval with no request: abandoned after 2 s, and forgotten.
        self.assertTrue(c.wait_for(lambda: c.stats(bucket).abandons >= 1, timeout=6), c.log())
        self.assertIsNone(c.state(bucket))
        # Its next request subscribes it again and gets an assignment.
        c.request(bucket)
        self.assertTrue(c.wait_for(lambda: kind(c, bucket) == "token_bucket", timeout=5), c.log())
        self.assertEqual(c.stats(bucket).subscriptions, 2)
        self.assertGreaterEqual(s.metric('caudal_rlqs_actions_total{action="abandon"}'), 1)

    def test_a_stopped_store_gives_the_failure_mode(self):
        for mode, expect in (("deny", "deny_all"), ("allow", "allow_all")):
            with self.subTest(mode):
                s, target = start(self.store.url, on_failure=mode, test_hooks=True)
                self.addCleanup(s.close)
                c, bucket = self.subscribed(target, "f-" + mode)
                s.fail_store()
                self.assertTrue(c.wait_for(lambda: kind(c, bucket) == expect, timeout=6),
                                c.log())
                s.recover_store()
                self.assertTrue(c.wait_for(lambda: kind(c, bucket) == "token_bucket", timeout=8),
                                c.log())
        # local: the assignment held is kept, extended at each report while the store fails.
        s, target = start(self.store.url, on_failure="local", test_hooks=True)
        self.addCleanup(s.close)
        c, bucket = self.subscribed(target, "f-local")
        s.fail_store()
        before = c.stats(bucket).extensions
        self.assertTrue(c.wait_for(lambda: c.stats(bucket).extensions >= before + 2, timeout=6),
                        c.log())
        self.assertEqual(kind(c, bucket), "token_bucket")
        self.assertEqual(c.stats(bucket).replacements, 0)


if __name__ == "__main__":
    unittest.main()
