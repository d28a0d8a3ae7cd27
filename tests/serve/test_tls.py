"""`caudal serve` over TLS on its HTTP listener, driven by Python's ssl and http.client: server
certificates, client certificates (mTLS) and their identities, caller tokens, handshake deadlines
and caps, one log line for many failed handshakes, and certificate and token reload on SIGHUP.
Every certificate is made by openssl in the test's own directory (certs.py)."""
import http.client
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import textwrap
import time
import unittest

import certs
import harness

POLICY = textwrap.dedent("""\
    policies:
      - name: per_key
        identity: [api_key]
        limits: [{algorithm: token_bucket, capacity: 100, refill: 100/1m}]
    """)
TOKEN = "t0ken-that-must-never-be-printed"
CHECK = json.dumps({"descriptors": {"api_key": "k"}})


class Pki:
    """A CA, the server's certificate, three clients (envoy, with a SPIFFE URI SAN; intruder;
    stranger, signed by a CA nobody trusts) in one temporary directory."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="caudal-pki-")
        self.ca = certs.Authority(self.dir)
        self.server = self.ca.server()
        self.envoy = self.ca.issue("envoy", "edge-proxy", ["URI:spiffe://mesh/envoy"])
        self.intruder = self.ca.issue("intruder", "intruder")
        wrong = certs.Authority(self.dir, "wrong", "untrusted CA")
        self.stranger = wrong.issue("stranger", "edge-proxy", ["URI:spiffe://mesh/envoy"])

    def context(self, client=None):
        ctx = ssl.create_default_context(cafile=self.ca.cert)
        if client is not None:
            ctx.load_cert_chain(*client)
        return ctx

    def close(self):
        shutil.rmtree(self.dir, ignore_errors=True)


def tls_config(pki, client_cert="optional", auth=None, extra=""):
    cert, key = pki.server
    text = "server:\n  tls: {cert_file: %s, key_file: %s, client_ca_file: %s, client_cert: %s}\n" % (
        cert, key, pki.ca.cert, client_cert)
    if auth:
        text += "  auth: %s\n" % auth
    return text + extra + POLICY


def https(serve, ctx, method, path, body=None, headers=None):
    """(status, headers, body) over a new TLS connection."""
    conn = http.client.HTTPSConnection("127.0.0.1", serve.port, context=ctx, timeout=10)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def check(serve, ctx, headers=None):
    return https(serve, ctx, "POST", "/v1/check", CHECK,
                 dict({"Content-Type": "application/json"}, **(headers or {})))


def handshake_failures(serve, ctx):
    """caudal_tls_handshake_failures_total by reason, from /metrics over a TLS connection."""
    _, _, body = https(serve, ctx, "GET", "/metrics")
    out = {}
    for line in body.decode().splitlines():
        if line.startswith("caudal_tls_handshake_failures_total{"):
            labels, value = line.rsplit(" ", 1)
            assert 'listener="http"' in labels, line
            out[labels.split('reason="')[1].rstrip('"}')] = int(value)
    return out


def handshake_fails(serve, ctx):
    """True when the TLS handshake (or, under TLS 1.3, the first read after it) is refused."""
    try:
        status, _, _ = https(serve, ctx, "GET", "/healthz")
        return False
    except (ssl.SSLError, ConnectionResetError, BrokenPipeError, http.client.RemoteDisconnected):
        return True


class TlsTest(unittest.TestCase):
    def setUp(self):
        self.pki = Pki()

    def tearDown(self):
        self.pki.close()

    def serve(self, config, **kw):
        s = harness.Serve(config, test_hooks=False, **kw)
        self.addCleanup(s.close)
        return s

    def test_token_and_client_identities_guard_decisions_health_stays_open(self):
        s = self.serve(tls_config(self.pki, auth="{token_file: token, allowed_clients: "
                                                  "['spiffe://mesh/envoy']}"),
                       files={"token": TOKEN + "\n"})
        self.assertTrue(s.banner.startswith("caudal serve: listening on https://"), s.banner)
        anonymous = self.pki.context()
        self.assertEqual(https(s, anonymous, "GET", "/healthz")[0], 200)
        self.assertIn(https(s, anonymous, "GET", "/readyz")[0], (200, 503))
        self.assertEqual(https(s, anonymous, "GET", "/metrics")[0], 200)  # open by default

        status, headers, body = check(s, anonymous)
        self.assertEqual(status, 401)
        self.assertEqual(headers["www-authenticate"], 'Bearer realm="caudal"')
        self.assertEqual(json.loads(body)["error"]["code"], "unauthenticated")
        status, headers, _ = check(s, anonymous, {"Authorization": "Bearer wrong"})
        self.assertEqual(status, 401)
        self.assertIn('error="invalid_token"', headers["www-authenticate"])
        self.assertEqual(https(s, anonymous, "GET", "/v1/auth")[0], 401)
        # Nothing was charged by the refused calls: the bucket holds all but this one.
        status, _, body = check(s, anonymous, {"Authorization": "Bearer " + TOKEN})
        self.assertEqual(status, 200)
        self.assertEqual(json.loads(body)["policies"][0]["remaining"], 99)

        # An allowed certificate identity (the URI SAN) passes without a token; another CN of
        # the same CA is forbidden; a CA nobody configured never completes the handshake.
        self.assertEqual(check(s, self.pki.context(self.pki.envoy))[0], 200)
        status, _, body = check(s, self.pki.context(self.pki.intruder))
        self.assertEqual(status, 403)
        self.assertEqual(json.loads(body)["error"]["code"], "forbidden")
        self.assertEqual(check(s, self.pki.context(self.pki.intruder),
                               {"Authorization": "Bearer " + TOKEN})[0], 200)
        self.assertTrue(handshake_fails(s, self.pki.context(self.pki.stranger)))

        # The token is printed nowhere.
        self.assertNotIn(TOKEN, s.banner + s.log())

    def test_required_client_certificate_and_untrusted_server(self):
        s = self.serve(tls_config(self.pki, client_cert="require"))
        self.assertTrue(handshake_fails(s, self.pki.context()))
        self.assertEqual(check(s, self.pki.context(self.pki.intruder))[0], 200)  # no auth set
        # A client that trusts another CA refuses caudal's certificate.
        other = ssl.create_default_context(cafile=os.path.join(self.pki.dir, "wrong.pem"))
        other.load_cert_chain(*self.pki.envoy)
        with self.assertRaises(ssl.SSLCertVerificationError):
            https(s, other, "GET", "/healthz")

    def test_failed_handshakes_are_logged_once_and_plaintext_gets_nothing(self):
        s = self.serve(tls_config(self.pki, client_cert="require"))
        for _ in range(5):
            self.assertTrue(handshake_fails(s, self.pki.context(self.pki.stranger)))
        with socket.create_connection(("127.0.0.1", s.port), timeout=5) as c:
            c.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            self.assertFalse(c.recv(4096).startswith(b"HTTP/"))
        # Still serving, and the episode took one line. A failure is counted once its line is
        # written or held back: with all six counted, the log has all it will say of them.
        envoy = self.pki.context(self.pki.envoy)
        self.assertEqual(https(s, envoy, "GET", "/healthz")[0], 200)
        harness.wait_until(lambda: sum(handshake_failures(s, envoy).values()) == 6,
                           "the six failed handshakes counted")
        self.assertEqual(s.log().count("TLS handshake with"), 1, s.log())

    def test_failed_handshakes_are_counted_by_reason(self):
        s = self.serve(tls_config(self.pki, client_cert="require",
                                  extra="  header_timeout: 300ms\n"))

        def failures():
            return handshake_failures(s, self.pki.context(self.pki.envoy))

        self.assertEqual(failures(), {"no_client_certificate": 0, "bad_client_certificate": 0,
                                      "refused_by_client": 0, "protocol": 0, "closed": 0,
                                      "timeout": 0})
        # No certificate, twice; one from a CA nobody configured.
        for _ in range(2):
            self.assertTrue(handshake_fails(s, self.pki.context()))
        self.assertTrue(handshake_fails(s, self.pki.context(self.pki.stranger)))
        # A client that does not trust caudal's certificate says so with an alert.
        other = ssl.create_default_context(cafile=os.path.join(self.pki.dir, "wrong.pem"))
        other.load_cert_chain(*self.pki.envoy)
        with self.assertRaises(ssl.SSLCertVerificationError):
            https(s, other, "GET", "/healthz")
        # Plaintext HTTP on the TLS port.
        with socket.create_connection(("127.0.0.1", s.port), timeout=5) as c:
            c.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            c.recv(4096)
        # A TLS ClientHello cut short, then the connection closed.
        with socket.create_connection(("127.0.0.1", s.port), timeout=5) as c:
            c.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")
        # A client that connects and says nothing until header_timeout cuts it.
        with socket.create_connection(("127.0.0.1", s.port), timeout=5) as c:
            self.assertEqual(c.recv(1), b"")
        want = {"no_client_certificate": 2, "bad_client_certificate": 1, "refused_by_client": 1,
                "protocol": 1, "closed": 1, "timeout": 1}
        harness.wait_until(lambda: failures() == want, "the handshake failures counted", 5)
        # Good handshakes count nothing.
        self.assertEqual(check(s, self.pki.context(self.pki.envoy))[0], 200)
        self.assertEqual(failures(), want)

    def test_silent_clients_are_cut_at_header_timeout_and_count_against_the_caps(self):
        s = self.serve(tls_config(self.pki, extra="  header_timeout: 300ms\n"
                                               "  max_connections_per_client: 2\n"))
        silent = [socket.create_connection(("127.0.0.1", s.port), timeout=5) for _ in range(2)]
        try:
            # Both hold this client's share while they say nothing (the backlog hands them to
            # the server first): a third is closed at once.
            self.assertTrue(handshake_fails(s, self.pki.context(self.pki.envoy)))
            start = time.monotonic()
            for c in silent:
                self.assertEqual(c.recv(1), b"")  # closed by the server
            self.assertLess(time.monotonic() - start, 2.0)
        finally:
            for c in silent:
                c.close()
        harness.wait_until(
            lambda: not handshake_fails(s, self.pki.context(self.pki.envoy)), "a free slot", 5)

    def test_sighup_reloads_certificate_and_token_and_refuses_a_bad_certificate(self):
        token_path = os.path.join(self.pki.dir, "token")
        with open(token_path, "w") as f:
            f.write("first-token\n")
        s = self.serve(tls_config(self.pki, auth="{token_file: %s}" % token_path))
        ctx = self.pki.context(self.pki.envoy)
        old_cert = cert_of(s.port, ctx)
        held = http.client.HTTPSConnection("127.0.0.1", s.port, context=ctx, timeout=10)
        held.request("GET", "/healthz")
        self.assertEqual(held.getresponse().read(), b"ok\n")

        # A renewed certificate (a new key too) and a new token, then SIGHUP.
        cert, key = self.pki.server
        renewed = self.pki.ca.server("renewed")
        shutil.copy(renewed[0], cert)
        shutil.copy(renewed[1], key)
        with open(token_path, "w") as f:
            f.write("second-token\n")
        s.signal(signal.SIGHUP)
        harness.wait_until(lambda: "reloaded" in s.log(), "the reload")
        new_cert = cert_of(s.port, ctx)
        self.assertNotEqual(new_cert, old_cert)
        with open(renewed[0]) as f:
            self.assertEqual(new_cert, ssl.PEM_cert_to_DER_cert(f.read()))
        self.assertEqual(check(s, ctx, {"Authorization": "Bearer first-token"})[0], 401)
        self.assertEqual(check(s, ctx, {"Authorization": "Bearer second-token"})[0], 200)
        # The connection opened before the reload carries on.
        held.request("GET", "/healthz")
        self.assertEqual(held.getresponse().read(), b"ok\n")
        held.close()

        # A broken certificate is refused, logged, and the renewed one keeps serving.
        with open(cert, "w") as f:
            f.write("-----BEGIN CERTIFICATE-----\nnot a certificate\n-----END CERTIFICATE-----\n")
        s.signal(signal.SIGHUP)
        harness.wait_until(lambda: "reload refused" in s.log(), "the refusal")
        self.assertIn("server.tls.cert_file", s.log())
        self.assertEqual(cert_of(s.port, ctx), new_cert)
        self.assertEqual(check(s, ctx, {"Authorization": "Bearer second-token"})[0], 200)
        self.assertNotIn("second-token", s.log())

    def test_validate_names_the_file_at_fault(self):
        cert, key = self.pki.server
        cases = [
            ("cert_file: /nonexistent/cert.pem, key_file: %s" % key,
             "server.tls.cert_file: cannot load \"/nonexistent/cert.pem\""),
            ("cert_file: %s, key_file: %s" % (cert, self.pki.envoy[1]),
             "server.tls.key_file: cannot load"),
            ("cert_file: %s, key_file: %s, client_ca_file: /nonexistent/ca.pem" % (cert, key),
             "server.tls.client_ca_file: cannot load"),
        ]
        for tls, error in cases:
            path = os.path.join(self.pki.dir, "bad.yaml")
            with open(path, "w") as f:
                f.write("server:\n  tls: {%s}\n%s" % (tls, POLICY))
            r = subprocess.run([harness.CAUDAL, "validate", "--config", path],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
            self.assertIn(error, r.stderr)
            r = subprocess.run([harness.CAUDAL, "serve", "--config", path, "--http",
                                "127.0.0.1:0"], capture_output=True, text=True, timeout=10)
            self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
            self.assertIn(error, r.stderr)
        path = os.path.join(self.pki.dir, "good.yaml")
        with open(path, "w") as f:
            f.write(tls_config(self.pki, auth="{token_file: token}"))
        with open(os.path.join(self.pki.dir, "token"), "w") as f:
            f.write(TOKEN)
        r = subprocess.run([harness.CAUDAL, "validate", "--config", path], capture_output=True,
                           text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn(TOKEN, r.stdout + r.stderr)

    def test_token_from_the_environment_over_plaintext(self):
        s = self.serve(POLICY, env={"CAUDAL_AUTH_TOKEN": TOKEN})
        self.assertEqual(s.request("POST", "/v1/check", CHECK)[0], 401)
        self.assertEqual(s.request("POST", "/v1/check", CHECK,
                                   {"Authorization": "Bearer " + TOKEN})[0], 200)
        self.assertEqual(s.request("GET", "/healthz")[0], 200)
        self.assertNotIn(TOKEN, s.banner + s.log())


class RedisTlsTest(unittest.TestCase):
    """store.tls from the config file, against a redis-server that requires client certificates
    (--tls-auth-clients yes)."""

    def setUp(self):
        self.pki = Pki()
        self.addCleanup(self.pki.close)
        self.port = harness.free_port()
        cert, key = self.pki.server
        self.redis = subprocess.Popen(
            ["redis-server", "--bind", "127.0.0.1", "--port", "0", "--tls-port", str(self.port),
             "--tls-cert-file", cert, "--tls-key-file", key, "--tls-ca-cert-file",
             self.pki.ca.cert, "--tls-auth-clients", "yes", "--save", "", "--appendonly", "no",
             "--dir", self.pki.dir], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.addCleanup(self.stop_redis)
        harness.wait_until(self.redis_answers, "redis-server over TLS")

    def stop_redis(self):
        self.redis.kill()
        self.redis.wait()

    def redis_answers(self):
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                return True
        except OSError:
            return False

    def config(self, ca, client=None, server_name="localhost"):
        tls = "{ca_file: %s, server_name: %s%s}" % (
            ca, server_name, ", cert_file: %s, key_file: %s" % client if client else "")
        # A generous timeout: the first decisions must not fail closed on a loaded machine.
        return "store:\n  url: rediss://127.0.0.1:%d\n  timeout: 2s\n  tls: %s\n%s" % (
            self.port, tls, POLICY)

    def test_decides_in_redis_with_a_client_certificate(self):
        s = harness.Serve(self.config(self.pki.ca.cert, self.pki.envoy), test_hooks=False)
        self.addCleanup(s.close)
        harness.wait_until(lambda: s.request("GET", "/readyz")[0] == 200, "ready", 10)
        status, _, body = s.check({"api_key": "k"})
        self.assertEqual(status, 200, body)
        self.assertEqual(body["policies"][0]["decided_by"], "store")

    def start_fails(self, config):
        path = os.path.join(self.pki.dir, "caudal.yaml")
        with open(path, "w") as f:
            f.write(config)
        r = subprocess.run([harness.CAUDAL, "serve", "--config", path, "--http", "127.0.0.1:0"],
                           capture_output=True, text=True, timeout=20)
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        return r.stderr

    def test_wrong_ca_or_no_client_certificate_stop_the_start_with_the_reason(self):
        wrong = os.path.join(self.pki.dir, "wrong.pem")
        err = self.start_fails(self.config(wrong, self.pki.envoy))
        self.assertIn("certificate verify failed", err)
        self.assertIn("store.tls.ca_file", err)
        err = self.start_fails(self.config(self.pki.ca.cert))
        self.assertIn("store.tls.cert_file", err)
        err = self.start_fails(self.config(self.pki.ca.cert, self.pki.envoy, "redis.example"))
        self.assertIn("store.tls.server_name", err)


class RedisTlsReloadTest(unittest.TestCase):
    """A renewed Redis client certificate taken up on SIGHUP: new connections present it, a bad
    one is refused and the old one keeps serving. redis-server also listens in plaintext on
    loopback, for the test to change what it trusts and to drop caudal's connections."""

    def setUp(self):
        self.pki = Pki()
        self.addCleanup(self.pki.close)
        self.port = harness.free_port()
        self.admin = harness.free_port()
        cert, key = self.pki.server
        both = os.path.join(self.pki.dir, "both-cas.pem")
        with open(both, "w") as f:
            for ca in (self.pki.ca.cert, os.path.join(self.pki.dir, "wrong.pem")):
                with open(ca) as pem:
                    f.write(pem.read())
        self.redis = subprocess.Popen(
            ["redis-server", "--bind", "127.0.0.1", "--port", str(self.admin),
             "--tls-port", str(self.port), "--tls-cert-file", cert, "--tls-key-file", key,
             "--tls-ca-cert-file", both, "--tls-auth-clients", "yes", "--save", "",
             "--appendonly", "no", "--dir", self.pki.dir],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.addCleanup(self.stop_redis)
        harness.wait_until(lambda: self.redis_cli("PING") == "PONG", "redis-server")

    def stop_redis(self):
        self.redis.kill()
        self.redis.wait()

    def redis_cli(self, *words):
        r = subprocess.run(["redis-cli", "-h", "127.0.0.1", "-p", str(self.admin)] + list(words),
                           capture_output=True, text=True, timeout=10)
        return r.stdout.strip()

    def install_client(self, pair):
        for src, name in zip(pair, ("client.pem", "client.key")):
            shutil.copy(src, os.path.join(self.pki.dir, name))

    def test_sighup_takes_a_renewed_client_certificate_for_new_connections(self):
        self.install_client(self.pki.envoy)  # signed by the CA redis trusts first
        client = tuple(os.path.join(self.pki.dir, n) for n in ("client.pem", "client.key"))
        s = harness.Serve(
            "store:\n  url: rediss://127.0.0.1:%d\n  timeout: 2s\n"
            "  tls: {ca_file: %s, server_name: localhost, cert_file: %s, key_file: %s}\n%s" % (
                self.port, self.pki.ca.cert, client[0], client[1], POLICY), test_hooks=False)
        self.addCleanup(s.close)
        harness.wait_until(lambda: s.request("GET", "/readyz")[0] == 200, "ready", 10)

        def decided_in_redis():
            status, _, body = s.check({"api_key": "k"})
            return status == 200 and body["policies"][0]["decided_by"] == "store"

        self.assertTrue(decided_in_redis())

        # A broken certificate refuses the reload; the connections keep deciding.
        with open(client[0], "w") as f:
            f.write("-----BEGIN CERTIFICATE-----\nnot a certificate\n-----END CERTIFICATE-----\n")
        s.signal(signal.SIGHUP)
        harness.wait_until(lambda: "reload refused" in s.log(), "the refusal")
        self.assertIn("store.tls: redis store: cannot load the TLS client certificate", s.log())
        self.assertIn(client[0], s.log())
        self.assertEqual(s.metric('caudal_config_reloads_total{result="failure"}'), 1)
        self.assertTrue(decided_in_redis())

        # Renewed under the second CA. Once redis trusts that CA alone and drops every client,
        # caudal decides again only if it reconnects with the renewed certificate.
        self.install_client(self.pki.stranger)
        s.signal(signal.SIGHUP)
        harness.wait_until(
            lambda: s.metric('caudal_config_reloads_total{result="success"}') == 1, "the reload")
        self.assertEqual(self.redis_cli("CONFIG", "SET", "tls-ca-cert-file",
                                        os.path.join(self.pki.dir, "wrong.pem")), "OK")
        self.assertGreaterEqual(int(self.redis_cli("CLIENT", "KILL", "TYPE", "normal")), 1)
        harness.wait_until(decided_in_redis, "decisions in redis over the renewed certificate",
                           10)
        self.assertEqual(s.metric('caudal_config_reloads_total{result="failure"}'), 1)


def cert_of(port, ctx):
    """The DER certificate a new TLS connection to `port` is shown."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as c:
            return c.getpeercert(binary_form=True)


if __name__ == "__main__":
    unittest.main()
