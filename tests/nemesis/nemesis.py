"""The nemesis harness: a Redis Cluster (3 primaries, each with a replica) or a Sentinel group (a
primary, 2 replicas and 3 sentinels), several `caudal serve` instances reaching it each through
proxies of their own, clients recording every request, and a nemesis injecting faults at random
from a seed, alone and together. At the end checker.py reads the history. docs/testing.md, "The
nemesis", says what it proves and how to run it. The servers are redis-server, or valkey-server
with CAUDAL_TEST_REDIS=valkey.

Usage: nemesis.py --bin BUILD_DIR [--topology cluster|sentinel] [--duration S] [--seed N]
                  [--instances N] [--out DIR] [--overadmit N] [--keep]
`--overadmit N` runs the instances as caudal-testing with a store that admits one refused
request in N (the checker must then fail); it exits with the checker's status.
"""
import argparse
import asyncio
import json
import os
import random
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import checker

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "serve"))
from harness import REDIS_CLI, REDIS_FAMILY, REDIS_SERVER, free_port  # noqa: E402

NS = 1_000_000_000
CLUSTER_NODE_TIMEOUT_MS = 1000
SENTINEL_DOWN_AFTER_MS = 1000
SENTINEL_MASTER = "caudal"
LEASE_TTL_MS = 250

# The policies every instance serves; the checker reads the same table from run.json.
POLICIES = [
    {"name": "bucket", "algorithm": "token_bucket", "capacity": 40, "rate_per_s": 200,
     "leased": True, "lease_ttl_ms": LEASE_TTL_MS, "keys": 6},
    {"name": "gcra", "algorithm": "gcra", "capacity": 10, "rate_per_s": 100,
     "leased": True, "lease_ttl_ms": LEASE_TTL_MS, "keys": 4},
    {"name": "window", "algorithm": "fixed_window", "limit": 150, "window_ms": 1000,
     "leased": True, "lease_ttl_ms": LEASE_TTL_MS, "keys": 4},
    {"name": "exact", "algorithm": "token_bucket", "capacity": 5, "rate_per_s": 50,
     "leased": False, "lease_ttl_ms": 0, "keys": 4},
]


def now_ns():
    return time.time_ns()


def cluster_port(rng):
    """A free port below the ephemeral range whose bus port (+10000) is free too."""
    while True:
        port = rng.randrange(20000, 30000)
        try:
            with socket.socket() as a, socket.socket() as b:
                a.bind(("127.0.0.1", port))
                b.bind(("127.0.0.1", port + 10000))
            return port
        except OSError:
            continue


def wait_until(predicate, what, timeout_s=30.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if predicate():
                return True
        except OSError:
            pass
        time.sleep(0.05)
    raise RuntimeError("timed out waiting for " + what)


# --- RESP, enough for the admin commands --------------------------------------------------------

def _read_reply(f):
    line = f.readline()
    if not line:
        raise OSError("connection closed")
    kind, rest = line[:1], line[1:-2]
    if kind == b"+":
        return rest.decode()
    if kind == b"-":
        return RedisError(rest.decode())
    if kind == b":":
        return int(rest)
    if kind == b"$":
        n = int(rest)
        if n < 0:
            return None
        data = f.read(n + 2)
        return data[:-2].decode(errors="replace")
    if kind == b"*":
        n = int(rest)
        return None if n < 0 else [_read_reply(f) for _ in range(n)]
    raise OSError("bad reply %r" % line)


class RedisError(str):
    pass


def redis_command(port, *words, timeout_s=2.0):
    with socket.create_connection(("127.0.0.1", port), timeout=timeout_s) as s:
        wire = b"*%d\r\n" % len(words)
        for w in words:
            w = w if isinstance(w, bytes) else str(w).encode()
            wire += b"$%d\r\n%s\r\n" % (len(w), w)
        s.sendall(wire)
        with s.makefile("rb") as f:
            return _read_reply(f)


# --- Redis Cluster -------------------------------------------------------------------------------

NO_PERSISTENCE = ["--save", "", "--appendonly", "no"]


class Node:
    """One redis-server, its real-time clock offset by a file the preload reads. `args` follow
    the common ones; `conf` is written once to its config file, which it is started with and
    which a Sentinel (its own, or one reconfiguring a replica) rewrites and finds on a restart.
    A sentinel (`sentinel`) runs without the preload: its timers are not what is tested."""

    def __init__(self, port, root, preload, args, conf=None, sentinel=False):
        self.port = port
        self.dir = os.path.join(root, "%s-%d" % ("sentinel" if sentinel else "redis", port))
        os.makedirs(self.dir)
        self.offset_path = os.path.join(self.dir, "clock-offset")
        with open(self.offset_path, "wb") as f:
            f.write((0).to_bytes(8, "little", signed=True))
        self.conf = None
        if conf is not None:
            self.conf = os.path.join(self.dir, "redis.conf")
            with open(self.conf, "w") as f:
                f.write("".join(line + "\n" for line in conf))
        self.preload = preload
        self.args = args
        self.sentinel = sentinel
        self.proc = None
        self.stopped = False

    def start(self):
        args = [REDIS_SERVER] + ([self.conf] if self.conf else [])
        args += ["--sentinel"] if self.sentinel else []
        args += ["--bind", "127.0.0.1", "--port", str(self.port), "--dir", self.dir,
                 "--logfile", "redis.log"] + self.args
        env = dict(os.environ)
        if not self.sentinel:
            env.update(LD_PRELOAD=self.preload, CAUDAL_CLOCK_OFFSET_FILE=self.offset_path)
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                     env=env)
        self.stopped = False
        wait_until(lambda: redis_command(self.port, "PING", timeout_s=0.5) == "PONG",
                   "%s on %d" % (REDIS_SERVER, self.port))
        info = self.command("INFO", "server")  # the server asked for, not another on PATH
        if ("valkey_version:" in info) != (REDIS_FAMILY == "valkey"):
            raise RuntimeError("%s on %d is not %s" % (REDIS_SERVER, self.port, REDIS_FAMILY))
        if self.sentinel:
            # Sentinel's periods shortened as tests/support/redis_sentinel.cc does (and says
            # why): a returning primary demoted within seconds, no 30 s TILT on a loaded machine.
            self.command("SENTINEL", "DEBUG", "info-period", 1000, "publish-period", 1000,
                         "tilt-period", 5000)

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def kill(self):
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def signal(self, sig):
        if self.running():
            self.proc.send_signal(sig)
            self.stopped = sig == signal.SIGSTOP

    def set_offset_ms(self, ms):
        with open(self.offset_path, "r+b") as f:
            f.write((int(ms) * 1000).to_bytes(8, "little", signed=True))

    def command(self, *words, timeout_s=2.0):
        return redis_command(self.port, *words, timeout_s=timeout_s)

    def role(self):
        try:
            info = self.command("INFO", "replication", timeout_s=0.5)
        except OSError:
            return None
        m = re.search(r"role:(\w+)", info or "")
        return m.group(1) if m else None


