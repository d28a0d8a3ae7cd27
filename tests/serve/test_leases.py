"""Exact leases across three `caudal serve` processes on one redis-server and one hot key: under
the limit every request is admitted at a few hundredths of a Redis command per decision; above
it, the admitted never pass the bound B + r·(t + ttl) and stay near an exact limiter's; Stop gives
what the leases hold back; a reload that changes the limit applies it at once."""
import http.client
import signal
import socket
import threading
import time
import unittest

from harness import Redis, Serve, wait_until

CONFIG = """
store: {url: %(url)s, timeout: 1s, instances: 3, lease: {ttl: %(ttl)s, max_share: 0.3}}
policies:
  - name: hot
    identity: [api_key]
    limits:
      - {algorithm: token_bucket, capacity: %(capacity)d, refill: %(refill)s}
"""


# The commands caudal's scripts call inside Redis (counted by INFO commandstats too).
SCRIPT_COMMANDS = {"get", "set", "time", "pexpire", "del", "lrange", "lrem", "lset", "rpush",
                   "rpop", "ltrim"}


def commands(redis):
    """The commands redis-server has run so far, by name, but the INFO calls that read them."""
    calls = {}
    for line in info(redis, "commandstats").splitlines():
        if line.startswith("cmdstat_") and not line.startswith("cmdstat_info:"):
            name = line.split(":")[0][len("cmdstat_"):]
            calls[name] = int(line.split("calls=")[1].split(",")[0])
    return calls


def info(redis, section):
    with socket.create_connection((redis.bind, redis.port), timeout=5) as s:
        s.sendall(b"*2\r\n$4\r\nINFO\r\n$%d\r\n%s\r\n" % (len(section), section.encode()))
        data = b""
        while b"\r\n" not in data:
            data += s.recv(65536)
        size = int(data.split(b"\r\n", 1)[0][1:])
        body = data.split(b"\r\n", 1)[1]
        while len(body) < size:
            body += s.recv(65536)
        return body[:size].decode()


