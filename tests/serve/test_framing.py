"""HTTP framing per RFC 9112 against a real `caudal serve`, over raw sockets: a request whose body
length is in doubt is refused and its connection closed, so that bytes smuggled after it are
never read as a request, never decided and never charged."""
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


def read_response(c):
    """One response (status, lower-case headers, body) from socket `c`, or None on EOF."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = c.recv(4096)
        if not chunk:
            return None
        data += chunk
    head, rest = data.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, value = line.split(":", 1)
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    while len(rest) < length:
        chunk = c.recv(4096)
        if not chunk:
            break
        rest += chunk
    return int(lines[0].split()[1]), headers, rest[:length]


def closed_after(c, timeout_s=3.0):
    """True when the peer closes `c` (EOF or reset) with nothing more to read."""
    c.settimeout(timeout_s)
    try:
        return c.recv(4096) == b""
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def hidden_request(key):
    body = json.dumps({"descriptors": {"api_key": key}})
    return ("POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            "Content-Length: %d\r\n\r\n%s" % (len(body), body)).encode()


class Framing(unittest.TestCase):
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

    def assert_smuggling_refused(self, name, fields, expected_status, version="1.1",
                                 body=b"0\r\n\r\n"):
        key = "hidden-" + name
        before = self.decisions()
        wire = ("POST /v1/check HTTP/%s\r\nHost: x\r\n%s\r\n" % (version, fields)).encode()
        wire += body + hidden_request(key)
        with socket.create_connection(("127.0.0.1", self.s.port)) as c:
            c.sendall(wire)
            c.settimeout(3)
            response = read_response(c)
            self.assertIsNotNone(response, name)
            status, headers, reply = response
            self.assertEqual(status, expected_status, "%s: %r" % (name, reply))
            self.assertEqual(headers.get("connection"), "close", name)
            self.assertIn("error", json.loads(reply), name)
            self.assertTrue(closed_after(c), "%s: the connection stayed open" % name)
        self.assertEqual(self.decisions(), before, "%s: something was decided" % name)
        # The hidden key was never charged: its first real request finds a full bucket.
        self.assertEqual(self.remaining(key), 4, name)

    def test_final_coding_not_chunked_is_refused_and_closed(self):
        for name, te in [("identity", "identity"), ("gzip", "gzip"),
                         ("chunked-identity", "chunked, identity"),
                         ("chunked-gzip", "chunked, gzip")]:
            with self.subTest(te=te):
                self.assert_smuggling_refused(name, "Transfer-Encoding: %s\r\n" % te, 400)

    def test_unsupported_coding_before_chunked_is_501_and_closed(self):
        self.assert_smuggling_refused("gzip-chunked", "Transfer-Encoding: gzip, chunked\r\n", 501)
        self.assert_smuggling_refused(
            "gzip-then-chunked", "Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n", 501)

    def test_repeated_chunked_is_refused_and_closed(self):
        self.assert_smuggling_refused("chunked-twice", "Transfer-Encoding: chunked, chunked\r\n",
                                      400)
        self.assert_smuggling_refused(
            "chunked-two-lines", "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
            400)

    def test_content_length_with_transfer_encoding_is_refused_and_closed(self):
        for name, fields in [
                ("cl-te", "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n"),
                ("te-cl", "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n"),
                ("identity-cl", "Transfer-Encoding: identity\r\nContent-Length: 5\r\n")]:
            with self.subTest(fields=fields):
                self.assert_smuggling_refused(name, fields, 400)

    def test_transfer_encoding_in_http10_is_refused_and_closed(self):
        self.assert_smuggling_refused("http10", "Transfer-Encoding: chunked\r\n", 400,
                                      version="1.0")

    def test_a_malformed_chunk_is_refused_and_closed(self):
        self.assert_smuggling_refused("bad-chunk", "Transfer-Encoding: chunked\r\n", 400,
                                      body=b"zz\r\n")

    def test_chunked_request_is_served_and_the_connection_kept(self):
        body = json.dumps({"descriptors": {"api_key": "chunky"}}).encode()
        wire = (b"POST /v1/check HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" +
                b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body))
        with socket.create_connection(("127.0.0.1", self.s.port)) as c:
            c.settimeout(3)
            for remaining in (4, 3):
                c.sendall(wire)
                status, headers, reply = read_response(c)
                self.assertEqual(status, 200, reply)
                self.assertNotEqual(headers.get("connection"), "close")
                self.assertEqual(json.loads(reply)["policies"][0]["remaining"], remaining)


if __name__ == "__main__":
    unittest.main()
