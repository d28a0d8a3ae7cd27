"""caudal's container image (packaging/image/build-image) run under podman as a user would run
it: a mounted config and Envoy config directory, `--network host`, a read-only root filesystem.
From outside the container: /v1/check, Envoy's RLS and gRPC health answer; the process runs as
the image's non-root user, logs JSON, and has no shell; on SIGTERM with requests in flight (held
at a paused Redis) it closes its listeners, answers every request and exits 0.

podman runs here with the settings this machine needs (crun cannot set rlimits without
CAP_SYS_RESOURCE, and cgroups are v1): runc, cgroupfs, no default ulimits (a containers.conf of
the test's own). Its storage lives in the build directory, beside the image.
Environment (set by CTest): CAUDAL_IMAGE_DIR, RLS_PROTO_ROOT, PROTOC, PROTOBUF_INCLUDE."""
import concurrent.futures
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import unittest

import grpc

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "serve"))
sys.path.insert(0, os.path.join(HERE, "..", "envoy"))
import harness  # noqa: E402
from rls_client_test import METHOD, OK, OVER, rls_pb2  # noqa: E402
from test_tls_grpc import HEALTH_METHOD, health_pb2  # noqa: E402

IMAGE_DIR = os.environ["CAUDAL_IMAGE_DIR"]
CONTAINERS_CONF = """\
[containers]
default_ulimits = []

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
"""
ENVOY_YAML = "domain: edge\ndescriptors:\n  - key: path\n    rate_limit: {unit: minute, requests_per_unit: 2}\n"
IN_FLIGHT = 6  # of each, HTTP and gRPC
DEFAULT_CONFIG = "/etc/caudal/caudal.yaml"  # the image's CAUDAL_CONFIG


class Podman:
    """podman with this test's containers.conf and storage under IMAGE_DIR/podman."""

    def __init__(self, conf_dir):
        conf = os.path.join(conf_dir, "containers.conf")
        with open(conf, "w") as f:
            f.write(CONTAINERS_CONF)
        self.env = dict(os.environ, CONTAINERS_CONF=conf)
        storage = os.path.join(IMAGE_DIR, "podman")
        self.base = ["podman", "--root", os.path.join(storage, "root"),
                     "--runroot", os.path.join(storage, "run")]

    def __call__(self, *args, check=True):
        r = subprocess.run(self.base + list(args), env=self.env, capture_output=True, text=True,
                           timeout=120)
        if check and r.returncode != 0:
            raise AssertionError("podman %s: %s%s" % (" ".join(args), r.stdout, r.stderr))
        return r


class ImageTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.mkdtemp(prefix="caudal-image-")
        cls.podman = Podman(cls.dir)
        loaded = cls.podman("load", "-i", os.path.join(IMAGE_DIR, "caudal-image.tar")).stdout
        m = re.search(r"Loaded image.*: (\S+)", loaded)
        assert m, loaded
        cls.image = m.group(1)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.dir, ignore_errors=True)

    def setUp(self):
        self.redis = harness.Redis()
        self.addCleanup(self.redis.close)
        self.config_dir = tempfile.mkdtemp(prefix="caudal-image-config-", dir=self.dir)
        envoy_dir = os.path.join(self.config_dir, "ratelimit")
        os.mkdir(envoy_dir)
        with open(os.path.join(envoy_dir, "edge.yaml"), "w") as f:
            f.write(ENVOY_YAML)
        self.http_port, self.grpc_port = harness.free_port(), harness.free_port()
        with open(os.path.join(self.config_dir, "caudal.yaml"), "w") as f:
            f.write(textwrap.dedent("""\
                store: {url: '%s', timeout: 10s}
                server: {http: '127.0.0.1:%d', grpc: '127.0.0.1:%d', shutdown_timeout: 20s}
                envoy_config: /etc/caudal/ratelimit
                policies:
                  - name: per-key
                    identity: [api_key]
                    limits: [{algorithm: token_bucket, capacity: 2, refill: 2/1m}]
                """) % (self.redis.url, self.http_port, self.grpc_port))
        for d, _, files in os.walk(self.config_dir):  # readable by the image's user
            os.chmod(d, 0o755)
            for name in files:
                os.chmod(os.path.join(d, name), 0o644)
        self.name = "caudal-test-%d" % self.http_port
        self.base = "http://127.0.0.1:%d" % self.http_port

    def volumes(self, config_at=DEFAULT_CONFIG):
        """The test's config mounted at `config_at`, and Envoy's directory where it names it."""
        return ["--volume", "%s/caudal.yaml:%s:ro" % (self.config_dir, config_at),
                "--volume", "%s/ratelimit:/etc/caudal/ratelimit:ro" % self.config_dir]

    def run_once(self, *args, config_at=DEFAULT_CONFIG):
        """`podman run IMAGE ARGS...` to its end: the finished podman run."""
        return self.podman("run", "--rm", "--network", "host", "--read-only",
                           *self.volumes(config_at), self.image, *args, check=False)

    def start(self, *args, config_at=DEFAULT_CONFIG):
        """`podman run --detach IMAGE ARGS...`, ready once HTTP and gRPC listen."""
        self.podman("run", "--detach", "--name", self.name, "--network", "host", "--read-only",
                    *self.volumes(config_at), self.image, *args)
        self.addCleanup(self.podman, "rm", "--force", self.name, check=False)
        # HTTP listens first, gRPC next: ready once both do.
        harness.wait_until(lambda: self.get("/readyz")[0] == 200, "the container to be ready")
        harness.wait_until(lambda: not self.refused(self.grpc_port), "gRPC to listen")
        self.channel = grpc.insecure_channel("127.0.0.1:%d" % self.grpc_port)
        self.addCleanup(self.channel.close)

    # The harness's HTTP client, on self.base.
    request = harness.Serve.request
    check_descriptors = harness.Serve.check

    def get(self, path):
        try:
            return self.request("GET", path)
        except OSError:
            return 0, {}, b""

    def check(self, key):
        return self.check_descriptors({"api_key": key})

    def rls(self, path=b"/a"):
        call = self.channel.unary_unary(
            METHOD, request_serializer=rls_pb2.RateLimitRequest.SerializeToString,
            response_deserializer=rls_pb2.RateLimitResponse.FromString)
        req = rls_pb2.RateLimitRequest(domain=b"edge")
        req.descriptors.add().entries.add(key=b"path", value=path)
        return call, req

    def inspect(self, template):
        return self.podman("inspect", "--format", template, self.name).stdout.strip()

    def stop(self):
        self.podman("kill", "--signal", "TERM", self.name)
        self.assertEqual(self.podman("wait", self.name).stdout.strip(), "0")
        self.podman("rm", self.name)

    def json_logs(self):
        logs = self.podman("logs", self.name)
        return [json.loads(line) for line in (logs.stderr + logs.stdout).splitlines()
                if line.strip()]

    def test_serves_from_outside_as_a_non_root_user_on_a_read_only_root(self):
        self.start()  # the image's own command: serve its config, JSON logs
        self.assertEqual(self.check("k")[0], 200)
        self.assertEqual(self.check("k")[0], 200)
        self.assertEqual(self.check("k")[0], 429)
        call, req = self.rls()
        self.assertEqual(call(req, timeout=10).overall_code, OK)
        self.assertEqual(call(req, timeout=10).overall_code, OK)
        self.assertEqual(call(req, timeout=10).overall_code, OVER)
        health = self.channel.unary_unary(
            HEALTH_METHOD, request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
            response_deserializer=health_pb2.HealthCheckResponse.FromString)
        self.assertEqual(health(health_pb2.HealthCheckRequest(service=b""), timeout=10).status,
                         health_pb2.HealthCheckResponse.SERVING)

        # The process, seen from the host: the image's user, not root, on a read-only root.
        pid = int(self.inspect("{{.State.Pid}}"))
        with open("/proc/%d/status" % pid) as f:
            uids = re.search(r"^Uid:\s+(\d+)\s+(\d+)", f.read(), re.M)
        self.assertEqual(uids.groups(), ("10001", "10001"))
        with open("/proc/%d/mountinfo" % pid) as f:
            root = [line.split() for line in f if line.split()[4] == "/"]
        self.assertTrue(root and root[0][5].split(",")[0] == "ro", root)
        # Logs are JSON lines; there is no shell to exec into.
        lines = self.json_logs()
        self.assertTrue(any("listening on http://127.0.0.1" in line["msg"] for line in lines))
        shell = self.podman("exec", self.name, "/bin/sh", "-c", "true", check=False)
        self.assertNotEqual(shell.returncode, 0)

    def test_serve_as_a_command_or_its_flags_alone(self):
        # The config mounted elsewhere than the image's: served only if the flag reached serve;
        # then the image's config with a flag of serve's alone.
        other_port = harness.free_port()
        cases = [(["serve", "--config", "/config/caudal.yaml"], "/config/caudal.yaml", None),
                 (["--config", "/config/caudal.yaml"], "/config/caudal.yaml", None),
                 (["--http", "127.0.0.1:%d" % other_port], DEFAULT_CONFIG, other_port)]
        for i, (args, config_at, port) in enumerate(cases):
            with self.subTest(args=args):
                self.base = "http://127.0.0.1:%d" % (port or self.http_port)
                self.start(*args, config_at=config_at)
                self.assertEqual(self.check("k%d" % i)[0], 200)
                lines = self.json_logs()  # the image's log format, whatever the arguments
                self.assertTrue(any("listening on %s" % self.base in line["msg"]
                                    for line in lines), lines)
                self.stop()

    def test_validate_help_and_version(self):
        valid = self.run_once("validate", "--config", "/config/caudal.yaml",
                              config_at="/config/caudal.yaml")
        self.assertEqual(valid.returncode, 0, valid.stderr)
        self.assertIn("/config/caudal.yaml: valid (1 policies: per-key;", valid.stdout)
        # Without --config, the image's: here the test's, mounted over it.
        mounted = self.run_once("validate")
        self.assertEqual(mounted.returncode, 0, mounted.stderr)
        self.assertIn(DEFAULT_CONFIG + ": valid (1 policies: per-key;", mounted.stdout)
        with open(os.path.join(self.config_dir, "caudal.yaml"), "a") as f:
            f.write("  - name: per-key\n")  # a second policy of the same name
        broken = self.run_once("validate")
        self.assertEqual(broken.returncode, 2, broken.stdout)
        self.assertIn("caudal validate: ", broken.stderr)

        usage = self.run_once("--help")
        self.assertEqual(usage.returncode, 0, usage.stderr)
        for command in ("serve", "validate", "check", "admin", "simulate"):
            self.assertRegex(usage.stdout, r"(?m)^  %s " % command)
        for args in (["version"], ["--version"]):
            version = self.run_once(*args)
            self.assertEqual(version.returncode, 0, version.stderr)
            self.assertRegex(version.stdout, r"^caudal \d+\.\d+\.\d+")
        unknown = self.run_once("frobnicate")
        self.assertEqual(unknown.returncode, 2)
        self.assertIn('unknown command "frobnicate"', unknown.stderr)

    def test_sigterm_answers_every_request_in_flight(self):
        self.start()
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=IN_FLIGHT)
        self.addCleanup(pool.shutdown)
        call, req = self.rls()
        call(req, timeout=10)  # the channel is connected before the store pauses
        # Redis holds every write from now on: each decision waits at the store.
        self.assertEqual(self.redis.command("CLIENT", "PAUSE", "60000", "WRITE"), b"+OK")
        rls = [call.future(self.rls(b"/p%d" % i)[1], timeout=60) for i in range(IN_FLIGHT)]
        http = [pool.submit(self.check, "k%d" % i) for i in range(IN_FLIGHT)]
        harness.wait_until(self.decisions_wait_at_redis, "decisions to wait at the paused Redis")

        self.podman("kill", "--signal", "TERM", self.name)
        harness.wait_until(lambda: self.refused(self.http_port), "the HTTP listener to close")
        harness.wait_until(lambda: self.refused(self.grpc_port), "the gRPC listener to close")
        self.assertFalse(any(f.done() for f in http + rls), "answered before the store did")
        self.assertEqual(self.inspect("{{.State.Running}}"), "true")

        self.assertEqual(self.redis.command("CLIENT", "UNPAUSE"), b"+OK")
        for f in http:
            status, headers, body = f.result(timeout=30)
            self.assertEqual(status, 200, body)
            self.assertEqual(headers.get("connection"), "close")
        for f in rls:
            self.assertEqual(f.result(timeout=30).overall_code, OK)
        self.assertEqual(self.podman("wait", self.name).stdout.strip(), "0")
        logs = self.podman("logs", self.name)
        self.assertIn('"msg":"stopped"', logs.stdout + logs.stderr)

    def decisions_wait_at_redis(self):
        """A client of Redis is paused on a decision, and caudal has accepted every connection
        (its listen queue is empty), so each request is read and on its way to the store."""
        queue = subprocess.run(["ss", "-Hltn", "sport = :%d" % self.http_port],
                               capture_output=True, text=True).stdout.split()
        return self.redis_info("blocked_clients") >= 1 and len(queue) > 1 and queue[1] == "0"

    def redis_info(self, field):
        with socket.create_connection(("127.0.0.1", self.redis.port), timeout=5) as s:
            s.sendall(b"INFO clients\r\n")
            data = b""
            while field.encode() not in data or not data.endswith(b"\r\n"):
                data += s.recv(4096)
        m = re.search(field.encode() + rb":(\d+)", data)
        return int(m.group(1)) if m else 0

    @staticmethod
    def refused(port):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return False
        except ConnectionRefusedError:
            return True
        except ConnectionResetError:  # taken into a closing listener's backlog: ask again
            return False


if __name__ == "__main__":
    unittest.main()
