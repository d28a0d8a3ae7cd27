"""The `allow` and `local` failure modes through the network faults of test_partition.py (root; a
network namespace the test creates, redis-server inside, caudal on this side): 10% packet loss,
a silent partition, the link down and a slow path (every round trip past the store's timeout),
each followed by its heal. One sequential keep-alive client
asks /v1/check for a fail-open policy and a local one in turn, on keys of their own in each
phase, and checks what each mode promises:

- allow: every decision admitted; those the store did not make carry `Caudal-Degraded` and are
  counted, one for one, in caudal_failure_mode_decisions_total{mode="allow"};
- local: no key admitted past this instance's share of its limit (the limit divided by
  `store.instances`) by local decisions, nor past the limit by the store's; each local decision
  marked and counted in caudal_failure_mode_decisions_total{mode="local"};

then that after the heal the store decides both again, a key refused locally included (its local
refusal leaves nothing behind). Prints a table (docs/reliability.md quotes it)."""
import collections
import http.client
import json
import os
import sys
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "serve"))
from harness import Serve, wait_until  # noqa: E402
from test_partition import (SLOW_TIMEOUT_MS, TIMEOUT_MS, DelayRelay, p99, slack_ms,  # noqa: E402
                            namespaced_redis)

INSTANCES = 4
LIMIT = 40                      # the local policy's, in Redis
LOCAL_SHARE = LIMIT // INSTANCES  # what this instance admits alone, per key
KEYS = 10                       # per policy and phase
CONFIG_TEMPLATE = """
store: {url: %%%%s, timeout: %%dms, on_failure: deny, instances: %d}
policies:
  - name: open
    identity: [api_key]
    on_failure: allow
    limits: [{algorithm: token_bucket, capacity: 1000000, refill: 1000000/1s}]
  - name: alone
    identity: [tenant]
    on_failure: local
    limits: [{algorithm: token_bucket, capacity: %d, refill: %d/1d}]
""" % (INSTANCES, LIMIT, LIMIT)
CONFIG = CONFIG_TEMPLATE % TIMEOUT_MS
SLOW_CONFIG = CONFIG_TEMPLATE % SLOW_TIMEOUT_MS
ROWS = []

Answer = collections.namedtuple("Answer", "policy key status allowed by degraded ms")
FAILOVER = ("fail_open", "local", "fail_closed")  # decided_by: not the store (nor its refusals)


