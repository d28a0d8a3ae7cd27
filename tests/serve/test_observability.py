"""Who is being refused, and by which policy: the throttled refusal log (identities hashed unless
configured otherwise), JSON logs, and GET /v1/top-refused (a heavy-hitters sketch per policy);
and what /metrics serves: valid Prometheus text (promtool's check) holding the documented
families, a Redis store's own counters among them."""
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import unittest

from harness import Redis, Serve, wait_until

OPERATIONS_MD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs",
                             "operations.md")

CONFIG = """
logging: {format: %s, identities: %s}
policies:
  - name: per-key
    identity: [api_key]
    limits: [{algorithm: fixed_window, limit: 2, window: 1m}]
"""


class RefusalLogAndTopRefused(unittest.TestCase):
    def refuse(self, serve, key, times):
        for _ in range(times):
            serve.check({"api_key": key})

    def test_hashed_identities_one_line_per_identity_and_the_top(self):
        s = Serve(CONFIG % ("text", "hash"))
        try:
            self.refuse(s, "s3cret-key", 2 + 5)  # 2 admitted, 5 refused
            self.refuse(s, "other-key", 2 + 1)
            wait_until(lambda: s.log().count(" refused ") == 2, "two refusal lines")
            log = s.log()
            self.assertNotIn("s3cret-key", log)  # an API key is a secret
            self.assertIn("check=per-key", log)
            self.assertIn("identity=h:", log)
            status, headers, body = s.request("GET", "/v1/top-refused")
            self.assertEqual(status, 200)
            self.assertEqual(headers["content-type"], "application/json")
            top = json.loads(body)
            self.assertEqual(top["sketch_size"], 32)
            [check] = top["checks"]
            self.assertEqual((check["api"], check["check"], check["refused"]), ("http", "per-key", 6))
            self.assertEqual([h["count"] for h in check["top"]], [5, 1])
            self.assertTrue(all(h["identity"].startswith("h:") for h in check["top"]))
            self.assertEqual(s.request("POST", "/v1/top-refused")[0], 405)
        finally:
            s.close()

    def test_json_logs_with_identity_values(self):
        s = Serve(CONFIG % ("json", "value"))
        try:
            self.refuse(s, "k1", 3)
            wait_until(lambda: '"msg":"refused"' in s.log(), "the refusal line")
            lines = [json.loads(l) for l in s.log().splitlines() if l.strip()]
            self.assertTrue(all({"time", "level", "msg"} <= set(l) for l in lines), lines)
            [refused] = [l for l in lines if l["msg"] == "refused"]
            self.assertEqual(refused["identity"], "api_key=k1")
            self.assertEqual(refused["check"], "per-key")
            self.assertEqual(refused["level"], "info")
            top = json.loads(s.request("GET", "/v1/top-refused?top=1")[2])
            self.assertEqual(top["checks"][0]["top"], [{"identity": "api_key=k1", "count": 1, "error": 0}])
        finally:
            s.close()

    def test_json_mode_writes_one_object_per_line_on_both_streams_numbers_as_numbers(self):
        # The released binary (no test hooks, whose replies share stdout), with both banners.
        envoy_dir = tempfile.mkdtemp(prefix="caudal-json-logs-")
        envoy = os.path.join(envoy_dir, "rl.yaml")
        with open(envoy, "w") as f:
            f.write("domain: edge\ndescriptors:\n  - key: k\n"
                    "    rate_limit: {unit: minute, requests_per_unit: 1}\n")
        config = ("server: {grpc: '127.0.0.1:0'}\nenvoy_config: %s\n" % envoy) + CONFIG % (
            "json", "value")
        s = Serve(config, test_hooks=False)
        try:
            grpc_banner = s.proc.stdout.readline().decode()
            self.refuse(s, "k1", 3)
            wait_until(lambda: '"msg":"refused"' in s.log(), "the refusal line")
            s.signal(signal.SIGHUP)
            wait_until(lambda: '"msg":"reloaded' in s.log(), "the reload's line")
            s.signal(signal.SIGTERM)
            self.assertEqual(s.proc.wait(timeout=10), 0)
            stdout = [s.banner, grpc_banner] + [l.decode() for l in s.proc.stdout.readlines()]
            stderr = s.log().splitlines()
            for line in stdout + stderr:
                self.assertIsInstance(json.loads(line), dict, line)
            banner, grpc = json.loads(s.banner), json.loads(grpc_banner)
            self.assertEqual((banner["level"], banner["url"], banner["policies"]),
                             ("info", s.base, 1))
            self.assertIn("listening on " + s.base, banner["msg"])  # what scripts look for
            self.assertEqual(banner["store"], "memory://")
            self.assertTrue(re.fullmatch(r"127\.0\.0\.1:\d+", grpc["grpc"]), grpc)
            self.assertEqual((grpc["domains"], grpc["envoy_config"]), (1, envoy))
            [refused] = [json.loads(l) for l in stderr if '"msg":"refused"' in l]
            self.assertGreater(refused["retry_after_ms"], 0)
            self.assertEqual((refused["held_back_same"], refused["held_back_others"]), (0, 0))
            # A graceful stop says it starts, and then that it is done (docs/operations.md).
            msgs = [json.loads(l)["msg"] for l in stderr]
            self.assertTrue(msgs[-2].startswith("stopping: answering what is in flight"), msgs)
            self.assertEqual(msgs[-1], "stopped")
        finally:
            s.close()
            shutil.rmtree(envoy_dir, ignore_errors=True)


