"""Real HTTP clients: curl, and urllib3's Retry honouring Retry-After (Debian's python3-urllib3).
The urllib3 case runs on the real clock: the client itself waits what Retry-After says, and a
client that obeys must never meet a second 429 for the same wait (Retry-After rounds up)."""
import subprocess
import unittest

import urllib3

from harness import Serve


class Curl(unittest.TestCase):
    def test_forward_auth_and_check_with_curl(self):
        s = Serve("""
policies:
  - name: per-key
    identity: [api_key]
    limits: [{algorithm: gcra, capacity: 2, refill: 2/1h}]
""")
        try:
            def curl(*args):
                out = subprocess.run(["curl", "-sS", "-i", "--max-time", "10", *args],
                                     capture_output=True, check=True).stdout.decode()
                head, _, body = out.partition("\r\n\r\n")
                return head.split("\r\n"), body

            head, _ = curl("-H", "X-API-Key: abc", s.base + "/v1/auth")
            self.assertIn("200", head[0])
            self.assertIn('RateLimit: "per-key";r=1;t=1800', head)
            head, _ = curl("-X", "POST", "-H", "Content-Type: application/json", "-d",
                           '{"descriptors": {"api_key": "abc"}}', s.base + "/v1/check")
            self.assertIn("200", head[0])
            head, body = curl("-H", "X-API-Key: abc", s.base + "/v1/auth")
            self.assertIn("429", head[0])
            self.assertIn("Retry-After: 1800", head)
            self.assertIn("Content-Type: application/problem+json", head)
            self.assertIn('"violated_policies":["per-key"]', body)
        finally:
            s.close()


class Urllib3Retry(unittest.TestCase):
    def test_a_client_obeying_retry_after_never_gets_a_second_429(self):
        s = Serve("""
policies:
  - name: per-key
    identity: [api_key]
    limits: [{algorithm: token_bucket, capacity: 1, refill: 2/3s}]
""", test_hooks=False)
        try:
            retry = urllib3.util.Retry(total=5, status_forcelist=[429], allowed_methods=None,
                                       respect_retry_after_header=True, backoff_factor=0,
                                       raise_on_status=False)
            http = urllib3.PoolManager(retries=retry)
            for i in range(3):
                r = http.request("POST", s.base + "/v1/check",
                                 body=b'{"descriptors": {"api_key": "k"}}',
                                 headers={"Content-Type": "application/json"})
                self.assertEqual(r.status, 200, r.data)
                refusals = [h for h in r.retries.history if h.status == 429]
                # The first request passes at once; later ones wait once (1.5 s → "2"), never twice.
                self.assertEqual(len(refusals), 0 if i == 0 else 1, r.retries.history)
        finally:
            s.close()


if __name__ == "__main__":
    unittest.main()
