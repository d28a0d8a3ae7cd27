"""POST /v1/check against a real `caudal serve`: decisions, RateLimit headers, Retry-After,
problem+json, and every bad-input case (which must consume nothing)."""
import json
import socket
import unittest

from harness import Serve

CONFIG = """
store: {url: "memory://"}
policies:
  - name: per-key
    identity: [api_key]
    limits:
      - {algorithm: token_bucket, capacity: 3, refill: 3/70s}
  - name: per-tenant
    identity: [tenant]
    limits:
      - {algorithm: fixed_window, limit: 100, window: 1m}
"""


class CheckApi(unittest.TestCase):
    def setUp(self):
        self.s = Serve(CONFIG)

    def tearDown(self):
        self.s.close()

    def test_allowed_then_refused_with_draft_headers(self):
        for remaining in (2, 1, 0):
            status, h, body = self.s.check({"api_key": "k"})
            self.assertEqual(status, 200)
            self.assertEqual(h["content-type"], "application/json")
            self.assertEqual(h["ratelimit-policy"], '"per-key";q=3;w=70')
            self.assertRegex(h["ratelimit"], r'^"per-key";r=%d;t=\d+$' % remaining)
            self.assertTrue(body["allowed"])
            self.assertEqual(body["policies"][0]["remaining"], remaining)
        status, h, body = self.s.check({"api_key": "k"})
        self.assertEqual(status, 429)
        self.assertEqual(h["content-type"], "application/problem+json")
        # One token every 70/3 s = 23.33 s: rounded up, never earlier.
        self.assertEqual(h["retry-after"], "24")
        self.assertEqual(body["type"], "urn:caudal:problem:quota-exceeded")
        self.assertEqual(body["status"], 429)
        self.assertEqual(body["violated_policies"], ["per-key"])
        self.assertEqual(body["refused_by"], ["per-key"])
        self.assertEqual(body["policies"][0]["retry_after_ms"], 23334)

    def test_retry_after_is_never_early(self):
        for _ in range(3):
            self.s.check({"api_key": "k"})
        status, h, _ = self.s.check({"api_key": "k"})
        self.assertEqual(status, 429)
        wait_s = int(h["retry-after"])
        self.s.advance_ms(23333 - 1)  # just short of the exact 23.333 s
        self.assertEqual(self.s.check({"api_key": "k"})[0], 429)
        self.s.advance_ms(wait_s * 1000 - 23332)  # now exactly Retry-After after the refusal
        self.assertEqual(self.s.check({"api_key": "k"})[0], 200)

    def test_headers_name_the_policy_closest_to_its_limit(self):
        self.s.check({"api_key": "k"})
        self.s.check({"api_key": "k"})
        status, h, body = self.s.check({"api_key": "k", "tenant": "t"})
        self.assertEqual(status, 200)
        self.assertEqual([p["name"] for p in body["policies"]], ["per-key", "per-tenant"])
        self.assertTrue(h["ratelimit"].startswith('"per-key";r=0'))
        status, h, _ = self.s.check({"tenant": "t2"})
        self.assertEqual(h["ratelimit-policy"], '"per-tenant";q=100;w=60')

    def test_all_or_nothing_over_http(self):
        for _ in range(3):
            self.s.check({"api_key": "k", "tenant": "t"})
        status, _, body = self.s.check({"api_key": "k", "tenant": "t"})
        self.assertEqual(status, 429)
        self.assertEqual(body["policies"][1]["remaining"], 97)  # the tenant was not charged
        self.assertEqual(self.s.check({"tenant": "t"})[2]["policies"][0]["remaining"], 96)

    def test_bad_input_is_400_naming_the_field_and_consumes_nothing(self):
        cases = [
            ("{not json", "invalid_json", "body"),
            ("[]", "invalid_body", "body"),
            ('{"cost": 1}', "missing_descriptors", "descriptors"),
            ('{"descriptors": {"api_key": "k"}, "extra": 1}', "unknown_field", '"extra"'),
            ('{"descriptors": ["k"]}', "invalid_descriptors", "descriptors"),
            ('{"descriptors": {}}', "invalid_descriptors", "descriptors"),
            ('{"descriptors": {"api_key": 7}}', "invalid_descriptors", "descriptors.api_key"),
            ('{"descriptors": {"api_key": ""}}', "invalid_descriptors", "descriptors.api_key"),
            ('{"descriptors": {"ip": "300.1.1.1"}}', "invalid_descriptors", "descriptors.ip"),
            ('{"descriptors": {"api_key": "k"}, "cost": 0}', "invalid_cost", "cost"),
            ('{"descriptors": {"api_key": "k"}, "cost": -2}', "invalid_cost", "cost"),
            ('{"descriptors": {"api_key": "k"}, "cost": 1.5}', "invalid_cost", "cost"),
            ('{"descriptors": {"api_key": "k"}, "cost": "1"}', "invalid_cost", "cost"),
            ('{"descriptors": {"api_key": "k"}, "cost": 99999999999999999999}', "invalid_cost",
             "cost"),
            ('{"descriptors": {"api_key": "k"}, "cost": 4}', "invalid_cost", "cost"),
        ]
        for body, code, field in cases:
            status, h, raw = self.s.request("POST", "/v1/check", body,
                                            {"Content-Type": "application/json"})
            self.assertEqual(status, 400, body)
            self.assertEqual(h["content-type"], "application/json")
            err = json.loads(raw)["error"]
            self.assertEqual(err["code"], code, body)
            self.assertTrue(err["message"].startswith(field), (body, err["message"]))
        status, _, body = self.s.check({"api_key": "k"})
        self.assertEqual(body["policies"][0]["remaining"], 2)  # nothing was consumed before

    def test_too_large_unknown_path_wrong_method(self):
        big = '{"descriptors": {"api_key": "%s"}}' % ("x" * 70000)
        status, _, raw = self.s.request("POST", "/v1/check", big)
        self.assertEqual(status, 413)
        self.assertEqual(json.loads(raw)["error"]["code"], "body_too_large")
        status, _, raw = self.s.request("GET", "/v2/nothing")
        self.assertEqual(status, 404)
        self.assertEqual(json.loads(raw)["error"]["code"], "not_found")
        status, h, raw = self.s.request("GET", "/v1/check")
        self.assertEqual(status, 405)
        self.assertEqual(h["allow"], "POST")
        status, h, _ = self.s.request("POST", "/metrics", "x")
        self.assertEqual(status, 405)

    def test_malformed_http_and_huge_headers(self):
        with socket.create_connection(("127.0.0.1", self.s.port)) as c:
            c.sendall(b"NOT HTTP AT ALL\r\n\r\n")
            self.assertIn(b" 400 ", c.recv(4096).split(b"\r\n")[0] + b" ")
        with socket.create_connection(("127.0.0.1", self.s.port)) as c:
            c.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 20000 + b"\r\n\r\n")
            self.assertIn(b" 431 ", c.recv(4096).split(b"\r\n")[0] + b" ")

    def test_health_ready_metrics(self):
        self.assertEqual(self.s.request("GET", "/healthz")[0], 200)
        self.assertEqual(self.s.request("GET", "/readyz")[0], 200)
        self.s.check({"api_key": "k"})
        for _ in range(3):
            self.s.check({"api_key": "k"})
        self.assertEqual(self.s.metric('caudal_decisions_total{api="http",policy="per-key",outcome="allowed"}'), 3)
        self.assertEqual(self.s.metric('caudal_decisions_total{api="http",policy="per-key",outcome="denied"}'), 1)
        self.assertEqual(self.s.metric('caudal_http_responses_total{code="429"}'), 1)
        self.assertGreaterEqual(self.s.metric('caudal_decision_duration_seconds_count{api="http"}'), 4)


if __name__ == "__main__":
    unittest.main()
