"""The nemesis checker: reads a run (run.json, history.csv written by nemesis.py) and checks what
every key admitted against the bound its policy promises (docs/algorithms.md, "The bounds,
exactly"), then reports under-admission, unavailability and who decided.

The client's clock only ever widens what an admission could be: a request admitted was decided
somewhere in [sent, answered] of the history, and the units it spent were consumed by the store
in (sent - ttl, answered] (a lease is spent only before ttl has passed since the request that
took it was sent, which was before the store consumed them; with no lease, at the decision).
So the checker asks of the store's consumption only what must have happened:

- token_bucket, gcra: for every x and y, the units of the admissions whose whole window
  (sent - ttl, answered] lies within [x, y] are at most B + r·(y - x). A set of admissions that
  breaks it cannot have been consumed by one bucket, wherever in their windows they were; no
  timing of the client can make an honest run fail. Checked exactly for every x and y (a sweep
  over x with a max segment tree over y, O(n log n) per key).
- fixed_window (clock-aligned windows of the store's clock, on the client's): the admissions
  whose [sent, answered] lies within one window are at most `limit` (a lease of a window is
  spent within it). An admission straddling a boundary is counted in neither, and reported.

A violation is reported with the interval, the units over, and the faults injected around it.
Some faults change what the store itself admits, as the docs state: a failover after a primary
was killed or stopped (asynchronous replication loses what was not yet copied), a Sentinel
failover of a live primary (not paused for its replica to catch up, nor stopped at the
promotion) and a store clock that jumps (a bucket refills, a window ends early). A key over its
bound is checked again on each stretch of the run between those faults' windows
(explaining_windows), its admissions touching a window left out: a violation found there is
*unexplained* and fails the run; one that only the whole history shows is *explained* by the
faults it spans, and reported with its size (`--strict` fails on those too).

Usage: checker.py RUN_DIR [--json OUT] [--strict]; exit 0 when no unexplained violation.
"""
import argparse
import bisect
import csv
import json
import math
import os
import sys
from collections import Counter, defaultdict

NS = 1_000_000_000
# Faults whose effect on the bound is stated (docs/reliability.md, the nemesis): what they can
# over-admit is reported, not failed.
EXPLAINING = {"redis-kill-primary", "redis-stop-primary", "sentinel-failover", "clock",
              "clock-failover"}
# How far around a violation's interval a fault still explains it: a failover's loss is spent
# over the bucket's refill after it, a clock jump lasts until the offset is undone.
AROUND_NS = 3 * NS


class MaxTree:
    """Leaves start at `values`; add(l, v) adds v to every leaf from l on; best_from(l) is the
    largest leaf from l on and its index."""

    def __init__(self, values):
        n = 1
        while n < max(1, len(values)):
            n *= 2
        self.n = n
        self.mx = [-math.inf] * (2 * n)
        self.pending = [0.0] * (2 * n)
        for i, v in enumerate(values):
            self.mx[n + i] = v
        for i in range(n - 1, 0, -1):
            self.mx[i] = max(self.mx[2 * i], self.mx[2 * i + 1])

    def add(self, first, v):
        lo, hi = first + self.n, 2 * self.n
        l0, r0 = lo, hi - 1
        mx, pending = self.mx, self.pending
        while lo < hi:
            if lo & 1:
                mx[lo] += v
                pending[lo] += v
                lo += 1
            if hi & 1:
                hi -= 1
                mx[hi] += v
                pending[hi] += v
            lo >>= 1
            hi >>= 1
        for i in (l0 >> 1, r0 >> 1):
            while i:
                mx[i] = max(mx[2 * i], mx[2 * i + 1]) + pending[i]
                i >>= 1

    def best_from(self, first):
        """The largest leaf from `first` on, and its index."""
        mx, pending, n = self.mx, self.pending, self.n
        best, best_i = -math.inf, -1
        stack = [(1, 0, n, 0.0)]
        while stack:
            node, lo, hi, above = stack.pop()
            if hi <= first or mx[node] + above <= best:
                continue
            if lo >= first:
                # The whole range counts: descend to its largest leaf.
                value = mx[node] + above
                while node < n:
                    above += pending[node]
                    node = 2 * node if mx[2 * node] >= mx[2 * node + 1] else 2 * node + 1
                best, best_i = value, node - n
                continue
            mid = (lo + hi) // 2
            above += pending[node]
            stack.append((2 * node, lo, mid, above))
            stack.append((2 * node + 1, mid, hi, above))
        return best, best_i


