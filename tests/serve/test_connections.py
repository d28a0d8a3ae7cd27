"""Connection limits: a slow-drip (slowloris) header is cut off at header_timeout however it is
paced, a silent body at body_timeout, and past max_connections new connections are closed."""
import re
import socket
import subprocess
import threading
import time
import unittest

from harness import Serve, wait_until

POLICY = """
policies:
  - name: p
    identity: [api_key]
    limits: [{algorithm: gcra, capacity: 5, refill: 5/1h}]
"""
CONFIG = """
server:
  max_connections: 4
  max_connections_per_client: 4  # every test client is 127.0.0.1
  header_timeout: 300ms
  body_timeout: 300ms
  idle_timeout: 1s
""" + POLICY


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


class Pipelining(unittest.TestCase):
    def setUp(self):  # default timeouts: the client below is slow to read on purpose
        self.s = Serve(POLICY)

    def tearDown(self):
        self.s.close()

    def decided(self):
        return sum(self.s.metric('caudal_decisions_total{api="http",policy="p",outcome="%s"}' % o)
                   for o in ("allowed", "denied"))

    def out_of_send_room(self, c):
        """True once the server's socket to `c` has no room to send (the kernel's own account,
        `ss -m`: queued bytes w at the send buffer tb, or past the two thirds at which it is no
        longer writable once tb has grown to its most): the server's next write waits until `c`
        reads, and nothing else frees room."""
        out = subprocess.run(
            ["ss", "-tmnH", "state", "established",
             "( sport = :%d and dport = :%d )" % (self.s.port, c.getsockname()[1])],
            capture_output=True, text=True, check=True).stdout
        m = re.search(r"\btb(\d+),.*\bw(\d+),", out)
        if m is None:
            return False
        tb, w = int(m.group(1)), int(m.group(2))
        with open("/proc/sys/net/ipv4/tcp_wmem") as f:
            most = int(f.read().split()[2])
        return w >= tb or (tb >= most and 3 * w > 2 * tb)

    def test_pipelined_answers_beyond_the_socket_buffers_arrive_whole_and_in_order(self):
        # The client reads nothing until the server has stopped deciding (its send buffer is
        # full), so answers are written partly, asynchronously, and the requests still buffered
        # wait their turn.
        n = 60000
        wire = b"".join(b"GET /v1/auth HTTP/1.1\r\nHost: x\r\nX-API-Key: k%d\r\n\r\n" % (i // 6)
                        for i in range(n))
        with socket.create_connection(("127.0.0.1", self.s.port)) as c:
            c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 16)
            sender = threading.Thread(target=c.sendall, args=(wire,))
            sender.start()

            # Stopped deciding: blocked on its socket (or, on a huge buffer, done).
            wait_until(lambda: self.out_of_send_room(c) or self.decided() == n,
                       "the server to stop on a full socket buffer")
            received = bytearray()
            statuses = []
            while len(statuses) < n:
                chunk = c.recv(1 << 16)
                self.assertTrue(chunk, "closed after %d answers" % len(statuses))
                received += chunk
                while True:
                    end = received.find(b"\r\n\r\n")
                    if end < 0:
                        break
                    head = bytes(received[:end]).split(b"\r\n")
                    length = next(int(h.split(b":")[1]) for h in head
                                  if h.lower().startswith(b"content-length:"))
                    if len(received) < end + 4 + length:
                        break
                    statuses.append(int(head[0].split()[1]))
                    del received[:end + 4 + length]
            sender.join()
        self.assertEqual(statuses, [200, 200, 200, 200, 200, 429] * (n // 6))


if __name__ == "__main__":
    unittest.main()
