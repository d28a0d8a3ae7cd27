"""Reserve, then settle, across three `caudal serve` processes on one redis-server, and again on
a three-primary Redis Cluster: exact under the estimate, over it (debt), at expiry, settled from
another instance, one reservation across two policies (on the Cluster, keys on two primaries),
the bound on admitted cost, an admin reset that forgets them, and bad input answered with a 4xx
that charges nothing."""
import json
import random
import threading
import unittest

import harness
from harness import wait_until

# A bucket that refills one unit a day: within a test's seconds it refills nothing, so the
# expected state is exact arithmetic.
CONFIG = """
store: {url: '%s', timeout: 500ms}
policies:
  - name: tokens
    identity: [user]
    limits:
      - {algorithm: token_bucket, capacity: 10000, refill: 1/1d}
    reservations: {max_open: 5}
  - name: windowed
    identity: [team]
    limits:
      - {algorithm: gcra, capacity: 1000, refill: 1/1d}
    reservations: {on_expiry: give_back, max_open: 100}
  - name: logged
    identity: [org]
    limits:
      - {algorithm: sliding_window_log, limit: 10, window: 1m}
"""

JSON = {"Content-Type": "application/json"}
TOKEN = "admin-token-for-tests"


def post(s, path, payload):
    status, headers, body = s.request("POST", path, json.dumps(payload), JSON)
    return status, headers, json.loads(body) if body else None


def reserve(s, descriptors, cost, ttl="60s"):
    return post(s, "/v1/reserve", {"descriptors": descriptors, "cost": cost, "ttl": ttl})


def settle(s, reservation, cost):
    return post(s, "/v1/settle", {"reservation": reservation, "cost": cost})


def remaining_of(body):
    return body["policies"][0]["remaining"]


def post_keyed(s, path, payload, key):
    headers = dict(JSON, **{"Idempotency-Key": key})
    status, headers, body = s.request("POST", path, json.dumps(payload), headers)
    return status, headers, json.loads(body) if body else None