def check_bucket(admissions, capacity, rate_per_ns, ttl_ns):
    """admissions: [(sent, answered, units)]. The worst interval: (excess units, x, y, units in
    it), excess <= 0 when the bound holds; and how many distinct x break it."""
    if not admissions:
        return (-capacity, 0, 0, 0), 0
    items = [(s - ttl_ns, a, c) for s, a, c in admissions]
    his = sorted(a for _, a, _ in items)
    position = {}
    for j, h in enumerate(his):
        position.setdefault(h, j)
    tree = MaxTree([-rate_per_ns * h for h in his])
    items.sort(key=lambda it: -it[0])
    worst = (-math.inf, 0, 0)
    broken = 0
    i = 0
    while i < len(items):
        x = items[i][0]
        while i < len(items) and items[i][0] == x:
            tree.add(position[items[i][1]], items[i][2])
            i += 1
        # Only ends y >= x make an interval (an admission's hi is never below its lo).
        value, j = tree.best_from(bisect.bisect_left(his, x))
        excess = value + rate_per_ns * x - capacity
        if excess > 1e-6:
            broken += 1
        if excess > worst[0]:
            worst = (excess, x, his[j])
    excess, x, y = worst
    units = sum(c for lo, hi, c in items if lo >= x and hi <= y)
    return (excess, x, y, units), broken


def check_window(admissions, limit, window_ns):
    """The windows over `limit`: [(window start, units)], and how many admissions straddled a
    boundary (counted in no window)."""
    per = Counter()
    straddling = 0
    for s, a, c in admissions:
        k = s // window_ns
        if a // window_ns != k:
            straddling += 1
            continue
        per[k] += c
    over = sorted((k * window_ns, u) for k, u in per.items() if u > limit)
    return over, straddling


def worst_violation(adm, policy):
    """The worst interval over `policy`'s bound among admissions `adm`, or None."""
    if policy["algorithm"] in ("token_bucket", "gcra"):
        ttl_ns = policy["lease_ttl_ms"] * 1_000_000 if policy["leased"] else 0
        (excess, x, y, units), broken = check_bucket(
            adm, policy["capacity"], policy["rate_per_s"] / NS, ttl_ns)
        if excess <= 1e-6:
            return None
        return {"x_ns": x, "y_ns": y, "units": units, "bound": round(units - excess, 3),
                "over": round(excess, 3), "starts_broken": broken}
    window_ns = policy["window_ms"] * 1_000_000
    over, _ = check_window(adm, policy["limit"], window_ns)
    if not over:
        return None
    start, units = max(over, key=lambda o: o[1])
    return {"x_ns": start, "y_ns": start + window_ns, "units": units, "bound": policy["limit"],
            "over": units - policy["limit"], "starts_broken": len(over)}


def explaining_windows(faults):
    """When an explaining fault can change what the store admits: from 1 s before it (what was
    not yet replicated) to 2 s after the cluster had healed (a bucket refilled by a clock jump,
    a lease granted then, spent)."""
    out = []
    for f in faults:
        if f["kind"] in EXPLAINING:
            end = f.get("settled_ns") or f["end_ns"] or math.inf
            out.append((f["start_ns"] - NS, end + 2 * NS))
    return sorted(out)


def segments(adm, shadows):
    """`adm` split at the explaining windows, without the admissions that touch one."""
    merged = []
    for lo, hi in shadows:
        if merged and lo <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    starts = [lo for lo, _ in merged]
    out = [[] for _ in range(len(merged) + 1)]
    for s, a, c in adm:
        i = bisect.bisect_right(starts, a)  # the windows starting at or before a
        if i > 0 and merged[i - 1][1] >= s:
            continue
        out[i].append((s, a, c))
    return [seg for seg in out if seg]


