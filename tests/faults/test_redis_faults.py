"""Redis faults against a real `caudal serve` and redis-server on loopback: Redis stalled (SIGSTOP,
DEBUG SLEEP), refusing writes (maxmemory reached, noeviction), unreachable at start, and one key
flooding at 10x its limit. A sequential keep-alive client sends forward-auth requests; each test
records the p99 latency of decisions during the fault, the requests that failed, the store
operations per request (Redis's INFO commandstats), the time to recover and the log lines and
bytes written during the fault. Prints a table (docs/reliability.md quotes it) and checks the
bounds the docs promise: answers within the store's timeout plus scheduling slack, /readyz never
blocked by the store, readiness failing while writes fail, nothing admitted beyond the policy."""
import http.client
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "serve"))
from harness import Redis, Serve, wait_until  # noqa: E402
from test_partition import CONFIG, SLACK_MS, TIMEOUT_MS, Load, p99  # noqa: E402

ROWS = []


def readyz_probes(port, seconds, probers=10):
    """`probers` threads each asking /readyz back to back for `seconds`; (statuses, latencies ms)."""
    statuses, latencies, lock = [], [], threading.Lock()

    def probe():
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            start = time.monotonic()
            conn.request("GET", "/readyz")
            r = conn.getresponse()
            r.read()
            with lock:
                statuses.append(r.status)
                latencies.append((time.monotonic() - start) * 1000)
            time.sleep(0.01)
        conn.close()

    threads = [threading.Thread(target=probe) for _ in range(probers)]
    for t in threads:
        t.start()
    return threads, statuses, latencies


def redis_seconds(redis):
    out = subprocess.run(["redis-cli", "-h", redis.bind, "-p", str(redis.port), "TIME"],
                         check=True, stdout=subprocess.PIPE, text=True).stdout
    return int(out.split()[0])


def script_calls(redis):
    """Calls of caudal's scripts so far: EVALSHA and FCALL (plain consumes go to the library)."""
    out = subprocess.run(["redis-cli", "-h", redis.bind, "-p", str(redis.port), "INFO",
                          "commandstats"], check=True, stdout=subprocess.PIPE, text=True).stdout
    calls = 0
    for line in out.splitlines():
        if line.startswith(("cmdstat_evalsha:", "cmdstat_fcall:")):
            calls += int(line.split("calls=")[1].split(",")[0])
    return calls


class LogMeter:
    """Lines and bytes `caudal serve` logged between start() and stop()."""

    def __init__(self, serve):
        self.serve = serve
        self.at = len(serve.log())

    def stop(self):
        text = self.serve.log()[self.at:]
        return "%d lines, %d B" % (text.count("\n"), len(text.encode()))