def hammer(servers, key, seconds):
    """Each server driven by one client on one keep-alive connection for `seconds`: the answers
    (admitted, refused) per server and the interval from the first send to the last answer."""
    results = [None] * len(servers)
    start = time.monotonic()

    def run(i, s):
        c = http.client.HTTPConnection("127.0.0.1", s.port, timeout=10)
        admitted = refused = 0
        while time.monotonic() - start < seconds:
            c.request("GET", "/v1/auth", headers={"X-API-Key": key})
            r = c.getresponse()
            r.read()
            if r.status == 200:
                admitted += 1
            elif r.status == 429:
                refused += 1
            else:
                raise AssertionError("unexpected status %d" % r.status)
        c.close()
        results[i] = (admitted, refused)

    threads = [threading.Thread(target=run, args=(i, s)) for i, s in enumerate(servers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results, time.monotonic() - start


class Leases(unittest.TestCase):
    def start(self, capacity, refill, ttl="250ms", n=3):
        config = CONFIG % {"url": self.redis.url, "ttl": ttl, "capacity": capacity,
                           "refill": refill}
        servers = [Serve(config, test_hooks=False) for _ in range(n)]
        self.servers += servers
        return servers, config

    def setUp(self):
        self.redis = Redis()
        self.servers = []

    def tearDown(self):
        for s in self.servers:
            s.close()
        self.redis.close()

    def test_under_the_limit_everything_is_admitted_at_few_commands_per_decision(self):
        servers, _ = self.start(capacity=1_000_000, refill="1000000/1s")
        hammer(servers, "warm-up", 0.3)
        from_leases = 'caudal_lease_requests_total{answered_by="lease"}'
        leased_before = sum(s.metric(from_leases) for s in servers)
        before = commands(self.redis)
        results, _ = hammer(servers, "hot", 3.0)
        after = commands(self.redis)
        by_name = {n: after[n] - before.get(n, 0) for n in after if after[n] > before.get(n, 0)}
        spent = sum(by_name.values())
        # What caudal sent, without the commands its scripts ran inside Redis.
        sent = sum(n for name, n in by_name.items() if name not in SCRIPT_COMMANDS)
        decisions = sum(a + r for a, r in results)
        admitted = sum(a for a, _ in results)
        leased = sum(s.metric(from_leases) for s in servers) - leased_before
        print("under the limit: %d decisions, %d admitted, %d from leases; %d commands sent to "
              "Redis (%.4f per decision), %d run counting the scripts' own (%.4f: %s)"
              % (decisions, admitted, leased, sent, sent / decisions, spent, spent / decisions,
                 by_name))
        self.assertGreater(decisions, 1000)
        self.assertGreaterEqual(admitted, 0.95 * decisions, "at least 95% of the ideal")
        self.assertEqual(admitted, decisions, "nothing refused under the limit")
        self.assertLessEqual(sent / decisions, 0.05)
        self.assertGreater(leased, 0.9 * decisions)

    def test_above_the_limit_admitted_never_pass_the_bound_and_stay_near_the_ideal(self):
        capacity, rate, ttl_s = 100, 200, 0.25
        servers, _ = self.start(capacity=capacity, refill="%d/1s" % rate)
        results, elapsed = hammer(servers, "hot", 4.0)
        admitted = sum(a for a, _ in results)
        refused = sum(r for _, r in results)
        bound = capacity + rate * (elapsed + ttl_s)
        ideal = capacity + rate * elapsed  # an exact limiter over the run, without leases
        print("above the limit: %d admitted, %d refused in %.2fs; bound %.0f, ideal %.0f "
              "(%.1f%%)" % (admitted, refused, elapsed, bound, ideal, 100 * admitted / ideal))
        self.assertGreater(refused, admitted, "the load was above the limit")
        self.assertLessEqual(admitted, bound)
        self.assertGreaterEqual(admitted, 0.95 * ideal)
        self.assertGreater(sum(s.metric("caudal_lease_grants_total") +
                               s.metric("caudal_lease_renewals_total") for s in servers), 0)
        # Far above its limit the hot key is decided from shares of its refill.
        self.assertGreater(sum(s.metric("caudal_lease_shares_total") for s in servers), 0)

    def test_stop_gives_the_leases_back(self):
        # A bucket that does not refill during the test, and that a second of load cannot empty
        # (three clients answered from leases pass 10,000 a second): whatever the store still
        # counts is exactly what was admitted once every lease is given back.
        capacity = 1_000_000
        servers, config = self.start(capacity=capacity, refill="1/30m", ttl="10s")
        results, _ = hammer(servers, "hot", 1.0)
        admitted = sum(a for a, _ in results)
        # Read once, right after the load, the gauge may lag: it is refreshed every 50 ms, and a
        # lease spent down at the load's end may have its renewal still in flight.
        wait_until(lambda: sum(s.metric("caudal_lease_units") for s in servers) > 0,
                   "units held in leases", timeout_s=5)
        for s in servers:
            s.close()
        self.servers = []
        probe = Serve(config.replace("lease: {ttl: 10s, max_share: 0.3}", "lease: off"),
                      test_hooks=False)
        self.servers.append(probe)
        status, _, body = probe.check({"api_key": "hot"})
        self.assertEqual(status, 200)
        self.assertEqual(body["policies"][0]["remaining"], capacity - admitted - 1,
                         "every unit leased and unspent was given back")

    def test_a_reload_that_changes_the_limit_ends_the_leases_and_applies_at_once(self):
        servers, config = self.start(capacity=10_000, refill="1/1h", ttl="10s", n=1)
        s = servers[0]
        hammer(servers, "hot", 0.5)
        wait_until(lambda: s.metric("caudal_lease_units") > 0, "units held in leases")
        given_back = s.metric("caudal_lease_units_given_back_total")
        s.write_config(config.replace("capacity: 10000", "capacity: 3"))
        s.signal(signal.SIGHUP)
        wait_until(lambda: s.metric('caudal_config_reloads_total{result="success"}') > 0,
                   "the reload")
        wait_until(lambda: s.metric("caudal_lease_units") == 0, "the old leases ended")
        self.assertGreater(s.metric("caudal_lease_units_given_back_total"), given_back)
        answers = [s.request("GET", "/v1/auth", headers={"X-API-Key": "hot"})[0]
                   for _ in range(5)]
        self.assertEqual(answers, [200, 200, 200, 429, 429], "the new limit, at once")


if __name__ == "__main__":
    unittest.main()
