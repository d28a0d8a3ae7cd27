"""What `caudal serve` writes to its log while Redis fails under heavy traffic: several keep-alive
clients send forward-auth requests back to back through Redis killed (SIGKILL, then restarted),
stalled (SIGSTOP), partitioned (every packet dropped, in a network namespace the test creates;
root), and stalled and resumed over and over (a flapping store: failing and succeeding decisions
interleaved). For each, the lines and bytes logged from the fault's start until decisions are
back, against the requests answered meanwhile: the breaker's opening and its closing, two lines
whatever the traffic, never a line per request or per failure. Prints a table
(docs/reliability.md quotes it)."""
import http.client
import os
import signal
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "serve"))
from harness import Redis, Serve, wait_until  # noqa: E402
from test_partition import CONFIG, TIMEOUT_MS, namespaced_redis  # noqa: E402

CLIENTS = 6
FAULT_S = 2.0
MAX_LINES = 2      # the breaker opening, and closing once decisions are back
MAX_BYTES = 1024   # each line names the store and the error: a few hundred bytes
ROWS = []


class Flood:
    """CLIENTS threads sending forward-auth requests back to back until stop(); every answer kept
    as (time, status)."""

    def __init__(self, port):
        self.port = port
        self.answers = []
        self.errors = []
        self.done = threading.Event()
        self.threads = [threading.Thread(target=self._run, args=(i,), daemon=True)
                        for i in range(CLIENTS)]
        for t in self.threads:
            t.start()

    def _run(self, i):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        n = 0
        try:
            while not self.done.is_set():
                n += 1
                conn.request("GET", "/v1/auth", headers={"X-API-Key": "c%d-%d" % (i, n % 50)})
                response = conn.getresponse()
                response.read()
                self.answers.append((time.monotonic(), response.status))
        except (OSError, http.client.HTTPException) as e:
            self.errors.append(repr(e))
        finally:
            conn.close()

    def stop(self):
        self.done.set()
        for t in self.threads:
            t.join(15)
        return sorted(self.answers)


def failing_episodes(answers):
    """How many runs of failed answers (503) the clients saw, in time order."""
    episodes, failing = 0, False
    for _, status in answers:
        if status == 503 and not failing:
            episodes += 1
        failing = status == 503
    return episodes


class LogVolume(unittest.TestCase):
    @classmethod
    def tearDownClass(cls):
        print("\n%d clients back to back on /v1/auth, store.timeout %d ms, on_failure deny; the "
              "log from the fault's start until decisions are back" % (CLIENTS, TIMEOUT_MS))
        print("%-44s %9s %9s %9s %9s %6s %6s" % ("fault", "requests", "failed", "episodes",
                                                 "seconds", "lines", "bytes"))
        for row in ROWS:
            print("%-44s %9d %9d %9d %9.1f %6d %6d" % row)

    def measure(self, name, redis_url, begin, end, seconds=FAULT_S, during=None):
        """Floods caudal through begin() ... end() and until decisions are back; checks the log
        written meanwhile and returns the answers, in time order."""
        s = Serve(CONFIG % redis_url, test_hooks=False)
        self.addCleanup(s.close)
        wait_until(lambda: s.request("GET", "/v1/auth", headers={"X-API-Key": "w"})[0] == 200,
                   "caudal to decide")
        logged_before = len(s.log())
        flood = Flood(s.port)
        time.sleep(0.2)
        started = time.monotonic()
        begin()
        try:
            (during or time.sleep)(seconds)
        finally:
            end()
        ended = time.monotonic()
        # Until decisions are back: one decided after the end, and the breaker closed.
        wait_until(lambda: any(t > ended and status == 200 for t, status in flood.answers[-50:]),
                   "decisions after the fault", 30)
        wait_until(lambda: s.metric("caudal_store_breaker_state") == 0, "the breaker to close", 30)
        back = time.monotonic()
        answers = flood.stop()
        self.assertEqual(flood.errors, [], name)
        text = s.log()[logged_before:]
        lines, size = text.count("\n"), len(text.encode())
        during_fault = [a for a in answers if started <= a[0] <= back]
        failed = sum(status == 503 for _, status in during_fault)
        ROWS.append((name, len(during_fault), failed, failing_episodes(during_fault),
                     back - started, lines, size))
        self.assertEqual({status for _, status in answers} - {200, 503}, set(), name)
        self.assertGreater(failed, 100, "%s: the fault failed decisions under load" % name)
        self.assertLessEqual(lines, MAX_LINES, "%s: %d lines for %d requests:\n%s" % (
            name, lines, len(during_fault), text))
        self.assertLessEqual(size, MAX_BYTES, name)
        self.assertEqual(text.count("circuit open, deciding by failure mode"), 1, text)
        self.assertEqual(text.count("answers again: circuit closed"), 1, text)
        return during_fault

    def stoppable_redis(self):
        # A local Redis, resumed (if a test stopped it) before it is closed.
        redis = Redis()
        self.addCleanup(redis.close)
        self.addCleanup(lambda: redis.proc and os.kill(redis.proc.pid, signal.SIGCONT))
        return redis

    def test_redis_killed(self):
        redis = Redis()
        self.addCleanup(redis.close)
        self.measure("Redis killed (SIGKILL) %g s, then restarted" % FAULT_S, redis.url,
                     redis.stop, redis.start)

    def test_redis_stalled(self):
        redis = self.stoppable_redis()
        self.measure("Redis stalled (SIGSTOP) %g s" % FAULT_S, redis.url,
                     lambda: os.kill(redis.proc.pid, signal.SIGSTOP),
                     lambda: os.kill(redis.proc.pid, signal.SIGCONT))

    def test_redis_partitioned(self):
        ns, redis = namespaced_redis(self.addCleanup)
        self.measure("partitioned (every packet dropped) %g s" % FAULT_S, redis.url,
                     ns.blackhole, ns.heal)

    def test_redis_flapping(self):
        # Stalled 0.3 s in every 1.2 s: the breaker opens in each stall (five timeouts over
        # 0.1 s) and its probe, 0.5 s later, finds Redis answering and closes it. Every opening
        # after the first within 10 s is held back, and so is its closing.
        redis = self.stoppable_redis()

        def flap(seconds):
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                os.kill(redis.proc.pid, signal.SIGSTOP)
                time.sleep(0.3)
                os.kill(redis.proc.pid, signal.SIGCONT)
                time.sleep(0.9)

        answers = self.measure("Redis stalled 0.3 s in every 1.2 s, for 3.6 s", redis.url,
                               lambda: None, lambda: None, 3.6, during=flap)
        self.assertGreaterEqual(failing_episodes(answers), 3,
                                "failing and succeeding decisions interleaved")


if __name__ == "__main__":
    unittest.main()
