"""Admin changes reach the other instances through the store's announcements (Redis Pub/Sub):
two `caudal serve` on one real redis-server (and on a Redis Cluster). Timed from the admin
call's answer on B to A's first admitted request: a reset that A's over-limit cache must forget,
and a raised limit A must read. With the subscription killed the instances subscribe again; with
the channel refused the poll still applies the change."""
import json
import socket
import sys
import time
import unittest

from harness import Redis, RedisCluster, Serve, wait_until

TOKEN = "admin-token-for-tests"
CONFIG = """
store: {url: "%s", timeout: 500ms}
policies:
  - name: per-tenant
    identity: [tenant]
    limits:
      - {algorithm: token_bucket, capacity: 1, refill: 1/1h}
"""
OVERRIDE = "/v1/admin/policies/per-tenant/overrides?tenant=acme"
STATE = "/v1/admin/policies/per-tenant/state?tenant=acme"
AUTH = {"Authorization": "Bearer " + TOKEN, "Content-Type": "application/json"}
RUNS = 20
# The target is a p99 of 50 ms (each run prints what it measured); the bound asserted leaves room
# for a loaded machine, where one request alone may stall 150 ms, and still fails the
# once-a-second poll alone: 20 runs all below it would have a chance of 0.4^20.
BOUND_S = 0.4
# The poll's period and a margin: what a change takes when no announcement reaches an instance.
POLL_S = 2.5


def start(url):
    return Serve(CONFIG % url, test_hooks=False, env={"CAUDAL_ADMIN_TOKEN": TOKEN})


def allowed(serve):
    return serve.check({"tenant": "acme"})[0] == 200


def until_admitted(serve, limit_s):
    """Seconds until `serve` admits acme, checking back to back; None past `limit_s`."""
    started = time.monotonic()
    while time.monotonic() - started < limit_s:
        if allowed(serve):
            return time.monotonic() - started
    return None