class Cluster:
    topology = "cluster"
    description = "redis-cluster (3+3)"
    KINDS = [  # (kind, weight)
        ("caudal-kill", 2), ("caudal-stop", 2), ("caudal-reload", 2),
        ("partition-hold", 2), ("partition-drop", 2), ("latency", 3),
        ("redis-kill-primary", 2), ("redis-stop-primary", 2), ("redis-kill-replica", 1),
        ("redis-stop-replica", 1), ("redis-failover", 2), ("reshard", 2), ("clock", 2),
        ("clock-failover", 2), ("lease-storm", 1),
    ]

    def __init__(self, root, preload, rng, primaries=3):
        self.primaries = primaries
        args = NO_PERSISTENCE + ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                                 "--cluster-node-timeout", str(CLUSTER_NODE_TIMEOUT_MS)]
        self.nodes = [Node(cluster_port(rng), root, preload, args) for _ in range(2 * primaries)]
        self.sentinels = []
        for n in self.nodes:
            n.start()
        subprocess.run([REDIS_CLI, "--cluster", "create"] +
                       ["127.0.0.1:%d" % n.port for n in self.nodes] +
                       ["--cluster-replicas", "1", "--cluster-yes"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                       stdin=subprocess.DEVNULL, timeout=60)
        self.wait_healthy(60)

    def problem(self):
        """Why the cluster is not whole yet (every node up and agreeing on cluster_state:ok,
        every primary with a replica in sync), or ""."""
        primaries = 0
        for n in self.nodes:
            if not n.running() or n.stopped:
                return "node %d down" % n.port
            info = n.command("CLUSTER", "INFO", timeout_s=1)
            if "cluster_state:ok" not in (info or ""):
                return "node %d: cluster_state not ok" % n.port
            rep = n.command("INFO", "replication", timeout_s=1) or ""
            if "role:master" in rep:
                primaries += 1
                if "connected_slaves:1" not in rep:
                    return "primary %d without its replica" % n.port
            elif "master_link_status:up" not in rep:
                return "replica %d not in sync" % n.port
        return "" if primaries == len(self.nodes) // 2 else "%d primaries" % primaries

    def wait_healthy(self, timeout_s=30):
        deadline = time.monotonic() + timeout_s
        why = "not asked"
        while time.monotonic() < deadline:
            try:
                why = self.problem()
            except OSError as e:
                why = str(e)
            if not why:
                return True
            time.sleep(0.1)
        raise RuntimeError("cluster not healthy within %d s: %s" % (timeout_s, why))

    def by_role(self, role):
        return [n for n in self.nodes if n.running() and not n.stopped and n.role() == role]

    def failover(self, replica):
        """A manual failover to `replica` (CLUSTER FAILOVER: the primary paused until the replica
        has caught up), once it is done."""
        replica.command("CLUSTER", "FAILOVER")
        wait_until(lambda: replica.role() == "master", "the manual failover", 30)

    def node_id(self, n):
        return n.command("CLUSTER", "MYID")

    @property
    def url(self):
        return "redis-cluster://" + ",".join("127.0.0.1:%d" % n.port for n in self.nodes)

    def migrate_slot_of_a_key(self, rng):
        """Resharding, the protocol redis-cli's reshard follows, for the slot of one key caudal
        wrote: IMPORTING on the target, MIGRATING on the source, the keys moved with MIGRATE,
        then the slot assigned to the target on every primary. Returns a description."""
        primaries = self.by_role("master")
        if len(primaries) < 2:
            return None
        source = rng.choice(primaries)
        key = source.command("RANDOMKEY")
        if not key or isinstance(key, RedisError):
            return None
        slot = source.command("CLUSTER", "KEYSLOT", key)
        target = rng.choice([p for p in primaries if p is not source])
        sid, tid = self.node_id(source), self.node_id(target)
        target.command("CLUSTER", "SETSLOT", slot, "IMPORTING", sid)
        source.command("CLUSTER", "SETSLOT", slot, "MIGRATING", tid)
        moved = 0
        while True:
            keys = source.command("CLUSTER", "GETKEYSINSLOT", slot, 100)
            if not keys or isinstance(keys, RedisError):
                break
            reply = source.command("MIGRATE", "127.0.0.1", target.port, "", 0, 5000, "KEYS",
                                   *keys, timeout_s=6)
            if isinstance(reply, RedisError):
                raise RuntimeError("MIGRATE: %s" % reply)
            moved += len(keys)
        for p in primaries:
            p.command("CLUSTER", "SETSLOT", slot, "NODE", tid)
        return "slot %d (%d keys) %d→%d" % (slot, moved, source.port, target.port)

    def close(self):
        for n in self.nodes:
            if n.stopped:
                n.signal(signal.SIGCONT)
            n.kill()


# --- Redis Sentinel -----------------------------------------------------------------------------

class SentinelGroup:
    """A primary, its replicas and 3 sentinels (quorum 2, down after 1 s); every data node keeps
    a config file for the sentinels to rewrite, so a restarted node comes back in the role they
    last gave it (an empty primary that they then demote)."""

    topology = "sentinel"
    description = "redis-sentinel (1+2, 3 sentinels)"
    KINDS = [  # (kind, weight)
        ("caudal-kill", 2), ("caudal-stop", 2), ("caudal-reload", 2),
        ("partition-hold", 2), ("partition-drop", 2), ("partition-sentinels", 2), ("latency", 3),
        ("redis-kill-primary", 2), ("redis-stop-primary", 2), ("redis-kill-replica", 1),
        ("redis-stop-replica", 1), ("sentinel-failover", 2), ("sentinel-kill", 1),
        ("sentinel-stop", 1), ("clock", 2), ("clock-failover", 2), ("lease-storm", 1),
    ]

    def __init__(self, root, preload, rng, replicas=2, sentinels=3):
        self.primaries = 1
        first = free_port()
        self.nodes = [Node(first, root, preload, NO_PERSISTENCE, [])]
        self.nodes += [Node(free_port(), root, preload, NO_PERSISTENCE,
                            ["replicaof 127.0.0.1 %d" % first]) for _ in range(replicas)]
        for n in self.nodes:
            n.start()
        m = SENTINEL_MASTER
        conf = ["sentinel monitor %s 127.0.0.1 %d 2" % (m, first),
                "sentinel down-after-milliseconds %s %d" % (m, SENTINEL_DOWN_AFTER_MS),
                "sentinel failover-timeout %s 10000" % m,
                "sentinel parallel-syncs %s 1" % m]
        self.sentinels = [Node(free_port(), root, None, [], conf, sentinel=True)
                          for _ in range(sentinels)]
        for s in self.sentinels:
            s.start()
        self.wait_healthy(60)

    def named_primary(self, sentinel):
        addr = sentinel.command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", SENTINEL_MASTER,
                                timeout_s=1)
        return int(addr[1]) if isinstance(addr, list) else None

    def problem(self):
        """Why the group is not whole yet (every process up, one primary with every replica in
        sync, every sentinel naming it and seeing the replicas and the other sentinels), or ""."""
        for n in self.nodes + self.sentinels:
            if not n.running() or n.stopped:
                return "%d down" % n.port
        primaries = self.by_role("master")
        if len(primaries) != 1:
            return "%d primaries" % len(primaries)
        port = primaries[0].port
        for n in self.nodes:
            if n is primaries[0]:
                continue
            rep = n.command("INFO", "replication", timeout_s=1) or ""
            if "master_link_status:up" not in rep or "master_port:%d\r" % port not in rep:
                return "replica %d not in sync with %d" % (n.port, port)
        for s in self.sentinels:
            if self.named_primary(s) != port:
                return "sentinel %d names another primary than %d" % (s.port, port)
            replicas = s.command("SENTINEL", "REPLICAS", SENTINEL_MASTER, timeout_s=1) or []
            healthy = sum(1 for r in replicas if isinstance(r, list) and
                          dict(zip(r[::2], r[1::2])).get("flags") == "slave")
            if healthy != len(self.nodes) - 1:
                return "sentinel %d sees %d healthy replicas" % (s.port, healthy)
            others = s.command("SENTINEL", "SENTINELS", SENTINEL_MASTER, timeout_s=1) or []
            if len(others) != len(self.sentinels) - 1:
                return "sentinel %d knows %d others" % (s.port, len(others))
        return ""

    def wait_healthy(self, timeout_s=30):
        deadline = time.monotonic() + timeout_s
        why = "not asked"
        while time.monotonic() < deadline:
            try:
                why = self.problem()
            except OSError as e:
                why = str(e)
            if not why:
                return True
            time.sleep(0.1)
        raise RuntimeError("sentinel group not healthy within %d s: %s" % (timeout_s, why))

    def by_role(self, role):
        return [n for n in self.nodes if n.running() and not n.stopped and n.role() == role]

    def failover(self, replica=None):
        """SENTINEL FAILOVER, asked of a sentinel (the primary alive: nothing waits for the
        replicas to catch up), once a replica is the primary; the one promoted."""
        old = self.by_role("master")[0]
        sentinel = self.sentinels[0]
        reply = sentinel.command("SENTINEL", "FAILOVER", SENTINEL_MASTER)
        if isinstance(reply, RedisError):
            raise RuntimeError("SENTINEL FAILOVER: %s" % reply)
        wait_until(lambda: self.named_primary(sentinel) not in (None, old.port),
                   "the sentinel failover", 30)
        port = self.named_primary(sentinel)
        new = next(n for n in self.nodes if n.port == port)
        wait_until(lambda: new.role() == "master", "the promotion", 30)
        return new

    @property
    def url(self):
        return "redis-sentinel://%s/%s" % (
            ",".join("127.0.0.1:%d" % s.port for s in self.sentinels), SENTINEL_MASTER)

    def close(self):
        for n in self.sentinels + self.nodes:
            if n.stopped:
                n.signal(signal.SIGCONT)
            n.kill()


