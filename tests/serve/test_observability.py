"""Who is being refused, and by which policy: the throttled refusal log (identities hashed unless
configured otherwise), JSON logs, and GET /v1/top-refused (a heavy-hitters sketch per policy)."""
import json
import unittest

from harness import Serve, wait_until

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


if __name__ == "__main__":
    unittest.main(verbosity=2)