class Checker:
    """Sequential keep-alive /v1/check requests, one policy's descriptor each."""

    HEADER = {"open": "api_key", "alone": "tenant"}

    def __init__(self, port):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        self.recovery_keys = 0

    def one(self, policy, key):
        body = json.dumps({"descriptors": {self.HEADER[policy]: key}})
        start = time.monotonic()
        self.conn.request("POST", "/v1/check", body, {"Content-Type": "application/json"})
        response = self.conn.getresponse()
        reply = json.loads(response.read())
        ms = (time.monotonic() - start) * 1000
        p = reply["policies"][0]
        return Answer(policy, key, response.status, p["allowed"], p["decided_by"],
                      response.getheader("Caudal-Degraded"), ms)

    def run(self, seconds, phase):
        """Both policies in turn for `seconds`, over KEYS keys each named after `phase`."""
        answers, n = [], 0
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            policy = ("open", "alone")[n % 2]
            answers.append(self.one(policy, "%s-%s-%d" % (policy, phase, (n // 2) % KEYS)))
            n += 1
        return answers

    def until_store_decides(self, limit_s=30):
        """Returns once the store decides both policies again (on keys never used before)."""
        start = time.monotonic()
        decided = set()
        while time.monotonic() - start < limit_s:
            self.recovery_keys += 1
            for policy in ("open", "alone"):
                if self.one(policy, "recovery-%d" % self.recovery_keys).by == "store":
                    decided.add(policy)
            if decided == {"open", "alone"}:
                return
        raise AssertionError("the store did not decide again within %d s" % limit_s)


class PartitionModes(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.ns, cls.redis = namespaced_redis(cls.addClassCleanup)

    @classmethod
    def tearDownClass(cls):
        print("\nstore.timeout %d ms (the slow path: %d ms), instances %d; a sequential keep-alive "
              "client on /v1/check, a fail-open policy and a local one (%d/1d, %d per key alone) "
              "in turn" % (TIMEOUT_MS, SLOW_TIMEOUT_MS, INSTANCES, LIMIT, LOCAL_SHARE))
        print("%-26s %-6s %9s %10s %9s %9s %s" % (
            "fault", "mode", "requests", "failover", "admitted", "p99 ms",
            "store decides again after heal"))
        for row in ROWS:
            print("%-26s %-6s %9d %9.1f%% %9s %9.1f %s" % row)

    def fault(self, name, tag, begin, end, seconds, total, timeout_ms=TIMEOUT_MS):
        """Runs the client through a fault and its heal, on keys named after `tag`; checks both
        modes. `total`: the fault cuts Redis off entirely, so every decision during it is a
        failover. `timeout_ms`: the server's store.timeout."""
        s = self.s
        allow_before = s.metric(self.ALLOW)
        local_before = s.metric(self.LOCAL)
        begin()
        try:
            answers = self.checker.run(seconds, tag)
        finally:
            end()
        healed = time.monotonic()
        allow_counted = s.metric(self.ALLOW) - allow_before
        local_counted = s.metric(self.LOCAL) - local_before
        self.checker.until_store_decides()
        recovered = time.monotonic() - healed

        by_policy = {p: [a for a in answers if a.policy == p] for p in ("open", "alone")}
        self.assertLess(p99([a.ms for a in answers]), timeout_ms + slack_ms(), name)
        self.check_allow(name, by_policy["open"], allow_counted, total)
        refused_locally = self.check_local(name, by_policy["alone"], local_counted, total)
        for policy, mine in by_policy.items():
            failover = sum(a.by in FAILOVER for a in mine)
            ROWS.append((name, {"open": "allow", "alone": "local"}[policy], len(mine),
                         100.0 * failover / max(1, len(mine)),
                         "%d" % sum(a.allowed for a in mine), p99([a.ms for a in mine]),
                         "%.2f s" % recovered))

        # After the heal the store decides again, and a key refused alone is the store's again:
        # Redis never saw its local charges. (It may run the few calls that timed out before the
        # breaker opened, and its probes, when TCP retransmits them after the heal: a charge or
        # two on some keys, far below the limit.)
        for key in refused_locally:
            for _ in range(5):  # a store call that times out on a busy machine is not the point
                a = self.checker.one("alone", key)
                if a.by == "store":
                    break
            self.assertEqual((a.by, a.allowed, a.degraded), ("store", True, None), key)
        after = self.checker.run(1.0, tag + "-after")
        failover = sum(a.by in FAILOVER for a in after)
        self.assertLess(failover, len(after) * 0.1, "%s: still failing over after the heal" % name)

    def check_allow(self, name, answers, counted, total):
        self.assertTrue(answers, name)
        for a in answers:
            self.assertEqual((a.status, a.allowed), (200, True), "allow admits everything")
            self.assertIn(a.by, ("store", "fail_open"), name)
            # Marked degraded exactly when the failure mode decided.
            self.assertEqual(a.degraded, "store_unavailable" if a.by == "fail_open" else None)
        failed_open = sum(a.by == "fail_open" for a in answers)
        self.assertEqual(counted, failed_open, "%s: allow decisions counted in /metrics" % name)
        self.assertGreater(failed_open, 0, "%s: the fault reached the store" % name)
        if total:
            self.assertGreater(failed_open, len(answers) * 0.9, name)

    def check_local(self, name, answers, counted, total):
        """Checks the local share; returns the keys refused by a local decision that Redis
        cannot have spent (asked fewer times than its limit in Redis, or cut off from it)."""
        self.assertTrue(answers, name)
        alone = collections.Counter()
        by_store = collections.Counter()
        asked = collections.Counter()
        refused_locally = set()
        for a in answers:
            self.assertIn(a.by, ("store", "local", "over_limit_cache"), name)
            self.assertEqual(a.status, 200 if a.allowed else 429, name)
            self.assertEqual(a.degraded, "store_unavailable" if a.by == "local" else None)
            asked[a.key] += 1
            if a.allowed:
                (alone if a.by == "local" else by_store)[a.key] += 1
            elif a.by == "local":
                refused_locally.add(a.key)
        for key in asked:
            self.assertLessEqual(alone[key], LOCAL_SHARE, "%s: %s admitted alone" % (name, key))
            self.assertLessEqual(by_store[key], LIMIT, "%s: %s admitted by the store" % (name, key))
        self.assertEqual(counted, sum(a.by == "local" for a in answers),
                         "%s: local decisions counted in /metrics" % name)
        if total:
            self.assertGreater(counted, len(answers) * 0.9, name)
            # Asked more than its share with the store out of reach: exactly the share admitted.
            for key, n in asked.items():
                if n > LOCAL_SHARE and by_store[key] == 0:
                    self.assertEqual(alone[key], LOCAL_SHARE, "%s: %s" % (name, key))
                    self.assertIn(key, refused_locally)
        return sorted(k for k in refused_locally if total or asked[k] < LIMIT)

    ALLOW = 'caudal_failure_mode_decisions_total{api="http",policy="open",mode="allow"}'
    LOCAL = 'caudal_failure_mode_decisions_total{api="http",policy="alone",mode="local"}'

    def test_allow_and_local_through_loss_partition_and_link_down(self):
        self.s = Serve(CONFIG % self.redis.url, test_hooks=False)
        self.addCleanup(self.s.close)
        self.checker = Checker(self.s.port)
        self.addCleanup(self.checker.conn.close)
        wait_until(lambda: self.checker.one("open", "warm").by == "store",
                   "caudal to decide on the namespaced Redis")
        self.addCleanup(self.ns.heal)
        self.addCleanup(self.ns.link, True)
        self.fault("10% loss each way", "loss", lambda: self.ns.loss(10), self.ns.heal, 3.0,
                   total=False)
        self.fault("silent partition", "silent", self.ns.blackhole, self.ns.heal, 2.0, total=True)
        self.fault("link down", "down", lambda: self.ns.link(False), lambda: self.ns.link(True),
                   2.0, total=True)

    def test_allow_and_local_on_a_slow_path(self):
        # Every round trip 300 ms longer, past the store's timeout: a store that answers, too
        # late. The calls that timed out still reach Redis and may charge a key or two there.
        relay = DelayRelay(self.ns.ip, 6379)
        self.addCleanup(relay.close)
        self.s = Serve(SLOW_CONFIG % ("redis://127.0.0.1:%d" % relay.port), test_hooks=False)
        self.addCleanup(self.s.close)
        self.checker = Checker(self.s.port)
        self.addCleanup(self.checker.conn.close)
        wait_until(lambda: self.checker.one("open", "warm").by == "store",
                   "caudal to decide through the relay")

        def delay(ms):
            relay.delay_ms = ms

        self.fault("+150 ms each way", "slow", lambda: delay(150), lambda: delay(0), 2.0,
                   total=True, timeout_ms=SLOW_TIMEOUT_MS)


if __name__ == "__main__":
    unittest.main()
