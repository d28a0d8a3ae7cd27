"""The HAProxy recipe of docs/integrations.md (examples/haproxy/: a Lua action over
core.httpclient and haproxy.cfg), run as written against Debian's HAProxy 2.6: admitted requests
reach the application with their RateLimit headers; a refusal is a 429 with Retry-After,
RateLimit and RateLimit-Policy; a malformed identity a 400; the store down under a deny policy a
503; caudal down a 503 (fail closed) or the application's answer (fail open, the one-line change
the doc gives). Only the addresses and the Lua file's path are replaced."""
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import unittest

from harness import Serve, free_port, wait_until
from nginx import Upstream
from test_nginx_recipe import CAUDAL_CONFIG, DOC, ROOT, get, read, show

EXAMPLES = os.path.join(ROOT, "examples", "haproxy")
HAPROXY = shutil.which("haproxy") or "/usr/sbin/haproxy"
FAIL_CLOSED = "unless { var(txn.caudal) -m str admitted }"
FAIL_OPEN = "unless { var(txn.caudal) -m str admitted down }"


class Haproxy:
    def __init__(self, cfg, lua, port):
        self.dir = tempfile.mkdtemp(prefix="caudal-haproxy-")
        self.port = port
        lua_path = os.path.join(self.dir, "caudal.lua")
        with open(lua_path, "w") as f:
            f.write(lua)
        cfg = cfg.replace("/etc/haproxy/caudal.lua", lua_path)
        self.cfg_path = os.path.join(self.dir, "haproxy.cfg")
        with open(self.cfg_path, "w") as f:
            f.write(cfg)
        self.log_path = os.path.join(self.dir, "haproxy.log")
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen([HAPROXY, "-db", "-f", self.cfg_path],
                                     stdout=self._log, stderr=subprocess.STDOUT)

        def up():
            if self.proc.poll() is not None:
                raise AssertionError("haproxy exited:\n" + self.log())
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                return True
            except OSError:
                return False
        try:
            wait_until(up, "haproxy to listen")
        except AssertionError:
            self.close()
            raise

    def log(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")

    def close(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class DocQuotesTheTestedFiles(unittest.TestCase):
    def test_doc_quotes_both_files_and_the_fail_open_line(self):
        doc = read(DOC)
        self.assertIn("```lua\n" + read(os.path.join(EXAMPLES, "caudal.lua")) + "```", doc)
        cfg = read(os.path.join(EXAMPLES, "haproxy.cfg"))
        self.assertIn("```haproxy\n" + cfg + "```", doc)
        self.assertEqual(cfg.count(FAIL_CLOSED), 1)
        self.assertIn(FAIL_OPEN, doc)


class Recipe:
    FAIL_OPEN = False

    def setUp(self):
        self.app = Upstream()
        self.caudal = Serve(CAUDAL_CONFIG)
        self.port = free_port()
        cfg = read(os.path.join(EXAMPLES, "haproxy.cfg"))
        lua = read(os.path.join(EXAMPLES, "caudal.lua"))
        for old, new in (("bind :80", "bind 127.0.0.1:%d" % self.port),
                         ("127.0.0.1:9000", "127.0.0.1:%d" % self.app.port)):
            self.assertEqual(cfg.count(old), 1, old)
            cfg = cfg.replace(old, new)
        if self.FAIL_OPEN:
            cfg = cfg.replace(FAIL_CLOSED, FAIL_OPEN)
        self.assertEqual(lua.count("127.0.0.1:8080"), 1)
        lua = lua.replace("127.0.0.1:8080", "127.0.0.1:%d" % self.caudal.port)
        self.haproxy = Haproxy(cfg, lua, self.port)

    def tearDown(self):
        self.haproxy.close()
        self.caudal.close()
        self.app.close()

    def test_each_outcome_has_its_status(self):
        for i in range(3):
            r = get(self.port)
            show("haproxy admitted %d of 3" % (i + 1), r)
            status, h, body = r
            self.assertEqual(status, 200, self.haproxy.log())
            self.assertEqual(body, "upstream /hello\n")
            self.assertEqual(h["ratelimit"], '"per-api-key";r=%d;t=%d' % (2 - i, 1200 * (i + 1)))
            self.assertEqual(h["ratelimit-policy"], '"per-api-key";q=3;w=3600')
        r = get(self.port)
        show("haproxy refused", r)
        status, h, body = r
        self.assertEqual(status, 429)
        self.assertEqual(h["retry-after"], "1200")
        self.assertEqual(h["ratelimit"], '"per-api-key";r=0;t=3600')
        self.assertEqual(h["ratelimit-policy"], '"per-api-key";q=3;w=3600')
        self.assertIn("quota-exceeded", body)
        self.assertEqual(self.app.hits, 3)

        r = get(self.port, api_keys=("k1", "k2"))
        show("haproxy identity twice", r)
        self.assertEqual(r[0], 400)
        self.assertEqual(get(self.port, api_keys=("k2",))[0], 200)

        self.caudal.fail_store()
        r = get(self.port, api_keys=("k3",))
        show("haproxy store down", r)
        self.assertEqual(r[0], 503)
        self.assertEqual(r[1]["retry-after"], "1")
        self.assertIn("store-unavailable", r[2])
        self.caudal.recover_store()
        self.assertEqual(self.app.hits, 4)

        self.caudal.close()
        r = get(self.port, api_keys=("k4",))
        show("haproxy caudal down", r)
        if self.FAIL_OPEN:
            self.assertEqual((r[0], r[2]), (200, "upstream /hello\n"))
            self.assertEqual(self.app.hits, 5)
        else:
            self.assertEqual((r[0], r[2]), (503, "rate limiter unavailable"))
            self.assertEqual(self.app.hits, 4)


class FailClosed(Recipe, unittest.TestCase):
    pass


class FailOpen(Recipe, unittest.TestCase):
    FAIL_OPEN = True


if __name__ == "__main__":
    unittest.main()
