"""Ambiguous identities against a real `caudal serve`: an identity header given twice, a JSON key
given twice, a NUL, a control character or ill-formed UTF-8 in an identity are refused with 400
and a message, and nothing is decided or charged for them."""
import json
import socket
import unittest

from harness import Serve

CONFIG = """
policies:
  - name: p
    identity: [api_key]
    limits: [{algorithm: token_bucket, capacity: 5, refill: 5/1h}]
"""


def exchange(port, wire):
    """Sends `wire` on a new connection; returns (status, body) of the one response."""
    with socket.create_connection(("127.0.0.1", port)) as c:
        c.settimeout(5)
        c.sendall(wire)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = c.recv(4096)
            if not chunk:
                break
            data += chunk
        head, body = data.split(b"\r\n\r\n", 1)
        lines = head.split(b"\r\n")
        length = next((int(h.split(b":")[1]) for h in lines
                       if h.lower().startswith(b"content-length:")), 0)
        while len(body) < length:
            body += c.recv(4096)
        return int(lines[0].split()[1]), body


class Identities(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.s = Serve(CONFIG, test_hooks=False)

    @classmethod
    def tearDownClass(cls):
        cls.s.close()

    def decisions(self):
        return sum(self.s.metric('caudal_decisions_total{policy="p",outcome="%s"}' % o)
                   for o in ("allowed", "denied"))

    def remaining(self, key):
        status, _, body = self.s.check({"api_key": key})
        self.assertEqual(status, 200)
        return body["policies"][0]["remaining"]

    def assert_refused(self, wire, code, keys):
        before = self.decisions()
        status, body = exchange(self.s.port, wire)
        self.assertEqual(status, 400, body)
        error = json.loads(body)["error"]
        self.assertEqual(error["code"], code, error)
        self.assertTrue(error["message"], error)
        self.assertEqual(self.decisions(), before, "something was decided")
        for key in keys:  # none of the keys the request named was charged
            self.assertEqual(self.remaining(key), 4, key)
        return error["message"]

    def check_wire(self, body):
        return (b"POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (len(body), body))

    def test_identity_header_given_twice(self):
        message = self.assert_refused(
            b"GET /v1/auth HTTP/1.1\r\nHost: x\r\nX-API-Key: dup-a\r\nX-API-Key: dup-b\r\n\r\n",
            "ambiguous_identity", ["dup-a", "dup-b"])
        self.assertIn("X-API-Key", message)

    def test_identity_header_with_ill_formed_utf8(self):
        self.assert_refused(b"GET /v1/auth HTTP/1.1\r\nHost: x\r\nX-API-Key: bad-\xff\xfe\r\n\r\n",
                            "invalid_identity", [])
        # The bytes of a lone surrogate (ED A0 80), which some decoders pass through.
        self.assert_refused(b"GET /v1/auth HTTP/1.1\r\nHost: x\r\nX-API-Key: s-\xed\xa0\x80\r\n\r\n",
                            "invalid_identity", [])

    def test_repeated_json_keys(self):
        self.assert_refused(self.check_wire(b'{"descriptors": {"api_key": "j-a", "api_key": "j-b"}}'),
                            "duplicate_field", ["j-a", "j-b"])
        self.assert_refused(
            self.check_wire(b'{"descriptors": {"api_key": "t-a"}, "descriptors": {"api_key": "t-b"}}'),
            "duplicate_field", ["t-a", "t-b"])
        self.assert_refused(
            self.check_wire(b'{"cost": 1, "descriptors": {"api_key": "c-a"}, "cost": 5}'),
            "duplicate_field", ["c-a"])

    def test_nul_and_control_characters_in_a_json_identity(self):
        for name, value in [("nul", b"n\\u0000ul"), ("lf", b"l\\nf"), ("c1", b"c\\u0085")]:
            with self.subTest(name=name):
                self.assert_refused(
                    self.check_wire(b'{"descriptors": {"api_key": "%s"}}' % value),
                    "invalid_descriptors", [name[0]])

    def test_raw_ill_formed_utf8_in_a_json_identity(self):
        self.assert_refused(self.check_wire(b'{"descriptors": {"api_key": "r-\xff"}}'),
                            "invalid_json", [])

    def test_well_formed_identities_are_decided(self):
        status, _ = exchange(self.s.port, "GET /v1/auth HTTP/1.1\r\nHost: x\r\n"
                                          "X-API-Key: caf\u00e9\r\n\r\n".encode())
        self.assertEqual(status, 200)
        self.assertEqual(self.remaining("caf\u00e9"), 3)


if __name__ == "__main__":
    unittest.main()
