#!/usr/bin/env python3
"""`caudal serve --grpc` as a process: Envoy's ShouldRateLimit beside the HTTP API, on the same
store, clock (--test-hooks) and failure mode, with Redis stopped mid-run. Messages come from
rls_client_test (protoc --python_out at test time); the process harness from tests/serve."""
import os
import re
import shutil
import sys
import tempfile
import textwrap
import time
import unittest

import grpc

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "serve"))
import harness  # noqa: E402
from rls_client_test import METHOD, OK, OVER, d, rls_pb2  # noqa: E402

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

    def __init__(self, store_yaml="", store=None):
        self.dir = tempfile.mkdtemp(prefix="caudal-envoy-")
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


if __name__ == "__main__":
    unittest.main(verbosity=2)
