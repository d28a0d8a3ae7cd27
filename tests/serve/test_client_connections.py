"""Connection limits against a real `caudal serve`: one client holding a thousand connections and
reconnecting cannot lock the others out (a per-client cap, by address), the default cap fits the
file-descriptor limit (raised at start where allowed), and running out of descriptors anyway is
logged once per episode while the acceptor backs off instead of spinning."""
import os
import re
import resource
import socket
import time
import unittest

from harness import Serve, connect_from, open_descriptors, raise_file_limit, wait_until

POLICY = """
policies:
  - name: p
    identity: [api_key]
    limits: [{algorithm: gcra, capacity: 5, refill: 5/1h}]
"""
REQUEST = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"


def answers(c):
    """True when connection `c` is served (it was admitted), False when the server closed it."""
    try:
        c.sendall(REQUEST)
        return c.recv(4096).startswith(b"HTTP/1.1 200 OK")
    except OSError:  # reset, broken pipe, timeout
        return False


def served_from(source, port):
    c = connect_from(source, port)
    try:
        return answers(c)
    finally:
        c.close()


def failed_accepts_at_most(seconds):
    """How many accepts can fail in `seconds` when each failure pauses accepting 10 ms, doubling
    up to 1 s (ServerCore::AcceptFailure)."""
    failed, elapsed, pause = 1, 0.0, 0.010
    while elapsed + pause <= seconds:
        elapsed += pause
        failed += 1
        pause = min(pause * 2, 1.0)
    return failed


def close_all(sockets):
    for c in sockets:
        c.close()


class PerClientCap(unittest.TestCase):
    CONFIG = """
server:
  max_connections: 200  # a client may hold a quarter: 50
  trusted_proxies: [127.0.0.4/32]
""" + POLICY

    def setUp(self):
        raise_file_limit()
        self.s = Serve(self.CONFIG, test_hooks=False)

    def tearDown(self):
        self.s.close()

    def test_a_client_holding_a_thousand_connections_does_not_lock_others_out(self):
        held = []
        try:
            for _ in range(1000):
                held.append(connect_from("127.0.0.2", self.s.port))
            # The kernel completed every handshake; the server kept the client's share and
            # closed the rest at once.
            self.assertEqual(sum(answers(c) for c in held), 50)
            # The client keeps reconnecting; every other client is still served.
            for i in range(100):
                extra = connect_from("127.0.0.2", self.s.port)
                self.assertFalse(answers(extra), "reconnection %d was admitted" % i)
                extra.close()
                if i % 10 == 0:
                    self.assertTrue(served_from("127.0.0.%d" % (10 + i // 10), self.s.port))
            self.assertTrue(all(answers(c) for c in held[:50]), "an admitted client lost out")
        finally:
            close_all(held)
        log = self.s.log()
        self.assertEqual(log.count("per-client connection cap (50) reached by 127.0.0.2"), 1, log)
        # Once it holds none, it gets its share back.
        wait_until(lambda: served_from("127.0.0.2", self.s.port), "127.0.0.2 to be served again")

    def test_trusted_proxies_are_exempt(self):
        held = [connect_from("127.0.0.4", self.s.port) for _ in range(80)]
        try:
            self.assertEqual(sum(answers(c) for c in held), 80)
        finally:
            close_all(held)


class DescriptorLimit(unittest.TestCase):
    CONFIG = """
server:
  max_connections_per_client: 1000000  # only the descriptor limit applies here
""" + POLICY

    def test_max_connections_fits_the_descriptor_limit(self):
        raise_file_limit()
        s = Serve(self.CONFIG, test_hooks=False, nofile=(256, 256))
        held = []
        try:
            m = re.search(r"max_connections lowered from 10000 to (\d+): the file-descriptor "
                          r"limit is 256", s.log())
            self.assertIsNotNone(m, s.log())
            budget = int(m.group(1))
            self.assertGreater(budget, 50)
            self.assertLess(budget, 256 - 128)
            for i in range(budget + 20):
                held.append(connect_from("127.0.1.%d" % (1 + i % 200), s.port))
            # Exactly max_connections are served; the rest are closed by the cap, never by
            # running out of descriptors.
            self.assertEqual(sum(answers(c) for c in held), budget)
            close_all(held)
            held = []
            wait_until(lambda: served_from("127.0.0.1", s.port), "a connection to be served")
            self.assertIn("connection cap (%d) reached" % budget, s.log())
            self.assertNotIn("accept failed", s.log())
        finally:
            close_all(held)
            s.close()

    def test_the_soft_limit_is_raised_to_the_hard_one(self):
        s = Serve(POLICY, test_hooks=False, nofile=(256, 4096))
        try:
            with open("/proc/%d/limits" % s.proc.pid) as f:
                line = next(l for l in f if l.startswith("Max open files"))
            self.assertEqual(line.split()[3:5], ["4096", "4096"], line)
            self.assertIn("max_connections lowered from 10000 to", s.log())
            self.assertEqual(s.request("GET", "/healthz")[0], 200)
        finally:
            s.close()


class OutOfDescriptors(unittest.TestCase):
    """The descriptor limit lowered under a running server: accept() fails with EMFILE."""

    def test_emfile_is_logged_once_and_the_acceptor_does_not_spin(self):
        raise_file_limit()
        s = Serve(DescriptorLimit.CONFIG, test_hooks=False)
        pid = s.proc.pid
        original = resource.prlimit(pid, resource.RLIMIT_NOFILE)
        held = []
        try:
            limit = open_descriptors(pid) + 4
            began = time.monotonic()  # no earlier than the episode
            resource.prlimit(pid, resource.RLIMIT_NOFILE, (limit, original[1]))
            held = [connect_from("127.0.0.5", s.port) for _ in range(30)]
            wait_until(lambda: "accept failed" in s.log(), "accept to fail")
            self.assertIn("Too many open files", s.log())
            close_all(held)
            held = []
            resource.prlimit(pid, resource.RLIMIT_NOFILE, original)
            wait_until(lambda: served_from("127.0.0.6", s.port), "accepts to resume")
            episode_s = time.monotonic() - began  # no shorter than the episode
            # The episode's accepts, which the line that ends it counts, were retried with
            # backoff rather than in a loop; and they took one line between them.
            m = re.search(r"accepting connections again, after (\d+) failed accepts", s.log())
            self.assertIsNotNone(m, s.log())
            self.assertLessEqual(int(m.group(1)), failed_accepts_at_most(episode_s),
                                 "in %.3f s" % episode_s)
            self.assertEqual(s.log().count("accept failed"), 1, s.log())
        finally:
            close_all(held)
            s.close()


if __name__ == "__main__":
    unittest.main()
