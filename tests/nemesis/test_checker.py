"""The checker on histories made by hand: an exact limiter's passes whatever the client's
latency, one unit too many fails, a lease's slack is granted only to leased policies, windows are
counted only for what they must hold, and the sweep finds what a brute-force search over every
interval finds."""
import random
import unittest

import checker

NS = checker.NS
MS = 1_000_000


def exact_bucket(capacity, rate_per_s, sends, latency_ns=0, extra_at=None):
    """An exact bucket deciding each send (cost 1) at its send time; admitted ones answered
    latency_ns later. `extra_at`: the index of one refused request admitted all the same."""
    tokens, last, out = float(capacity), None, []
    for i, s in enumerate(sends):
        if last is not None:
            tokens = min(capacity, tokens + (s - last) * rate_per_s / NS)
        last = s
        if tokens >= 1:
            tokens -= 1
            out.append((s, s + latency_ns, 1))
        elif i == extra_at:
            out.append((s, s + latency_ns, 1))
    return out


def brute_force(admissions, capacity, rate_per_ns, ttl_ns):
    lows = sorted({s - ttl_ns for s, _, _ in admissions})
    highs = sorted({a for _, a, _ in admissions})
    worst = -float("inf")
    for x in lows:
        for y in highs:
            if y < x:
                continue
            units = sum(c for s, a, c in admissions if s - ttl_ns >= x and a <= y)
            worst = max(worst, units - capacity - rate_per_ns * (y - x))
    return worst


class Buckets(unittest.TestCase):
    def test_an_exact_bucket_passes_at_any_client_latency(self):
        sends = [i * 2 * MS for i in range(2000)]  # 500/s against 100/s: mostly refused
        for latency in (0, 1 * MS, 300 * MS):
            adm = exact_bucket(20, 100, sends, latency)
            (excess, _, _, _), broken = checker.check_bucket(adm, 20, 100 / NS, 0)
            self.assertLessEqual(excess, 1e-6, latency)
            self.assertEqual(broken, 0)

    def test_one_unit_too_many_fails(self):
        sends = [i * 2 * MS for i in range(2000)]
        adm = exact_bucket(20, 100, sends, 1 * MS, extra_at=1500)
        (excess, x, y, units), broken = checker.check_bucket(adm, 20, 100 / NS, 0)
        self.assertGreater(excess, 0)
        self.assertGreater(broken, 0)
        self.assertGreater(units, 20)
        self.assertLessEqual(x, 1500 * 2 * MS)
        self.assertGreaterEqual(y, 1500 * 2 * MS)

    def test_a_lease_slack_covers_units_spent_up_to_ttl_late(self):
        # Every unit of a full bucket spent at once, then the next ttl of refill spent early
        # (as a lease granted at the start allows): over B + r·t, within B + r·(t + ttl).
        ttl = 250 * MS
        adm = [(0, 1 * MS, 20)] + [(i * MS, i * MS + MS, 1) for i in range(1, 26)]
        (excess, _, _, _), _ = checker.check_bucket(adm, 20, 100 / NS, 0)
        self.assertGreater(excess, 0, "without a lease this is over the bound")
        (excess, _, _, _), _ = checker.check_bucket(adm, 20, 100 / NS, ttl)
        self.assertLessEqual(excess, 1e-6, "with leases of ttl 250 ms it is within it")

    def test_the_sweep_finds_what_every_interval_finds(self):
        rng = random.Random(3)
        for _ in range(40):
            adm = []
            t = 0
            for _ in range(rng.randrange(1, 40)):
                t += rng.randrange(0, 30 * MS)
                adm.append((t, t + rng.randrange(0, 20 * MS), rng.choice([1, 1, 3])))
            cap, rate, ttl = rng.choice([2, 5]), rng.choice([50, 200]) / NS, rng.choice([0, 10 * MS])
            (excess, _, _, _), _ = checker.check_bucket(adm, cap, rate, ttl)
            self.assertAlmostEqual(excess, brute_force(adm, cap, rate, ttl), places=6)


class Windows(unittest.TestCase):
    def test_a_window_over_its_limit_is_found_and_a_straddler_is_in_no_window(self):
        w = 1000 * MS
        adm = [(i * MS, i * MS + MS, 1) for i in range(10)]          # 10 in window 0
        adm.append((w - MS // 2, w + MS // 2, 1))                    # straddles 0 and 1
        over, straddling = checker.check_window(adm, 10, w)
        self.assertEqual(over, [])
        self.assertEqual(straddling, 1)
        adm.append((500 * MS, 501 * MS, 1))                          # an 11th in window 0
        over, _ = checker.check_window(adm, 10, w)
        self.assertEqual(over, [(0, 11)])


class Run(unittest.TestCase):
    def run_of(self, rows, faults=()):
        run = {"seed": 7, "duration_s": 1, "store": "test", "started_ns": 0,
               "policies": {"b": {"name": "b", "algorithm": "token_bucket", "capacity": 2,
                                  "rate_per_s": 1, "leased": False, "lease_ttl_ms": 0}},
               "faults": list(faults)}
        return checker.check(run, rows)

    def row(self, t_ms, status, cost=1, key="b/k"):
        return {"sent": t_ms * MS, "answered": t_ms * MS + MS, "instance": 0, "status": status,
                "cost": cost, "keys": [key], "decided": ["store"]}

    def test_a_violation_names_the_faults_around_it_and_what_explains_it(self):
        rows = [self.row(t, "200") for t in (0, 10, 20)]
        plain = self.run_of(rows)
        self.assertEqual((plain["violations"], plain["unexplained"]), (1, 1))
        clock = {"kind": "clock", "target": "redis-1", "start_ns": 5 * MS, "end_ns": 8 * MS,
                 "detail": "+1000 ms"}
        explained = self.run_of(rows, [clock])
        self.assertEqual((explained["violations"], explained["unexplained"]), (1, 0))
        self.assertEqual(explained["violation_list"][0]["explained_by"], ["clock"])

    def test_a_violation_away_from_the_explaining_faults_stays_unexplained(self):
        rows = [self.row(t, "200") for t in (0, 10, 20)]
        late = {"kind": "clock", "target": "redis-1", "start_ns": 60 * NS, "end_ns": 61 * NS,
                "detail": "+1000 ms"}
        r = self.run_of(rows + [self.row(60_000, "200")], [late])
        self.assertEqual((r["violations"], r["unexplained"]), (1, 1))
        self.assertEqual(r["violation_list"][0]["unexplained"]["units"], 3)
        kill = {"kind": "caudal-kill", "target": "caudal-0", "start_ns": 5 * MS,
                "end_ns": 8 * MS}
        r = self.run_of(rows, [kill])
        self.assertEqual(r["unexplained"], 1, "a killed instance explains no over-admission")

    def test_refusals_timeouts_and_unavailability_are_not_admissions(self):
        rows = [self.row(0, "200"), self.row(1, "200"), self.row(2, "429"), self.row(3, "503"),
                self.row(4, "timeout"), self.row(2000, "200")]
        r = self.run_of(rows)
        self.assertEqual(r["violations"], 0)
        self.assertEqual(r["statuses"], {"200": 3, "429": 1, "503": 1, "timeout": 1})
        self.assertAlmostEqual(r["unavailable_seconds"], 1.997, places=3)
        self.assertEqual(r["under_admission"]["b"]["admitted"], 3)
        self.assertEqual(r["under_admission"]["b"]["exact"], 3)


if __name__ == "__main__":
    unittest.main()