def ideal_admitted(requests, policy):
    """What an exact limiter deciding at the send times would have admitted of `requests`
    [(sent, units)]: the reference for under-admission."""
    admitted = 0
    if policy["algorithm"] in ("token_bucket", "gcra"):
        cap, rate = policy["capacity"], policy["rate_per_s"] / NS
        tokens, last = float(cap), None
        for s, c in requests:
            if last is not None:
                tokens = min(cap, tokens + (s - last) * rate)
            last = s
            if tokens + 1e-9 >= c:
                tokens -= c
                admitted += c
    else:
        window_ns = policy["window_ms"] * 1_000_000
        used = Counter()
        for s, c in requests:
            k = s // window_ns
            if used[k] + c <= policy["limit"]:
                used[k] += c
                admitted += c
    return admitted


def load(run_dir):
    """The run's description, and its history as an iterator of rows (read as it is consumed: a
    long run's history is millions of rows)."""
    with open(os.path.join(run_dir, "run.json")) as f:
        run = json.load(f)

    def rows():
        with open(os.path.join(run_dir, "history.csv"), newline="") as f:
            for r in csv.DictReader(f):
                yield {"sent": int(r["sent_ns"]), "answered": int(r["answered_ns"]),
                       "instance": int(r["instance"]), "status": r["status"],
                       "cost": int(r["cost"]), "keys": r["keys"].split("|"),
                       "decided": r["decided"].split("|") if r["decided"] else []}
    return run, rows()


def faults_around(faults, x, y):
    return [f for f in faults
            if f["start_ns"] <= y + AROUND_NS and (f["end_ns"] or math.inf) >= x - AROUND_NS]


def describe(f, t0):
    end = "…" if f["end_ns"] is None else "%.2f" % ((f["end_ns"] - t0) / NS)
    return "%s %s [%.2f s, %s s]%s" % (f["kind"], f["target"], (f["start_ns"] - t0) / NS, end,
                                       (" " + f["detail"]) if f.get("detail") else "")


def outages(by_instance, faults):
    """Per instance, runs of requests that were not decided (503, timeout, error) between two
    that were: (seconds, the kinds of fault active at the run's start). `by_instance`: per
    instance, (sent, failed) of each request."""
    out = []
    for seq in by_instance.values():
        seq.sort()
        start = None
        for sent, failed in seq:
            if failed and start is None:
                start = sent
            elif not failed and start is not None:
                kinds = sorted({f["kind"] for f in faults
                                if f["start_ns"] <= start <= (f["end_ns"] or math.inf) + NS})
                out.append(((sent - start) / NS, kinds or ["none"]))
                start = None
    return out