# --- Proxies ------------------------------------------------------------------------------------

class Proxies:
    """caudal-nemesis-proxy: the delay proxy of tests/support, one per (instance, node)."""

    def __init__(self, binary):
        self.proc = subprocess.Popen([binary], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, bufsize=1)
        self.lock = threading.Lock()

    def ask(self, line):
        with self.lock:
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()
            answer = self.proc.stdout.readline().strip()
        if answer.startswith("error"):
            raise RuntimeError("proxy: %s: %s" % (line, answer))
        return answer

    def open(self, target_port):
        pid, port = self.ask("open %d" % target_port).split()
        return int(pid), int(port)

    def close(self):
        try:
            self.proc.stdin.close()
        except BrokenPipeError:
            pass  # it died: reported by the nemesis
        self.proc.wait(timeout=10)


# --- caudal instances ---------------------------------------------------------------------------

def config_text(url, address_map, instances, generation):
    lines = ["# generation %d (a reload rewrites this line)" % generation,
             "store:",
             "  url: %s" % url,
             "  timeout: 100ms",
             "  instances: %d" % instances,
             "  on_failure: deny",
             "  lease: {ttl: %dms, max_share: 0.3}" % LEASE_TTL_MS,
             "  address_map:"]
    for real, mapped in sorted(address_map.items()):
        lines.append('    "%s": "%s"' % (real, mapped))
    lines.append("policies:")
    for p in POLICIES:
        lines += ["  - name: %s" % p["name"], "    identity: [%s]" % p["name"]]
        if not p["leased"]:
            lines.append("    lease: off")
        lines.append("    limits:")
        if p["algorithm"] == "fixed_window":
            lines.append("      - {algorithm: fixed_window, limit: %d, window: %dms}" % (
                p["limit"], p["window_ms"]))
        else:
            lines.append("      - {algorithm: %s, capacity: %d, refill: %d/1s}" % (
                p["algorithm"], p["capacity"], p["rate_per_s"]))
    return "\n".join(lines) + "\n"


