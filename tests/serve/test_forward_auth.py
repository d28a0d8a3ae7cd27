"""/v1/auth (forward-auth): the client address comes from X-Forwarded-For only when the peer is
a trusted proxy, taking the right-most untrusted hop; API key and tenant come from headers."""
import unittest

from harness import Serve

POLICIES = """
policies:
  - name: per-ip
    identity: [ip]
    limits: [{algorithm: gcra, capacity: 1, refill: 1/1h}]
  - name: per-key
    identity: [api_key]
    limits: [{algorithm: gcra, capacity: 2, refill: 2/1h}]
  - name: per-tenant
    identity: [tenant]
    limits: [{algorithm: gcra, capacity: 1, refill: 1/1h}]
"""


class TrustedProxy(unittest.TestCase):
    def setUp(self):
        self.s = Serve("""
server:
  trusted_proxies: [127.0.0.1/32, 10.0.0.0/8]
  descriptor_headers: {api_key: X-Key, tenant: X-Org}
""" + POLICIES)

    def tearDown(self):
        self.s.close()

    def auth(self, headers):
        return self.s.request("GET", "/v1/auth", headers=headers)[0]

    def test_right_most_untrusted_hop_is_the_client(self):
        # A client may forge the left part; the trusted chain (10.x, then us) is peeled off.
        xff = {"X-Forwarded-For": "1.1.1.1, 198.51.100.7, 10.0.0.9"}
        self.assertEqual(self.auth(xff), 200)
        self.assertEqual(self.auth({"X-Forwarded-For": "2.2.2.2, 198.51.100.7"}), 429)
        self.assertEqual(self.auth({"X-Forwarded-For": "198.51.100.8"}), 200)
        # Garbage stops the walk at the last good hop (here the trusted 10.0.0.1 itself).
        self.assertEqual(self.auth({"X-Forwarded-For": "not-an-ip, 10.0.0.1"}), 200)
        self.assertEqual(self.auth({"X-Forwarded-For": "10.0.0.1"}), 429)

    def test_headers_become_descriptors(self):
        self.assertEqual(self.auth({"X-Forwarded-For": "198.51.100.1", "X-Key": "k", "X-Org": "o"}), 200)
        status, h, body = self.s.request(
            "GET", "/v1/auth", headers={"X-Forwarded-For": "198.51.100.2", "X-Org": "o"})
        self.assertEqual(status, 429)
        self.assertIn(b'"violated_policies":["per-tenant"]', body)
        self.assertEqual(h["retry-after"], "3600")
        status, h, _ = self.s.request("POST", "/v1/auth",
                                      headers={"X-Forwarded-For": "198.51.100.3", "X-Key": "k"})
        self.assertEqual(status, 200)  # any method
        # per-ip and per-key both have 0 left: the tie goes to the first in the config.
        self.assertEqual(h["ratelimit"], '"per-ip";r=0;t=3600')


class UntrustedPeer(unittest.TestCase):
    def test_forwarded_for_from_an_untrusted_peer_is_ignored(self):
        s = Serve("server: {trusted_proxies: [192.0.2.0/24]}\n" + POLICIES)
        try:
            self.assertEqual(s.request("GET", "/v1/auth", headers={"X-Forwarded-For": "198.51.100.1"})[0], 200)
            # Another forged address changes nothing: the key is the peer, 127.0.0.1.
            self.assertEqual(s.request("GET", "/v1/auth", headers={"X-Forwarded-For": "198.51.100.2"})[0], 429)
        finally:
            s.close()


if __name__ == "__main__":
    unittest.main()
