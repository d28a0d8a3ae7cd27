"""Failure modes with the store gone: allow (200, degraded), deny (503 store_unavailable, not 429),
local (this instance alone, limits divided by the instance count). The circuit breaker opens after
5 failures in a row and logs it once, and once again when the store answers; /readyz follows the
background probe. Run against a real redis-server that is killed and restarted, and against the
memory store failing on demand (caudal-testing)."""
import json
import os
import subprocess
import tempfile
import unittest

from harness import CAUDAL, Redis, Serve, wait_until

POLICIES = """
policies:
  - name: open
    identity: [api_key]
    on_failure: allow
    limits: [{algorithm: gcra, capacity: 10, refill: 10/1h}]
  - name: closed
    identity: [tenant]
    on_failure: deny
    limits: [{algorithm: gcra, capacity: 10, refill: 10/1h}]
  - name: alone
    identity: [account]
    on_failure: local
    limits: [{algorithm: token_bucket, capacity: 10, refill: 10/1h}]
"""


class FailureModes:
    """Mixed into a TestCase providing self.s, self.fail_store() and self.heal_store()."""

    def assert_modes_while_down(self):
        self.assertEqual(self.s.check({"api_key": "k"})[0], 200)
        self.fail_store()
        status, h, body = self.s.check({"api_key": "k"})
        self.assertEqual(status, 200)
        self.assertEqual(h["caudal-degraded"], "store_unavailable")
        self.assertEqual(body["policies"][0]["decided_by"], "fail_open")

        status, h, raw = self.s.request("GET", "/v1/auth", headers={"X-Tenant": "t"})
        self.assertEqual(status, 503)
        self.assertEqual(h["retry-after"], "1")
        self.assertEqual(h["content-type"], "application/problem+json")
        self.assertEqual(json.loads(raw)["reason"], "store_unavailable")

        # local: 10 divided among 5 instances is 2 here.
        results = [self.s.check({"account": "a"})[0] for _ in range(3)]
        self.assertEqual(results, [200, 200, 429])
        # The readiness probe runs in the background: /readyz answers at once, and turns 503
        # within a probe interval.
        wait_until(lambda: self.s.request("GET", "/readyz")[0] == 503, "readiness to turn 503")
        self.assertEqual(self.s.metric('caudal_failure_mode_decisions_total{api="http",policy="open",mode="allow"}'), 1)
        self.assertEqual(self.s.metric('caudal_failure_mode_decisions_total{api="http",policy="closed",mode="deny"}'), 1)
        self.assertEqual(self.s.metric('caudal_failure_mode_decisions_total{api="http",policy="alone",mode="local"}'), 3)
        self.assertEqual(self.s.metric("caudal_store_degraded"), 1)

        self.heal_store()
        wait_until(lambda: self.s.check({"tenant": "t"})[0] == 200, "the store to answer again")
        status, h, body = self.s.check({"api_key": "k"})
        self.assertNotIn("caudal-degraded", h)
        # The fail-open request cost nothing (a killed Redis without persistence forgot the first).
        self.assertEqual(body["policies"][0]["remaining"], self.remaining_after_recovery)
        wait_until(lambda: self.s.request("GET", "/readyz")[0] == 200, "readiness to turn 200")
        log = self.s.log()
        self.assertEqual(log.count("failed 5 times in a row"), 1, log)
        self.assertEqual(log.count("circuit open, deciding by failure mode"), 1, log)
        self.assertEqual(log.count("answers again: circuit closed"), 1, log)


class WithRedis(unittest.TestCase, FailureModes):
    def setUp(self):
        self.redis = Redis()
        self.s = Serve("store: {url: %s, timeout: 50ms, instances: 5}\n" % self.redis.url + POLICIES,
                       test_hooks=False)

    def tearDown(self):
        self.s.close()
        self.redis.close()

    remaining_after_recovery = 9

    def fail_store(self):
        self.redis.stop()

    def heal_store(self):
        self.redis.start()

    def test_modes_with_redis_killed_and_restarted(self):
        self.assert_modes_while_down()


class WithFailingMemoryStore(unittest.TestCase, FailureModes):
    def setUp(self):
        self.s = Serve("store: {instances: 5}\n" + POLICIES)

    def tearDown(self):
        self.s.close()

    remaining_after_recovery = 8

    def fail_store(self):
        self.s.fail_store()

    def heal_store(self):
        self.s.recover_store()

    def test_modes_with_the_store_failing_on_demand(self):
        self.assert_modes_while_down()


