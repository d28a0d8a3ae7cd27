#!/usr/bin/env python3
"""`caudal serve --grpc` as a process: Envoy's ShouldRateLimit beside the HTTP API, on the same
store, clock (--test-hooks) and failure mode, with Redis stopped mid-run; gRPC health following
the store; the Envoy files reloaded when a ConfigMap-style symlink swap changes them, and never
half-written when a writer rewrites one in place; an always_charge rule's stream-done report
charged on one instance and waited out on another. Messages
come from rls_client_test (protoc --python_out at test time); the process harness from
tests/serve."""
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

import grpc

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "serve"))
import harness  # noqa: E402
from rls_client_test import METHOD, OK, OVER, TMP, d, rls_pb2  # noqa: E402


def load_health_pb2():
    # grpc/health/v1/health.proto's package would shadow the grpc module: load its file directly.
    path = os.path.join(TMP, "grpc", "health", "v1", "health_pb2.py")
    spec = importlib.util.spec_from_file_location("caudal_health_pb2", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


health_pb2 = load_health_pb2()
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING

ENVOY_YAML = textwrap.dedent("""\
    domain: edge
    descriptors:
      - key: client
        rate_limit: {unit: second, requests_per_unit: 1, algorithm: token_bucket, capacity: 3}
      - key: remote_address
        rate_limit: {unit: minute, requests_per_unit: 100}
    """)


class GrpcServe:
    """caudal serve with server.grpc and envoy_config, and a client for its gRPC port."""

    def __init__(self, store_yaml="", store=None, envoy_path=None):
        self.dir = tempfile.mkdtemp(prefix="caudal-envoy-")
        if envoy_path is None:
            envoy_path = os.path.join(self.dir, "ratelimit.yaml")
            with open(envoy_path, "w") as f:
                f.write(ENVOY_YAML)
        config = "server: {grpc: '127.0.0.1:0'}\nenvoy_config: %s\n%spolicies: []\n" % (
            envoy_path, store_yaml)
        self.serve = harness.Serve(config, store=store)
        line = self.serve.proc.stdout.readline().decode()
        m = re.search(r"gRPC\) on 127\.0\.0\.1:(\d+)", line)
        if not m:
            self.serve.close()
            raise AssertionError("no gRPC line: %r\n%s" % (line, self.serve.log()))
        self.channel = grpc.insecure_channel("127.0.0.1:%s" % m.group(1))
        self.call = self.channel.unary_unary(
            METHOD, request_serializer=rls_pb2.RateLimitRequest.SerializeToString,
            response_deserializer=rls_pb2.RateLimitResponse.FromString)

    def health(self):
        call = self.channel.unary_unary(
            "/grpc.health.v1.Health/Check",
            request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
            response_deserializer=health_pb2.HealthCheckResponse.FromString)
        return call(health_pb2.HealthCheckRequest(service=b""), timeout=10).status

    def watch(self):
        call = self.channel.unary_stream(
            "/grpc.health.v1.Health/Watch",
            request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
            response_deserializer=health_pb2.HealthCheckResponse.FromString)
        return call(health_pb2.HealthCheckRequest(service=b""), timeout=30)

    def ask(self, *descriptors):
        req = rls_pb2.RateLimitRequest(domain=b"edge")
        for desc in descriptors:
            out = req.descriptors.add()
            for kv in desc["entries"]:
                k, v = kv.split("=", 1)
                out.entries.add(key=k.encode(), value=v.encode())
        return self.call(req, timeout=10)

    def close(self):
        self.channel.close()
        self.serve.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class ServeGrpcTest(unittest.TestCase):
    def test_token_bucket_on_the_servers_clock(self):
        s = GrpcServe()
        try:
            codes = [s.ask(d("client=a")).overall_code for _ in range(4)]
            self.assertEqual(codes, [OK, OK, OK, OVER])
            s.serve.advance_ms(999)
            self.assertEqual(s.ask(d("client=a")).overall_code, OVER)
            s.serve.advance_ms(1)
            self.assertEqual(s.ask(d("client=a")).overall_code, OK)
        finally:
            s.close()

    def test_redis_stopped_deny_as_unavailable(self):
        redis = harness.Redis()
        s = GrpcServe("store: {on_failure: deny}\nenvoy: {deny_as: unavailable}\n", store=redis.url)
        try:
            self.assertEqual(s.ask(d("remote_address=1.2.3.4")).statuses[0].limit_remaining, 99)
            redis.stop()
            start = time.monotonic()
            with self.assertRaises(grpc.RpcError) as e:
                s.ask(d("remote_address=1.2.3.4"))
            self.assertEqual(e.exception.code(), grpc.StatusCode.UNAVAILABLE)
            self.assertLess(time.monotonic() - start, 3)  # the store's timeout, not the client's
        finally:
            s.close()
            redis.close()

    def test_redis_stopped_allow(self):
        redis = harness.Redis()
        s = GrpcServe("store: {on_failure: allow}\n", store=redis.url)
        try:
            self.assertEqual(s.ask(d("remote_address=1.2.3.4")).overall_code, OK)
            redis.stop()
            r = s.ask(d("remote_address=1.2.3.4"))
            self.assertEqual(r.overall_code, OK)
            headers = {h.key: h.value for h in r.response_headers_to_add}
            self.assertEqual(headers.get("Caudal-Degraded"), "store_unavailable")
        finally:
            s.close()
            redis.close()


    def test_health_follows_the_store(self):
        redis = harness.Redis()
        s = GrpcServe("store: {on_failure: allow}\n", store=redis.url)
        try:
            harness.wait_until(lambda: s.health() == SERVING, "the store probe to pass")
            stream = s.watch()
            self.assertEqual(next(stream).status, SERVING)
            redis.stop()
            # The store's probe notices within its interval; Watch streams see it at their poll.
            harness.wait_until(lambda: s.health() == NOT_SERVING, "health to turn NOT_SERVING")
            self.assertEqual(next(stream).status, NOT_SERVING)
            stream.cancel()
        finally:
            s.close()
            redis.close()

    def test_configmap_swap_reloads_and_a_bad_file_keeps_the_old_one(self):
        # The layout of a Kubernetes ConfigMap volume: ratelimit.yaml -> ..data/ratelimit.yaml,
        # ..data -> ..v1; an update writes ..v2 and renames a new ..data link over the old one.
        root = tempfile.mkdtemp(prefix="caudal-configmap-")
        serial = [0]

        def publish(text):
            serial[0] += 1
            version = os.path.join(root, "..v%d" % serial[0])
            os.mkdir(version)
            with open(os.path.join(version, "ratelimit.yaml"), "w") as f:
                f.write(text)
            os.symlink("..v%d" % serial[0], os.path.join(root, "..data_tmp"))
            os.rename(os.path.join(root, "..data_tmp"), os.path.join(root, "..data"))

        publish(ENVOY_YAML)
        os.symlink("..data/ratelimit.yaml", os.path.join(root, "ratelimit.yaml"))
        s = GrpcServe(envoy_path=root)
        try:
            def limit():
                return s.ask(d("remote_address=1.2.3.4")).statuses[0].current_limit.requests_per_unit

            self.assertEqual(limit(), 100)
            publish(ENVOY_YAML.replace("requests_per_unit: 100", "requests_per_unit: 5"))
            harness.wait_until(lambda: limit() == 5, "the swapped file to be served")
            failures = 'caudal_config_reloads_total{result="failure"}'
            before = s.serve.metric(failures)
            publish(ENVOY_YAML.replace("unit: minute", "unit: fortnight"))
            harness.wait_until(lambda: s.serve.metric(failures) > before, "the bad file's refusal")
            self.assertEqual(limit(), 5)  # the previous domains keep serving
            self.assertIn("reload refused", s.serve.log())
        finally:
            s.close()
            shutil.rmtree(root, ignore_errors=True)

    def test_a_file_rewritten_in_place_is_never_served_half_written(self):
        # A writer that rewrites the Envoy file in place, over and over: truncate, write a prefix
        # that is valid YAML on its own (the rule "late" is missing from it), pause 1..50 ms, write
        # the rest. Its writes keep the events coming, so the watcher compares while the file is
        # half-written (at max_delay at the latest); "late" must keep its limit throughout.
        late = "  - key: late\n    rate_limit: {unit: minute, requests_per_unit: 1000}\n"
        prefix = ENVOY_YAML
        s = GrpcServe()
        path = os.path.join(s.dir, "ratelimit.yaml")
        with open(path, "w") as f:
            f.write(prefix + late)
        successes = 'caudal_config_reloads_total{result="success"}'
        harness.wait_until(lambda: s.serve.metric(successes) >= 1, "the full file's first reload")
        writer_script = textwrap.dedent("""\
            import sys, time
            path, prefix, rest = sys.argv[1], sys.argv[2], sys.argv[3]
            end = time.monotonic() + 8
            pause = 1
            while time.monotonic() < end:
                with open(path, "w") as f:  # truncates: the file is rewritten in place
                    f.write(prefix)
                    f.flush()
                    time.sleep(pause / 1000)
                    f.write(rest)
                pause = pause % 50 + 7 if pause < 50 else 1
                time.sleep(0.005)
            """)
        try:
            def late_limit():
                return s.ask(d("late=x")).statuses[0].current_limit.requests_per_unit

            self.assertEqual(late_limit(), 1000)
            reloads = s.serve.metric(successes)
            writer = subprocess.Popen([sys.executable, "-c", writer_script, path, prefix, late])
            calls, unlimited = 0, 0
            while writer.poll() is None:
                calls += 1
                unlimited += late_limit() != 1000
                time.sleep(0.002)
            self.assertEqual(writer.returncode, 0)
            self.assertGreater(calls, 100)
            self.assertEqual(unlimited, 0, "%d of %d calls found no limit on \"late\"" % (
                unlimited, calls))
            # Once the writer stops, the file is stable: it is reloaded (whole), and only then.
            harness.wait_until(lambda: s.serve.metric(successes) > reloads, "the settled reload")
            self.assertEqual(late_limit(), 1000)
        finally:
            s.close()

    def test_control_characters_reach_no_metric_or_log_raw(self):
        # The reference decides on any value Envoy sends, and so does caudal (refusing one would
        # make Envoy, whose failure_mode_deny is false by default, let the request through). A
        # value's control characters are replaced in the stat key it names and escaped in logs.
        root = tempfile.mkdtemp(prefix="caudal-controls-")
        path = os.path.join(root, "ratelimit.yaml")
        with open(path, "w") as f:
            f.write("domain: edge\ndescriptors:\n  - key: user\n    detailed_metric: true\n"
                    "    rate_limit: {unit: minute, requests_per_unit: 1}\n")
        values = ["a\rb", "\x1b[31mred", "bell\x07", "del\x7f", "csi\u009b", "ls\u2028ep"]
        raw = [b"\r", b"\x1b", b"\x07", b"\x7f", "\u009b".encode(), "\u2028".encode()]
        for log_format in ("text", "json"):
            s = GrpcServe("logging: {format: %s, identities: value}\n" % log_format,
                          envoy_path=path)
            try:
                for v in values:
                    first, second = s.ask(d("user=" + v)), s.ask(d("user=" + v))
                    self.assertEqual((first.overall_code, second.overall_code), (OK, OVER), v)
                    self.assertEqual(first.statuses[0].current_limit.requests_per_unit, 1)
                _, _, metrics = s.serve.request("GET", "/metrics")
                for b in raw:
                    self.assertFalse(b in metrics, "%r raw in /metrics" % b)
                self.assertIn(b'policy="edge.user_a_b",stat="over_limit"} 1', metrics)
                self.assertIn(b'policy="edge.user__[31mred",stat="total_hits"} 2', metrics)
                self.assertIn(b'policy="edge.user_ls_ep",stat="within_limit"} 1', metrics)
                harness.wait_until(lambda: s.serve.log().count("refused") >= len(values),
                                   "the refusals' log lines")
                with open(s.serve.stderr_path, "rb") as f:
                    log = f.read()
                for b in raw:
                    self.assertFalse(b in log.replace(b"\n", b""), "%r raw in the log" % b)
                self.assertIn(b"user=a\\u000db", log)
                self.assertIn(b"user=ls\\u2028ep", log)
            finally:
                s.close()
        shutil.rmtree(root, ignore_errors=True)

    def test_bytes_that_are_no_request_are_invalid_argument_and_counted(self):
        s = GrpcServe()
        try:
            raw = s.channel.unary_unary(METHOD, request_serializer=lambda b: b,
                                        response_deserializer=rls_pb2.RateLimitResponse.FromString)
            garbage = [b"\xff\xff\xff\xff",      # a tag that never ends
                       b"\x0a\x05ab",              # domain: 5 bytes announced, 2 sent
                       b"\x0f\x01"]                # field 1 with wire type 7, which none has
            for g in garbage:
                with self.assertRaises(grpc.RpcError) as e:
                    raw(g, timeout=10)
                self.assertEqual(e.exception.code(), grpc.StatusCode.INVALID_ARGUMENT, g)
                self.assertEqual(e.exception.details(),
                                 "request: not a RateLimitRequest (malformed protobuf, %d bytes)"
                                 % len(g))
            self.assertEqual(s.serve.metric("caudal_rls_malformed_requests_total"), len(garbage))
            # No bytes at all are a request, an empty one, refused for what it lacks.
            with self.assertRaises(grpc.RpcError) as e:
                raw(b"", timeout=10)
            self.assertEqual(e.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
            self.assertEqual(e.exception.details(), "domain must not be empty")
            # The service goes on, and nothing was charged: the client's bucket is whole.
            self.assertEqual([s.ask(d("client=a")).overall_code for _ in range(4)],
                             [OK, OK, OK, OVER])
        finally:
            s.close()


STREAM_YAML = textwrap.dedent("""\
    domain: edge
    descriptors:
      - key: user
        rate_limit: {unit: minute, requests_per_unit: 60, algorithm: token_bucket, capacity: 100,
                     always_charge: true, name: stream}
      - key: path
        rate_limit: {unit: minute, requests_per_unit: 1}
    """)


class AlwaysChargeTwoInstancesTest(unittest.TestCase):
    """Envoy's apply_on_stream_done across two `caudal serve --grpc` on one redis-server: a check
    of hits_addend 0 on the request path, the stream's actual cost reported at its end."""

    def setUp(self):
        self.redis = harness.Redis()
        self.root = tempfile.mkdtemp(prefix="caudal-stream-")
        path = os.path.join(self.root, "ratelimit.yaml")
        with open(path, "w") as f:
            f.write(STREAM_YAML)
        extra = "envoy: {headers: ietf_and_x_ratelimit}\n"
        self.a = GrpcServe(extra, store=self.redis.url, envoy_path=path)
        self.b = GrpcServe(extra, store=self.redis.url, envoy_path=path)

    def tearDown(self):
        self.a.close()
        self.b.close()
        self.redis.close()
        shutil.rmtree(self.root, ignore_errors=True)

    @staticmethod
    def ask(s, *descriptors):
        """descriptors: (key, value, hits_addend) each."""
        req = rls_pb2.RateLimitRequest(domain=b"edge")
        for key, value, hits in descriptors:
            out = req.descriptors.add()
            out.entries.add(key=key.encode(), value=value.encode())
            out.hits_addend.value = hits
        r = s.call(req, timeout=10)
        return r, {h.key: h.value for h in r.response_headers_to_add}

    def test_a_report_charged_on_one_instance_makes_the_other_wait_until_the_debt_is_paid(self):
        a, b = self.a, self.b
        # Each instance decides on its own scripted clock (Redis decides at the time each one
        # passes): read both, so that every expectation below is exact to the microsecond.
        now_a, now_b = a.serve.advance_ms(0), b.serve.advance_ms(0)
        self.assertLess(abs(now_b - now_a), 10_000_000)
        r, _ = self.ask(a, ("user", "client-7", 0))
        self.assertEqual((r.overall_code, r.statuses[0].limit_remaining), (OK, 100))
        # The stream used 130, more than the burst: refused (Envoy ignores the answer) and
        # counted all the same, 30 units of debt at one a second.
        r, _ = self.ask(a, ("user", "client-7", 130))
        self.assertEqual(r.overall_code, OVER)
        self.assertEqual(r.statuses[0].duration_until_reset.seconds, 130)
        paid = now_a + 30_000_000  # µs, on A's clock, where the debt was written
        r, headers = self.ask(b, ("user", "client-7", 0))
        self.assertEqual(r.overall_code, OVER, "B's next check waits")
        self.assertEqual(r.statuses[0].limit_remaining, 0)
        wait_s = -(-(paid - now_b) // 1_000_000)  # whole seconds, rounded up
        full_s = -(-(now_a + 130_000_000 - now_b) // 1_000_000)
        self.assertEqual(r.statuses[0].duration_until_reset.seconds, full_s)
        self.assertEqual(headers["x-ratelimit-reset"], str(wait_s), headers)
        self.assertEqual(headers["RateLimit"], '"stream";r=0;t=%d' % wait_s)
        # B's clock moved to the last whole ms before the debt is paid, then 1 ms on.
        steps = -(-(paid - now_b) // 1000)
        self.assertGreater(steps, 1)
        now_b = b.serve.advance_ms(steps - 1)
        self.assertLess(now_b, paid)
        r, headers = self.ask(b, ("user", "client-7", 0))
        self.assertEqual(r.overall_code, OVER, "1 ms before the debt is paid")
        self.assertEqual(headers["x-ratelimit-reset"], "1")
        self.assertGreaterEqual(b.serve.advance_ms(1), paid)
        r, _ = self.ask(b, ("user", "client-7", 0))
        self.assertEqual((r.overall_code, r.statuses[0].limit_remaining), (OK, 0), "paid")
        # All-or-nothing: a report that another descriptor refuses is charged all the same.
        b.serve.advance_ms(10_000)  # 10 units back
        r, _ = self.ask(b, ("path", "/p", 1))
        self.assertEqual(r.overall_code, OK)
        r, _ = self.ask(b, ("user", "client-7", 4), ("path", "/p", 1))
        self.assertEqual(r.overall_code, OVER)
        self.assertEqual([s.code for s in r.statuses], [OK, OVER])
        r, _ = self.ask(a, ("user", "client-7", 0))
        self.assertEqual(r.statuses[0].limit_remaining, 6, "charged in Redis, seen from A")


if __name__ == "__main__":
    unittest.main(verbosity=2)
