"""An AI gateway's contract in every dimension, across three `caudal serve` processes on one
redis-server, and again on a three-primary Redis Cluster: per API key 60 requests a minute,
100,000 input and 50,000 output tokens a minute, $20 a day and 10 million tokens a calendar
month. Concurrent clients reserve estimates and settle the usage a model reports, each call on
any instance; at the end every dimension counts exactly what the clients were told, within its
bound. A request refused by one dimension charges nothing in any; an overrun's debt delays the
next request until it is paid, exactly; bad costs are a 400 that charges nothing."""
import json
import random
import threading
import time
import unittest

import harness

CONFIG = """
store: {url: '%s', timeout: 500ms}
policies:
  - name: gateway
    identity: [api_key]
    limits:
      - {algorithm: token_bucket, capacity: 60, refill: 60/1m}
      - {algorithm: token_bucket, capacity: 100000, refill: 100000/1m, dimension: input_tokens}
      - {algorithm: token_bucket, capacity: 50000, refill: 50000/1m, dimension: output_tokens}
      - {algorithm: fixed_window, limit: 20000000, window: 1 day, dimension: usd_micros}
      - {algorithm: fixed_window, limit: 10000000, window: 1 month,
         calendar: {time_zone: Europe/Madrid}, dimension: [input_tokens, output_tokens]}
    reservations: {max_open: 100}
"""
REQUESTS, INPUT, OUTPUT, USD, MONTH = range(5)  # the limits, in order
JSON = {"Content-Type": "application/json"}


def post(s, path, payload):
    status, headers, body = s.request("POST", path, json.dumps(payload), JSON)
    return status, headers, json.loads(body) if body else None


def price(input_tokens, output_tokens):
    """Micro-dollars: $1 per million input tokens, $4 per million output tokens."""
    return input_tokens + output_tokens * 4


