"""HTTP framing per RFC 9112 against a real `caudal serve`, over raw sockets: a request whose body
length is in doubt is refused and its connection closed, so that bytes smuggled after it are
never read as a request, never decided and never charged; and requests that are ambiguous in
other ways (no Host or two, a line ending in a bare LF, a field line folded onto the next, a
target that is neither a path nor an http URI, a query /v1/check does not take, two
Authorization headers) are refused at once, charging nothing. An absolute-form target is decided
as its path."""
import json
import socket
import time
import unittest

from harness import Serve

CONFIG = """
policies:
  - name: p
    identity: [api_key]
    limits: [{algorithm: token_bucket, capacity: 5, refill: 5/1h}]
"""


def read_response(c):
    """One response (status, lower-case headers, body) from socket `c`, or None on EOF."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = c.recv(4096)
        if not chunk:
            return None
        data += chunk
    head, rest = data.split(b"\r\n\r\n", 1)
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, value = line.split(":", 1)
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    while len(rest) < length:
        chunk = c.recv(4096)
        if not chunk:
            break
        rest += chunk
    return int(lines[0].split()[1]), headers, rest[:length]


def closed_after(c, timeout_s=3.0):
    """True when the peer closes `c` (EOF or reset) with nothing more to read."""
    c.settimeout(timeout_s)
    try:
        return c.recv(4096) == b""
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


def hidden_request(key):
    body = json.dumps({"descriptors": {"api_key": key}})
    return ("POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            "Content-Length: %d\r\n\r\n%s" % (len(body), body)).encode()


class Framing(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.s = Serve(CONFIG, test_hooks=False)

    @classmethod
    def tearDownClass(cls):
        cls.s.close()

    def decisions(self):
        return sum(self.s.metric('caudal_decisions_total{policy="p",outcome="%s"}' % o)
                   for o in ("allowed", "denied"))

    def remaining(self, key):
        status, _, body = self.s.check({"api_key": key})
        self.assertEqual(status, 200)
        return body["policies"][0]["remaining"]

    def assert_smuggling_refused(self, name, fields, expected_status, version="1.1",
                                 body=b"0\r\n\r\n"):
        key = "hidden-" + name
        before = self.decisions()
        wire = ("POST /v1/check HTTP/%s\r\nHost: x\r\n%s\r\n" % (version, fields)).encode()
        wire += body + hidden_request(key)
        with socket.create_connection(("127.0.0.1", self.s.port)) as c:
            c.sendall(wire)
            c.settimeout(3)
            response = read_response(c)
            self.assertIsNotNone(response, name)
            status, headers, reply = response
            self.assertEqual(status, expected_status, "%s: %r" % (name, reply))
            self.assertEqual(headers.get("connection"), "close", name)
            self.assertIn("error", json.loads(reply), name)
            self.assertTrue(closed_after(c), "%s: the connection stayed open" % name)
        self.assertEqual(self.decisions(), before, "%s: something was decided" % name)
        # The hidden key was never charged: its first real request finds a full bucket.
        self.assertEqual(self.remaining(key), 4, name)

    def test_final_coding_not_chunked_is_refused_and_closed(self):
        for name, te in [("identity", "identity"), ("gzip", "gzip"),
                         ("chunked-identity", "chunked, identity"),
                         ("chunked-gzip", "chunked, gzip")]:
            with self.subTest(te=te):
                self.assert_smuggling_refused(name, "Transfer-Encoding: %s\r\n" % te, 400)

    def test_unsupported_coding_before_chunked_is_501_and_closed(self):
        self.assert_smuggling_refused("gzip-chunked", "Transfer-Encoding: gzip, chunked\r\n", 501)
        self.assert_smuggling_refused(
            "gzip-then-chunked", "Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n", 501)

    def test_a_folded_framing_field_is_refused_and_closed(self):
        # Unfolded, "chunked" would end the codings; a proxy that does not unfold reads gzip.
        self.assert_smuggling_refused("folded-te", "Transfer-Encoding: gzip,\r\n chunked\r\n",
                                      400)
        self.assert_smuggling_refused("folded-cl", "Content-Length:\r\n\t0\r\n", 400, body=b"")

    def test_repeated_chunked_is_refused_and_closed(self):
        self.assert_smuggling_refused("chunked-twice", "Transfer-Encoding: chunked, chunked\r\n",
                                      400)
        self.assert_smuggling_refused(
            "chunked-two-lines", "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
            400)

    def test_content_length_with_transfer_encoding_is_refused_and_closed(self):
        for name, fields in [
                ("cl-te", "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n"),
                ("te-cl", "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n"),
                ("identity-cl", "Transfer-Encoding: identity\r\nContent-Length: 5\r\n")]:
            with self.subTest(fields=fields):
                self.assert_smuggling_refused(name, fields, 400)

    def test_transfer_encoding_in_http10_is_refused_and_closed(self):
        self.assert_smuggling_refused("http10", "Transfer-Encoding: chunked\r\n", 400,
                                      version="1.0")

    def test_a_malformed_chunk_is_refused_and_closed(self):
        self.assert_smuggling_refused("bad-chunk", "Transfer-Encoding: chunked\r\n", 400,
                                      body=b"zz\r\n")

    def test_chunked_request_is_served_and_the_connection_kept(self):
        body = json.dumps({"descriptors": {"api_key": "chunky"}}).encode()
        wire = (b"POST /v1/check HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" +
                b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body))
        with socket.create_connection(("127.0.0.1", self.s.port)) as c:
            c.settimeout(3)
            for remaining in (4, 3):
                c.sendall(wire)
                status, headers, reply = read_response(c)
                self.assertEqual(status, 200, reply)
                self.assertNotEqual(headers.get("connection"), "close")
                self.assertEqual(json.loads(reply)["policies"][0]["remaining"], remaining)


TOKEN = "caller-t0ken"


class Strictness(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.s = Serve("server: {auth: {token_file: token}}\n" + CONFIG, test_hooks=False,
                      files={"token": TOKEN + "\n"})

    @classmethod
    def tearDownClass(cls):
        cls.s.close()

    def decisions(self):
        return sum(self.s.metric('caudal_decisions_total{api="http",policy="p",outcome="%s"}' % o)
                   for o in ("allowed", "denied"))

    def remaining(self, key):
        body = json.dumps({"descriptors": {"api_key": key}})
        status, _, reply = self.s.request("POST", "/v1/check", body,
                                          {"Authorization": "Bearer " + TOKEN})
        self.assertEqual(status, 200, reply)
        return json.loads(reply)["policies"][0]["remaining"]

    def assert_refused_at_once(self, name, wire, code, key, closes=True):
        """`wire` gets a 400 with `code` well within the 10 s header and body timeouts, its
        connection closes when the request's framing was at fault (a well-framed request's
        refusal keeps it), nothing is decided, and `key` was not charged."""
        before = self.decisions()
        start = time.monotonic()
        with socket.create_connection(("127.0.0.1", self.s.port)) as c:
            c.sendall(wire)
            c.settimeout(5)
            response = read_response(c)
            self.assertIsNotNone(response, name)
            status, _, reply = response
            self.assertLess(time.monotonic() - start, 2, "%s: answered late" % name)
            self.assertEqual(status, 400, "%s: %r" % (name, reply))
            self.assertEqual(json.loads(reply)["error"]["code"], code, name)
            if closes:
                self.assertTrue(closed_after(c), "%s: the connection stayed open" % name)
        self.assertEqual(self.decisions(), before, "%s: something was decided" % name)
        self.assertEqual(self.remaining(key), 4, name)

    def check_wire(self, key, head="Host: x\r\n", target="/v1/check",
                   auth=("Bearer " + TOKEN,), chunked=False, eol=b"\r\n"):
        body = json.dumps({"descriptors": {"api_key": key}}).encode()
        fields = "".join("Authorization: %s\r\n" % a for a in auth)
        if chunked:
            fields += "Transfer-Encoding: chunked\r\n"
            payload = b"%x" % len(body) + eol + body + eol + b"0" + eol + eol
        else:
            fields += "Content-Length: %d\r\n" % len(body)
            payload = body
        return ("POST %s HTTP/1.1\r\n%s%s\r\n" % (target, head, fields)).encode() + payload

    def test_the_well_formed_request_is_decided(self):
        before = self.decisions()
        with socket.create_connection(("127.0.0.1", self.s.port)) as c:
            c.settimeout(5)
            for wire in (self.check_wire("fine"), self.check_wire("fine", chunked=True)):
                c.sendall(wire)
                status, _, reply = read_response(c)
                self.assertEqual(status, 200, reply)
        self.assertEqual(self.decisions(), before + 2)

    def test_no_host_or_two_hosts_is_400(self):
        self.assert_refused_at_once("no host", self.check_wire("nohost", head=""), "bad_host",
                                    "nohost")
        self.assert_refused_at_once("two hosts",
                                    self.check_wire("twohosts", head="Host: a\r\nHost: b\r\n"),
                                    "bad_host", "twohosts")

    def test_chunk_lines_ending_in_a_bare_lf_are_400_at_once(self):
        self.assert_refused_at_once("bare lf", self.check_wire("barelf", chunked=True, eol=b"\n"),
                                    "bad_framing", "barelf")

    def test_a_folded_field_line_in_any_field_is_400_and_closed(self):
        for name, head in [("fold-sp", "Host: x\r\nX-Anything: a\r\n b\r\n"),
                           ("fold-tab", "X-Trace: 1\r\n\t2\r\nHost: x\r\n"),
                           ("fold-host", "Host: x\r\n y\r\n")]:
            with self.subTest(name=name):
                self.assert_refused_at_once(name, self.check_wire(name, head=head), "bad_framing",
                                            name)
        # The refusal names the fault.
        with socket.create_connection(("127.0.0.1", self.s.port)) as c:
            c.sendall(self.check_wire("fold-msg", head="Host: x\r\nX-A: a\r\n b\r\n"))
            c.settimeout(5)
            status, _, reply = read_response(c)
        self.assertEqual(status, 400)
        self.assertIn("obs-fold", json.loads(reply)["error"]["message"])

    def test_an_absolute_form_target_is_decided_as_its_path(self):
        """RFC 9112 §3.2.2: absolute-form is accepted, routed by its path and query, the same
        decision as origin-form, and on the same connection."""
        before = self.decisions()
        absolute = "http://127.0.0.1:%d/v1/check" % self.s.port
        with socket.create_connection(("127.0.0.1", self.s.port)) as c:
            c.settimeout(5)
            remaining = []
            for target in ("/v1/check", absolute, "HTTP://localhost" + "/v1/check", "/v1/check"):
                c.sendall(self.check_wire("absolute", target=target))
                status, headers, reply = read_response(c)
                self.assertEqual(status, 200, "%s: %r" % (target, reply))
                self.assertNotEqual(headers.get("connection"), "close", target)
                remaining.append(json.loads(reply)["policies"][0]["remaining"])
        self.assertEqual(remaining, [4, 3, 2, 1])
        self.assertEqual(self.decisions(), before + 4)
        # Its query is the query: /v1/check refuses one, as it does in origin-form.
        self.assert_refused_at_once("absolute query",
                                    self.check_wire("absq", target=absolute + "?x=1"),
                                    "unknown_parameter", "absq", closes=False)

    def test_a_target_neither_a_path_nor_an_http_uri_is_400_and_closed(self):
        for name, target in [("ftp", "ftp://127.0.0.1/v1/check"),
                             ("authority", "127.0.0.1:%d" % self.s.port),
                             ("userinfo", "http://u@127.0.0.1/v1/check"),
                             ("no-host", "http:///v1/check"),
                             ("relative", "v1/check")]:
            with self.subTest(name=name):
                key = "target-" + name
                self.assert_refused_at_once(name, self.check_wire(key, target=target),
                                            "bad_request", key)

    def test_a_query_on_check_is_refused_as_auth_refuses_one(self):
        self.assert_refused_at_once("query", self.check_wire("query", target="/v1/check?x=1"),
                                    "unknown_parameter", "query", closes=False)

    def test_two_authorization_headers_are_ambiguous(self):
        self.assert_refused_at_once(
            "two authorizations",
            self.check_wire("twoauth", auth=("Bearer " + TOKEN, "Bearer someone-else")),
            "ambiguous_identity", "twoauth", closes=False)
        self.assert_refused_at_once(
            "the same twice", self.check_wire("sameauth", auth=("Bearer " + TOKEN,) * 2),
            "ambiguous_identity", "sameauth", closes=False)


if __name__ == "__main__":
    unittest.main()