class RedisDownAtStart(unittest.TestCase):
    """Redis unreachable when caudal starts: it serves by failure mode, reports not ready, and
    connects in the background once Redis is up."""

    def setUp(self):
        self.redis = Redis(started=False)
        self.s = Serve("store: {url: %s, timeout: 50ms, instances: 5}\n" % self.redis.url + POLICIES,
                       test_hooks=False)

    def tearDown(self):
        self.s.close()
        self.redis.close()

    def test_starts_decides_by_failure_mode_then_connects(self):
        status, _, body = self.s.request("GET", "/readyz")
        self.assertEqual(status, 503)
        self.assertIn(b"not connected yet", body)
        status, h, body = self.s.check({"api_key": "k"})
        self.assertEqual(status, 200)
        self.assertEqual(h["caudal-degraded"], "store_unavailable")
        self.assertEqual(body["policies"][0]["decided_by"], "fail_open")
        self.assertEqual(self.s.request("GET", "/v1/auth", headers={"X-Tenant": "t"})[0], 503)
        self.assertEqual([self.s.check({"account": "a"})[0] for _ in range(3)], [200, 200, 429])

        self.redis.start()
        wait_until(lambda: self.s.request("GET", "/readyz")[0] == 200, "caudal to connect to redis")
        status, h, body = self.s.check({"tenant": "t"})
        self.assertEqual(status, 200)
        self.assertNotIn("caudal-degraded", h)
        self.assertEqual(body["policies"][0]["decided_by"], "store")
        self.assertEqual(body["policies"][0]["remaining"], 9)
        log = self.s.log()
        self.assertEqual(log.count("store unreachable at start"), 1, log)
        self.assertIn('store "redis" connected after', log)
        self.assertEqual(log.count("answers again"), 1, log)


class RedisMayEvict(unittest.TestCase):
    """A Redis whose maxmemory-policy may evict caudal's keys: logged once, in /metrics, and with
    store.on_eviction_risk: refuse, not ready until the policy is noeviction."""

    def setUp(self):
        self.redis = Redis(persistence=["--save", "", "--appendonly", "no", "--maxmemory", "100mb",
                                        "--maxmemory-policy", "allkeys-lru"])
        self.s = Serve("store: {url: %s, timeout: 50ms, on_eviction_risk: refuse}\n"
                       % self.redis.url + POLICIES, test_hooks=False)

    def tearDown(self):
        self.s.close()
        self.redis.close()

    def test_refuse_keeps_it_unready_while_redis_may_evict(self):
        wait_until(lambda: b"may evict" in self.s.request("GET", "/readyz")[2], "the risk to show")
        status, _, body = self.s.request("GET", "/readyz")
        self.assertEqual(status, 503)
        self.assertIn(b"allkeys-lru", body)
        self.assertEqual(self.s.metric("caudal_redis_eviction_risk"), 1)
        self.assertEqual(self.s.check({"tenant": "t"})[0], 200)  # it still decides
        self.assertEqual(self.redis.command("CONFIG", "SET", "maxmemory-policy", "noeviction"),
                         b"+OK")
        wait_until(lambda: self.s.request("GET", "/readyz")[0] == 200, "readiness to turn 200")
        self.assertEqual(self.s.metric("caudal_redis_eviction_risk"), 0)
        log = self.s.log()
        self.assertEqual(log.count("may evict caudal's keys"), 1, log)
        self.assertEqual(log.count("no longer evicts caudal's keys"), 1, log)


class StoreConfigErrorsFailFast(unittest.TestCase):
    """A wrong password or database is a mistake to fix, not an outage: caudal refuses to start."""

    def setUp(self):
        self.redis = Redis(password="s3cret")
        self.dir = tempfile.TemporaryDirectory(prefix="caudal-serve-")

    def tearDown(self):
        self.redis.close()
        self.dir.cleanup()

    def serve(self, url):
        path = os.path.join(self.dir.name, "caudal.yaml")
        with open(path, "w") as f:
            f.write("store: {url: \"%s\"}\n" % url + POLICIES)
        return subprocess.run([CAUDAL, "serve", "--config", path, "--http", "127.0.0.1:0"],
                              capture_output=True, timeout=30, text=True)

    def test_wrong_password_or_database_exits_with_the_cause(self):
        r = self.serve("redis://:nope@127.0.0.1:%d" % self.redis.port)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn('refused the credentials of user "default"', r.stderr)
        self.assertNotIn("nope", r.stderr)
        r = self.serve("redis://:s3cret@127.0.0.1:%d/99" % self.redis.port)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("refused database 99", r.stderr)
        r = self.serve("redis://127.0.0.1:%d/x" % self.redis.port)
        self.assertEqual(r.returncode, 2, r.stderr)


if __name__ == "__main__":
    unittest.main()
