"""A network partition between `caudal serve` and Redis, in a network namespace the test creates
(root; a veth pair on a /30 of 10.254.0.0/16 that never leaves the machine): redis-server inside,
caudal on this side. A client sends forward-auth requests throughout while the link is made
lossy, cut silently (every packet dropped), taken down, and slowed, then healed; it records how
fast every request was answered, how many failed, and how long decisions took to come back.
Prints a table (docs/reliability.md quotes it) and checks that during every fault each request
is answered by the failure mode within the store's timeout (plus scheduling slack), and that
decisions resume after each heal."""
import asyncio
import http.client
import os
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "serve"))
from harness import Redis, Serve, free_port, wait_until  # noqa: E402
from netns import Namespace  # noqa: E402

# store.timeout: above a loaded machine's scheduling stalls (five timeouts in a row open the
# engine's circuit breaker for 500 ms, failing every decision meanwhile), far below TCP's
# retransmission timeout.
TIMEOUT_MS = 50
# The slow path's own: the relay is a Python event loop, which a loaded machine delays by tens of
# ms, so "a round trip within the timeout" (+20 ms) must stay far inside it and "past it"
# (+300 ms) far beyond, or the phase measures the machine rather than caudal.
SLOW_TIMEOUT_MS = 200
SLACK_MS = 150   # what a 2-core machine at load 2 may add to an answer (client and server side)
CONFIG_TEMPLATE = """
store: {url: %%s, timeout: %dms, on_failure: deny}
policies:
  - name: api
    identity: [api_key]
    limits: [{algorithm: token_bucket, capacity: 1000000, refill: 1000000/1s}]
"""
CONFIG = CONFIG_TEMPLATE % TIMEOUT_MS
SLOW_CONFIG = CONFIG_TEMPLATE % SLOW_TIMEOUT_MS


def slack_ms():
    """SLACK_MS, scaled by how far the machine's load exceeds its cores: every process waits
    for a core that much longer."""
    return SLACK_MS * max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))
ROWS = []


class Load:
    """Sequential keep-alive forward-auth requests; each answer's status and latency."""

    def __init__(self, port):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        self.n = 0

    def one(self):
        self.n += 1
        start = time.monotonic()
        self.conn.request("GET", "/v1/auth", headers={"X-API-Key": "k%d" % (self.n % 100)})
        response = self.conn.getresponse()
        response.read()
        return response.status, (time.monotonic() - start) * 1000

    def run(self, seconds):
        results = []
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            results.append(self.one())
        return results

    def until_decided(self, limit_s=60):
        """Seconds until a request is decided again (200), sending requests back to back."""
        start = time.monotonic()
        while time.monotonic() - start < limit_s:
            if self.one()[0] == 200:
                return time.monotonic() - start
        raise AssertionError("decisions did not resume within %d s" % limit_s)


def p99(latencies):
    s = sorted(latencies)
    return s[min(len(s) - 1, int(len(s) * 0.99))] if s else 0.0


class DelayRelay:
    """A TCP relay on this side that holds every chunk `delay_ms` before passing it on, each way:
    a slow path to Redis (this kernel may lack netem)."""

    def __init__(self, target_host, target_port):
        self.port = free_port()
        self.delay_ms = 0
        self.target = (target_host, target_port)
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        self.ready.wait(10)

    def _run(self):
        asyncio.set_event_loop(self.loop)
        self.server = self.loop.run_until_complete(
            asyncio.start_server(self._client, "127.0.0.1", self.port))
        self.ready.set()
        self.loop.run_forever()

    async def _pipe(self, reader, writer):
        queue = asyncio.Queue()

        async def send():
            while True:
                due, data = await queue.get()
                if data is None:
                    break
                await asyncio.sleep(max(0, due - self.loop.time()))
                writer.write(data)
                await writer.drain()
            writer.close()

        sender = asyncio.ensure_future(send())
        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    break
                await queue.put((self.loop.time() + self.delay_ms / 1000, data))
        except (ConnectionError, OSError):
            pass
        await queue.put((0, None))
        await sender

    async def _client(self, reader, writer):
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer),
                             return_exceptions=True)

    def close(self):
        async def shutdown():
            self.server.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(shutdown(), self.loop).result(5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)
        self.loop.close()


