"""Graceful shutdown of a real `caudal serve`: SIGTERM with requests in flight over HTTP and gRPC
(held at the store by caudal-testing's hooks) turns readiness off, closes both listeners, answers
every request, and exits 0; a second SIGTERM exits at once; a store that never answers is cut at
server.shutdown_timeout. Messages come from protoc at test time (tests/envoy/rls_client_test.py)."""
import concurrent.futures
import os
import re
import signal
import socket
import sys
import textwrap
import threading
import time
import unittest

import grpc

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "envoy"))
import harness  # noqa: E402
from rls_client_test import METHOD, OK, rls_pb2  # noqa: E402
from test_tls_grpc import health_pb2  # noqa: E402

ENVOY_YAML = "domain: edge\ndescriptors:\n  - key: path\n    rate_limit: {unit: minute, requests_per_unit: 1000}\n"
WATCH_METHOD = "/grpc.health.v1.Health/Watch"
IN_FLIGHT = 6  # of each, HTTP and gRPC


def refused(port):
    """True once nothing listens on port. A connection reset means it was taken into the backlog of
    a listener that closed before accepting it: closing, not yet closed, so ask again."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return False
    except ConnectionRefusedError:
        return True
    except ConnectionResetError:
        return False


class ShutdownTest(unittest.TestCase):
    def start(self, shutdown_timeout="10s"):
        envoy_dir = harness.tempfile.mkdtemp(prefix="caudal-envoy-")
        self.addCleanup(harness.shutil.rmtree, envoy_dir, True)
        with open(os.path.join(envoy_dir, "edge.yaml"), "w") as f:
            f.write(ENVOY_YAML)
        config = textwrap.dedent("""\
            server: {grpc: '127.0.0.1:0', shutdown_timeout: %s}
            envoy_config: %s
            policies:
              - name: per-key
                identity: [api_key]
                limits: [{algorithm: token_bucket, capacity: 1000, refill: 1000/1m}]
            """) % (shutdown_timeout, envoy_dir)
        self.serve = harness.Serve(config)
        self.addCleanup(self.serve.close)
        line = self.serve.proc.stdout.readline().decode()
        m = re.search(r"on 127\.0\.0\.1:(\d+)", line)
        self.assertIsNotNone(m, line + self.serve.log())
        self.grpc_port = int(m.group(1))
        self.channel = grpc.insecure_channel("127.0.0.1:%d" % self.grpc_port)
        self.addCleanup(self.channel.close)
        harness.wait_until(lambda: self.serve.request("GET", "/readyz")[0] == 200, "ready")
        self.pool = concurrent.futures.ThreadPoolExecutor(max_workers=2 * IN_FLIGHT)
        self.addCleanup(self.pool.shutdown)

    def send(self, n):
        """n HTTP checks and n ShouldRateLimit calls, each on its own connection or stream."""
        call = self.channel.unary_unary(
            METHOD, request_serializer=rls_pb2.RateLimitRequest.SerializeToString,
            response_deserializer=rls_pb2.RateLimitResponse.FromString)
        req = rls_pb2.RateLimitRequest(domain=b"edge")
        req.descriptors.add().entries.add(key=b"path", value=b"/a")
        http = [self.pool.submit(self.serve.check, {"api_key": "k%d" % i}) for i in range(n)]
        rls = [call.future(req, timeout=30) for _ in range(n)]
        return http, rls

    def hold(self, n):
        self.assertEqual(self.serve.hook("hold"), "holding")
        http, rls = self.send(n)
        self.assertEqual(self.serve.hook("held %d" % (2 * n)), "held %d" % (2 * n))
        return http, rls

    def test_sigterm_answers_every_request_in_flight(self):
        self.start()
        watch = self.channel.unary_stream(
            WATCH_METHOD, request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
            response_deserializer=health_pb2.HealthCheckResponse.FromString)(
                health_pb2.HealthCheckRequest(service=b""), timeout=30)
        self.assertEqual(next(watch).status, health_pb2.HealthCheckResponse.SERVING)
        http, rls = self.hold(IN_FLIGHT)

        self.serve.signal(signal.SIGTERM)
        self.assertEqual(next(watch).status, health_pb2.HealthCheckResponse.NOT_SERVING)
        harness.wait_until(lambda: refused(self.serve.port), "the HTTP listener to close")
        harness.wait_until(lambda: refused(self.grpc_port), "the gRPC listener to close")
        self.assertFalse(any(f.done() for f in http + rls), "answered before the store did")
        self.assertIsNone(self.serve.proc.poll(), "exited with requests in flight")

        self.assertEqual(self.serve.hook("release"), "released")
        for f in http:
            status, headers, body = f.result(timeout=20)
            self.assertEqual(status, 200, body)
            self.assertEqual(headers.get("connection"), "close")
        for f in rls:
            self.assertEqual(f.result(timeout=20).overall_code, OK)
        self.assertEqual(self.serve.proc.wait(timeout=10), 0, self.serve.log())
        self.assertIn("stopping: answering what is in flight for up to 10s", self.serve.log())

    def test_a_second_sigterm_exits_at_once(self):
        self.start()
        http, rls = self.hold(1)
        self.serve.signal(signal.SIGTERM)
        harness.wait_until(lambda: refused(self.serve.port), "the HTTP listener to close")
        started = time.monotonic()
        self.serve.signal(signal.SIGTERM)
        self.assertEqual(self.serve.proc.wait(timeout=5), 128 + signal.SIGTERM)
        self.assertLess(time.monotonic() - started, 5)
        self.assertIn("second SIGTERM while stopping: exiting now", self.serve.log())

    def test_a_store_that_never_answers_is_cut_at_the_shutdown_timeout(self):
        self.start(shutdown_timeout="1s")
        http, rls = self.hold(1)
        # The next readiness probe (one a second) is held too, and is in flight when the stop
        # begins; no probe is sent after that.
        self.assertEqual(self.serve.hook("held 3"), "held 3")
        started = time.monotonic()
        self.serve.signal(signal.SIGTERM)
        # gRPC's call is answered, UNAVAILABLE, at the deadline; HTTP's connection is closed.
        with self.assertRaises(grpc.RpcError) as e:
            rls[0].result(timeout=20)
        self.assertEqual(e.exception.code(), grpc.StatusCode.UNAVAILABLE)
        self.assertIn("not decided within server.shutdown_timeout", e.exception.details())
        self.assertGreaterEqual(time.monotonic() - started, 0.9)
        with self.assertRaises(Exception):
            http[0].result(timeout=20)
        # Closing the store waits for that probe: past the deadline's extra second caudal gives up
        # and exits, 1 for a shutdown that did not end cleanly.
        self.assertEqual(self.serve.proc.wait(timeout=10), 1, self.serve.log())
        self.assertLess(time.monotonic() - started, 4, "exited long after the shutdown timeout")
        self.assertIn("stopping took longer than server.shutdown_timeout", self.serve.log())


if __name__ == "__main__":
    unittest.main()
