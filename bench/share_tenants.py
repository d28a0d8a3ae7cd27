#!/usr/bin/env python3
"""Tenants of one shared capacity, measured from outside: each tenant's clients send POST /v1/check
with {"descriptors": {"tenant": NAME}} to the instances given, at its rate (evenly spaced) or as
fast as they are answered ("flood"), from its start, for the run. Prints one JSON object: per
tenant its admitted and refused, and its admitted in the run's last `--tail` seconds; and the
max-min (weighted) part each should have of the capacity's refill by the rates offered, computed
here by water-filling, floods counted as wanting everything.

  share_tenants.py --ports 8001,8002,8003 --refill 600 --seconds 10 --tail 5 \\
      small=60 mid=150 flood=flood gold=flood@3*3
"""
import argparse
import http.client
import json
import sys
import threading
import time


def parse_tenant(text):
    name, rest = text.split("=", 1)
    weight, start = 1, 0.0
    if "*" in rest:
        rest, w = rest.split("*", 1)
        weight = int(w)
    if "@" in rest:
        rest, s = rest.split("@", 1)
        start = float(s)
    rate = None if rest == "flood" else float(rest)
    return {"name": name, "rate": rate, "start": start, "weight": weight}


def max_min(capacity, tenants):
    """Weighted water-filling: each tenant's part, no one more than it wants."""
    want = {t["name"]: (t["rate"] if t["rate"] is not None else float("inf")) for t in tenants}
    weight = {t["name"]: t["weight"] for t in tenants}
    part = {n: 0.0 for n in want}
    left, open_ = float(capacity), set(want)
    while open_ and left > 1e-9:
        level = left / sum(weight[n] for n in open_)
        done = {n for n in open_ if want[n] - part[n] <= level * weight[n]}
        if not done:
            for n in open_:
                part[n] += level * weight[n]
            break
        for n in done:
            left -= want[n] - part[n]
            part[n] = want[n]
        open_ -= done
    return part


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ports", required=True)
    ap.add_argument("--refill", type=float, required=True, help="the capacity's refill a second")
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--tail", type=float, default=5)
    ap.add_argument("tenants", nargs="+")
    a = ap.parse_args()
    ports = [int(p) for p in a.ports.split(",")]
    tenants = [parse_tenant(t) for t in a.tenants]
    tally = {t["name"]: {"admitted": 0, "refused": 0, "tail": 0, "other": 0} for t in tenants}
    lock = threading.Lock()
    begin = time.monotonic() + 0.5
    tail_from = begin + a.seconds - a.tail

    def client(t, port, rate):
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        body = json.dumps({"descriptors": {"tenant": t["name"]}})
        start = begin + t["start"]
        sent = 0
        time.sleep(max(0.0, start - time.monotonic()))
        while time.monotonic() < begin + a.seconds:
            if rate:
                time.sleep(max(0.0, start + sent / rate - time.monotonic()))
                if time.monotonic() >= begin + a.seconds:
                    break
            c.request("POST", "/v1/check", body, {"Content-Type": "application/json"})
            r = c.getresponse()
            r.read()
            sent += 1
            now = time.monotonic()
            with lock:
                k = tally[t["name"]]
                if r.status == 200:
                    k["admitted"] += 1
                    if now >= tail_from:
                        k["tail"] += 1
                elif r.status == 429:
                    k["refused"] += 1
                else:
                    k["other"] += 1
        c.close()

    threads = []
    for t in tenants:
        # A paced tenant spreads its rate over the instances; a flood sends from one client each.
        for port in ports:
            rate = t["rate"] / len(ports) if t["rate"] is not None else None
            threads.append(threading.Thread(target=client, args=(t, port, rate)))
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    # The parts in the tail, every tenant active by then.
    active = [t for t in tenants if t["start"] <= a.seconds - a.tail]
    parts = max_min(a.refill, active)
    out = {"tenants": []}
    for t in tenants:
        k = tally[t["name"]]
        part = parts.get(t["name"], 0.0)
        # Under its part: it asks no more than max-min gives it.
        under = t["rate"] is not None and t["start"] <= a.seconds - a.tail and \
            part >= t["rate"] * (1 - 1e-9)
        out["tenants"].append(dict(k, name=t["name"], weight=t["weight"], part=part, under=under,
                                   tail_rate=k["tail"] / a.tail,
                                   of_part=(k["tail"] / a.tail) / part if part else None))
    json.dump(out, sys.stdout)
    print()


if __name__ == "__main__":
    main()
