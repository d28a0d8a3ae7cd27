"""Connection limits: a slow-drip (slowloris) header is cut off at header_timeout however it is
paced, a silent body at body_timeout, and past max_connections new connections are closed."""
import socket
import time
import unittest

from harness import Serve

CONFIG = """
server:
  max_connections: 4
  header_timeout: 300ms
  body_timeout: 300ms
  idle_timeout: 1s
policies:
  - name: p
    identity: [api_key]
    limits: [{algorithm: gcra, capacity: 5, refill: 5/1h}]
"""


def closed_by_peer(c, within_s):
    """True when the server closes `c` within `within_s` (reading what it sends first)."""
    c.settimeout(within_s)
    try:
        while c.recv(4096):
            pass
        return True
    except socket.timeout:
        return False
    except ConnectionResetError:
        return True


class Connections(unittest.TestCase):
    def setUp(self):
        self.s = Serve(CONFIG)

    def tearDown(self):
        self.s.close()

    def test_slowloris_header_is_cut_off(self):
        with socket.create_connection(("127.0.0.1", self.s.port)) as c:
            start = time.monotonic()
            cut = False
            for b in b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 100:
                try:
                    c.sendall(bytes([b]))
                except OSError:
                    cut = True
                    break
                time.sleep(0.05)  # the attacker's pace, well inside any per-read timeout
                if time.monotonic() - start > 3:
                    break
            self.assertTrue(cut or closed_by_peer(c, 1.0))
            self.assertLess(time.monotonic() - start, 3)

    def test_body_that_never_comes_is_cut_off(self):
        with socket.create_connection(("127.0.0.1", self.s.port)) as c:
            c.sendall(b"POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
            self.assertTrue(closed_by_peer(c, 3.0))

    def test_connection_cap(self):
        held = [socket.create_connection(("127.0.0.1", self.s.port)) for _ in range(4)]
        try:
            # Each held connection is a live session: make sure the server has accepted them all.
            for c in held:
                c.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                self.assertIn(b"200 OK", c.recv(4096))
            extra = socket.create_connection(("127.0.0.1", self.s.port))
            self.assertTrue(closed_by_peer(extra, 3.0))
            extra.close()
        finally:
            for c in held:
                c.close()
        # Once they are gone, new connections are served again.
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                if self.s.request("GET", "/healthz")[0] == 200:
                    break
            except OSError:
                time.sleep(0.05)
        self.assertEqual(self.s.request("GET", "/healthz")[0], 200)
        self.assertIn("connection cap (4) reached", self.s.log())

    def test_keep_alive_serves_many_requests_on_one_connection(self):
        with socket.create_connection(("127.0.0.1", self.s.port)) as c:
            for i in range(6):
                c.sendall(b"GET /v1/auth HTTP/1.1\r\nHost: x\r\nX-API-Key: k\r\n\r\n")
                head = c.recv(4096).split(b"\r\n")[0]
                self.assertEqual(head, b"HTTP/1.1 200 OK" if i < 5 else b"HTTP/1.1 429 Too Many Requests")


if __name__ == "__main__":
    unittest.main()
