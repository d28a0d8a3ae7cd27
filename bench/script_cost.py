#!/usr/bin/env python3
"""What one decision costs Redis inside caudal's script: EVALSHA time and CPU per decision.

    bench/script_cost.py [--build BUILD_DIR] [--against SCRIPT] [--entries 1,16,64]
                         [--keys 10000] [--rounds 30] [--floor]

Starts its own redis-server on a free loopback port, loads the script built in BUILD_DIR
(src/redis/decide_script.cc) and, with --against, another version of it (a decide_script.cc
from another build, or the script's text), and sends each the same kind of calls: token
buckets of 100 per hour, every decision allowed, keys drawn uniformly from --keys per version
(so that each version's keys age alike), the script's clock 1 ms further each call. Blocks of
calls (about 1280 decisions each) alternate between the versions, round after round, and after
each block `INFO commandstats` gives the EVALSHA time it took and `INFO cpu` the CPU Redis
spent, which also counts reading the call and its arguments before the script runs; the figures
are the median block's microseconds per decision, for each batch size (decisions per call).
Redis runs one script at a time on one core, so this CPU bounds the decisions per second one
Redis can give. Each version is sent its own wire format: packed numbers, one argument per
request, when the script unpacks them, else five decimal arguments per entry (earlier versions).

--floor adds two scripts sent the same calls that decide nothing: each reads its keys (`GET`)
and writes 33 bytes back, one with `SET ... PX` (a new TTL, as most writes of young buckets
set), one with `SET ... KEEPTTL` when the key exists. They are what reading and writing the
state alone costs Redis, below which no script keeping one state per key can go.
"""
import argparse
import contextlib
import random
import re
import socket
import struct
import subprocess
import sys
import tempfile
import time


def script_text(path):
    text = open(path, encoding="utf-8").read()
    if 'R"caudal_lua(' in text:
        return text.split('R"caudal_lua(', 1)[1].split(')caudal_lua"', 1)[0]
    return text


class Redis:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.file = self.sock.makefile("rb")

    @staticmethod
    def encode(*args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        return b"".join(out)

    def read(self):
        line = self.file.readline()
        kind, rest = line[:1], line[1:-2]
        if kind == b"-":
            raise RuntimeError(rest.decode())
        if kind in (b"+", b":"):
            return rest
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self.file.read(n + 2)[:-2]
        if kind == b"*":
            return [self.read() for _ in range(int(rest))]
        raise RuntimeError("unexpected reply %r" % line)

    def call(self, *args):
        self.sock.sendall(self.encode(*args))
        return self.read()


# Read and write every key, deciding nothing (--floor); the reply's first integer is 1, as the
# script's is for an allowed request.
FLOOR = {
    "floor-px": "for i = 1, #KEYS do redis.call('GET', KEYS[i]); "
                "redis.call('SET', KEYS[i], string.rep('x', 33), 'PX', 3600000) end return {1}",
    "floor-keep": "for i = 1, #KEYS do if redis.call('GET', KEYS[i]) then "
                  "redis.call('SET', KEYS[i], string.rep('x', 33), 'KEEPTTL') else "
                  "redis.call('SET', KEYS[i], string.rep('x', 33), 'PX', 3600000) end end "
                  "return {1}",
}


def used_cpu(r):
    """Redis's user + system CPU so far, in µs."""
    info = r.call("INFO", "cpu").decode()
    return sum(float(re.search(r"%s:([\d.]+)" % f, info).group(1))
               for f in ("used_cpu_user", "used_cpu_sys")) * 1e6


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def redis_server(name, extra=()):
    """A redis-server of its own, on a free loopback port, in a folder of its own, for as long
    as the block runs: (its port, a client). `extra`: more of its arguments."""
    port = free_port()
    with tempfile.TemporaryDirectory() as folder:
        server = subprocess.Popen(
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", folder] + list(extra),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for _ in range(100):
                try:
                    r = Redis(port)
                    r.call("PING")
                    break
                except OSError:
                    time.sleep(0.05)
            else:
                sys.exit("%s: redis-server did not start" % name)
            yield port, r
        finally:
            server.terminate()
            server.wait()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", default="build")
    p.add_argument("--against")
    p.add_argument("--entries", default="1,16,64")
    p.add_argument("--keys", type=int, default=10000)
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--floor", action="store_true")
    args = p.parse_args()

    versions = {"built": script_text(args.build + "/src/redis/decide_script.cc")}
    if args.against:
        versions["against"] = script_text(args.against)
    if args.floor:
        versions.update(FLOOR)
    token_bucket = int(re.search(r"local TOKEN_BUCKET = (\d+)", versions["built"]).group(1))

    with redis_server("script_cost") as (_, r):
        shas = {name: r.call("SCRIPT", "LOAD", text).decode() for name, text in versions.items()}
        packed = {name: "sunpack(ENTRY" in text or name in FLOOR
                  for name, text in versions.items()}
        now = 1_800_000_000_000_000
        rng = random.Random(1)
        print("Redis's time and CPU per decision (median block, %d rounds), %d keys" %
              (args.rounds, args.keys))
        for entries in [int(x) for x in args.entries.split(",")]:
            calls_per_block = max(20, 1280 // entries)
            r.call("FLUSHALL")
            per = {name: [] for name in shas}
            cpu = {name: [] for name in shas}
            for _ in range(args.rounds):
                for name, sha in shas.items():
                    calls = []
                    for _ in range(calls_per_block):
                        now += 1000
                        keys = ["caudal:{%s:%d}" % (name, rng.randrange(args.keys))
                                for _ in range(entries)]
                        argv = [now, 0]
                        for _ in range(entries):
                            request = [1, token_bucket, 100, 1, 36_000_000, 1]
                            argv += [struct.pack("<6q", *request)] if packed[name] else request
                        calls.append(Redis.encode("EVALSHA", sha, entries, *keys, *argv))
                    r.call("CONFIG", "RESETSTAT")
                    before = used_cpu(r)
                    r.sock.sendall(b"".join(calls))
                    for _ in calls:
                        reply = r.read()
                        if not isinstance(reply, list) or reply[0] != b"1":
                            sys.exit("script_cost: unexpected reply %r" % reply[:5])
                    cpu[name].append((used_cpu(r) - before) / (calls_per_block * entries))
                    stats = r.call("INFO", "commandstats").decode()
                    m = re.search(r"cmdstat_evalsha:calls=(\d+),usec=(\d+)", stats)
                    per[name].append(int(m.group(2)) / (int(m.group(1)) * entries))
            spent = {name: sorted(v)[len(v) // 2] for name, v in per.items()}
            used = {name: sorted(v)[len(v) // 2] for name, v in cpu.items()}
            line = "entries per call %3d: built %.2f µs (CPU %.2f)" % (
                entries, spent["built"], used["built"])
            for name in FLOOR:
                if name in spent:
                    line += ", %s %.2f µs (CPU %.2f)" % (name, spent[name], used[name])
            if "against" in spent:
                line += ", against %.2f µs (CPU %.2f), built / against %.2f (CPU %.2f)" % (
                    spent["against"], used["against"], spent["built"] / spent["against"],
                    used["built"] / used["against"])
            print(line, flush=True)


if __name__ == "__main__":
    main()