class Reservations(harness.ThreeInstances):
    CONFIG = CONFIG
    ENV = {"CAUDAL_ADMIN_TOKEN": TOKEN}

    def key_counts(self):
        return [int(n.command("DBSIZE")[1:]) for n in self.nodes]

    def test_one_reservation_across_two_policies_settles_both_from_another_instance(self):
        a, b, c = self.servers
        # On a Cluster, the identities of a pair whose two policies' keys land on two primaries
        # (each reserve writes its state and records on its key's node).
        spread = None
        for n in range(12):
            pair = {"user": "pair-user-%d" % n, "team": "pair-team-%d" % n}
            before = self.key_counts()
            status, _, body = reserve(a, pair, 300)
            self.assertEqual(status, 200, body)
            grew = [x - y for x, y in zip(self.key_counts(), before)]
            if len(grew) == 1 or sum(1 for g in grew if g > 0) == 2:
                spread = (pair, body)
                break
            self.assertEqual(settle(b, body["reservation"], 300)[0], 200)
        self.assertIsNotNone(spread, "no pair of keys on two primaries in 12 tries")
        pair, body = spread
        self.assertEqual([p["remaining"] for p in body["policies"]], [9700, 700])
        status, _, body = settle(b, body["reservation"], 100)
        self.assertEqual((status, body["outcome"]), (200, "settled"), body)
        self.assertEqual([p["remaining"] for p in body["policies"]], [9900, 900],
                         "each policy gave back 200")
        # Refused by one policy (gcra has 900): the other is charged nothing, nor recorded.
        status, _, body = reserve(c, pair, 901)
        self.assertEqual(status, 429, body)
        status, _, body = reserve(a, pair, 0)
        self.assertEqual([p["remaining"] for p in body["policies"]], [9900, 900])
        self.assertEqual(settle(c, body["reservation"], 0)[0], 200)

    def test_a_retried_reserve_and_settle_with_a_key_count_once_from_any_instance(self):
        a, b, c = self.servers
        user = {"user": "retried"}
        payload = {"descriptors": user, "cost": 500, "ttl": "60s"}
        status, _, first = post_keyed(a, "/v1/reserve", payload, "job-1")
        self.assertEqual(status, 200, first)
        self.assertEqual(remaining_of(first), 9500)
        status, headers, again = post_keyed(b, "/v1/reserve", payload, "job-1")
        self.assertEqual(status, 200, again)
        self.assertEqual(headers.get("idempotent-replayed"), "true")
        self.assertEqual(again["reservation"], first["reservation"], "one reservation, not two")
        status, _, body = reserve(c, user, 0)
        self.assertEqual(remaining_of(body), 9500, "the estimate charged once")
        status, _, body = post_keyed(c, "/v1/reserve", dict(payload, cost=400), "job-1")
        self.assertEqual((status, body["error"]["code"]), (422, "idempotency_key_reused"))
        done = {"reservation": first["reservation"], "cost": 650}
        status, _, settled = post_keyed(b, "/v1/settle", done, "job-1-done")
        self.assertEqual((status, settled["outcome"]), (200, "settled"), settled)
        self.assertEqual(settled["policies"][0]["remaining"], 9350)
        status, headers, replay = post_keyed(a, "/v1/settle", done, "job-1-done")
        self.assertEqual(headers.get("idempotent-replayed"), "true")
        self.assertEqual(replay, settled, "the first answer, replayed")

    def test_under_and_over_the_estimate_settled_from_other_instances(self):
        a, b, c = self.servers
        user = {"user": "exact"}
        status, _, body = reserve(a, user, 800)
        self.assertEqual(status, 200, body)
        self.assertEqual(body["expires_in_ms"], 60000)
        self.assertEqual(remaining_of(body), 9200)
        rid = body["reservation"]
        status, _, body = settle(b, rid, 731)
        self.assertEqual(status, 200, body)
        self.assertEqual(body["outcome"], "settled")
        self.assertEqual(body["policies"][0]["remaining"], 9269, "731 counted, exactly")
        status, _, again = settle(c, rid, 731)
        self.assertEqual((status, again["outcome"]), (200, "repeated"))
        self.assertEqual(again["policies"][0]["remaining"], 9269, "the first result")
        status, _, body = settle(a, rid, 700)
        self.assertEqual((status, body["error"]["code"]), (409, "settled_with_another_cost"))
        # Over the estimate: 9269 - 9000 reserved, settled at 9500: 231 of debt.
        overrun_before = a.metric("caudal_reservation_overrun_units_total")
        status, _, body = reserve(c, user, 9000)
        self.assertEqual(status, 200, body)
        status, _, body = settle(a, body["reservation"], 9500)
        self.assertEqual(status, 200, body)
        self.assertEqual(body["policies"][0]["overrun"], 500)
        self.assertEqual(body["policies"][0]["remaining"], 0)
        status, headers, body = b.check(user, 1)
        self.assertEqual(status, 429, body)
        # 232 units at one a day: the identity waits until the long-run rate is met.
        self.assertGreaterEqual(int(headers["retry-after"]), 231 * 86400)
        self.assertEqual(a.metric("caudal_reservation_overrun_units_total") - overrun_before, 500)

    def test_one_settle_charges_at_most_the_capacity_above_its_estimate(self):
        # An overrun of 2^40 - 1 charges 10000, the capacity: a day of debt, then one to refill
        # the unit asked for, where it would have been 25 years.
        a, b, c = self.servers
        user = {"user": "capped"}
        overrun_before = b.metric("caudal_reservation_overrun_units_total")
        status, _, body = reserve(a, user, 1)
        self.assertEqual(status, 200, body)
        status, _, body = settle(b, body["reservation"], 2 ** 40)
        self.assertEqual(status, 200, body)
        self.assertEqual((body["policies"][0]["overrun"], body["policies"][0]["uncharged"]),
                         (10000, 2 ** 40 - 1 - 10000))
        self.assertEqual(b.metric("caudal_reservation_overrun_units_total") - overrun_before,
                         10000)
        status, headers, body = c.check(user, 1)
        self.assertEqual(status, 429, body)
        self.assertGreater(int(headers["retry-after"]), 2 * 86400 - 60)
        self.assertLessEqual(int(headers["retry-after"]), 2 * 86400)
        status, _, body = reserve(a, user, 0)
        self.assertEqual(status, 429, "in debt, not even a reserve of 0")
        self.assertNotEqual(body.get("reason"), "too_many_open_reservations")

    def test_an_unsettled_reservation_expires_and_gives_back_where_configured(self):
        a, b, _ = self.servers
        team = {"team": "expiry"}
        status, _, body = reserve(a, team, 600, ttl="300ms")
        self.assertEqual((status, remaining_of(body)), (200, 400))
        # A probe reserved after it expires after it: once the probe's settle is 404 (its settled
        # record gone), the first has expired too, untouched.
        status, _, probe = reserve(b, {"team": "probe"}, 1, ttl="300ms")
        self.assertEqual(status, 200, probe)
        wait_until(lambda: settle(b, probe["reservation"], 1)[0] == 404, "the probe to expire", 10)
        # The next check on the key gives the estimate back first: 1000, then this check's 1.
        status, _, body = a.check(team, 1)
        self.assertEqual((status, remaining_of(body)), (200, 999))

    def test_at_most_max_open_per_identity(self):
        a, b, c = self.servers
        user = {"user": "bounded"}
        ids = []
        for i in range(5):
            status, _, body = reserve(self.servers[i % 3], user, 1)
            self.assertEqual(status, 200, body)
            ids.append(body["reservation"])
        status, headers, body = reserve(a, user, 1)
        self.assertEqual(status, 429, body)
        self.assertEqual(body["reason"], "too_many_open_reservations")
        self.assertEqual(settle(b, ids[0], 1)[0], 200)
        self.assertEqual(reserve(c, user, 1)[0], 200, "a settled reservation is not open")

    def test_reserves_of_zero_take_no_open_slot(self):
        # max_open reserves of 0 for a day each do not lock the identity's reserves out; past
        # max_open of them the one that expires first is forgotten.
        a, b, c = self.servers
        user = {"user": "free"}
        zeros = []
        for i in range(6):
            status, _, body = reserve(self.servers[i % 3], user, 0, ttl="%ds" % (86000 + i))
            self.assertEqual(status, 200, body)
            zeros.append(body["reservation"])
        for i in range(5):
            status, _, body = reserve(self.servers[i % 3], user, 1)
            self.assertEqual(status, 200, body)
        status, _, body = reserve(a, user, 1)
        self.assertEqual((status, body["reason"]), (429, "too_many_open_reservations"))
        status, _, body = settle(b, zeros[0], 7)
        self.assertEqual((status, body["error"]["code"]), (404, "unknown_reservation"))
        status, _, body = settle(c, zeros[5], 7)
        self.assertEqual((status, body["policies"][0]["overrun"]), (200, 7), body)
        self.assertEqual(remaining_of(body), 10000 - 5 - 7, "the forgotten one charged nothing")

    def test_a_reset_forgets_the_identitys_reservations(self):
        a, b, c = self.servers
        user = {"user": "reset"}
        ids = []
        for i in range(5):
            status, _, body = reserve(self.servers[i % 3], user, 100, ttl="24h")
            self.assertEqual(status, 200, body)
            ids.append(body["reservation"])
        self.assertEqual(settle(a, ids[4], 100)[0], 200)
        self.assertEqual(reserve(b, user, 1)[0], 200)
        self.assertEqual(reserve(c, user, 1)[0], 429, "its 5 slots held")
        status, _, body = b.request("DELETE", "/v1/admin/policies/tokens/state?user=reset", None,
                                    {"Authorization": "Bearer " + TOKEN})
        self.assertEqual(status, 200, body)
        for rid in ids:
            status, _, body = settle(c, rid, 100)
            self.assertEqual((status, body["error"]["code"]), (404, "unknown_reservation"), rid)
        status, _, body = reserve(a, user, 1)
        self.assertEqual((status, remaining_of(body)), (200, 9999), "fresh, its slots free")

    def test_bad_input_is_refused_and_charges_nothing(self):
        a, b, c = self.servers
        user = {"user": "bad"}
        for payload, code in [
            ({"descriptors": user, "cost": -5}, "invalid_cost"),
            ({"descriptors": user, "cost": 2 ** 41}, "invalid_cost"),
            ({"descriptors": user, "cost": 10001}, "invalid_cost"),
            ({"descriptors": user, "cost": 5, "ttl": "0s"}, "invalid_ttl"),
            ({"descriptors": user, "cost": 5, "ttl": "2d"}, "invalid_ttl"),
            ({"descriptors": user, "cost": 5, "refund": True}, "unknown_field"),
        ]:
            status, _, body = post(a, "/v1/reserve", payload)
            self.assertEqual((status, body["error"]["code"]), (400, code), payload)
        status, _, body = reserve(a, {"org": "o"}, 1)
        self.assertEqual(status, 400, "a sliding_window_log policy takes no reservations")
        status, _, body = reserve(b, user, 10)
        self.assertEqual(status, 200, body)
        rid = body["reservation"]
        for cost, code in [(-1, "invalid_cost"), (2 ** 41, "invalid_cost"), ("3", "invalid_cost")]:
            status, _, body = settle(c, rid, cost)
            self.assertEqual((status, body["error"]["code"]), (400, code))
        status, _, body = settle(c, "not-a-reservation", 1)
        self.assertEqual((status, body["error"]["code"]), (400, "invalid_reservation"))
        forged = ("b" if rid[0] == "a" else "a") + rid[1:]
        status, _, body = settle(c, forged, 1)
        self.assertEqual((status, body["error"]["code"]), (404, "unknown_reservation"))
        status, _, body = settle(a, rid, 10)
        self.assertEqual((status, remaining_of(body)), (200, 9990), "nothing else was charged")

    def test_the_bound_holds_across_instances(self):
        # Clients on three instances reserve estimates and settle actual costs from random
        # instances, some above the estimate. The bucket refills nothing during the test, so
        # the actual cost admitted may pass B only by the overruns: at most B plus one overrun
        # per reservation; and the state after them all is exactly B minus what was counted.
        user = {"user": "bound"}
        capacity = 10000
        lock = threading.Lock()
        settled = []  # (estimate, actual) of every reservation admitted and settled
        rng = random.Random(25)
        plans = [[(rng.randint(1, 400), rng.randint(0, 600)) for _ in range(25)] for _ in range(6)]

        def client(k):
            for estimate, actual in plans[k]:
                s = self.servers[(k + estimate) % 3]
                status, _, body = reserve(s, user, estimate)
                if status != 200:
                    self.assertEqual(status, 429, body)
                    continue
                other = self.servers[(k + actual + 1) % 3]
                status, _, body = settle(other, body["reservation"], actual)
                self.assertEqual(status, 200, body)
                with lock:
                    settled.append((estimate, actual))

        threads = [threading.Thread(target=client, args=(k,)) for k in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        actual_total = sum(a for _, a in settled)
        overruns = sum(max(0, a - e) for e, a in settled)
        self.assertGreater(len(settled), 10)
        self.assertLessEqual(actual_total, capacity + overruns)
        # Exact: a reserve of 0 reports what the state counts, B - Σ actual (0 in debt, where
        # it is refused).
        status, _, body = reserve(self.servers[0], user, 0)
        self.assertEqual(status, 429 if actual_total > capacity else 200, body)
        self.assertEqual(remaining_of(body), max(0, capacity - actual_total))


class ReservationsOnACluster(harness.OnACluster, Reservations):
    """The same, the three instances on a three-primary Redis Cluster: each key's state and
    reservations on its own node, a request across two nodes split and undone there."""

    def key_counts(self):
        return [int(n.command("DBSIZE")[1:]) for n in self.cluster.nodes]


if __name__ == "__main__":
    unittest.main()
