"""What a store clock that jumps does to the limits, counted through a real `caudal serve` on a
real redis-server whose real-time clock the preload offsets (clock_offset.cc). Decisions take the
store's time ("time from the store"), so after a failover to a node whose clock differs they see
the same jump. Slow refills (10 an hour) keep the real seconds of the test out of the counts:
  - a bucket jumped forward by J admits min(B, r·J) at once, then nothing more when the clock is
    put back (its refill waits until real time passes where the jump had taken it);
  - a bucket jumped back admits nothing until its clock is past its last decision again, and
    nothing more when the clock is put right;
  - a fixed window jumped past its end admits a whole new window; put back, the later window's
    count holds until it ends."""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "serve"))
from harness import Serve, free_port, wait_until  # noqa: E402

PRELOAD = os.environ.get("CAUDAL_CLOCK_OFFSET", "build/libcaudal_clock_offset.so")
MINUTE_MS = 60_000

CONFIG = """
store: {url: "%s", timeout: 1s, over_limit_cache: false}
policies:
  - name: bucket
    identity: [bucket]
    limits:
      - {algorithm: token_bucket, capacity: 10, refill: 10/1h}
  - name: window
    identity: [window]
    limits:
      - {algorithm: fixed_window, limit: 10, window: 1h}
"""


class SkewedRedis:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="caudal-skewed-redis-")
        self.offset = os.path.join(self.dir, "offset")
        with open(self.offset, "wb") as f:
            f.write((0).to_bytes(8, "little", signed=True))
        self.port = free_port()
        env = dict(os.environ, LD_PRELOAD=os.path.abspath(PRELOAD),
                   CAUDAL_CLOCK_OFFSET_FILE=self.offset)
        self.proc = subprocess.Popen(
            ["redis-server", "--bind", "127.0.0.1", "--port", str(self.port), "--dir", self.dir,
             "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
        wait_until(lambda: self.time_s() is not None, "redis-server")

    def set_ms(self, ms):
        # In place: truncating the file the server has mapped would kill it with SIGBUS.
        with open(self.offset, "r+b") as f:
            f.write((ms * 1000).to_bytes(8, "little", signed=True))

    def time_s(self):
        try:
            out = subprocess.run(["redis-cli", "-p", str(self.port), "TIME"], capture_output=True,
                                 text=True, timeout=2).stdout.split()
            return int(out[0]) if len(out) == 2 else None
        except (OSError, subprocess.TimeoutExpired, ValueError):
            return None

    def close(self):
        self.proc.kill()
        self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


class StoreClock(unittest.TestCase):
    def setUp(self):
        self.redis = SkewedRedis()
        self.serve = Serve(CONFIG % ("redis://127.0.0.1:%d" % self.redis.port), test_hooks=False)

    def tearDown(self):
        self.serve.close()
        self.redis.close()

    def admitted(self, name, key, n):
        count = 0
        for _ in range(n):
            status, _, _ = self.serve.check({name: key})
            self.assertIn(status, (200, 429))
            count += status == 200
        return count

    def test_the_preload_moves_the_store_clock(self):
        before = self.redis.time_s()
        self.redis.set_ms(30 * MINUTE_MS)
        self.assertGreaterEqual(self.redis.time_s() - before, 30 * 60)
        self.redis.set_ms(-30 * MINUTE_MS)
        self.assertLessEqual(self.redis.time_s() - before, -30 * 60 + 5)

    def test_a_bucket_jumped_forward_admits_the_refill_of_the_jump_once(self):
        self.assertEqual(self.admitted("bucket", "f", 11), 10)
        self.redis.set_ms(30 * MINUTE_MS)  # r·J = 10/h · 30 min = 5
        self.assertEqual(self.admitted("bucket", "f", 20), 5)
        self.redis.set_ms(0)
        self.assertEqual(self.admitted("bucket", "f", 20), 0, "put back, it refills nothing")
        self.redis.set_ms(3 * 60 * MINUTE_MS)  # r·J = 30, capped at B = 10
        self.assertEqual(self.admitted("bucket", "f", 20), 10)

    def test_a_bucket_jumped_back_admits_nothing_more(self):
        self.assertEqual(self.admitted("bucket", "b", 11), 10)
        self.redis.set_ms(-30 * MINUTE_MS)
        self.assertEqual(self.admitted("bucket", "b", 20), 0)
        self.redis.set_ms(0)
        self.assertEqual(self.admitted("bucket", "b", 20), 0, "put right, nothing is refilled")
        self.assertEqual(self.admitted("bucket", "fresh", 11), 10, "a new key is as ever")

    def test_a_window_jumped_past_its_end_admits_a_new_window(self):
        self.assertEqual(self.admitted("window", "w", 11), 10)
        self.redis.set_ms(60 * MINUTE_MS)
        self.assertEqual(self.admitted("window", "w", 20), 10)
        self.redis.set_ms(0)
        self.assertEqual(self.admitted("window", "w", 20), 0, "the later window's count holds")
        self.redis.set_ms(-60 * MINUTE_MS)
        self.assertEqual(self.admitted("window", "w", 20), 0, "and holds behind it too")


if __name__ == "__main__":
    unittest.main()
