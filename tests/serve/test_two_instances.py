"""Two `caudal serve` instances on one Redis jointly admit no more than one instance would."""
import unittest

from harness import Redis, Serve

CONFIG = """
store: {url: %s, timeout: 200ms}
policies:
  - name: shared
    identity: [api_key]
    limits:
      - {algorithm: gcra, capacity: 25, refill: 25/1h}
      - {algorithm: sliding_window_log, limit: 30, window: 1h}
"""


class TwoInstances(unittest.TestCase):
    def test_jointly_admit_what_one_would(self):
        redis = Redis()
        a = Serve(CONFIG % redis.url, test_hooks=False)
        b = Serve(CONFIG % redis.url, test_hooks=False)
        try:
            admitted = {"a": 0, "b": 0}
            for i in range(60):
                name, s = ("a", a) if i % 2 == 0 else ("b", b)
                if s.request("GET", "/v1/auth", headers={"X-API-Key": "k"})[0] == 200:
                    admitted[name] += 1
            self.assertEqual(admitted["a"] + admitted["b"], 25)
            self.assertGreater(admitted["a"], 0)
            self.assertGreater(admitted["b"], 0)
        finally:
            a.close()
            b.close()
            redis.close()


if __name__ == "__main__":
    unittest.main()