class Gateway(harness.ThreeInstances):
    CONFIG = CONFIG

    def state(self, key, server=0):
        """Each limit's remaining, by a check that costs nothing in any dimension."""
        status, _, body = post(self.servers[server], "/v1/check",
                               {"descriptors": {"api_key": key}, "costs": {"requests": 0}})
        limits = body["policies"][0]["limits"]
        self.assertEqual([l["dimension"] for l in limits],
                         ["requests", "input_tokens", "output_tokens", "usd_micros",
                          "input_tokens+output_tokens"])
        return status, [l["remaining"] for l in limits]

    def units_admitted(self):
        """Per dimension, the units the three instances' status pages say were admitted."""
        total = {}
        for s in self.servers:
            status, _, body = s.request("GET", "/v1/status")
            self.assertEqual(status, 200)
            policy = [p for p in json.loads(body)["policies"] if p["name"] == "gateway"][0]
            for u in policy["units"]:
                total[u["dimension"]] = total.get(u["dimension"], 0) + u["admitted"]
        return total

    def test_concurrent_reserves_and_settles_count_every_dimension_exactly(self):
        key = "k-%d" % random.getrandbits(40)
        units_before = self.units_admitted()
        lock = threading.Lock()
        admitted = []   # (estimate, actual) costs per dimension of each reservation admitted
        refused = [0]
        started = time.monotonic()

        def client(seed):
            rng = random.Random(seed)
            for _ in range(12):
                counted = rng.randrange(100, 3000)
                max_tokens = rng.randrange(200, 2000)
                estimate = {"requests": 1, "input_tokens": counted, "output_tokens": max_tokens,
                            "usd_micros": price(counted, max_tokens)}
                s = self.servers[rng.randrange(3)]
                status, _, body = post(s, "/v1/reserve", {"descriptors": {"api_key": key},
                                                          "costs": estimate, "ttl": "60s"})
                self.assertIn(status, (200, 429), body)
                if status == 429:
                    with lock:
                        refused[0] += 1
                    continue
                # The model's usage: usually under max_tokens, now and then over it.
                used = rng.randrange(0, max_tokens + max_tokens // 4)
                actual = {"requests": 1, "input_tokens": counted, "output_tokens": used,
                          "usd_micros": price(counted, used)}
                other = self.servers[rng.randrange(3)]
                status, _, settled = post(other, "/v1/settle",
                                          {"reservation": body["reservation"], "costs": actual})
                self.assertEqual(status, 200, settled)
                self.assertEqual(settled["outcome"], "settled")
                with lock:
                    admitted.append((estimate, actual))

        threads = [threading.Thread(target=client, args=(i,)) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        elapsed = time.monotonic() - started
        self.assertGreater(len(admitted), 20)
        if 72 > 60 + elapsed + 1:  # more asked than 60 a minute could admit: some were refused
            self.assertGreater(refused[0], 0)

        def total(dim):
            return sum(a[dim] for _, a in admitted)

        # The status pages count each reserve's estimate in every dimension the policy counts.
        units_after = self.units_admitted()
        self.assertEqual(sorted(units_after), ["input_tokens", "output_tokens", "requests",
                                               "usd_micros"])
        for dim in units_after:
            self.assertEqual(units_after[dim] - units_before.get(dim, 0),
                             sum(e[dim] for e, _ in admitted), dim)
        status, remaining = self.state(key)
        # The windows count exactly what the clients were told: each settle gave back or
        # overdrew its own dimension, in the window the reserve counted it in.
        self.assertEqual(remaining[USD], 20_000_000 - total("usd_micros"))
        self.assertEqual(remaining[MONTH],
                         10_000_000 - total("input_tokens") - total("output_tokens"))
        # Buckets: never above B + r·t (plus the overruns settled, each into debt).
        overruns = sum(max(0, a["output_tokens"] - e["output_tokens"]) for e, a in admitted)
        self.assertLessEqual(len(admitted), 60 + elapsed * 1.0 + 1)
        self.assertLessEqual(total("input_tokens"), 100_000 + elapsed * 100_000 / 60 + 1)
        self.assertLessEqual(total("output_tokens"),
                             50_000 + elapsed * 50_000 / 60 + overruns + 1)
        # And what the requests bucket holds is what it admitted, less what refilled since.
        self.assertGreaterEqual(remaining[REQUESTS], 60 - len(admitted))
        self.assertLessEqual(remaining[REQUESTS], 60 - len(admitted) + elapsed * 1.0 + 1)

    def test_a_refusal_in_one_dimension_charges_nothing_in_any(self):
        key = "r-%d" % random.getrandbits(40)
        s = self.servers[0]
        status, _, _ = post(s, "/v1/check", {"descriptors": {"api_key": key},
                                             "costs": {"requests": 1, "output_tokens": 49_000,
                                                       "usd_micros": 5000}})
        self.assertEqual(status, 200)
        _, before = self.state(key, server=1)
        # 1,000 output tokens left (less what refilled); 2,500 asked: refused by that one limit.
        status, headers, body = post(self.servers[2], "/v1/check",
                                     {"descriptors": {"api_key": key},
                                      "costs": {"requests": 1, "input_tokens": 700,
                                                "output_tokens": 2500, "usd_micros": 10_700}})
        self.assertEqual(status, 429, body)
        refused = [l for l in body["policies"][0]["limits"] if not l["allowed"]]
        self.assertEqual([l["dimension"] for l in refused], ["output_tokens"])
        self.assertIn('"gateway/output-tokens";q=50000;qu="output-tokens";w=60',
                      headers["ratelimit-policy"])
        _, after = self.state(key, server=1)
        # The windows are unchanged exactly; the buckets only refilled.
        self.assertEqual(after[USD], before[USD])
        self.assertEqual(after[MONTH], before[MONTH])
        for i in (REQUESTS, INPUT, OUTPUT):
            self.assertGreaterEqual(after[i], before[i])
        self.assertLess(after[OUTPUT], before[OUTPUT] + 100)

    def test_an_overrun_delays_the_next_request_until_its_debt_is_paid_exactly(self):
        key = "d-%d" % random.getrandbits(40)
        status, _, body = post(self.servers[0], "/v1/reserve",
                               {"descriptors": {"api_key": key},
                                "costs": {"requests": 1, "output_tokens": 50_000}})
        self.assertEqual(status, 200, body)
        # 5,000 tokens over the estimate: 5,000 of debt, paid back at 50,000 a minute.
        status, _, settled = post(self.servers[1], "/v1/settle",
                                  {"reservation": body["reservation"],
                                   "costs": {"requests": 1, "output_tokens": 55_000}})
        self.assertEqual(status, 200, settled)
        charged = [p for p in settled["policies"] if p["dimension"] == "output_tokens"]
        self.assertEqual(charged[0]["overrun"], 5000)
        began = time.monotonic()
        status, headers, refused = post(self.servers[2], "/v1/check",
                                        {"descriptors": {"api_key": key},
                                         "costs": {"requests": 1, "output_tokens": 100}})
        waited_ms = (time.monotonic() - began) * 1000
        self.assertEqual(status, 429, refused)
        # 5,100 tokens at 50,000 a minute (1.2 ms each): 6,120 ms from the settle, less the
        # moments between the settle and this check. The other dimensions had room.
        expected = 6120
        self.assertLessEqual(refused["retry_after_ms"], expected)
        self.assertGreaterEqual(refused["retry_after_ms"], expected - 250 - waited_ms)
        self.assertEqual(headers["retry-after"], str(-(-refused["retry_after_ms"] // 1000)))
        # A request that does not touch output tokens passes: the debt is that dimension's.
        status, _, _ = post(self.servers[0], "/v1/check",
                            {"descriptors": {"api_key": key},
                             "costs": {"requests": 1, "input_tokens": 10}})
        self.assertEqual(status, 200)

    def test_bad_costs_are_a_400_naming_the_field_and_charge_nothing(self):
        key = "b-%d" % random.getrandbits(40)
        s = self.servers[1]
        post(s, "/v1/check", {"descriptors": {"api_key": key}, "costs": {"usd_micros": 1}})
        _, before = self.state(key)
        cases = [
            ({"costs": {"input_tokens": -1}}, "costs.input_tokens"),
            ({"costs": {"input_tokens": 2.5}}, "costs.input_tokens"),
            ({"costs": {"input_tokens": 2 ** 41}}, "costs.input_tokens"),
            ({"costs": {"input_tokens": 2 ** 64}}, "costs.input_tokens"),
            ({"costs": {"images": 1}}, "costs.images"),
            ({"costs": {}}, "costs"),
            ({"costs": []}, "costs"),
            ({"cost": 1, "costs": {"requests": 1}}, "cost and costs"),
            ({"costs": {"output_tokens": 50_001}}, "could never pass"),
        ]
        for extra, says in cases:
            for path in ("/v1/check", "/v1/reserve"):
                payload = dict({"descriptors": {"api_key": key}}, **extra)
                status, _, body = post(s, path, payload)
                self.assertEqual(status, 400, (path, extra, body))
                self.assertEqual(body["error"]["code"], "invalid_cost", body)
                self.assertIn(says, body["error"]["message"])
        status, _, body = post(s, "/v1/settle", {"reservation": "x", "cost": 1,
                                                 "costs": {"requests": 1}})
        self.assertEqual((status, body["error"]["code"]), (400, "invalid_cost"))
        _, after = self.state(key)
        self.assertEqual(after[USD], before[USD])
        self.assertEqual(after[MONTH], before[MONTH])
        self.assertEqual(after[REQUESTS], before[REQUESTS])


class GatewayOnACluster(harness.OnACluster, Gateway):
    """The same, the three instances on a three-primary Redis Cluster."""


if __name__ == "__main__":
    unittest.main()
