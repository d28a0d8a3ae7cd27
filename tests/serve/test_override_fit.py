"""Runtime overrides that do not fit their policy or Envoy rule: the admin API refuses them (400
invalid_limits, with the config file's message), and a reload after which a held one no longer
fits leaves it unapplied, kept in the store, logged once at warning and counted, until a reload
makes it fit again."""
import json
import os
import shutil
import signal
import tempfile
import unittest

from harness import Serve, wait_until

TOKEN = "admin-token-for-tests"
AUTH = {"Authorization": "Bearer " + TOKEN, "Content-Type": "application/json"}
ENVOY_YAML = """
domain: edge
descriptors:
  - key: user
    rate_limit: {unit: minute, requests_per_unit: 1}
"""
# "inflight" is what the override replaces; "rate" admits a user once an hour.
CONFIG = """
server: {grpc: '127.0.0.1:0'}
envoy_config: %s
descriptor_mode: %s
policies:
  - name: inflight
    identity: [user]
    limits: [{algorithm: token_bucket, capacity: 100, refill: 100/1m}]
  - name: rate
    identity: [user]
    limits: [{algorithm: token_bucket, capacity: 1, refill: 1/1h}]
"""
SLOTS = json.dumps({"limits": [{"algorithm": "concurrency", "limit": 1, "hold": "10m"}]})
INFLIGHT = "/v1/admin/policies/inflight/overrides"
NOT_APPLYING = 'not applying the override of policy "inflight"'


class OverrideFit(unittest.TestCase):
    def start(self, mode):
        self.envoy_dir = tempfile.mkdtemp(prefix="caudal-envoy-")
        self.addCleanup(shutil.rmtree, self.envoy_dir, True)
        with open(os.path.join(self.envoy_dir, "edge.yaml"), "w") as f:
            f.write(ENVOY_YAML)
        self.s = Serve(self.config(mode), env={"CAUDAL_ADMIN_TOKEN": TOKEN})
        self.addCleanup(self.s.close)
        self.s.proc.stdout.readline()  # the gRPC listener's line, before any hook's answer

    def config(self, mode):
        return CONFIG % (self.envoy_dir, mode)

    def reload(self, mode):
        before = self.s.metric('caudal_config_reloads_total{result="success"}')
        self.s.write_config(self.config(mode))
        self.s.signal(signal.SIGHUP)
        wait_until(lambda: self.s.metric('caudal_config_reloads_total{result="success"}')
                   > before, "the reload to be counted")

    def put(self, path, body):
        status, _, reply = self.s.request("PUT", path, body, AUTH)
        return status, json.loads(reply)

    def test_an_override_that_does_not_fit_is_refused_with_the_files_reason(self):
        self.start("consume_each")
        status, reply = self.put("/v1/admin/policies/edge.user/overrides?user=u", SLOTS)
        self.assertEqual(status, 400, reply)
        self.assertEqual(reply["error"]["code"], "invalid_limits")
        self.assertEqual(reply["error"]["message"],
                         "limits[0]: concurrency limits are for caudal's policies: Envoy's rate "
                         "limit protocol has no way to release a slot")
        status, reply = self.put(INFLIGHT + "?user=u", SLOTS)
        self.assertEqual(status, 400, reply)
        self.assertEqual(reply["error"]["code"], "invalid_limits")
        self.assertEqual(reply["error"]["message"],
                         "limits[0]: a concurrency limit needs policies decided all_or_nothing: "
                         "consume_each would hold slots for a refused request")
        for policy in ("inflight", "edge.user"):
            status, _, body = self.s.request("GET", "/v1/admin/policies/%s/overrides" % policy,
                                             None, AUTH)
            self.assertEqual((status, json.loads(body)["count"]), (200, 0), "nothing was set")
        self.assertEqual(self.s.check({"user": "u"})[0], 200, "the service keeps serving")

    def test_a_reload_leaves_an_override_that_no_longer_fits_unapplied_until_it_fits(self):
        self.start("all_or_nothing")
        status, reply = self.put(INFLIGHT + "?user=u", SLOTS)
        self.assertEqual(status, 201, reply)
        status, _, body = self.s.check({"user": "u"})
        self.assertEqual(status, 200)
        status, _, _ = self.s.request("POST", "/v1/release", json.dumps({"hold": body["hold"]}),
                                      {"Content-Type": "application/json"})
        self.assertEqual(status, 200)

        self.reload("consume_each")
        self.assertEqual(self.s.metric("caudal_runtime_overrides_not_applied"), 1)
        self.assertEqual(self.s.metric("caudal_runtime_overrides"), 0)
        wait_until(lambda: NOT_APPLYING in self.s.log(), "the warning")
        self.assertIn("limits[0]: a concurrency limit needs policies decided all_or_nothing",
                      self.s.log())
        status, _, body = self.s.check({"user": "u"})
        self.assertEqual(status, 429, body)  # "rate" is spent
        self.assertNotIn("hold", body)
        status, _, listed = self.s.request("GET", INFLIGHT, None, AUTH)
        self.assertEqual(json.loads(listed)["count"], 1, "kept in the store")

        self.reload("all_or_nothing")
        self.assertEqual(self.s.metric("caudal_runtime_overrides_not_applied"), 0)
        self.assertEqual(self.s.metric("caudal_runtime_overrides"), 1)
        self.s.advance_ms(3600 * 1000)  # "rate" admits u again; the hold is 10 minutes
        status, _, body = self.s.check({"user": "u"})
        self.assertEqual(status, 200, "the refused request took no slot: %s" % body)
        self.assertIn("hold", body)
        self.assertEqual(self.s.log().count(NOT_APPLYING), 1, self.s.log())


if __name__ == "__main__":
    unittest.main()