def check(run, rows):
    policies = run["policies"]
    faults = run["faults"]
    t0 = run["started_ns"]
    per_key = defaultdict(list)      # admissions (sent, answered, units)
    asked = defaultdict(list)        # definite answers (sent, units), for under-admission
    statuses = Counter()
    decided_by = Counter()
    by_instance = defaultdict(list)  # (sent, failed), for unavailability
    requests = 0
    for r in rows:
        requests += 1
        statuses[r["status"]] += 1
        by_instance[r["instance"]].append((r["sent"], r["status"] not in ("200", "429")))
        for d in r["decided"]:
            decided_by[d] += 1
        if r["status"] not in ("200", "429"):
            continue
        for key in r["keys"]:
            asked[key].append((r["sent"], r["cost"]))
            if r["status"] == "200":
                per_key[key].append((r["sent"], r["answered"], r["cost"]))

    shadows = explaining_windows(faults)
    violations = []
    straddled = 0
    keys_checked = 0
    admitted_units = Counter()
    ideal_units = Counter()
    for key in sorted(set(asked) | set(per_key)):
        policy = policies[key.split("/", 1)[0]]
        adm = per_key.get(key, [])
        keys_checked += 1
        admitted_units[policy["name"]] += sum(c for _, _, c in adm)
        ideal_units[policy["name"]] += ideal_admitted(sorted(asked.get(key, [])), policy)
        v = worst_violation(adm, policy)
        if v is None:
            continue
        v["key"] = key
        # Checked again between the explaining faults only: what breaks the bound there is
        # unexplained, whatever the faults elsewhere did.
        v["unexplained"] = None
        for segment in segments(adm, shadows):
            w = worst_violation(segment, policy)
            if w is not None and (v["unexplained"] is None or w["over"] > v["unexplained"]["over"]):
                v["unexplained"] = w
        straddled += v.pop("straddling", 0)
        violations.append(v)
    for key in per_key:
        policy = policies[key.split("/", 1)[0]]
        if policy["algorithm"] == "fixed_window":
            straddled += check_window(per_key[key], policy["limit"],
                                      policy["window_ms"] * 1_000_000)[1]
    for v in violations:
        around = faults_around(faults, v["x_ns"], v["y_ns"])
        v["faults_around"] = [describe(f, t0) for f in around]
        v["explained_by"] = ([] if v["unexplained"] is not None else
                             sorted({f["kind"] for f in around if f["kind"] in EXPLAINING}))
        for w in (v, v["unexplained"]):
            if w is not None:
                w["x_s"] = round((w["x_ns"] - t0) / NS, 3)
                w["y_s"] = round((w["y_ns"] - t0) / NS, 3)

    down = outages(by_instance, faults)
    unavailable = defaultdict(lambda: [0, 0.0])
    for seconds, kinds in down:
        for k in kinds:
            unavailable[k][0] += 1
            unavailable[k][1] += seconds
    fault_counts = Counter(f["kind"] for f in faults)
    under = {name: {"admitted": admitted_units[name], "exact": ideal_units[name],
                    "under_admission": round(1 - admitted_units[name] / ideal_units[name], 4)
                    if ideal_units[name] else 0.0}
             for name in sorted(ideal_units)}
    unexplained = [v for v in violations if v["unexplained"] is not None]
    return {
        "seed": run["seed"], "duration_s": run["duration_s"], "store": run["store"],
        "requests": requests, "statuses": dict(statuses), "decided_by": dict(decided_by),
        "faults": dict(fault_counts), "keys": keys_checked,
        "violations": len(violations), "unexplained": len(unexplained),
        "violation_list": violations, "straddling_window_boundary": straddled,
        "under_admission": under,
        "unavailable": {k: {"runs": n, "seconds": round(s, 3)}
                        for k, (n, s) in sorted(unavailable.items())},
        "unavailable_seconds": round(sum(s for s, _ in down), 3),
    }


def report(result, out):
    p = lambda *a: print(*a, file=out)
    p("nemesis run: seed %d, %s s on %s; %d requests, %d keys" % (
        result["seed"], result["duration_s"], result["store"], result["requests"],
        result["keys"]))
    p("answers: " + ", ".join("%s %d" % kv for kv in sorted(result["statuses"].items())))
    p("decided by: " + ", ".join("%s %d" % kv for kv in sorted(result["decided_by"].items())))
    p("faults: " + ", ".join("%s %d" % kv for kv in sorted(result["faults"].items())))
    p("violations: %d (%d unexplained)" % (result["violations"], result["unexplained"]))
    for v in result["violation_list"]:
        p("  %s: %s units in [%.3f s, %.3f s], bound %s, %s over; explained by %s (seed %d)" % (
            v["key"], v["units"], v["x_s"], v["y_s"], v["bound"], v["over"],
            ", ".join(v["explained_by"]) or "nothing", result["seed"]))
        w = v["unexplained"]
        if w is not None:
            p("    away from every explaining fault: %s units in [%.3f s, %.3f s], bound %s, "
              "%s over" % (w["units"], w["x_s"], w["y_s"], w["bound"], w["over"]))
        for f in v["faults_around"]:
            p("      fault: " + f)
    p("fixed-window admissions straddling a boundary (in no window's count): %d" %
      result["straddling_window_boundary"])
    for name, u in result["under_admission"].items():
        p("under-admission %s: admitted %d of the %d an exact limiter would (%.2f%%)" % (
            name, u["admitted"], u["exact"], 100 * u["under_admission"]))
    p("unavailable: %.2f s in all (per instance, summed)" % result["unavailable_seconds"])
    for k, u in result["unavailable"].items():
        p("  during %s: %d runs, %.2f s" % (k, u["runs"], u["seconds"]))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run_dir")
    ap.add_argument("--json", help="write the result as JSON here")
    ap.add_argument("--strict", action="store_true", help="explained violations fail too")
    args = ap.parse_args(argv)
    run, rows = load(args.run_dir)
    result = check(run, rows)
    report(result, sys.stdout)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    failed = result["violations"] if args.strict else result["unexplained"]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
