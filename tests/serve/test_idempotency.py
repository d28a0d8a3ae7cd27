"""Idempotency-Key across instances: two `caudal serve` processes on one Redis (and on a Redis
Cluster) charge a request retried with the same key once, whichever instance each retry reaches,
and answer every retry the first answer; the same key with another body is a 422 that charges
nothing; the same key sent to both at once is decided once."""
import concurrent.futures
import http.client
import json
import unittest

from harness import Redis, RedisCluster, Serve

CONFIG = """
store: {url: "%s", timeout: 500ms}
policies:
  - name: shared
    identity: [api_key]
    limits: [{algorithm: token_bucket, capacity: 100, refill: 100/1h}]
"""


def keyed(serve, key, descriptors, cost):
    body = json.dumps({"descriptors": descriptors, "cost": cost})
    status, headers, raw = serve.request("POST", "/v1/check", body,
                                         {"Idempotency-Key": key,
                                          "Content-Type": "application/json"})
    return status, headers, json.loads(raw)


def remaining(serve, descriptors):
    """What is left, as a check of cost 1 without a key says (it spends that 1)."""
    status, _, body = serve.check(descriptors)
    assert status == 200, body
    return body["policies"][0]["remaining"]


class IdempotencyAcrossInstances(unittest.TestCase):
    def instances(self, url):
        a = Serve(CONFIG % url, test_hooks=False)
        self.addCleanup(a.close)
        b = Serve(CONFIG % url, test_hooks=False)
        self.addCleanup(b.close)
        return a, b

    def retried_requests_are_charged_once(self, a, b):
        for n in range(8):  # several keys, so that a Cluster's records land on several nodes
            who = {"api_key": "user-%d" % n}
            key = '"order-%d"' % n
            status, headers, first = keyed(a, key, who, 5)
            self.assertEqual((status, first["policies"][0]["remaining"]), (200, 95))
            self.assertNotIn("idempotent-replayed", headers)
            for s in (b, a, b):
                status, headers, again = keyed(s, key, who, 5)
                self.assertEqual((status, headers.get("idempotent-replayed")), (200, "true"))
                self.assertEqual(again, first)
            # Another body under the key: refused, nothing charged, through either instance.
            for s in (a, b):
                status, _, refused = keyed(s, key, who, 6)
                self.assertEqual((status, refused["error"]["code"]),
                                 (422, "idempotency_key_reused"))
            self.assertEqual(remaining(b, who), 94, "5 charged once, then this 1")

    def same_key_at_once_is_decided_once(self, a, b):
        who = {"api_key": "racer"}
        with concurrent.futures.ThreadPoolExecutor(max_workers=16) as pool:
            futures = [pool.submit(keyed, (a, b)[i % 2], "race-1", who, 10) for i in range(32)]
            answers = [f.result(timeout=30) for f in futures]
        statuses = sorted(status for status, _, _ in answers)
        self.assertTrue(set(statuses) <= {200, 409}, statuses)
        firsts = [body for status, headers, body in answers
                  if status == 200 and "idempotent-replayed" not in headers]
        self.assertEqual(len(firsts), 1, statuses)
        for status, headers, body in answers:
            if status == 200:
                self.assertEqual(body, firsts[0])
            else:
                self.assertEqual(body["error"]["code"], "idempotency_key_in_use")
        self.assertEqual(remaining(a, who), 89, "10 charged once, then this 1")
        decided = sum(s.metric('caudal_idempotency_keys_total{outcome="first"}') for s in (a, b))
        self.assertGreaterEqual(decided, 1)

    def test_one_redis(self):
        redis = Redis()
        self.addCleanup(redis.close)
        a, b = self.instances(redis.url)
        self.retried_requests_are_charged_once(a, b)
        self.same_key_at_once_is_decided_once(a, b)
        # Every record is a key of Redis's with a TTL: bounded by the window.
        keys = redis.command("KEYS", "caudal:idempotency:*")
        self.assertEqual(keys, b"*9", "8 orders and the race: one record each")

    def test_redis_cluster(self):
        cluster = RedisCluster()
        self.addCleanup(cluster.close)
        a, b = self.instances(cluster.url)
        self.retried_requests_are_charged_once(a, b)
        self.same_key_at_once_is_decided_once(a, b)
        holders = [n for n in cluster.nodes
                   if n.command("KEYS", "caudal:idempotency:*") != b"*0"]
        self.assertGreater(len(holders), 1, "records on several primaries")


class MemoryRecordsBoundedInBytes(unittest.TestCase):
    def test_the_oldest_answers_are_forgotten_past_max_bytes(self):
        """server.idempotency.max_bytes reaches the memory store: 1 MiB holds about 1,300 records
        of a check's answer, far below max_keys; past it the oldest are forgotten (a retry of one
        is decided again), the latest replayed."""
        s = Serve("server: {idempotency: {max_keys: 100000, max_bytes: 1048576}}\n"
                  + CONFIG % "memory://", test_hooks=False)
        self.addCleanup(s.close)
        # No policy applies to this identity: every answer is a 200, kept.
        who = {"other": "bytes"}
        body = json.dumps({"descriptors": who, "cost": 1})
        conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=10)
        self.addCleanup(conn.close)
        for n in range(3000):
            conn.request("POST", "/v1/check", body, {"Idempotency-Key": "k-%d" % n})
            r = conn.getresponse()
            r.read()
            self.assertEqual(r.status, 200)
        _, latest, _ = keyed(s, "k-2999", who, 1)
        self.assertEqual(latest.get("idempotent-replayed"), "true")
        _, oldest, _ = keyed(s, "k-0", who, 1)
        self.assertNotIn("idempotent-replayed", oldest)


if __name__ == "__main__":
    unittest.main()