def namespaced_redis(add_cleanup):
    """A network namespace and a redis-server inside it on port 6379, as (ns, redis); each is
    handed to `add_cleanup` (a test's addCleanup, a class's addClassCleanup) as soon as it exists,
    so it is closed even when what follows fails."""
    ns = Namespace()
    add_cleanup(ns.close)
    # Not loopback, so Redis's protected mode would refuse the client: the namespace is ours.
    redis = Redis(started=False, bind=ns.ip, port=6379,
                  persistence=["--save", "", "--appendonly", "no", "--protected-mode", "no"])
    add_cleanup(redis.close)
    redis.start(wrap=ns.wrap())
    return ns, redis


class Partition(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.ns, cls.redis = namespaced_redis(cls.addClassCleanup)

    @classmethod
    def tearDownClass(cls):
        print("\nstore.timeout %d ms (the slow path: %d ms), on_failure deny; a sequential "
              "keep-alive client on /v1/auth" % (TIMEOUT_MS, SLOW_TIMEOUT_MS))
        print("%-44s %9s %8s %9s %9s %s" % ("phase", "requests", "failed", "p50 ms", "p99 ms",
                                           "decisions again after heal"))
        for name, results, recovered in ROWS:
            lat = [ms for _, ms in results]
            failed = sum(status != 200 for status, _ in results)
            print("%-44s %9d %7.1f%% %9.1f %9.1f %s" % (
                name, len(results), 100.0 * failed / max(1, len(results)),
                sorted(lat)[len(lat) // 2] if lat else 0, p99(lat) if lat else 0,
                "%.2f s" % recovered if recovered is not None else ""))

    def record(self, name, results, recovered=None):
        ROWS.append((name, results, recovered))
        statuses = {status for status, _ in results}
        self.assertTrue(statuses <= {200, 503}, "%s: %s" % (name, statuses))
        return (sum(status != 200 for status, _ in results) / max(1, len(results)),
                p99([ms for _, ms in results]))

    def assert_answered_within_timeout(self, name, results, timeout_ms=TIMEOUT_MS):
        _, worst = self.record(name, results)
        self.assertLess(worst, timeout_ms + slack_ms(), name)

    def test_loss_silent_partition_and_link_down(self):
        s = Serve(CONFIG % self.redis.url, test_hooks=False)
        self.addCleanup(s.close)
        load = Load(s.port)
        self.addCleanup(load.conn.close)
        wait_until(lambda: load.one()[0] == 200, "caudal to decide on the namespaced Redis")
        failed, _ = self.record("healthy", load.run(2))
        self.assertLess(failed, 0.1)

        self.ns.loss(10)
        self.addCleanup(self.ns.heal)
        self.assert_answered_within_timeout("10% packet loss each way", load.run(3))
        self.ns.heal()
        self.record("10% loss healed", [], load.until_decided())

        self.ns.blackhole()
        results = load.run(3)
        self.assert_answered_within_timeout("silent partition (every packet dropped)", results)
        self.assertGreater(self.record("-", results)[0], 0.9)
        ROWS.pop()
        self.ns.heal()
        self.record("silent partition healed", [], load.until_decided())
        failed, _ = self.record("after the silent partition", load.run(2))
        self.assertLess(failed, 0.1)

        self.ns.link(False)
        self.addCleanup(self.ns.link, True)
        results = load.run(3)
        self.assert_answered_within_timeout("link down", results)
        self.ns.link(True)
        self.record("link down healed", [], load.until_decided())
        failed, _ = self.record("after the link came back", load.run(2))
        self.assertLess(failed, 0.1)

    def test_slow_path(self):
        relay = DelayRelay(self.ns.ip, 6379)
        self.addCleanup(relay.close)
        s = Serve(SLOW_CONFIG % ("redis://127.0.0.1:%d" % relay.port), test_hooks=False)
        self.addCleanup(s.close)
        load = Load(s.port)
        self.addCleanup(load.conn.close)
        wait_until(lambda: load.one()[0] == 200, "caudal to decide through the relay")
        relay.delay_ms = 10  # 20 ms more per round trip: within the store's timeout
        failed, _ = self.record("+10 ms each way (round trip within timeout)", load.run(2))
        self.assertLess(failed, 0.2)
        relay.delay_ms = 150  # 300 ms more per round trip: past the timeout
        results = load.run(2)
        self.assert_answered_within_timeout("+150 ms each way (round trip past timeout)", results,
                                            SLOW_TIMEOUT_MS)
        self.assertGreater(self.record("-", results)[0], 0.9)
        ROWS.pop()
        relay.delay_ms = 0
        self.record("slow path healed", [], load.until_decided())


if __name__ == "__main__":
    unittest.main()