class Instance:
    def __init__(self, index, binary, root, url, address_map, count, testing_hooks):
        self.index = index
        self.binary = binary
        self.dir = os.path.join(root, "caudal-%d" % index)
        os.makedirs(self.dir)
        self.config_path = os.path.join(self.dir, "caudal.yaml")
        self.url, self.address_map, self.count = url, address_map, count
        self.generation = 0
        self.write_config()
        self.port = free_port()
        self.testing_hooks = testing_hooks
        self.proc = None
        self.stopped = False
        self.starts = 0

    def write_config(self):
        tmp = self.config_path + ".tmp"
        with open(tmp, "w") as f:
            f.write(config_text(self.url, self.address_map, self.count, self.generation))
        os.replace(tmp, self.config_path)

    def start(self):
        self.starts += 1
        log = open(os.path.join(self.dir, "stderr-%d.log" % self.starts), "wb")
        env = dict(os.environ)
        if self.testing_hooks:
            env["CAUDAL_TESTING_CLOCK"] = "real"
        self.proc = subprocess.Popen(
            [self.binary, "serve", "--config", self.config_path, "--http",
             "127.0.0.1:%d" % self.port],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, env=env, text=True,
            bufsize=1)
        log.close()
        self.stopped = False
        banner = self.proc.stdout.readline()
        if "listening on" not in banner:
            raise RuntimeError("caudal %d did not start: %r" % (self.index, banner))
        # Drained, so that a full pipe never blocks the server's stdout.
        if not self.testing_hooks:
            threading.Thread(target=self._drain, args=(self.proc,), daemon=True).start()

    @staticmethod
    def _drain(proc):
        for _ in proc.stdout:
            pass

    def hook(self, line):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return self.proc.stdout.readline().strip()

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def kill(self):
        if self.proc is not None:
            if self.stopped:
                self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
            self.proc.wait()
            self.proc = None
            self.stopped = False

    def signal(self, sig):
        if self.running():
            self.proc.send_signal(sig)
            if sig in (signal.SIGSTOP, signal.SIGCONT):
                self.stopped = sig == signal.SIGSTOP

    def reload(self):
        self.generation += 1
        self.write_config()
        self.signal(signal.SIGHUP)

    def close(self):
        if self.proc is None:
            return
        if self.stopped:
            self.proc.send_signal(signal.SIGCONT)
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None


