"""The fixed window's boundary burst over HTTP, with the server's clock driven by the test: a fixed
window admits a whole window's limit just before a boundary and again just after it; a sliding
window log admits the limit once."""
import unittest

from harness import Serve

CONFIG = """
policies:
  - name: fixed
    identity: [fixed]
    limits: [{algorithm: fixed_window, limit: 20, window: 1m}]
  - name: sliding
    identity: [sliding]
    limits: [{algorithm: sliding_window_log, limit: 20, window: 1m}]
"""


class BoundaryBurst(unittest.TestCase):
    def setUp(self):
        self.s = Serve(CONFIG)

    def tearDown(self):
        self.s.close()

    def burst(self, field, n):
        return sum(1 for _ in range(n) if self.s.check({field: "client"})[0] == 200)

    def test_fixed_window_admits_twice_the_limit_across_a_boundary(self):
        now_us = self.s.advance_ms(0)
        to_boundary_ms = (60_000_000 - now_us % 60_000_000) // 1000
        if to_boundary_ms < 300:  # too close to this boundary: aim at the next one
            to_boundary_ms += 60_000
        self.s.advance_ms(to_boundary_ms - 300)  # 0.3 s before the minute turns
        before = {f: self.burst(f, 25) for f in ("fixed", "sliding")}
        self.s.advance_ms(600)  # 0.3 s after
        after = {f: self.burst(f, 25) for f in ("fixed", "sliding")}
        self.assertEqual(before, {"fixed": 20, "sliding": 20})
        self.assertEqual(after, {"fixed": 20, "sliding": 0})  # 40 vs 20 within 0.6 s


if __name__ == "__main__":
    unittest.main()
