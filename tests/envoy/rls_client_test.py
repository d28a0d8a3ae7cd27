#!/usr/bin/env python3
"""ShouldRateLimit from Python (python3-grpcio), as any RLS client generated from Envoy's protos.

Messages come from protoc --python_out over caudal's proto/ at test time; the server is
rls_test_server on a manual clock that this test advances. Paths arrive in the environment:
RLS_TEST_SERVER, RLS_PROTO_ROOT, PROTOC, PROTOBUF_INCLUDE (set by CTest).
"""
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

import grpc

CONFIG = textwrap.dedent("""\
    domain: py
    descriptors:
      - key: bucket
        rate_limit: {unit: second, requests_per_unit: 1, algorithm: token_bucket, capacity: 3}
      - key: message_type
        value: marketing
        descriptors:
          - key: to_number
            rate_limit: {unit: day, requests_per_unit: 2}
      - key: to_number
        rate_limit: {unit: day, requests_per_unit: 10}
      - key: path
        value: /api/*
        rate_limit: {unit: minute, requests_per_unit: 1}
      - key: general
        rate_limit: {unit: minute, requests_per_unit: 50, name: general}
      - key: premium
        rate_limit: {unit: minute, requests_per_unit: 500, name: premium, replaces: [{name: general}]}
      - key: ldap
        rate_limit: {unlimited: true}
      - key: trial
        rate_limit: {unit: minute, requests_per_unit: 1}
        shadow_mode: true
    """)

TMP = tempfile.mkdtemp(prefix="caudal-rls-py-")


def generate_messages():
    root = os.environ["RLS_PROTO_ROOT"]
    protos = [os.path.relpath(os.path.join(d, f), root)
              for d, _, files in os.walk(root) for f in files if f.endswith(".proto")]
    includes = [f"-I{root}"] + [f"-I{p}" for p in os.environ.get("PROTOBUF_INCLUDE", "").split(";") if p]
    subprocess.run([os.environ["PROTOC"], *includes, f"--python_out={TMP}", *protos], check=True)
    sys.path.insert(0, TMP)


generate_messages()
from envoy.service.ratelimit.v3 import rls_pb2  # noqa: E402

OK = rls_pb2.RateLimitResponse.OK
OVER = rls_pb2.RateLimitResponse.OVER_LIMIT
METHOD = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"


