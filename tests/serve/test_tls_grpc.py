"""Envoy's rate limit service over TLS and mTLS, called by a real gRPC client (Debian's
python3-grpcio): client certificates required, the caller token in the `authorization` metadata,
the identity allow-list, gRPC health open to all, and a renewed certificate picked up without a
restart, a broken one refused. Messages come from protoc at test time (tests/envoy/rls_client_test.py)."""
import importlib.util
import os
import re
import shutil
import signal
import socket
import ssl
import sys
import tempfile
import textwrap
import unittest

import grpc

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "envoy"))
import certs  # noqa: E402
import harness  # noqa: E402
from rls_client_test import METHOD, OK, TMP, rls_pb2  # noqa: E402

ENVOY_YAML = textwrap.dedent("""\
    domain: edge
    descriptors:
      - key: client
        rate_limit: {unit: minute, requests_per_unit: 100}
    """)
TOKEN = "grpc-t0ken-never-printed"
HEALTH_METHOD = "/grpc.health.v1.Health/Check"


def load_health_pb2():
    # The generated module's package (grpc.health.v1) would shadow grpcio's own `grpc`: load it
    # by path instead.
    path = os.path.join(TMP, "grpc", "health", "v1", "health_pb2.py")
    spec = importlib.util.spec_from_file_location("caudal_health_pb2", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


health_pb2 = load_health_pb2()


def read(path):
    with open(path, "rb") as f:
        return f.read()


class GrpcTlsTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="caudal-grpc-tls-")
        self.addCleanup(shutil.rmtree, self.dir, True)
        self.ca = certs.Authority(self.dir)
        self.server_cert = self.ca.server()
        self.envoy = self.ca.issue("envoy", "envoy")
        self.intruder = self.ca.issue("intruder", "intruder")
        with open(os.path.join(self.dir, "ratelimit.yaml"), "w") as f:
            f.write(ENVOY_YAML)

    def start(self, client_cert="require", listeners="[grpc]", auth=""):
        cert, key = self.server_cert
        config = textwrap.dedent("""\
            server:
              grpc: '127.0.0.1:0'
              tls: {cert_file: %s, key_file: %s, client_ca_file: %s, client_cert: %s,
                    listeners: %s}
            %senvoy_config: %s
            policies: []
            """) % (cert, key, self.ca.cert, client_cert, listeners,
                    ("  auth: %s\n" % auth) if auth else "",
                    os.path.join(self.dir, "ratelimit.yaml"))
        self.serve = harness.Serve(config, test_hooks=False, files={"token": TOKEN + "\n"})
        self.addCleanup(self.serve.close)
        line = self.serve.proc.stdout.readline().decode()
        m = re.search(r"gRPC over TLS\) on 127\.0\.0\.1:(\d+)", line)
        self.assertIsNotNone(m, line + self.serve.log())
        self.grpc_port = int(m.group(1))

    def channel(self, client=None):
        creds = grpc.ssl_channel_credentials(
            root_certificates=read(self.ca.cert),
            private_key=read(client[1]) if client else None,
            certificate_chain=read(client[0]) if client else None)
        # The certificate names localhost and 127.0.0.1; gRPC verifies the target's name.
        ch = grpc.secure_channel("localhost:%d" % self.grpc_port, creds)
        self.addCleanup(ch.close)
        return ch

    def ask(self, ch, metadata=None):
        call = ch.unary_unary(METHOD, request_serializer=rls_pb2.RateLimitRequest.SerializeToString,
                              response_deserializer=rls_pb2.RateLimitResponse.FromString)
        req = rls_pb2.RateLimitRequest(domain=b"edge")
        req.descriptors.add().entries.add(key=b"client", value=b"a")
        return call(req, timeout=10, metadata=metadata)

    def health(self, ch):
        call = ch.unary_unary(HEALTH_METHOD,
                              request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
                              response_deserializer=health_pb2.HealthCheckResponse.FromString)
        return call(health_pb2.HealthCheckRequest(service=b""), timeout=10).status

    def code_of(self, fn):
        with self.assertRaises(grpc.RpcError) as e:
            fn()
        return e.exception.code()

    def test_required_client_certificate(self):
        self.start()
        self.assertEqual(self.ask(self.channel(self.envoy)).overall_code, OK)
        # No client certificate: the handshake fails, the call never reaches the service.
        self.assertEqual(self.code_of(lambda: self.ask(self.channel())),
                         grpc.StatusCode.UNAVAILABLE)
        # The HTTP listener stayed plaintext (listeners: [grpc]).
        self.assertTrue(self.serve.base.startswith("http://"), self.serve.base)
        self.assertEqual(self.serve.request("GET", "/healthz")[0], 200)

    def test_token_and_allowed_identities(self):
        self.start(client_cert="optional",
                   auth="{token_file: token, allowed_clients: [envoy]}")
        anonymous = self.channel()
        self.assertEqual(self.code_of(lambda: self.ask(anonymous)),
                         grpc.StatusCode.UNAUTHENTICATED)
        self.assertEqual(self.code_of(lambda: self.ask(anonymous, [("authorization", "Bearer x")])),
                         grpc.StatusCode.UNAUTHENTICATED)
        self.assertEqual(self.ask(anonymous, [("authorization", "Bearer " + TOKEN)]).overall_code,
                         OK)
        self.assertEqual(self.ask(self.channel(self.envoy)).overall_code, OK)
        self.assertEqual(self.code_of(lambda: self.ask(self.channel(self.intruder))),
                         grpc.StatusCode.PERMISSION_DENIED)
        # Health stays open to every caller that completes the handshake.
        self.assertEqual(self.health(anonymous), health_pb2.HealthCheckResponse.SERVING)
        self.assertNotIn(TOKEN, self.serve.banner + self.serve.log())

    def test_two_authorization_entries_are_ambiguous_and_charge_nothing(self):
        self.start(client_cert="optional", auth="{token_file: token}")
        ch = self.channel()
        good = [("authorization", "Bearer " + TOKEN)]
        for metadata in (good + [("authorization", "Bearer x")], good * 2):
            with self.assertRaises(grpc.RpcError) as e:
                self.ask(ch, metadata)
            self.assertEqual(e.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
            self.assertIn("authorization: given 2 times", e.exception.details())
            self.assertNotIn(TOKEN, e.exception.details())
        # The refused calls charged nothing: the first decided one finds 99 of 100 left.
        self.assertEqual(self.ask(ch, good).statuses[0].limit_remaining, 99)

    def test_sighup_serves_a_renewed_certificate_without_a_restart(self):
        self.start()
        before = self.served_cert()
        cert, key = self.server_cert
        renewed = self.ca.server("renewed")
        shutil.copy(renewed[1], key)
        shutil.copy(renewed[0], cert)
        self.serve.signal(signal.SIGHUP)
        want = ssl.PEM_cert_to_DER_cert(read(renewed[0]).decode())
        harness.wait_until(lambda: self.served_cert() == want, "the renewed certificate", 15)
        self.assertNotEqual(before, want)
        self.assertEqual(self.ask(self.channel(self.envoy)).overall_code, OK)

    def test_a_broken_certificate_is_refused_and_the_old_one_keeps_serving(self):
        self.start()
        before = self.served_cert()
        cert, key = self.server_cert
        copies = self.grpc_copies()
        self.assertEqual(copies, {"cert": read(cert), "key": read(key), "ca": read(self.ca.cert)})
        with open(cert, "w") as f:
            f.write("-----BEGIN CERTIFICATE-----\nnot a certificate\n-----END CERTIFICATE-----\n")
        self.serve.signal(signal.SIGHUP)
        harness.wait_until(lambda: "reload refused" in self.serve.log(), "the refusal")
        self.assertIn("server.tls.cert_file", self.serve.log())
        # gRPC reads its copies of the files again every second (it would stop completing
        # handshakes if it read the broken file): they still hold the old pair, so every refresh
        # finds it. That gRPC takes up what the copies hold: the renewal test above.
        self.assertEqual(self.grpc_copies(), copies)
        self.assertEqual(self.served_cert(), before)
        self.assertEqual(self.ask(self.channel(self.envoy)).overall_code, OK)

    def grpc_copies(self):
        """The files gRPC's certificate provider reads: caudal's copies in memory
        (src/envoy/grpc_tls_files.h), by name ("cert", "key", "ca") and content."""
        fds = "/proc/%d/fd" % self.serve.proc.pid
        out = {}
        for fd in os.listdir(fds):
            try:
                m = re.match(r"/memfd:caudal-grpc-(\w+) ", os.readlink(os.path.join(fds, fd)))
            except OSError:  # closed meanwhile
                continue
            if m:
                out[m.group(1)] = read(os.path.join(fds, fd))
        return out

    def served_cert(self):
        ctx = ssl.create_default_context(cafile=self.ca.cert)
        ctx.load_cert_chain(*self.envoy)
        ctx.set_alpn_protocols(["h2"])
        with socket.create_connection(("127.0.0.1", self.grpc_port), timeout=5) as raw:
            with ctx.wrap_socket(raw, server_hostname="localhost") as c:
                return c.getpeercert(binary_form=True)


if __name__ == "__main__":
    unittest.main()
