"""Runtime overrides across processes: two `caudal serve` on one real redis-server. A limit raised
through one instance's admin API admits the next request at once on both; the override survives
a restart of both; an override's expiry ends it on both; a reset is seen by both; a policy with
share takes a weight instead of limits, kept for both; and `caudal admin` speaks the same API from
a shell."""
import json
import os
import subprocess
import time
import unittest

from harness import CAUDAL, Redis, Serve

TOKEN = "admin-token-for-tests"
CONFIG = """
store: {url: %s, timeout: 200ms}
policies:
  - name: per-tenant
    identity: [tenant]
    limits:
      - {algorithm: token_bucket, capacity: 1, refill: 1/1h}
  - name: provider-tokens
    identity: [tenant]
    share: {fairness: max_min, window: 2s}
    limits:
      - {algorithm: token_bucket, capacity: 2000000, refill: 2000000/1m}
"""
ACME = "/v1/admin/policies/per-tenant/overrides?tenant=acme"
STATE = "/v1/admin/policies/per-tenant/state?tenant=acme"
AUTH = {"Authorization": "Bearer " + TOKEN, "Content-Type": "application/json"}
RAISE = json.dumps({"limits": [{"algorithm": "token_bucket", "capacity": 100,
                                "refill": "100/1h"}]})


def allowed(serve):
    return serve.check({"tenant": "acme"})[0] == 200


def start(redis):
    return Serve(CONFIG % redis.url, test_hooks=False, env={"CAUDAL_ADMIN_TOKEN": TOKEN})