class RedisFaults(unittest.TestCase):
    @classmethod
    def tearDownClass(cls):
        print("\nstore.timeout %d ms, on_failure deny; a sequential keep-alive client on "
              "/v1/auth" % TIMEOUT_MS)
        print("%-40s %8s %8s %9s %11s %s" % ("fault", "requests", "failed", "p99 ms",
                                             "recovered", "other"))
        for name, results, recovered, other in ROWS:
            lat = [ms for _, ms in results]
            failed = sum(status != 200 for status, _ in results)
            print("%-40s %8d %7.1f%% %9.1f %11s %s" % (
                name, len(results), 100.0 * failed / max(1, len(results)),
                p99(lat) if lat else 0, "%.2f s" % recovered if recovered is not None else "-",
                other))

    def serve(self, redis, config=CONFIG):
        s = Serve(config % redis.url, test_hooks=False)
        self.addCleanup(s.close)
        load = Load(s.port)
        self.addCleanup(load.conn.close)
        return s, load

    def check_answers(self, name, results):
        self.assertTrue({status for status, _ in results} <= {200, 503}, name)
        self.assertLess(p99([ms for _, ms in results]), TIMEOUT_MS + SLACK_MS, name)

    def test_stalled_by_sigstop(self):
        self._stall_with(lambda r: os.kill(r.proc.pid, signal.SIGSTOP),
                         lambda r: os.kill(r.proc.pid, signal.SIGCONT),
                         "Redis stalled: SIGSTOP (2 s)")

    def test_stalled_by_debug_sleep(self):
        def sleep(r):
            threading.Thread(target=lambda: r.command("DEBUG", "SLEEP", "2.2"),
                             daemon=True).start()

            def asleep():  # a PING no longer answered within 50 ms: the sleep holds Redis
                try:
                    with socket.create_connection((r.bind, r.port), timeout=0.05) as s:
                        s.sendall(b"PING\r\n")
                        return not s.recv(64)
                except OSError:
                    return True

            wait_until(asleep, "DEBUG SLEEP to hold Redis")

        self._stall_with(sleep, lambda r: None, "Redis stalled: DEBUG SLEEP (2 s)")

    def _stall_with(self, begin, end, name):
        box = {}  # the Redis, for begin and end

        def start_stall():
            begin(box["redis"])

        def end_stall():
            end(box["redis"])

        redis = Redis(persistence=["--save", "", "--appendonly", "no",
                                   "--enable-debug-command", "yes"])
        self.addCleanup(redis.close)
        box["redis"] = redis
        s, load = self.serve(redis)
        wait_until(lambda: load.one()[0] == 200, "caudal to decide")
        wait_until(lambda: s.request("GET", "/readyz")[0] == 200, "ready")
        log = LogMeter(s)
        start_stall()
        try:
            threads, statuses, probe_ms = readyz_probes(s.port, 2.0)
            results = load.run(2.0)
            for t in threads:
                t.join()
        finally:
            end_stall()
        logged = log.stop()
        recovered = load.until_decided()
        if name.endswith("DEBUG SLEEP (2 s)"):
            recovered = max(0.0, recovered - 0.2)  # the sleep outlasts the run by 0.2 s
        self.check_answers(name, results)
        self.assertGreater(sum(status != 200 for status, _ in results), len(results) // 2)
        self.assertLess(p99(probe_ms), SLACK_MS, "/readyz is never held by the store")
        self.assertIn(503, statuses, "not ready while Redis is stalled")
        wait_until(lambda: s.request("GET", "/readyz")[0] == 200, "ready again")
        ROWS.append((name, results, recovered,
                     "/readyz x10: p99 %.1f ms, %d%% 503; log %s" % (
                         p99(probe_ms), 100 * statuses.count(503) // max(1, len(statuses)),
                         logged)))

    def test_refusing_writes(self):
        redis = Redis()
        self.addCleanup(redis.close)
        s, load = self.serve(redis)
        wait_until(lambda: load.one()[0] == 200, "caudal to decide")
        wait_until(lambda: s.request("GET", "/readyz")[0] == 200, "ready")
        value = "x" * 65536
        for i in range(40):  # 2.5 MB of data
            redis.command("SET", "fill:%d" % i, value)
        log = LogMeter(s)
        # Memory past maxmemory, nothing to evict: Redis refuses every write (OOM), answers reads.
        redis.command("CONFIG", "SET", "maxmemory-policy", "noeviction")
        self.assertEqual(redis.command("CONFIG", "SET", "maxmemory", "1mb"), b"+OK")
        filled = time.monotonic()
        self.assertTrue(redis.command("SET", "probe", "1").startswith(b"-OOM"))
        wait_until(lambda: s.request("GET", "/readyz")[0] == 503, "/readyz to fail", 5)
        unready_after = time.monotonic() - filled
        results = load.run(2.0)
        logged = log.stop()
        self.check_answers("refusing writes", results)
        self.assertTrue(all(status == 503 for status, _ in results), "deny: every decision 503")
        redis.command("CONFIG", "SET", "maxmemory", "0")  # room again
        freed = time.monotonic()
        recovered = load.until_decided()
        wait_until(lambda: s.request("GET", "/readyz")[0] == 200, "ready again", 5)
        ROWS.append(("Redis refusing writes (maxmemory)", results, recovered,
                     "/readyz 503 %.2f s after writes were refused, 200 %.2f s after "
                     "maxmemory was raised; log %s" % (unready_after, time.monotonic() - freed, logged)))

    def test_unreachable_at_start(self):
        redis = Redis(started=False)
        self.addCleanup(redis.close)
        s, load = self.serve(redis)
        log = LogMeter(s)
        results = load.run(1.5)
        self.check_answers("unreachable at start", results)
        self.assertTrue(all(status == 503 for status, _ in results))
        self.assertEqual(s.request("GET", "/readyz")[0], 503)
        started = time.monotonic()
        redis.start()
        up = time.monotonic() - started
        recovered = load.until_decided()
        wait_until(lambda: s.request("GET", "/readyz")[0] == 200, "ready once Redis is up")
        ROWS.append(("Redis unreachable at start", results, recovered,
                     "Redis took %.2f s to start (counted in recovery); log %s" % (
                         up, log.stop())))

    def test_abusive_key_at_ten_times_its_limit(self):
        redis = Redis()
        self.addCleanup(redis.close)
        config = """
store: {url: %%s, timeout: %dms, on_failure: deny}
policies:
  - name: api
    identity: [api_key]
    limits: [{algorithm: fixed_window, limit: 200, window: 1h}]
""" % TIMEOUT_MS
        s, load = self.serve(redis, config)
        wait_until(lambda: s.request("GET", "/readyz")[0] == 200, "ready")
        before = script_calls(redis)
        first_window = redis_seconds(redis) // 3600
        statuses = []
        for _ in range(2000):  # 10x the window's limit
            load.conn.request("GET", "/v1/auth", headers={"X-API-Key": "abuser"})
            r = load.conn.getresponse()
            r.read()
            statuses.append(r.status)
        calls = script_calls(redis) - before
        # Windows start on the store's clock at multiples of an hour; a flood that crosses
        # one boundary may take the next window's limit as well (the fixed window's burst).
        windows = redis_seconds(redis) // 3600 - first_window + 1
        admitted = statuses.count(200)
        refused = statuses.count(429)
        if windows == 1:
            self.assertEqual(admitted, 200, "exactly the limit admitted")
        else:
            self.assertGreaterEqual(admitted, 200)
            self.assertLessEqual(admitted, 200 * windows, "at most the limit per window")
        self.assertEqual(admitted + refused, 2000)
        # Every admission is a store call; the refusals after the first cost none until the
        # window ends (the over-limit cache), so the whole flood costs about its admissions.
        self.assertGreaterEqual(calls, admitted, "every admission decided by the store")
        self.assertLessEqual(calls - admitted, refused // 100,
                             "refusals cost >= 100x fewer store calls than requests")
        ROWS.append(("one key at 10x its limit (200/1h)", [], None,
                     "%d requests, %d admitted, %d refused: %d script calls (%.3f per request; "
                     "%d for the %d refusals)" % (len(statuses), admitted, refused, calls,
                                                 calls / len(statuses), calls - admitted,
                                                 refused)))


if __name__ == "__main__":
    unittest.main()