METRICS_CONFIG = """
policies:
  - name: per-key
    identity: [api_key]
    limits: [{algorithm: fixed_window, limit: 1, window: 1m}]
  - name: watched
    identity: [user]
    shadow: true
    limits: [{algorithm: fixed_window, limit: 1, window: 1m}]
  - name: open
    identity: [tenant]
    on_failure: allow
    limits: [{algorithm: fixed_window, limit: 5, window: 1m}]
"""


def documented_metrics():
    """The metric names docs/operations.md lists (generated from the metric table)."""
    with open(OPERATIONS_MD) as f:
        doc = f.read()
    section = doc[doc.index("<!-- metrics: generated"):doc.index("<!-- end of metrics -->")]
    return re.findall(r"^\| `([a-z_]+)[{`]", section, re.M)


class MetricsExposition(unittest.TestCase):
    def test_metrics_are_valid_prometheus_text_with_every_documented_family(self):
        s = Serve(METRICS_CONFIG)
        try:
            for _ in range(2):
                s.check({"api_key": "k"})  # allowed, then denied
                s.check({"user": "u"})  # allowed, then allowed by a shadow denial
            s.request("POST", "/v1/check", "{", {"Content-Type": "application/json"})  # 400
            s.fail_store()
            s.check({"tenant": "t"})  # decided by the failure mode
            s.recover_store()
            s.signal(signal.SIGHUP)  # the same file again: a reload that succeeds
            wait_until(lambda: s.metric('caudal_config_reloads_total{result="success"}') == 1,
                       "the reload counted")
            status, headers, body = s.request("GET", "/metrics")
        finally:
            s.close()
        self.assertEqual(status, 200)
        self.assertEqual(headers["content-type"], "text/plain; version=0.0.4")
        check = subprocess.run(["promtool", "check", "metrics"], input=body,
                               capture_output=True, timeout=60)
        self.assertEqual((check.returncode, check.stdout, check.stderr), (0, b"", b""),
                         body.decode())
        text = body.decode()
        families = re.findall(r"^# TYPE (\S+) ", text, re.M)
        documented = documented_metrics()
        self.assertGreaterEqual(len(documented), 16)
        self.assertEqual(families, documented)
        for line in ('caudal_decisions_total{api="http",policy="per-key",outcome="denied"} 1',
                     'caudal_shadow_denials_total{api="http",policy="watched"} 1',
                     'caudal_failure_mode_decisions_total{api="http",policy="open",mode="allow"} 1',
                     'caudal_http_responses_total{code="400"} 1',
                     'caudal_config_reloads_total{result="failure"} 0'):
            self.assertIn("\n" + line + "\n", text)
        self.assertRegex(text, r'\ncaudal_store_errors_total\{code="[A-Z_]+"\} [1-9]')

    def test_a_redis_stores_own_counters_are_rows_of_metrics(self):
        redis = Redis()
        # The reload after a flush takes four round trips and three script compilations: a
        # deadline of 10 ms (the default) is not what this test is about, and a loaded machine
        # under the sanitizers can miss it.
        s = Serve("""
store: {url: "%s", timeout: 2s}
policies:
  - name: per-key
    identity: [api_key]
    limits: [{algorithm: token_bucket, capacity: 100, refill: 1/1s}]
""" % redis.url, test_hooks=False)

        def rows():
            status, _, body = s.request("GET", "/metrics")
            self.assertEqual(status, 200)
            return body, {k: int(v) for k, v in
                          re.findall(r"^(caudal_redis_[a-z_]+) (\d+)$", body.decode(), re.M)}

        try:
            _, before = rows()
            for _ in range(5):
                self.assertEqual(s.check({"api_key": "k"})[0], 200)
            _, after = rows()
            # The next call is answered "Function not found" (or NOSCRIPT), then reloads.
            redis.command("FUNCTION", "FLUSH")
            redis.command("SCRIPT", "FLUSH")
            self.assertEqual(s.check({"api_key": "k"})[0], 200)
            body, last = rows()
        finally:
            s.close()
            redis.close()
        check = subprocess.run(["promtool", "check", "metrics"], input=body,
                               capture_output=True, timeout=60)
        self.assertEqual((check.returncode, check.stderr), (0, b""), body.decode())
        # The readiness probe decides on the store too: its calls come on top of the checks'.
        self.assertGreaterEqual(after["caudal_redis_requests_total"] -
                                before["caudal_redis_requests_total"], 5)
        self.assertGreaterEqual(after["caudal_redis_calls_total"] -
                                before["caudal_redis_calls_total"], 1)
        self.assertEqual(before["caudal_redis_script_reloads_total"], 0)
        self.assertGreaterEqual(last["caudal_redis_script_reloads_total"], 1)
        for quiet in ("timeouts", "undo_failures", "moved", "asked", "primary_switches"):
            self.assertEqual(last["caudal_redis_%s_total" % quiet], 0, quiet)

if __name__ == "__main__":
    unittest.main(verbosity=2)