def within(seconds, predicate):
    """Polls `predicate` for at most `seconds` of real time (the instances poll once a second)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


class AdminAcrossInstances(unittest.TestCase):
    def setUp(self):
        self.redis = Redis()
        self.a = start(self.redis)
        self.b = start(self.redis)

    def tearDown(self):
        self.a.close()
        self.b.close()
        self.redis.close()

    def restart_both(self):
        self.a.close()
        self.b.close()
        self.a = start(self.redis)
        self.b = start(self.redis)

    def test_a_raise_admits_at_once_on_both_and_survives_a_restart(self):
        self.assertTrue(allowed(self.a))
        self.assertFalse(allowed(self.a))
        self.assertFalse(allowed(self.b))
        status, _, body = self.a.request("PUT", ACME, RAISE, AUTH)
        self.assertEqual(status, 201, body)
        self.assertTrue(allowed(self.a), "the instance that set it applies it at once")
        started = time.monotonic()
        self.assertTrue(within(2.5, lambda: allowed(self.b)), self.b.log())
        self.assertLess(time.monotonic() - started, 2.5)

        self.restart_both()
        for serve in (self.a, self.b):
            status, _, body = serve.request("GET", "/v1/admin/policies/per-tenant/overrides",
                                            None, AUTH)
            self.assertEqual(status, 200)
            self.assertEqual(json.loads(body)["count"], 1)
            self.assertTrue(allowed(serve), "the override outlived the restart")
        self.assertNotIn(TOKEN, self.a.log() + self.b.log())

    def test_an_override_ends_by_itself_on_both(self):
        body = json.dumps({"limits": [{"algorithm": "token_bucket", "capacity": 100,
                                       "refill": "100/1h"}], "expires_in": "2s"})
        self.assertTrue(allowed(self.a))
        self.assertFalse(allowed(self.b), "the policy's one unit is spent, for both")
        status, _, answer = self.a.request("PUT", ACME, body, AUTH)
        self.assertEqual(status, 201, answer)
        self.assertTrue(within(2.5, lambda: allowed(self.b)), "b applies the override")
        self.assertTrue(allowed(self.a))

        def limits_from(serve):
            return json.loads(serve.request("GET", STATE, None, AUTH)[2])["limits_from"]
        self.assertEqual(limits_from(self.b), "runtime_override")
        self.assertTrue(within(5, lambda: limits_from(self.b) == "limits"), self.b.log())
        self.assertTrue(within(1.5, lambda: limits_from(self.a) == "limits"), self.a.log())
        self.assertFalse(allowed(self.a), "back to the policy's limits, as they were left")
        self.assertFalse(allowed(self.b))

    def test_a_reset_is_seen_by_both_and_the_cli_speaks_the_api(self):
        self.assertTrue(allowed(self.a))
        self.assertFalse(allowed(self.a))
        self.assertFalse(allowed(self.b))
        env = dict(os.environ, CAUDAL_ADMIN_TOKEN=TOKEN)
        got = subprocess.run([CAUDAL, "admin", "--url", self.a.base, "state", "get", "per-tenant",
                              "tenant=acme"], env=env, capture_output=True, text=True, timeout=30)
        self.assertEqual(got.returncode, 0, got.stderr)
        self.assertEqual(json.loads(got.stdout)["limits"][0]["remaining"], 0)
        self.assertFalse(allowed(self.b), "a look spends nothing and gives nothing")
        got = subprocess.run([CAUDAL, "admin", "--url", self.a.base, "state", "reset",
                              "per-tenant", "tenant=acme"], env=env, capture_output=True,
                             text=True, timeout=30)
        self.assertEqual(got.returncode, 0, got.stderr)
        self.assertEqual(json.loads(got.stdout)["limits"][0]["remaining"], 1)
        self.assertTrue(within(2.5, lambda: allowed(self.b)), "b forgot its remembered refusal")
        got = subprocess.run([CAUDAL, "admin", "--url", self.a.base, "overrides", "delete",
                              "per-tenant", "tenant=acme"], env=env, capture_output=True,
                             text=True, timeout=30)
        self.assertEqual(got.returncode, 1)
        self.assertIn("no_override", got.stderr)
        got = subprocess.run([CAUDAL, "admin", "--url", self.a.base, "state", "get", "per-tenant",
                              "tenant=acme"], env=dict(os.environ, CAUDAL_ADMIN_TOKEN="wrong"),
                             capture_output=True, text=True, timeout=30)
        self.assertEqual(got.returncode, 1)
        self.assertIn("401", got.stderr)

    def test_a_policy_with_share_takes_a_weight_kept_for_both(self):
        env = dict(os.environ, CAUDAL_ADMIN_TOKEN=TOKEN)
        got = subprocess.run([CAUDAL, "admin", "--url", self.a.base, "overrides", "set",
                              "provider-tokens", "tenant=acme", "--weight", "4"], env=env,
                             capture_output=True, text=True, timeout=30)
        self.assertEqual(got.returncode, 0, got.stderr)
        answer = json.loads(got.stdout)
        self.assertEqual((answer["weight"], answer["limits"]), (4, []))

        def weights(serve):
            status, _, body = serve.request(
                "GET", "/v1/admin/policies/provider-tokens/overrides", None, AUTH)
            self.assertEqual(status, 200, body)
            return [o["weight"] for o in json.loads(body)["overrides"]]
        self.assertEqual(weights(self.b), [4], "kept in Redis, for every instance")

        shared = "/v1/admin/policies/provider-tokens/overrides?tenant=acme"
        for path, body, code in ((ACME, json.dumps({"weight": 2}), "invalid_weight"),
                                 (shared, RAISE, "invalid_limits"),
                                 (shared, json.dumps({"weight": 4097}), "invalid_weight")):
            status, _, answer = self.b.request("PUT", path, body, AUTH)
            self.assertEqual(status, 400, answer)
            self.assertEqual(json.loads(answer)["error"]["code"], code, answer)
        self.assertEqual(weights(self.a), [4], "a refused PUT changes nothing")
        status, _, body = self.a.request("GET", "/v1/admin/policies/per-tenant/overrides",
                                         None, AUTH)
        self.assertEqual(json.loads(body)["count"], 0, body)


if __name__ == "__main__":
    unittest.main()
