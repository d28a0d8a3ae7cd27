"""Idempotency-Key requests and admin calls when Redis stops answering, with store.timeout 50ms:
stalled (SIGSTOP: its connections stay open, nothing answers) and killed (refused). Each is
answered within the store's deadline, as a request without a key is, never after the records'
connect timeout (2 s); a keyed check is answered what the same check without a key is, by its
policy's failure mode, and charges nothing; every admin call is a 503."""
import json
import os
import signal
import time
import unittest

from harness import Redis, Serve

TOKEN = "admin-token-for-tests"
AUTH = {"Authorization": "Bearer " + TOKEN, "Content-Type": "application/json"}
CONFIG = """
store: {url: %s, timeout: 50ms}
policies:
  - name: open
    identity: [api_key]
    on_failure: allow
    limits: [{algorithm: token_bucket, capacity: 100, refill: 100/1h}]
  - name: closed
    identity: [tenant]
    on_failure: deny
    limits: [{algorithm: token_bucket, capacity: 100, refill: 100/1h}]
"""
DEADLINE_S = 0.05
# Far below the 2 s connect timeout, with room for a loaded machine (the client's own time, the
# admin thread's poll of the overrides in progress when the call arrives).
LATE_S = 0.4
OVERRIDE = "/v1/admin/policies/closed/overrides?tenant=t"
STATE = "/v1/admin/policies/closed/state?tenant=t"
RAISE = json.dumps({"limits": [{"algorithm": "token_bucket", "capacity": 5, "refill": "5/1h"}]})


def timed(call):
    start = time.monotonic()
    reply = call()
    return reply, time.monotonic() - start


class RecordDeadlines(unittest.TestCase):
    def setUp(self):
        self.redis = Redis()
        self.addCleanup(self.redis.close)
        self.s = Serve(CONFIG % self.redis.url, test_hooks=False,
                       env={"CAUDAL_ADMIN_TOKEN": TOKEN})
        self.addCleanup(self.s.close)
        self.keys = 0

    def check(self, descriptors, keyed):
        headers = {"Content-Type": "application/json"}
        if keyed:
            self.keys += 1
            headers["Idempotency-Key"] = '"order-%d"' % self.keys
        return self.s.request("POST", "/v1/check", json.dumps({"descriptors": descriptors}),
                              headers)

    def warm_up(self):
        """Every path's connections made while Redis answers: a stall finds them open."""
        for keyed in (False, True):
            self.assertEqual(self.check({"api_key": "warm"}, keyed)[0], 200)
        self.assertEqual(self.s.request("PUT", OVERRIDE, RAISE, AUTH)[0], 201)
        self.assertEqual(self.s.request("GET", STATE, None, AUTH)[0], 200)

    def assert_answered_by_deadline(self, how):
        for descriptors, failed in (({"api_key": "a"}, 200), ({"tenant": "t"}, 503)):
            (status, headers, raw), plain_s = timed(lambda: self.check(descriptors, False))
            self.assertEqual(status, failed, raw)
            (k_status, k_headers, k_raw), keyed_s = timed(lambda: self.check(descriptors, True))
            # The answer the request without a key got: status, degradation, body.
            self.assertEqual((k_status, k_headers.get("caudal-degraded"), json.loads(k_raw)),
                             (status, headers.get("caudal-degraded"), json.loads(raw)))
            self.assertNotIn("idempotent-replayed", k_headers)
            self.assertLess(keyed_s, LATE_S, "%s: a keyed check took %.3f s (without a key: "
                                             "%.3f s)" % (how, keyed_s, plain_s))
        for method, path, body in (("GET", "/v1/admin/policies/closed/overrides", None),
                                   ("PUT", OVERRIDE, RAISE), ("DELETE", OVERRIDE, None),
                                   ("GET", STATE, None), ("DELETE", STATE, None)):
            (status, _, raw), took = timed(lambda: self.s.request(method, path, body, AUTH))
            self.assertEqual((status, json.loads(raw)["error"]["code"]),
                             (503, "store_unavailable"), (method, path))
            self.assertLess(took, LATE_S, "%s: %s %s took %.3f s" % (how, method, path, took))

    def test_redis_stalled(self):
        self.warm_up()
        os.kill(self.redis.proc.pid, signal.SIGSTOP)
        try:
            # Each record call waits out its deadline: the first keyed one at least that long.
            _, took = timed(lambda: self.check({"api_key": "first"}, True))
            self.assertGreaterEqual(took, DEADLINE_S)
            self.assert_answered_by_deadline("stalled")
        finally:
            os.kill(self.redis.proc.pid, signal.SIGCONT)

    def test_redis_killed(self):
        self.warm_up()
        self.redis.stop()
        self.assert_answered_by_deadline("refused")

    def test_redis_stalled_before_any_record_call(self):
        """The records' connections are made by their first call: made during the stall, the
        call is bounded by the deadline all the same."""
        os.kill(self.redis.proc.pid, signal.SIGSTOP)
        try:
            self.assert_answered_by_deadline("stalled, records never connected")
        finally:
            os.kill(self.redis.proc.pid, signal.SIGCONT)


if __name__ == "__main__":
    unittest.main()