class Server:
    """rls_test_server as a child process; stopped by closing its stdin."""

    def __init__(self, *args):
        path = os.path.join(TMP, "config.yaml")
        with open(path, "w") as f:
            f.write(CONFIG)
        self.proc = subprocess.Popen([os.environ["RLS_TEST_SERVER"], "--config", path, *args],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline().split()
        assert line and line[0] == "port", f"server did not start: {line}"
        self.channel = grpc.insecure_channel(f"127.0.0.1:{line[1]}")
        self.call = self.channel.unary_unary(
            METHOD, request_serializer=rls_pb2.RateLimitRequest.SerializeToString,
            response_deserializer=rls_pb2.RateLimitResponse.FromString)

    def advance(self, duration):
        self.proc.stdin.write(f"advance {duration}\n")
        self.proc.stdin.flush()
        assert self.proc.stdout.readline().strip() == "ok"

    def ask(self, *descriptors, hits=0, domain="py"):
        req = rls_pb2.RateLimitRequest(domain=domain.encode(), hits_addend=hits)
        for d in descriptors:
            desc = req.descriptors.add()
            for kv in d["entries"]:
                k, v = kv.split("=", 1)
                desc.entries.add(key=k.encode(), value=v.encode())
            if "hits" in d:
                desc.hits_addend.value = d["hits"]
            desc.is_negative_hits = d.get("refund", False)
        return self.call(req, timeout=10)

    def stop(self):
        self.channel.close()
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


def d(*entries, **kw):
    return {"entries": entries, **kw}


class RlsClientTest(unittest.TestCase):
    def setUp(self):
        self.server = Server()

    def tearDown(self):
        self.server.stop()

    def test_token_bucket_whole_bound(self):
        s = self.server
        self.assertEqual([s.ask(d("bucket=a")).overall_code for _ in range(4)], [OK, OK, OK, OVER])
        s.advance("999ms")
        self.assertEqual(s.ask(d("bucket=a")).overall_code, OVER)
        s.advance("1ms")
        self.assertEqual(s.ask(d("bucket=a")).overall_code, OK)
        s.advance("1h")
        self.assertEqual([s.ask(d("bucket=a")).overall_code for _ in range(4)], [OK, OK, OK, OVER])

    def test_nested_descriptors_all_or_nothing(self):
        s = self.server
        both = (d("message_type=marketing", "to_number=1"), d("to_number=1"))
        self.assertEqual(s.ask(*both).overall_code, OK)
        self.assertEqual(s.ask(*both).overall_code, OK)
        r = s.ask(*both)
        self.assertEqual(r.overall_code, OVER)
        self.assertEqual([st.code for st in r.statuses], [OVER, OK])
        self.assertEqual(r.statuses[1].limit_remaining, 8)  # not consumed by the refused request
        self.assertEqual(r.statuses[0].current_limit.unit, rls_pb2.RateLimitResponse.RateLimit.DAY)

    def test_wildcard(self):
        s = self.server
        self.assertEqual(s.ask(d("path=/api/x")).overall_code, OK)
        self.assertEqual(s.ask(d("path=/api/x")).overall_code, OVER)
        self.assertEqual(s.ask(d("path=/api/y")).overall_code, OK)
        self.assertFalse(s.ask(d("path=/web")).statuses[0].HasField("current_limit"))

    def test_replaces_unlimited_shadow(self):
        s = self.server
        r = s.ask(d("general=u"), d("premium=u"))
        self.assertFalse(r.statuses[0].HasField("current_limit"))
        self.assertEqual(r.statuses[1].current_limit.name, "premium")
        r = s.ask(d("ldap=x"))
        self.assertEqual((r.overall_code, r.statuses[0].limit_remaining), (OK, 2**32 - 1))
        for _ in range(3):
            r = s.ask(d("trial=x"))
            self.assertEqual((r.overall_code, r.statuses[0].code), (OK, OK))
        self.assertEqual(r.statuses[0].limit_remaining, 0)

    def test_hits_addend(self):
        s = self.server
        self.assertEqual(s.ask(d("to_number=9"), hits=4).statuses[0].limit_remaining, 6)
        self.assertEqual(s.ask(d("to_number=9", hits=0)).statuses[0].limit_remaining, 6)
        self.assertEqual(s.ask(d("to_number=9", hits=6), hits=1).statuses[0].limit_remaining, 0)
        self.assertEqual(s.ask(d("to_number=9")).overall_code, OVER)

    def test_refund(self):
        s = self.server
        self.assertEqual(s.ask(d("to_number=8"), hits=7).statuses[0].limit_remaining, 3)
        r = s.ask(d("to_number=8", hits=5, refund=True))
        self.assertEqual((r.overall_code, r.statuses[0].limit_remaining), (OK, 8))
        self.assertEqual(s.ask(d("to_number=8", hits=8)).statuses[0].limit_remaining, 0)
        self.assertEqual(s.ask(d("to_number=8")).overall_code, OVER)
        r = s.ask(d("to_number=8", hits=100, refund=True))
        self.assertEqual(r.statuses[0].limit_remaining, 10)  # never past the limit

    def test_headers(self):
        r = self.server.ask(d("general=h"))
        headers = {h.key: h.value for h in r.response_headers_to_add}
        self.assertEqual(headers["RateLimit-Policy"], '"general";q=50;w=60')
        self.assertEqual(headers["RateLimit"], '"general";r=49;t=60')

    def test_bad_requests(self):
        with self.assertRaises(grpc.RpcError) as e:
            self.server.ask(d("to_number=1"), domain="")
        self.assertEqual(e.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("domain must not be empty", e.exception.details())
        # As the reference: an unknown domain or an empty descriptor has no limit.
        r = self.server.ask(d("to_number=1"), domain="unknown")
        self.assertEqual(r.overall_code, OK)
        self.assertFalse(r.statuses[0].HasField("current_limit"))
        r = self.server.ask({"entries": []})
        self.assertEqual(r.overall_code, OK)


class CompatibilityAndFailureTest(unittest.TestCase):
    def test_consume_each_counts_refused_requests(self):
        s = Server("--descriptor-mode", "consume_each")
        try:
            both = (d("message_type=marketing", "to_number=1"), d("to_number=1"))
            for _ in range(2):
                s.ask(*both)
            r = s.ask(*both)
            self.assertEqual(r.overall_code, OVER)
            self.assertEqual(r.statuses[1].limit_remaining, 7)
        finally:
            s.stop()

    def test_store_down(self):
        for mode, expect in (("allow", OK), ("deny", OVER)):
            s = Server("--store-down", "--failure-mode", mode)
            try:
                r = s.ask(d("to_number=1"))
                self.assertEqual(r.overall_code, expect, mode)
                self.assertEqual(r.response_headers_to_add[0].key, "Caudal-Degraded")
            finally:
                s.stop()
        s = Server("--store-down", "--failure-mode", "deny_unavailable")
        try:
            with self.assertRaises(grpc.RpcError) as e:
                s.ask(d("to_number=1"))
            self.assertEqual(e.exception.code(), grpc.StatusCode.UNAVAILABLE)
        finally:
            s.stop()


if __name__ == "__main__":
    unittest.main(verbosity=2)
