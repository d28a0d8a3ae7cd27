#!/usr/bin/env python3
"""What a decision over four dimensions costs Redis against one over one dimension.

    bench/dimension_cost.py [--build BUILD_DIR] [--batch 30] [--rounds 25] [--block 100]
    bench/dimension_cost.py --store [--build BUILD_DIR] [--rounds 3] [--seconds 3]
                            [--max-batch N] [--cost-spread N] [--capacity N] [--refill N]
                            [--against BUILD_DIR] [--module]

--store: the whole store, as a caudal instance drives it. BUILD_DIR's bench/redis_load (32
decisions in flight, 10,000 keys, one hash tag per request) is run against the server for
`--entries 1`, `--entries 4 --grouped 1` (four members of one group, as a policy counting four
dimensions keys them) and `--entries 4` (four keys apart), in turn, round after round, each run
after FLUSHALL and CONFIG RESETSTAT; Redis's own figures per decision follow each run: FCALL time
(INFO commandstats) and its CPU (INFO cpu: what reading calls and writing replies costs too).
--max-batch 1 makes a call per decision; by default the store batches what waits. --cost-spread N
has every limit but a request's first cost from 1 to N, drawn per request (as tokens and money
are; the first, the request count, costs 1): no two requests of four limits are then alike.
--spread-first draws the first's too (redis_load --spread-first 1), the one limit's included, as
limits counting tokens alone are charged.
--capacity N makes every limit N a second (redis_load --capacity): a small N puts the stream
above its limits, most requests refused (the refused share of each kind is printed). --refill N
makes every bucket refill N a second (redis_load --refill): by default a bucket is full again, its
key expired, by the key's next request, so every decision starts afresh; with a small N the state
is kept and read back, as a key below its limit is in production. --against runs
another build's redis_load the same way, alternating with this one's (its script is its own).
--module loads BUILD_DIR's caudal module (caudal.so, docs/stores.md) into the server and runs
each kind twice, alternating: with the script (redis_load --module 0) and with the module ("module:"
rows); the FCALL column is then the module command's time for those.

Without --store:
Starts its own redis-server on a free loopback port and loads, as one function library, the
fast script built in BUILD_DIR (src/redis/consume_script.cc, the library's parts and its
function's body) with a driver that calls that body in a loop on calls made in advance, so the
time is the script's own: without Redis reading the call, making its KEYS and ARGV, or writing
its reply. Each call is --batch requests on keys drawn from 10,000, all allowed:

    one    one token bucket (capacity and rate 10^9 a second), cost 1, a key per request;
    four   four such buckets, members of one group (grouped keys, caudal/store/store.h), one
           value per request, as a policy counting four dimensions keeps them.

and, for each, its floor: what any script keeping this state must do, done with the script's
own functions and nothing else (read the state, decide each bucket, write the state back), no
decoding, no bookkeeping, no reply. Blocks of --block calls alternate between the four, round
after round; each figure is the median block's µs per decision (FCALL time, INFO commandstats).
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

from script_cost import redis_server, used_cpu  # next to this file


# Appended to the library's build(): the driver, which calls the function's body (`C`) or a
# floor on calls made once, 400 of each kind, keys cycling over 10,000.
DRIVER = r"""
local C, spack
local CALLS = {}
local function calls(kind, B, spread)
  local t = CALLS[kind]
  if t then return t end
  math.randomseed(1)
  t = {}
  for c = 1, 400 do
    local K, A = {}, {'', '0'}
    for b = 1, B do
      local i = (c * B + b) % 10000
      if kind == 'one' then
        K[#K + 1] = 'PREFIX{d:' .. i .. '}:one'
        A[#A + 1] = spack('<i8i8i8i8i8i8', 1, TOKEN_BUCKET, 1e9, 1e9, 1e6, 1)
      else
        -- As the store sends it: the group's key once (ONE_KEY; a key per entry in a build
        -- before it), and costs above 1 in an argument of their own (COSTS_APART; in a build
        -- before it, in the request).
        local costs = {}
        for j = 1, 4 do costs[j] = j == 1 and 1 or math.random(1, spread) end
        local apart = COSTS_APART and math.max(unpack(costs)) > 1
        local s = spack('<i8', (ONE_KEY and ONE_KEY + 4 or 4) + (apart and COSTS_APART or 0))
        for j = 1, ONE_KEY and 1 or 4 do K[#K + 1] = 'PREFIXg{d:' .. i .. '}' end
        for j = 1, 4 do
          s = s .. spack('<i8i8i8i8i8i8', TOKEN_BUCKET + GROUP_FLAG, 1e9, 1e9, 1e6,
                         apart and 0 or costs[j], 1000 + j)
        end
        A[#A + 1] = s
        if apart then A[#A + 1] = spack('<i8i8i8i8', unpack(costs)) end
      end
    end
    t[c] = {K, A}
  end
  CALLS[kind] = t
  return t
end
local FLOOR_ST, FLOOR_S = {}, {}
-- One bucket: read, decide, write.
local function floor_one(K, now)
  for i = 1, #K do
    local key = K[i]
    local st = compact_read_into(key, FLOOR_ST)
    local _, _, reset, _, consumed, w0, w1, w2 = token_bucket(st, 1e9, 1e9, 1e6, now, 1)
    if consumed then compact_write(key, st, w0, w1, w2, now, reset, 0) end
  end
end
-- Four members of a group: read the value, decide each, write the value.
local function floor_four(K, now)
  for i = 1, #K do
    local key = K[i]
    local S = group_parse(redis.call('GET', key), FLOOR_S)
    local need = 0
    for m = 1, 4 do
      local id = 1000 + m
      local j = group_find(S, id)
      local st = nil
      if j then
        st = FLOOR_ST
        st[1], st[2], st[3] = S[j + 2], S[j + 3], S[j + 4]
      end
      local _, _, reset, _, _, w0, w1, w2 = token_bucket(st, 1e9, 1e9, 1e6, now, 1)
      group_put(S, j, id, w0, w1, w2, now, reset)
      if reset > need then need = reset end
    end
    group_write(key, S, now, need, 0)
    for id in pairs(GROUP_WRITTEN) do GROUP_WRITTEN[id] = nil end
  end
end
return function(kind, n, B, spread)
  local t = calls(kind == 'floor-one' and 'one' or kind == 'floor-four' and 'four' or kind, B, spread)
  local r = 0
  for c = 1, n do
    local x = t[c % 400 + 1]
    if kind == 'one' or kind == 'four' then
      r = C(x[1], x[2])
    else
      local now = redis.call('TIME')
      now = tonumber(now[1]) * 1000000 + tonumber(now[2])
      if kind == 'floor-one' then floor_one(x[1], now) else floor_four(x[1], now) end
    end
  end
  return r
end
"""


def library(build, name):
    text = open(build + "/src/redis/consume_script.cc", encoding="utf-8").read()
    lib = text.split('kConsumeLibrary = R"caudal_lua(', 1)[1].split(')caudal_lua"', 1)[0]
    head, body = lib.split("\n", 1)
    # build() ends by returning the function's body: keep it as C, and return the driver.
    parts, call = body.split("\nreturn function(KEYS, ARGV)", 1)
    call = call.split("\nlocal consume\nredis.register_function", 1)[0].rstrip()
    assert call.endswith("end\nend"), "the library's build() is not as embed_lua.cmake makes it"
    call = call[: -len("end")]  # build()'s own end, put back after the driver
    driver = DRIVER.replace("local C, spack\n", "local C, spack = body, struct.pack\n")
    for constant in ("ONE_KEY", "COSTS_APART"):
        if "local %s =" % constant not in parts:  # a build before it
            driver = driver.replace(constant, "false")
    return ("#!lua name=%s\n" % name + parts +
            "\nlocal body = function(KEYS, ARGV)" + call + driver.replace("PREFIX", name) +
            "end\nlocal drive\nredis.register_function('%s', function(keys, args)\n" % name +
            "  if not drive then drive = build() end\n"
            "  return drive(args[1], tonumber(args[2]), tonumber(args[3]), tonumber(args[4]))\nend)\n")


def store(r, port, args):
    loads = [("", args.build + "/bench/redis_load", ["--module", "0"] if args.module else [])]
    if args.module:
        loads.append(("module: ", args.build + "/bench/redis_load", ["--module", "1"]))
    if args.against:
        loads.append(("against: ", args.against + "/bench/redis_load", []))
    kinds = [("one limit", ["--entries", "1"]),
             ("four members of one group", ["--entries", "4", "--grouped", "1"]),
             ("four keys apart", ["--entries", "4"])]
    figures = {}
    for _ in range(args.rounds):
        for kind, flags in kinds:
            for label, binary, own in loads:
                # Each build loads its own script: none is left from the other's run.
                for command in (["FUNCTION", "FLUSH"], ["SCRIPT", "FLUSH"], ["FLUSHALL"],
                                ["CONFIG", "RESETSTAT"]):
                    r.call(*command)
                cpu = used_cpu(r)
                command = [binary, "--url", "redis://127.0.0.1:%d" % port, "--same-slot", "1",
                           "--in-flight", "32", "--threads", "1", "--keys", "10000",
                           "--seconds", str(args.seconds)] + flags + own
                if args.max_batch:
                    command += ["--max-batch", str(args.max_batch)]
                if args.cost_spread > 1:
                    command += ["--cost-spread", str(args.cost_spread)]
                    if args.spread_first:
                        command += ["--spread-first", "1"]
                if args.capacity:
                    command += ["--capacity", str(args.capacity)]
                if args.refill:
                    command += ["--refill", str(args.refill)]
                out = subprocess.run(command, capture_output=True, text=True)
                fields = dict(f.split("=", 1) for f in out.stdout.split() if "=" in f)
                if out.returncode != 0 or fields.get("errors") != "0":
                    sys.exit("dimension_cost: %s failed: %s%s" % (binary, out.stdout, out.stderr))
                cpu = used_cpu(r) - cpu
                stats = r.call("INFO", "commandstats").decode()
                # The fast script's calls, or the module's.
                usec = sum(int(u) for u in re.findall(
                    r"cmdstat_(?:fcall|caudal\.consume):calls=\d+,usec=(\d+)", stats))
                decisions = int(fields["decisions_total"])
                refused = int(fields.get("refused", "0")) / decisions
                figures.setdefault((label, kind), []).append(
                    (usec / decisions, cpu / decisions, refused,
                     float(fields["requests_per_call"])))
    print("Redis per decision, µs (FCALL time; CPU), median of %d runs of %g s, %s%s" %
          (args.rounds, args.seconds,
           "a call per decision" if args.max_batch == 1 else
           "batches of at most %d" % args.max_batch if args.max_batch else "batched",
           ", costs from 1 to %d" % args.cost_spread if args.cost_spread > 1 else "") +
          (", the first's too" if args.cost_spread > 1 and args.spread_first else "") +
          (", limits of %d a second" % args.capacity if args.capacity else "") +
          (", refilling %d a second" % args.refill if args.refill else ""))
    print("| | FCALL | CPU | FCALL against one limit | CPU against one limit |")
    print("|---|---|---|---|---|")
    for label, _, _ in loads:
        base = [statistics.median(x[i] for x in figures[(label, "one limit")]) for i in (0, 1)]
        for kind, _ in kinds:
            m = [statistics.median(x[i] for x in figures[(label, kind)]) for i in (0, 1)]
            print("| %s%s | %.2f | %.2f | %.2f× | %.2f× |" % (label, kind, m[0], m[1],
                                                             m[0] / base[0], m[1] / base[1]))
        # Each run's own ratio against the one-limit run of its round, to show the spread.
        for kind, _ in kinds[1:]:
            cpu = sorted(f[1] / o[1] for f, o in zip(figures[(label, kind)],
                                                     figures[(label, "one limit")]))
            print("%s%s: CPU against one limit per round, %s" %
                  (label, kind, ", ".join("%.2f×" % c for c in cpu)))
        # A faster script leaves fewer requests waiting for each call, and a call's setup is then
        # spread over fewer: the batches' sizes, to compare like with like.
        print("%srequests per call: %s" % (label, ", ".join(
            "%s %.1f" % (kind, statistics.median(x[3] for x in figures[(label, kind)]))
            for kind, _ in kinds)))
        if args.capacity:
            print("%srefused: %s" % (label, ", ".join(
                "%s %.0f%%" % (kind, 100 * statistics.median(x[2] for x in figures[(label, kind)]))
                for kind, _ in kinds)))


def script(r, args):
    builds = [("", "dimension_cost", args.build)]
    if args.against:
        builds.append(("against: ", "dimension_cost_against", args.against))
    for _, name, build in builds:
        r.call("FUNCTION", "LOAD", library(build, name))
    # The floors call the built script's functions: this build's only.
    runs = [(label, name, kind) for label, name, _ in builds for kind in ("one", "four")]
    runs += [("", "dimension_cost", kind) for kind in ("floor-one", "floor-four")]
    for _, name, kind in runs:  # every key written once before measuring
        r.call("FCALL", name, 0, kind, 400, args.batch, args.cost_spread)
    for _, name, _ in builds:  # the script's own answer, checked: every request allowed
        reply = r.call("FCALL", name, 0, "four", 1, args.batch, args.cost_spread)
        if reply[0] not in (b"1", b"3"):  # allowed, answered in full or briefly
            sys.exit("dimension_cost: the script refused a request: %r" % reply[:6])
    times = {run: [] for run in runs}
    for _ in range(args.rounds):
        for run in runs:
            r.call("CONFIG", "RESETSTAT")
            r.call("FCALL", run[1], 0, run[2], args.block, args.batch, args.cost_spread)
            stats = r.call("INFO", "commandstats").decode()
            usec = int(re.search(r"cmdstat_fcall:calls=\d+,usec=(\d+)", stats).group(1))
            times[run].append(usec / (args.block * args.batch))
    m = {run: statistics.median(v) for run, v in times.items()}
    print("µs per decision (median of %d blocks of %d calls of %d requests)%s" %
          (args.rounds, args.block, args.batch,
           ", costs from 1 to %d" % args.cost_spread if args.cost_spread > 1 else ""))
    print("| | one dimension | four dimensions | four against one |")
    print("|---|---|---|---|")
    for label, name, _ in builds:
        one, four = m[(label, name, "one")], m[(label, name, "four")]
        print("| %sthe fast script | %.2f | %.2f | %.2f× |" % (label, one, four, four / one))
    one, four = m[("", "dimension_cost", "floor-one")], m[("", "dimension_cost", "floor-four")]
    print("| its floor: read, decide, write | %.2f | %.2f | %.2f× |" % (one, four, four / one))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--build", default="build")
    p.add_argument("--batch", type=int, default=30)
    p.add_argument("--rounds", type=int)  # 25 blocks, or with --store 3 runs
    p.add_argument("--block", type=int, default=100)
    p.add_argument("--store", action="store_true")
    p.add_argument("--seconds", type=float, default=3)
    p.add_argument("--max-batch", type=int, default=0)
    p.add_argument("--cost-spread", type=int, default=1)
    p.add_argument("--capacity", type=int, default=0)
    p.add_argument("--refill", type=int, default=0)
    p.add_argument("--spread-first", action="store_true")
    p.add_argument("--against")
    p.add_argument("--module", action="store_true")
    args = p.parse_args()
    if args.rounds is None:
        args.rounds = 3 if args.store else 25
    module = ["--loadmodule", os.path.abspath(args.build + "/caudal.so")] if args.module else []
    with redis_server("dimension_cost", module) as (port, r):
        if args.store:
            store(r, port, args)
        else:
            script(r, args)


if __name__ == "__main__":
    main()
