"""Secrets stay secret: the store's password may come from a file or the environment instead of
the config, and is printed nowhere — not in the banner, the log, /metrics, `caudal validate` or
an error."""
import os
import subprocess
import unittest

from harness import CAUDAL, Redis, Serve

PASSWORD = "s3cr3t-p@ss/word"
POLICIES = """
policies:
  - name: per-key
    identity: [api_key]
    limits: [{algorithm: gcra, capacity: 5, refill: 5/1m}]
"""


class StorePasswordOutsideTheUrl(unittest.TestCase):
    def setUp(self):
        self.redis = Redis(password=PASSWORD)

    def tearDown(self):
        self.redis.close()

    def assert_decides_by_the_store_and_prints_no_secret(self, s):
        status, headers, body = s.check({"api_key": "k"})
        self.assertEqual(status, 200, s.log())
        self.assertNotIn("caudal-degraded", headers)
        self.assertEqual(body["policies"][0]["remaining"], 4)
        metrics = s.request("GET", "/metrics")[2].decode()
        for text in (s.banner, s.log(), metrics):
            self.assertNotIn(PASSWORD, text)
            self.assertNotIn("s3cr3t", text)

    def test_password_file_beside_the_config(self):
        s = Serve("store: {url: %s, password_file: redis.secret, timeout: 2s}\n" % self.redis.url + POLICIES,
                  test_hooks=False, files={"redis.secret": PASSWORD + "\n"})
        try:
            self.assert_decides_by_the_store_and_prints_no_secret(s)
        finally:
            s.close()

    def test_password_and_url_from_the_environment(self):
        s = Serve("store: {url: memory://, timeout: 2s}\n" + POLICIES, test_hooks=False,
                  env={"CAUDAL_STORE_URL": self.redis.url, "CAUDAL_STORE_PASSWORD": PASSWORD})
        try:
            self.assertIn("store redis://127.0.0.1", s.banner)
            self.assert_decides_by_the_store_and_prints_no_secret(s)
        finally:
            s.close()

    def test_a_password_in_the_url_is_redacted_everywhere(self):
        url = "redis://:%s@127.0.0.1:%d" % (PASSWORD.replace("@", "%40").replace("/", "%2F"),
                                            self.redis.port)
        s = Serve("store: {url: '%s', timeout: 2s}\n" % url + POLICIES, test_hooks=False)
        try:
            self.assertIn("redis://:***@127.0.0.1", s.banner)
            self.assert_decides_by_the_store_and_prints_no_secret(s)
        finally:
            s.close()
        path = os.path.join(self.redis.dir, "caudal.yaml")
        with open(path, "w") as f:
            f.write("store: {url: '%s'}\n" % url + POLICIES)
        out = subprocess.run([CAUDAL, "validate", "--config", path], capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("redis://:***@", out.stdout)
        self.assertNotIn("s3cr3t", out.stdout + out.stderr)

    def test_a_wrong_password_stops_serve_without_printing_it(self):
        path = os.path.join(self.redis.dir, "caudal.yaml")
        with open(path, "w") as f:
            f.write("store: {url: %s}\n" % self.redis.url + POLICIES)
        out = subprocess.run([CAUDAL, "serve", "--config", path, "--http", "127.0.0.1:0"],
                             capture_output=True, text=True, timeout=30,
                             env=dict(os.environ, CAUDAL_STORE_PASSWORD="wrong-s3cr3t"))
        self.assertEqual(out.returncode, 2, out.stderr)
        self.assertNotIn("wrong-s3cr3t", out.stdout + out.stderr)
        missing = os.path.join(self.redis.dir, "missing.yaml")
        with open(missing, "w") as f:
            f.write("store: {url: %s, password_file: nowhere.secret}\n" % self.redis.url + POLICIES)
        out = subprocess.run([CAUDAL, "serve", "--config", missing, "--http", "127.0.0.1:0"],
                             capture_output=True, text=True, timeout=30)
        self.assertEqual(out.returncode, 2, out.stderr)
        self.assertIn("store.password_file: cannot read", out.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