# --- Clients ------------------------------------------------------------------------------------

class Clients:
    """`workers` coroutines on one event loop (a thread of its own), each sending one request at a
    time to a random instance, over keep-alive connections; every request is a history row."""

    def __init__(self, instances, history_path, seed, workers, storm):
        self.instances = instances
        self.out = open(history_path, "w", buffering=1 << 20)
        self.out.write("sent_ns,answered_ns,instance,status,cost,keys,decided\n")
        self.rng = random.Random(seed ^ 0x5eed)
        self.workers = workers
        self.storm = storm  # threading.Event: while set, requests go to many fresh keys
        self.storm_round = 0
        self.stop = threading.Event()
        self.count = 0
        self.thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)

    def start(self):
        self.thread.start()

    def finish(self):
        self.stop.set()
        self.thread.join(timeout=30)
        self.out.close()

    def _pick(self):
        rng = self.rng
        if self.storm.is_set():
            # A lease expiry storm: many keys of the bucket policy each hit a few times (a lease
            # from the second request), then left to expire together.
            key = "bucket/storm-%d-%d" % (self.storm_round, rng.randrange(300))
            return [key], {"bucket": key.split("/", 1)[1]}, 1
        p = rng.choice(POLICIES)
        # One hot key takes half of a policy's requests.
        k = 0 if rng.random() < 0.5 else rng.randrange(1, p["keys"])
        keys = ["%s/k%d" % (p["name"], k)]
        if rng.random() < 0.1:  # all-or-nothing across two policies
            q = rng.choice([x for x in POLICIES if x is not p])
            keys.append("%s/k%d" % (q["name"], rng.randrange(q["keys"])))
        cost = 3 if rng.random() < 0.1 else 1
        descriptors = {key.split("/", 1)[0]: key.split("/", 1)[1] for key in keys}
        return keys, descriptors, cost

    async def _worker(self, w):
        conns = {}
        while not self.stop.is_set():
            inst = self.rng.choice(self.instances)
            keys, descriptors, cost = self._pick()
            body = json.dumps({"descriptors": descriptors, "cost": cost}).encode()
            request = (b"POST /v1/check HTTP/1.1\r\nHost: caudal\r\nContent-Type: "
                       b"application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
            sent = now_ns()
            status, decided = "error", ""
            try:
                conn = conns.get(inst.index)
                if conn is None:
                    conn = await asyncio.wait_for(
                        asyncio.open_connection("127.0.0.1", inst.port), 1.0)
                    conns[inst.index] = conn
                reader, writer = conn
                writer.write(request)
                status, decided = await asyncio.wait_for(self._answer(reader), 1.0)
            except asyncio.TimeoutError:
                status = "timeout"
            except (OSError, ValueError, asyncio.IncompleteReadError):
                status = "error"
            answered = now_ns()
            if status in ("timeout", "error"):
                conn = conns.pop(inst.index, None)
                if conn is not None:
                    conn[1].close()
            self.out.write("%d,%d,%d,%s,%d,%s,%s\n" % (sent, answered, inst.index, status, cost,
                                                      "|".join(keys), decided))
            self.count += 1
            if status == "error":
                await asyncio.sleep(0.02)  # a refused connection: not a busy loop

    @staticmethod
    async def _answer(reader):
        head = await reader.readuntil(b"\r\n\r\n")
        status = head[9:12].decode()
        m = re.search(rb"(?i)content-length: *(\d+)", head)
        body = await reader.readexactly(int(m.group(1))) if m else b""
        if b"connection: close" in head.lower():
            raise ValueError("closed by the server")
        decided = "|".join(d.decode() for d in re.findall(rb'"decided_by":"(\w+)"', body))
        return status, decided

    async def _run(self):
        await asyncio.gather(*(self._worker(w) for w in range(self.workers)))


# --- The nemesis --------------------------------------------------------------------------------

def store_fault(kind):
    """A fault of the Redis side (one at a time, the group healed after it)."""
    return kind.startswith(("redis", "sentinel-")) or kind in ("reshard", "clock",
                                                               "clock-failover")


class Nemesis:
    """Faults chosen from `seed` among the group's KINDS: a new one every 0.3-2 s while fewer
    than three are active; at most one Redis fault at a time (the cluster or Sentinel group is
    let heal fully between them) and at least two caudal instances untouched by a process
    fault."""

    def __init__(self, seed, cluster, proxies, instances, links, clients, sentinel_links=None):
        self.rng = random.Random(seed)
        self.cluster, self.proxies, self.instances = cluster, proxies, instances
        self.KINDS = cluster.KINDS
        self.links = links  # instance index -> its proxy ids
        self.sentinel_links = sentinel_links or {}  # instance index -> those to the sentinels
        self.clients = clients
        self.faults = []
        self.lock = threading.Lock()
        self.active = []
        self.redis_busy = False
        self.busy_instances = set()
        self.stop = threading.Event()
        self.errors = []

    def record(self, kind, target, detail=""):
        f = {"kind": kind, "target": target, "start_ns": now_ns(), "end_ns": None,
             "detail": detail}
        with self.lock:
            self.faults.append(f)
        return f

    def run(self, until_ns):
        threads = []
        while now_ns() < until_ns and not self.stop.is_set():
            time.sleep(self.rng.uniform(0.3, 2.0))
            if self.proxies.proc.poll() is not None:
                # The harness's own part died: what follows would measure nothing.
                self.errors.append("the proxy process exited (status %s)" %
                                   self.proxies.proc.returncode)
                break
            with self.lock:
                if len(self.active) >= 3:
                    continue
            kind = self.rng.choices([k for k, _ in self.KINDS], [w for _, w in self.KINDS])[0]
            duration = self.rng.uniform(0.3, 4.0)
            plan = self.plan(kind, duration)
            if plan is None:
                continue
            t = threading.Thread(target=self._apply, args=(kind, plan), daemon=True)
            t.start()
            threads.append(t)
        for t in threads:
            t.join(timeout=120)

    def plan(self, kind, duration):
        """Claims what the fault needs and returns what to do, or None when it cannot be now."""
        rng = self.rng
        with self.lock:
            if store_fault(kind):
                if self.redis_busy:
                    return None
                self.redis_busy = True
                self.active.append(kind)
                return {"duration": duration, "rng": random.Random(rng.random())}
            free = [i for i in self.instances if i.index not in self.busy_instances]
            if kind in ("caudal-kill", "caudal-stop") and len(free) <= 2:
                return None
            if not free or kind == "lease-storm":
                if kind != "lease-storm" or self.clients.storm.is_set():
                    return None
                self.active.append(kind)
                return {"duration": min(duration, 1.5)}
            inst = rng.choice(free)
            self.busy_instances.add(inst.index)
            self.active.append(kind)
            return {"duration": duration, "instance": inst, "ms": rng.choice([5, 20, 60, 150])}

    def _apply(self, kind, plan):
        try:
            getattr(self, "_" + kind.replace("-", "_"))(plan)
        except Exception as e:  # a harness failure is reported, never silently dropped
            self.errors.append("%s: %r" % (kind, e))
        finally:
            with self.lock:
                self.active.remove(kind)
                if "instance" in plan:
                    self.busy_instances.discard(plan["instance"].index)
                if store_fault(kind):
                    self.redis_busy = False

    def _end(self, f):
        f["end_ns"] = now_ns()
        f.setdefault("settled_ns", None)

    # caudal instances
    def _caudal_kill(self, p):
        inst = p["instance"]
        f = self.record("caudal-kill", "caudal-%d" % inst.index)
        inst.kill()
        time.sleep(p["duration"])
        inst.start()
        if inst.testing_hooks and self.overadmit:
            inst.hook("overadmit %d" % self.overadmit)
        self._end(f)

    def _caudal_stop(self, p):
        inst = p["instance"]
        f = self.record("caudal-stop", "caudal-%d" % inst.index, "%.2f s" % p["duration"])
        inst.signal(signal.SIGSTOP)
        time.sleep(p["duration"])
        inst.signal(signal.SIGCONT)
        self._end(f)

    def _caudal_reload(self, p):
        inst = p["instance"]
        f = self.record("caudal-reload", "caudal-%d" % inst.index)
        inst.reload()
        time.sleep(0.2)
        self._end(f)

    def _partition(self, p, how, links=None, kind=None):
        inst = p["instance"]
        ids = " ".join(str(i) for i in (links or self.links)[inst.index])
        f = self.record(kind or "partition-" + how, "caudal-%d" % inst.index,
                        "%.2f s" % p["duration"] + (" (%s)" % how if kind else ""))
        self.proxies.ask("%s %s" % (how, ids))
        time.sleep(p["duration"])
        self.proxies.ask("heal " + ids)
        self._end(f)

    def _partition_hold(self, p):
        self._partition(p, "hold")

    def _partition_drop(self, p):
        self._partition(p, "drop")

    def _partition_sentinels(self, p):
        # The instance keeps its links to the data nodes and loses those to every sentinel: no
        # failover announcement, no answer to who the primary is.
        how = "hold" if p["ms"] in (5, 20) else "drop"
        self._partition(p, how, self.sentinel_links, "partition-sentinels")

    def _latency(self, p):
        inst = p["instance"]
        ids = " ".join(str(i) for i in self.links[inst.index])
        f = self.record("latency", "caudal-%d" % inst.index, "+%d ms each way" % p["ms"])
        self.proxies.ask("delay %d %s" % (p["ms"], ids))
        time.sleep(p["duration"])
        self.proxies.ask("delay 0 " + ids)
        self._end(f)

    def _lease_storm(self, p):
        f = self.record("lease-storm", "bucket/storm-%d-*" % self.clients.storm_round)
        self.clients.storm.set()
        time.sleep(p["duration"])
        self.clients.storm.clear()
        self.clients.storm_round += 1
        self._end(f)

    # Redis
    def _settle(self, f):
        self.cluster.wait_healthy(60)
        f["settled_ns"] = now_ns()

    def _redis_kill_primary(self, p):
        node = p["rng"].choice(self.cluster.by_role("master"))
        f = self.record("redis-kill-primary", "redis-%d" % node.port)
        node.kill()
        try:
            # Restarted only once its replica took over: an empty primary coming back before
            # the failover would forget every counter (docs/reliability.md: no persistence).
            wait_until(lambda: len(self.cluster.by_role("master")) == self.cluster.primaries,
                       "a replica promoted", 30)
            time.sleep(p["duration"])
        finally:
            node.start()
        self._end(f)
        self._settle(f)

    def _redis_stop(self, p, role, kind):
        node = p["rng"].choice(self.cluster.by_role(role))
        f = self.record(kind, "redis-%d" % node.port, "%.2f s" % p["duration"])
        node.signal(signal.SIGSTOP)
        try:
            time.sleep(p["duration"])
        finally:
            node.signal(signal.SIGCONT)
        self._end(f)
        self._settle(f)

    def _redis_stop_primary(self, p):
        self._redis_stop(p, "master", "redis-stop-primary")

    def _redis_kill_replica(self, p):
        node = p["rng"].choice(self.cluster.by_role("slave"))
        f = self.record("redis-kill-replica", "redis-%d" % node.port)
        node.kill()
        time.sleep(p["duration"])
        node.start()
        self._end(f)
        self._settle(f)

    def _redis_stop_replica(self, p):
        self._redis_stop(p, "slave", "redis-stop-replica")

    def _redis_failover(self, p):
        node = p["rng"].choice(self.cluster.by_role("slave"))
        f = self.record("redis-failover", "redis-%d" % node.port, "CLUSTER FAILOVER")
        self.cluster.failover(node)
        self._end(f)
        self._settle(f)

    def _sentinel_failover(self, p):
        # Of a live primary: what it admits after the promotion, until it is demoted or its
        # clients learn of it, is lost (docs/scaling.md, "What a failover can lose").
        f = self.record("sentinel-failover", "sentinel", "SENTINEL FAILOVER")
        f["detail"] += " to redis-%d" % self.cluster.failover().port
        self._end(f)
        self._settle(f)

    # Sentinels (one at a time: the other two keep the quorum)
    def _sentinel_kill(self, p):
        node = p["rng"].choice(self.cluster.sentinels)
        f = self.record("sentinel-kill", "sentinel-%d" % node.port)
        node.kill()
        try:
            time.sleep(p["duration"])
        finally:
            node.start()
        self._end(f)
        self._settle(f)

    def _sentinel_stop(self, p):
        node = p["rng"].choice(self.cluster.sentinels)
        f = self.record("sentinel-stop", "sentinel-%d" % node.port, "%.2f s" % p["duration"])
        node.signal(signal.SIGSTOP)
        try:
            time.sleep(p["duration"])
        finally:
            node.signal(signal.SIGCONT)
        self._end(f)
        self._settle(f)

    def _reshard(self, p):
        f = self.record("reshard", "cluster")
        f["detail"] = self.cluster.migrate_slot_of_a_key(p["rng"]) or "nothing to move"
        self._end(f)
        self._settle(f)

    def _clock(self, p):
        rng = p["rng"]
        node = rng.choice([n for n in self.cluster.nodes if n.running()])
        ms = rng.choice([-3000, -1000, -300, 300, 1000, 3000])
        f = self.record("clock", "redis-%d" % node.port,
                        "%+d ms for %.2f s (%s)" % (ms, p["duration"], node.role()))
        node.set_offset_ms(ms)
        time.sleep(p["duration"])
        node.set_offset_ms(0)
        self._end(f)
        self._settle(f)

    def _clock_failover(self, p):
        # After a failover, "time from the store" is the new primary's clock: a replica whose
        # clock is off is promoted, serves for a while, and its clock is then put right. The
        # sentinels choose the replica they promote: every replica's clock is offset.
        rng = p["rng"]
        sentinel = self.cluster.topology == "sentinel"
        replicas = self.cluster.by_role("slave")
        nodes = replicas if sentinel else [rng.choice(replicas)]
        ms = rng.choice([-3000, -1000, 1000, 3000])
        f = self.record("clock-failover", "redis-%d" % nodes[0].port,
                        "%+d ms on a replica, promoted by %s FAILOVER, for %.2f s" % (
                            ms, "SENTINEL" if sentinel else "CLUSTER", p["duration"]))
        for n in nodes:
            n.set_offset_ms(ms)
        try:
            if sentinel:
                f["target"] = "redis-%d" % self.cluster.failover().port
            else:
                self.cluster.failover(nodes[0])
            time.sleep(p["duration"])
        finally:
            for n in nodes:
                n.set_offset_ms(0)
        self._end(f)
        self._settle(f)


def server_version():
    out = subprocess.run([REDIS_SERVER, "--version"], capture_output=True, text=True).stdout
    return out.split(" sha=")[0].strip()


def run(args):
    # Four instances, 24 proxies and their connections: past the default 1,024 descriptors.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    seed = args.seed
    # Absolute: a server restarted from its rewritten config file (Sentinel) has moved to its
    # directory before it reads the command line's.
    root = os.path.abspath(args.out or tempfile.mkdtemp(prefix="caudal-nemesis-"))
    os.makedirs(root, exist_ok=True)
    rng = random.Random(seed)
    preload = os.path.abspath(os.path.join(args.bin, "libcaudal_clock_offset.so"))
    testing = args.overadmit > 0
    binary = os.path.join(args.bin, "caudal-testing" if testing else "caudal")
    cluster = proxies = nemesis = None
    instances = []
    clients = None
    try:
        group = SentinelGroup if args.topology == "sentinel" else Cluster
        cluster = group(root, preload, rng)
        proxies = Proxies(os.path.join(args.bin, "caudal-nemesis-proxy"))
        links, sentinel_links = {}, {}
        for i in range(args.instances):
            address_map = {}
            links[i], sentinel_links[i] = [], []
            for n in cluster.nodes + cluster.sentinels:
                pid, port = proxies.open(n.port)
                links[i].append(pid)
                if n.sentinel:
                    sentinel_links[i].append(pid)
                address_map["127.0.0.1:%d" % n.port] = "127.0.0.1:%d" % port
            instances.append(Instance(i, binary, root, cluster.url, address_map,
                                      args.instances, testing))
        for inst in instances:
            inst.start()
            if testing:
                answer = inst.hook("overadmit %d" % args.overadmit)
                assert answer == "overadmitting %d" % args.overadmit, answer
        storm = threading.Event()
        clients = Clients(instances, os.path.join(root, "history.csv"), seed, args.workers, storm)
        nemesis = Nemesis(seed, cluster, proxies, instances, links, clients, sentinel_links)
        nemesis.overadmit = args.overadmit
        started = now_ns()
        clients.start()
        time.sleep(1.0)  # a clean start before the first fault
        if args.no_faults:
            time.sleep(args.duration)
        else:
            nemesis.run(started + int(args.duration * NS))
        time.sleep(1.0)
        clients.finish()
        over = 0
        if testing:
            for inst in instances:
                if inst.running():
                    over += int(inst.hook("overadmitted").split()[1])
        runinfo = {
            "seed": seed, "duration_s": args.duration, "store": cluster.description,
            "server": server_version(),
            "instances": args.instances, "workers": args.workers, "started_ns": started,
            "policies": {p["name"]: p for p in POLICIES}, "faults": nemesis.faults,
            "harness_errors": nemesis.errors, "overadmit_one_in": args.overadmit,
            "overadmitted_by_the_store": over,
        }
        with open(os.path.join(root, "run.json"), "w") as f:
            json.dump(runinfo, f, indent=1)
    finally:
        if clients is not None and not clients.stop.is_set():
            clients.finish()
        for inst in instances:
            inst.close()
        if proxies is not None:
            proxies.close()
        if cluster is not None:
            cluster.close()
    print("history and run: %s" % root)
    if nemesis is None:
        return 2
    if nemesis.errors:
        print("harness errors: " + "; ".join(nemesis.errors))
    status = checker.main([root, "--json", os.path.join(root, "result.json")])
    if testing:
        print("the store over-admitted %d requests on purpose" % over)
    if not args.keep and args.out is None:
        shutil.rmtree(root, ignore_errors=True)
    if nemesis.errors:
        return 2
    if args.expect_violations:
        ok = status == 1 and over > 0
        print("the checker %s the over-admission" % ("caught" if ok else "MISSED"))
        return 0 if ok else 1
    return status


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", required=True, help="the build directory")
    ap.add_argument("--duration", type=float, default=60.0, help="seconds of faults")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--topology", choices=["cluster", "sentinel"], default="cluster",
                    help="a Redis Cluster (3+3) or a Sentinel group (1+2, 3 sentinels)")
    ap.add_argument("--instances", type=int, default=4)
    ap.add_argument("--workers", type=int, default=12)
    ap.add_argument("--out", help="keep the run here (default: a temporary directory)")
    ap.add_argument("--overadmit", type=int, default=0, metavar="N",
                    help="caudal-testing's store admits one refused request in N")
    ap.add_argument("--no-faults", action="store_true", help="the clients only")
    ap.add_argument("--expect-violations", action="store_true",
                    help="succeed only when the checker fails (with --overadmit)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    sys.exit(run(ap.parse_args()))


if __name__ == "__main__":
    main()
