"""Process-level test support: a real `caudal serve` (and, when asked, a real redis-server) on
free loopback ports, each in its own temporary directory, stopped when the test ends."""
import json
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import unittest
import urllib.request

import openapi_check

CAUDAL = os.environ.get("CAUDAL_BIN", "build/caudal")
# The same command line with test hooks (a scripted clock, a store that fails on demand), driven
# over its stdin; never the released binary.
CAUDAL_TESTING = os.environ.get("CAUDAL_TESTING_BIN", "build/caudal-testing")
READY_TIMEOUT_S = 15
# The server the tests start and its client: redis-server and redis-cli, or with
# CAUDAL_TEST_REDIS=valkey valkey-server and valkey-cli (docs/stores.md).
REDIS_FAMILY = os.environ.get("CAUDAL_TEST_REDIS") or "redis"
REDIS_SERVER = REDIS_FAMILY + "-server"
REDIS_CLI = REDIS_FAMILY + "-cli"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(predicate, what, timeout_s=READY_TIMEOUT_S):
    """Polls for readiness (a process up, a log line written); never for rate-limit time."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError("timed out waiting for " + what)


class Redis:
    """A redis-server on a free port; started at once unless started=False (start() later).
    `password` sets requirepass; `persistence` replaces the default (no RDB, no AOF) with other
    redis-server arguments, e.g. ["--appendonly", "yes", "--appendfsync", "always"]; `bind` and
    `port` place it elsewhere than a free loopback port. start() after stop() keeps the port and
    the directory, as a restarted server would."""

    def __init__(self, started=True, password=None, persistence=None, bind="127.0.0.1",
                 port=None):
        self.dir = tempfile.mkdtemp(prefix="caudal-redis-")
        self.bind = bind
        self.port = port or free_port()
        self.password = password
        self.persistence = persistence or ["--save", "", "--appendonly", "no"]
        self.proc = None
        if started:
            self.start()

    def start(self, wrap=None):
        """`wrap`: a command prefix, e.g. ["ip", "netns", "exec", name] to run it elsewhere."""
        args = (wrap or []) + [REDIS_SERVER, "--bind", self.bind, "--port", str(self.port),
                               "--dir", self.dir] + self.persistence
        if self.password:
            args += ["--requirepass", self.password]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until(self._answers, REDIS_SERVER)
        if not self.password:  # the server asked for, never another one on PATH's say
            info = self.command("INFO", "server", whole=True)
            assert (b"valkey_version:" in info) == (REDIS_FAMILY == "valkey"), info

    def _answers(self):
        try:
            with socket.create_connection((self.bind, self.port), timeout=0.5) as s:
                s.sendall(b"PING\r\n")
                reply = s.recv(64)
                return reply.startswith(b"+PONG") or reply.startswith(b"-NOAUTH")
        except OSError:
            return False

    def stop(self):
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def command(self, *words, whole=False):
        """One command over RESP; the reply's first line (enough for +OK, :n, $n), or with
        `whole` what one read returns."""
        with socket.create_connection((self.bind, self.port), timeout=5) as s:
            wire = b"*%d\r\n" % len(words)
            for w in words:
                w = w.encode() if isinstance(w, str) else w
                wire += b"$%d\r\n%s\r\n" % (len(w), w)
            s.sendall(wire)
            reply = s.recv(4096)
            return reply if whole else reply.split(b"\r\n")[0]

    @property
    def url(self):
        return "redis://%s:%d" % (self.bind, self.port)

    def close(self):
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


def cluster_port():
    """A free port whose cluster bus port (+10000) is free too, below the ephemeral range."""
    import random
    while True:
        port = random.randrange(20000, 30000)
        try:
            with socket.socket() as a, socket.socket() as b:
                a.bind(("127.0.0.1", port))
                b.bind(("127.0.0.1", port + 10000))
            return port
        except OSError:
            continue


class RedisCluster:
    """A Redis Cluster of `primaries` redis-servers on loopback, joined by `redis-cli --cluster
    create`; ready once every node says cluster_state:ok."""

    def __init__(self, primaries=3):
        args = ["--save", "", "--appendonly", "no", "--cluster-enabled", "yes",
                "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "1000"]
        self.nodes = [Redis(persistence=args, port=cluster_port()) for _ in range(primaries)]
        try:
            subprocess.run([REDIS_CLI, "--cluster", "create"] +
                           ["127.0.0.1:%d" % n.port for n in self.nodes] +
                           ["--cluster-replicas", "0", "--cluster-yes"],
                           check=True, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                           stdin=subprocess.DEVNULL, timeout=60)
            wait_until(self._healthy, "the cluster's slots to be served")
        except BaseException:
            self.close()
            raise

    def _healthy(self):
        for n in self.nodes:
            with socket.create_connection((n.bind, n.port), timeout=5) as s:
                s.sendall(b"CLUSTER INFO\r\n")
                if b"cluster_state:ok" not in s.recv(4096):
                    return False
        return True

    @property
    def url(self):
        return "redis-cluster://" + ",".join("127.0.0.1:%d" % n.port for n in self.nodes)

    def close(self):
        for n in self.nodes:
            n.close()


def raise_file_limit():
    """Raises this process's soft descriptor limit to the hard one, for tests holding many
    connections (the CI's default soft limit is 1024)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def connect_from(source, port, timeout_s=5):
    """A TCP connection to 127.0.0.1:`port` from the loopback address `source` (any of
    127.0.0.0/8), so that one test can be several clients."""
    c = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    c.settimeout(timeout_s)
    c.bind((source, 0))
    c.connect(("127.0.0.1", port))
    return c


def open_descriptors(pid):
    return len(os.listdir("/proc/%d/fd" % pid))


def cpu_seconds(pid):
    """User plus system CPU time the process has used so far."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Serve:
    """`caudal serve` with `config` (YAML text) on a free port. With test_hooks (the default) it is
    caudal-testing's: advance_ms() moves its clock, fail_store() / recover_store() its store.
    `nofile`: (soft, hard) descriptor limits to start it with."""

    def __init__(self, config, test_hooks=True, store=None, env=None, files=None, nofile=None):
        self.dir = tempfile.mkdtemp(prefix="caudal-serve-")
        self.config_path = os.path.join(self.dir, "caudal.yaml")
        for name, content in (files or {}).items():  # beside the config, e.g. a password file
            with open(os.path.join(self.dir, name), "w") as f:
                f.write(content)
        self.write_config(config)
        self.stderr_path = os.path.join(self.dir, "stderr.log")
        binary = CAUDAL_TESTING if test_hooks else CAUDAL
        args = [binary, "serve", "--config", self.config_path, "--http", "127.0.0.1:0"]
        if store:
            args += ["--store", store]
        self._stderr = open(self.stderr_path, "wb")
        preexec = None
        if nofile is not None:
            def preexec():
                resource.setrlimit(resource.RLIMIT_NOFILE, nofile)
        self.proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self._stderr, env=dict(os.environ, **(env or {})),
                                     preexec_fn=preexec)
        line = self.proc.stdout.readline().decode()
        self.banner = line
        m = re.search(r"listening on (https?)://127\.0\.0\.1:(\d+)", line)
        if not m:
            log = self.log()
            self.close()
            raise AssertionError("caudal serve did not start: %r\n%s" % (line, log))
        self.port = int(m.group(2))
        self.base = "%s://127.0.0.1:%d" % (m.group(1), self.port)
        # Each server is on the transport asked for (CAUDAL_HTTP_IO, else the default,
        # io_uring): a silent fallback to epoll must not pass for the suite's io_uring run.
        wanted = (env or {}).get("CAUDAL_HTTP_IO", os.environ.get("CAUDAL_HTTP_IO", "io_uring"))
        if ("HTTP on io_uring" in line) != (wanted == "io_uring"):
            log = self.log()
            self.close()
            raise AssertionError("caudal serve is not on %s: %r\n%s" % (wanted, line, log))

    def write_config(self, text):
        tmp = self.config_path + ".tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, self.config_path)  # atomically, as a deploy tool would

    def log(self):
        with open(self.stderr_path, "rb") as f:
            return f.read().decode(errors="replace")

    def request(self, method, path, body=None, headers=None):
        """(status, headers dict (lower-case names), body bytes) without raising on 4xx/5xx.
        Every response is checked against docs/openapi.json (openapi_check)."""
        data = body.encode() if isinstance(body, str) else body
        req = urllib.request.Request(self.base + path, data=data, method=method,
                                     headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                reply = r.status, {k.lower(): v for k, v in r.headers.items()}, r.read()
        except urllib.error.HTTPError as e:
            reply = e.code, {k.lower(): v for k, v in e.headers.items()}, e.read()
        openapi_check.check(method, path, *reply)
        return reply

    def check(self, descriptors, cost=None):
        payload = {"descriptors": descriptors}
        if cost is not None:
            payload["cost"] = cost
        status, headers, body = self.request("POST", "/v1/check", json.dumps(payload),
                                             {"Content-Type": "application/json"})
        return status, headers, json.loads(body) if body else None

    def hook(self, command):
        """Sends one test-hook command; its one-line answer."""
        self.proc.stdin.write((command + "\n").encode())
        self.proc.stdin.flush()
        return self.proc.stdout.readline().decode().strip()

    def advance_ms(self, ms):
        reply = self.hook("advance %d" % ms)
        assert reply.startswith("now "), reply
        return int(reply.split()[1])  # the server's time, µs since the epoch

    def fail_store(self):
        assert self.hook("fail") == "failing"

    def recover_store(self):
        assert self.hook("recover") == "recovered"

    def metric(self, name_and_labels):
        _, _, body = self.request("GET", "/metrics")
        for line in body.decode().splitlines():
            if line.startswith(name_and_labels + " "):
                return float(line.split()[-1])
        return 0.0

    def signal(self, sig):
        self.proc.send_signal(sig)

    def close(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()
        self.proc.stdin.close()
        self._stderr.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class ThreeInstances(unittest.TestCase):
    """Three `caudal serve` (CONFIG % the store's URL, with ENV) on one redis-server, shared by a
    class's tests; a subclass with OnACluster first puts them on a three-primary Redis Cluster.
    `nodes` are the stores started, `servers` the instances."""
    CONFIG = None
    ENV = None

    @classmethod
    def start_store(cls):
        cls.redis = Redis()
        cls.nodes = [cls.redis]
        return cls.redis.url

    @classmethod
    def setUpClass(cls):
        url = cls.start_store()
        cls.servers = [Serve(cls.CONFIG % url, test_hooks=False, env=cls.ENV) for _ in range(3)]

    @classmethod
    def tearDownClass(cls):
        for s in cls.servers:
            s.close()
        for n in cls.nodes:
            n.close()


class OnACluster:
    """ThreeInstances' store as a three-primary Redis Cluster (`cluster`)."""

    @classmethod
    def start_store(cls):
        cls.cluster = RedisCluster()
        cls.nodes = [cls.cluster]
        return cls.cluster.url

