"""A policy with `share` across three `caudal serve` processes on one redis-server, and on a Redis
Cluster: one capacity divided among its tenants. A tenant flooding every instance takes only what
the others leave; a tenant under its fair share is never refused; everything admitted stays within
B + r·(t + window); the check's JSON, the RateLimit-Policy header and the admin state show the
tenant's share."""
import http.client
import json
import threading
import time
import unittest

from harness import Redis, RedisCluster, Serve

TOKEN = "admin-token-for-shares"
CONFIG = """
store: {url: "%(url)s", timeout: 1s, instances: 3}
policies:
  - name: provider-tokens
    identity: [tenant]
    share: {fairness: max_min, window: 1s}
    limits:
      - {algorithm: token_bucket, capacity: %(capacity)d, refill: %(rate)d/1s}
"""
CAPACITY, RATE, WINDOW_S = 300, 300, 1.0


def drive(servers, seconds, calm_per_server):
    """Per server, one client flooding tenant "flood" and one sending "calm" `calm_per_server` a
    second, evenly spaced, for `seconds`: {tenant: [admitted, refused]}, and the interval."""
    tally = {"flood": [0, 0], "calm": [0, 0]}
    lock = threading.Lock()
    start = time.monotonic()

    def run(port, tenant, per_second):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        body = json.dumps({"descriptors": {"tenant": tenant}})
        sent = 0
        while time.monotonic() - start < seconds:
            if per_second:
                time.sleep(max(0.0, start + sent / per_second - time.monotonic()))
            c.request("POST", "/v1/check", body, {"Content-Type": "application/json"})
            r = c.getresponse()
            r.read()
            sent += 1
            if r.status not in (200, 429):
                raise AssertionError("unexpected status %d for %s" % (r.status, tenant))
            with lock:
                tally[tenant][0 if r.status == 200 else 1] += 1
        c.close()

    threads = []
    for s in servers:
        threads.append(threading.Thread(target=run, args=(s.port, "flood", 0)))
        threads.append(threading.Thread(target=run, args=(s.port, "calm", calm_per_server)))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return tally, time.monotonic() - start


class IdentityShares(unittest.TestCase):
    def run_on(self, url):
        config = CONFIG % {"url": url, "capacity": CAPACITY, "rate": RATE}
        servers = [Serve(config, test_hooks=False, env={"CAUDAL_ADMIN_TOKEN": TOKEN})
                   for _ in range(3)]
        try:
            # calm: 10 a second per server, 30 in all, a tenth of the refill.
            tally, elapsed = drive(servers, 6.0, 10)
            admitted = tally["flood"][0] + tally["calm"][0]
            bound = CAPACITY + RATE * (elapsed + WINDOW_S)
            print("%s: flood admitted %d, refused %d; calm admitted %d, refused %d; in %.2f s "
                  "(bound %.0f)" % (url, tally["flood"][0], tally["flood"][1], tally["calm"][0],
                                    tally["calm"][1], elapsed, bound))
            self.assertGreater(tally["flood"][1], tally["flood"][0], "the flood was refused")
            self.assertEqual(tally["calm"][1], 0, "a tenant under its fair share")
            self.assertLessEqual(admitted, bound)
            # calm asks about 36 a second (a tenth more, and a unit per instance): the flood has
            # the rest, at 85% or more over the run but its first window.
            self.assertGreaterEqual(tally["flood"][0], 0.85 * (RATE - 36) * (elapsed - WINDOW_S))

            # The share shown: in the check's JSON, the RateLimit-Policy header and the state.
            s = servers[0]
            status, headers, body = s.check({"tenant": "flood"})
            self.assertIn(status, (200, 429))
            share = body["policies"][0]["share"]
            self.assertGreater(share, 0)
            self.assertEqual(body["policies"][0]["limits"][0]["share"], share)
            self.assertEqual(headers["ratelimit-policy"], '"provider-tokens";q=%d;w=1' % share)
            status, _, state = s.request(
                "GET", "/v1/admin/policies/provider-tokens/state?tenant=flood", None,
                {"Authorization": "Bearer " + TOKEN})
            self.assertEqual(status, 200, state)
            limit = json.loads(state)["limits"][0]
            self.assertIsNotNone(limit["share"])
            self.assertGreaterEqual(limit["share_held"], 0)
            # A tenant this instance never saw holds no share here.
            status, _, state = s.request(
                "GET", "/v1/admin/policies/provider-tokens/state?tenant=nobody", None,
                {"Authorization": "Bearer " + TOKEN})
            self.assertEqual(status, 200, state)
            self.assertIsNone(json.loads(state)["limits"][0]["share"])
            self.assertGreater(sum(x.metric("caudal_lease_shares_total") for x in servers), 0)
        finally:
            for s in servers:
                s.close()

    def test_on_one_redis_server(self):
        redis = Redis()
        try:
            self.run_on(redis.url)
        finally:
            redis.close()

    def test_on_a_redis_cluster(self):
        cluster = RedisCluster()
        try:
            self.run_on(cluster.url)
        finally:
            cluster.close()


if __name__ == "__main__":
    unittest.main()