def p99(samples):
    ordered = sorted(samples)
    return ordered[max(0, -(-len(ordered) * 99 // 100) - 1)]


def report(what, samples):
    print("%s: p99 %.1f ms, median %.1f ms over %d runs" % (
        what, p99(samples) * 1000, sorted(samples)[len(samples) // 2] * 1000, len(samples)),
        file=sys.stderr)


class Propagation(unittest.TestCase):
    def setUp(self):
        self.redis = Redis()
        self.a = start(self.redis.url)
        self.b = start(self.redis.url)
        self.wait_subscribed()

    def tearDown(self):
        self.a.close()
        self.b.close()
        self.redis.close()

    def wait_subscribed(self):
        """Until the server counts two subscribers of the channel (both instances')."""
        wait_until(lambda: self._numsub() == 2, "both instances to subscribe")

    def _numsub(self):
        with socket.create_connection((self.redis.bind, self.redis.port), timeout=5) as s:
            s.sendall(b"PUBSUB NUMSUB caudal:{overrides}:changes\r\n")
            reply = s.recv(4096).split(b"\r\n")
            return int(reply[-2][1:])  # *2 $n channel :count

    def spend(self, serve):
        """acme's one unit spent, and refused from A's over-limit cache from then on."""
        allowed(serve)
        hits = serve.metric("caudal_over_limit_cache_hits_total")
        self.assertFalse(allowed(serve))
        self.assertFalse(allowed(serve))
        self.assertGreater(serve.metric("caudal_over_limit_cache_hits_total"), hits,
                           "the refusal comes from the over-limit cache")

    def test_a_reset_on_b_is_seen_by_a_at_once(self):
        self.spend(self.a)
        samples = []
        for _ in range(RUNS):
            self.assertFalse(allowed(self.a))
            status, _, body = self.b.request("DELETE", STATE, None, AUTH)
            self.assertEqual(status, 200, body)
            took = until_admitted(self.a, POLL_S)
            self.assertIsNotNone(took, self.a.log())
            samples.append(took)
        report("reset on B -> A admits", samples)
        self.assertLess(p99(samples), BOUND_S, samples)
        self.assertGreaterEqual(self.a.metric("caudal_override_feed_rereads_total"), RUNS)

    def test_a_limit_raised_on_b_is_applied_by_a_at_once(self):
        self.spend(self.a)
        samples = []
        for i in range(RUNS):
            # A new capacity each run: fresh state under it.
            raise_to = json.dumps({"limits": [{"algorithm": "token_bucket",
                                               "capacity": 100 + i, "refill": "100/1h"}]})
            status, _, body = self.b.request("PUT", OVERRIDE, raise_to, AUTH)
            self.assertEqual(status, 201, body)
            took = until_admitted(self.a, POLL_S)
            self.assertIsNotNone(took, self.a.log())
            samples.append(took)
            status, _, body = self.b.request("DELETE", OVERRIDE, None, AUTH)
            self.assertEqual(status, 200, body)
            wait_until(lambda: not allowed(self.a), "A back to the policy's limit", POLL_S)
        report("limit raised on B -> A admits", samples)
        self.assertLess(p99(samples), BOUND_S, samples)

    def test_an_override_ends_on_every_instance_when_it_ends(self):
        self.spend(self.a)
        # Room for every check made until it ends.
        until = json.dumps({"limits": [{"algorithm": "token_bucket", "capacity": 100000,
                                        "refill": "100000/1h"}], "expires_in": "1s"})
        status, _, body = self.b.request("PUT", OVERRIDE, until, AUTH)
        self.assertEqual(status, 201, body)
        answered = time.monotonic()
        self.assertIsNotNone(until_admitted(self.a, POLL_S))
        while allowed(self.a) and time.monotonic() - answered < POLL_S:
            pass
        ended = time.monotonic() - answered
        print("override of 1 s: A refuses after %.1f ms" % (ended * 1000), file=sys.stderr)
        self.assertGreater(ended, 0.9, "not before its end")
        self.assertLess(ended, 1 + BOUND_S, "at its end, not at a later poll")

    def test_a_killed_subscription_is_made_again(self):
        self.assertEqual(self.redis.command("CLIENT", "KILL", "TYPE", "pubsub"), b":2")
        for serve in (self.a, self.b):
            wait_until(lambda s=serve: s.metric("caudal_override_feed_reconnects_total") >= 1,
                       "a resubscription")
        self.wait_subscribed()
        self.spend(self.a)
        heard = self.a.metric("caudal_override_feed_messages_total")
        status, _, body = self.b.request("DELETE", STATE, None, AUTH)
        self.assertEqual(status, 200, body)
        took = until_admitted(self.a, POLL_S)
        self.assertIsNotNone(took)
        self.assertLess(took, BOUND_S)
        self.assertGreater(self.a.metric("caudal_override_feed_messages_total"), heard,
                           "announced again once subscribed again")

    def test_the_poll_applies_what_no_announcement_carries(self):
        # The channel refused: the subscriptions are dropped and cannot be made again, and the
        # scripts' PUBLISH fails (the change itself is made).
        self.assertEqual(self.redis.command("ACL", "SETUSER", "default", "resetchannels"), b"+OK")
        self.redis.command("CLIENT", "KILL", "TYPE", "pubsub")
        wait_until(lambda: self._numsub() == 0, "the subscriptions to end")
        wait_until(lambda: "announcements are not heard" in self.a.log(), "A to say so")
        heard = self.a.metric("caudal_override_feed_messages_total")
        self.spend(self.a)
        status, _, body = self.b.request("DELETE", STATE, None, AUTH)
        self.assertEqual(status, 200, body)
        took = until_admitted(self.a, POLL_S)
        self.assertIsNotNone(took, "the poll applied the reset")
        self.assertEqual(self.a.metric("caudal_override_feed_messages_total"), heard,
                         "no announcement reached A")

        self.assertEqual(self.redis.command("ACL", "SETUSER", "default", "allchannels"), b"+OK")
        self.wait_subscribed()
        wait_until(lambda: "announcements are heard again" in self.a.log(), "A to say so")
        self.assertGreaterEqual(self.a.metric("caudal_override_feed_reconnects_total"), 1)
        self.spend(self.a)
        heard = self.a.metric("caudal_override_feed_messages_total")
        status, _, body = self.b.request("DELETE", STATE, None, AUTH)
        self.assertEqual(status, 200, body)
        took = until_admitted(self.a, POLL_S)
        self.assertIsNotNone(took)
        self.assertLess(took, BOUND_S)
        self.assertGreater(self.a.metric("caudal_override_feed_messages_total"), heard)


class PropagationOnACluster(unittest.TestCase):
    def setUp(self):
        self.cluster = RedisCluster()
        self.a = start(self.cluster.url)
        self.b = start(self.cluster.url)

    def tearDown(self):
        self.a.close()
        self.b.close()
        self.cluster.close()

    def test_a_reset_on_b_is_seen_by_a_at_once(self):
        # Subscribed (on a seed): a first reset is announced to A.
        status, _, body = self.b.request("DELETE", STATE, None, AUTH)
        self.assertEqual(status, 200, body)
        wait_until(lambda: self.a.metric("caudal_override_feed_messages_total") >= 1,
                   "A to hear B's announcement")
        allowed(self.a)
        self.assertFalse(allowed(self.a))
        samples = []
        for _ in range(5):
            self.assertFalse(allowed(self.a))
            status, _, body = self.b.request("DELETE", STATE, None, AUTH)
            self.assertEqual(status, 200, body)
            took = until_admitted(self.a, POLL_S)
            self.assertIsNotNone(took, self.a.log())
            samples.append(took)
        report("cluster: reset on B -> A admits", samples)
        self.assertLess(p99(samples), BOUND_S, samples)
        self.assertGreaterEqual(self.a.metric("caudal_override_feed_messages_total"), 6)


if __name__ == "__main__":
    unittest.main()
