"""docs/openapi.json against a real `caudal serve`: GET /v1/openapi.json serves it, every schema in
it is valid JSON Schema 2020-12, and at least one live response of every documented status of
every endpoint, errors and refusals before routing included, passes openapi_check (the harness
checks every response it receives; the raw and TLS requests here are checked the same way).
Each endpoint's test ends by asserting that every response the document lists for that path was
met. The checker itself is shown to refuse a body, a header and a status the document does not
describe."""
import concurrent.futures
import copy
import json
import os
import socket
import unittest

import jsonschema

import openapi_check
import test_tls
from harness import Redis, Serve, wait_until

CONFIG = """
store: {url: "memory://"}
policies:
  - name: per-key
    identity: [api_key]
    limits: [{algorithm: token_bucket, capacity: 2, refill: 2/1m}]
  - name: closed
    identity: [tenant]
    on_failure: deny
    limits: [{algorithm: fixed_window, limit: 5, window: 1m}]
  - name: huge
    identity: [region]
    limits: [{algorithm: fixed_window, limit: 900000, window: 1m}]
  - name: in-flight
    identity: [worker]
    limits: [{algorithm: concurrency, limit: 1, hold: 30s}]
"""
FORWARD_AUTH = """
server:
  descriptor_headers: {api_key: X-Key, tenant: X-Tenant}
"""
PROTECTED = "{token_file: token, allowed_clients: ['spiffe://mesh/envoy'], metrics: protected}"
TOKEN = "openapi-test-token"
ADMIN = "/v1/admin/"
ADMIN_TOKEN = "openapi-admin-token"


def raw(port, data):
    """Sends `data` on a new connection and reads one response until the server closes it (every
    refusal before routing closes). (status, lower-case headers, body)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as c:
        c.sendall(data)
        reply = b""
        while True:
            chunk = c.recv(65536)
            if not chunk:
                break
            reply += chunk
    head, _, body = reply.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return status, headers, body[:int(headers.get("content-length", "0"))]


def checked_raw(port, method, path, data):
    reply = raw(port, data)
    openapi_check.check(method, path, *reply)
    return reply


class OpenApiTest(unittest.TestCase):
    def serve(self, config=CONFIG, **kw):
        s = Serve(config, **kw)
        self.addCleanup(s.close)
        return s

    def assert_met(self, path):
        """Every response the document lists for `path` (all its methods, and 405 for the others)
        has been met by a live one in this process."""
        doc = openapi_check.document()
        wanted = {k for k in doc.documented() if k[0] == path}
        self.assertTrue(wanted, path)
        self.assertEqual(wanted - doc.seen(), set(), "documented for %s but never met" % path)

    def refused_before_routing(self, s, path, methods):
        """400 (framing), 413, 431 and 501 on `path` for each method: the transport's refusals."""
        for method in methods:
            start = ("%s %s HTTP/1.1\r\n" % (method, path)).encode()
            status = checked_raw(s.port, method, path, start + b"\r\n")[0]  # no Host
            self.assertEqual(status, 400)
            status = checked_raw(s.port, method, path,
                                 start + b"Host: x\r\nContent-Length: 70000\r\n\r\n")[0]
            self.assertEqual(status, 413)
            status = checked_raw(s.port, method, path,
                                 start + b"Host: x\r\nX-Big: " + b"a" * 20000 + b"\r\n\r\n")[0]
            self.assertEqual(status, 431)
            status = checked_raw(s.port, method, path,
                                 start + b"Host: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n")[0]
            self.assertEqual(status, 501)

    def caller_refusals(self, paths_and_methods):
        """401 and 403 from a TLS listener with server.auth (metrics: protected), and the 400 for
        two Authorization headers."""
        pki = test_tls.Pki()
        self.addCleanup(pki.close)
        cert, key = pki.server
        config = ("server:\n  tls: {cert_file: %s, key_file: %s, client_ca_file: %s, "
                  "client_cert: optional}\n  auth: %s\n" % (cert, key, pki.ca.cert, PROTECTED))
        s = self.serve(config + CONFIG, test_hooks=False, files={"token": TOKEN + "\n"})
        anonymous = pki.context()
        intruder = pki.context(pki.intruder)
        for path, method in paths_and_methods:
            body = json.dumps({"descriptors": {"api_key": "k"}}) if method == "POST" else None
            for ctx, want in ((anonymous, 401), (intruder, 403)):
                reply = test_tls.https(s, ctx, method, path, body)
                openapi_check.check(method, path, *reply)
                self.assertEqual(reply[0], want, (path, method))
            # Two Authorization headers, which http.client sends as given.
            conn = test_tls.http.client.HTTPSConnection("127.0.0.1", s.port, context=anonymous,
                                                        timeout=10)
            try:
                conn.putrequest(method, path)
                conn.putheader("Authorization", "Bearer " + TOKEN)
                conn.putheader("Authorization", "Bearer " + TOKEN)
                conn.putheader("Content-Length", str(len(body or "")))
                conn.endheaders((body or "").encode())
                r = conn.getresponse()
                reply = r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
            finally:
                conn.close()
            openapi_check.check(method, path, *reply)
            self.assertEqual(reply[0], 400, (path, method))
            self.assertEqual(json.loads(reply[2])["error"]["code"], "ambiguous_identity")

    def test_check(self):
        s = self.serve()
        for remaining in (1, 0):
            status, _, body = s.check({"api_key": "k"})
            self.assertEqual((status, body["policies"][0]["remaining"]), (200, remaining))
        self.assertEqual(s.check({"api_key": "k"})[0], 429)
        status, _, _ = s.request("POST", "/v1/check",
                                 json.dumps({"descriptors": {"api_key": "k"}, "refund": True}))
        self.assertEqual(status, 200)
        self.assertEqual(s.request("POST", "/v1/check", "{")[0], 400)
        self.assertEqual(s.request("POST", "/v1/check?x=1", "{}")[0], 400)
        self.assertEqual(s.request("GET", "/v1/check")[0], 405)
        status, _, raw_body = s.request("POST", "/v1/check", "x" * 70000)
        self.assertEqual((status, json.loads(raw_body)["error"]["code"]), (413, "body_too_large"))
        s.fail_store()
        status, headers, body = s.check({"tenant": "t", "api_key": "other"})
        self.assertEqual((status, headers["caudal-degraded"]), (503, "store_unavailable"))
        self.assertEqual(body["outcome"], "unavailable")
        s.recover_store()
        self.refused_before_routing(s, "/v1/check", ["POST"])
        self.caller_refusals([("/v1/check", "POST")])
        self.check_idempotency()
        self.assert_met("/v1/check")

    def check_idempotency(self, path="/v1/check", bodies=None):
        """Idempotency-Key's answers on `path`: a replay, 409 while the first is decided (its
        store answer parked), 422 for another body, 400 for a bad key, and the failure mode's 503
        when the records are full of claims in progress (max_keys: 1). `bodies(s)` gives the request and another
        one on the server `s` (default: a check, and the same with another cost)."""
        s = self.serve("server: {idempotency: {max_keys: 1}}\n" + CONFIG)
        if bodies is None:
            body = json.dumps({"descriptors": {"api_key": "k"}})
            other = json.dumps({"descriptors": {"api_key": "k"}, "cost": 2})
        else:
            body, other = (json.dumps(b) for b in bodies(s))

        def keyed(key, payload=body):
            return s.request("POST", path, payload, {"Idempotency-Key": key})

        pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
        self.addCleanup(pool.shutdown)
        self.assertEqual(s.hook("hold"), "holding")
        first = pool.submit(keyed, '"order-1"')
        self.assertEqual(s.hook("held 1"), "held 1")
        status, headers, raw_body = keyed('"order-1"')
        self.assertEqual((status, json.loads(raw_body)["error"]["code"]),
                         (409, "idempotency_key_in_use"))
        # A record that cannot be read (the records full of claims in progress): decided as when
        # the store fails, by the policy's failure mode (deny), charging nothing.
        status, _, raw_body = keyed('"order-2"')
        answer = json.loads(raw_body)
        self.assertEqual((status, answer.get("reason") or answer["error"]["code"]),
                         (503, "store_unavailable"))
        self.assertEqual(s.hook("release"), "released")
        status, headers, answered = first.result(timeout=20)
        self.assertEqual(status, 200)
        self.assertNotIn("idempotent-replayed", headers)
        # From here on every store answer is parked: none of these asks the store.
        status, headers, replayed = keyed("order-1")
        self.assertEqual((status, headers.get("idempotent-replayed"), replayed),
                         (200, "true", answered))
        status, _, raw_body = keyed("order-1", other)
        self.assertEqual((status, json.loads(raw_body)["error"]["code"]),
                         (422, "idempotency_key_reused"))
        status, _, raw_body = keyed('"unterminated')
        self.assertEqual((status, json.loads(raw_body)["error"]["code"]),
                         (400, "invalid_idempotency_key"))

    def test_forward_auth(self):
        s = self.serve(FORWARD_AUTH + CONFIG)
        for method in ("GET", "POST"):
            key = {"X-Key": "auth-" + method}
            self.assertEqual(s.request(method, "/v1/auth", headers=key)[0], 200)
            self.assertEqual(s.request(method, "/v1/auth", headers=key)[0], 200)
            self.assertEqual(s.request(method, "/v1/auth", headers=key)[0], 429)
            self.assertEqual(s.request(method, "/v1/auth?refused_status=418", headers=key)[0], 418)
            self.assertEqual(s.request(method, "/v1/auth?refused_status=500", headers=key)[0], 500)
            # The refused status in place of the caller's own errors: problem+json, documented.
            self.assertEqual(s.request(method, "/v1/auth?refused_status=401", headers=key)[0], 401)
            self.assertEqual(s.request(method, "/v1/auth?bogus=1", headers=key)[0], 400)
            self.assertEqual(s.request("HEAD", "/v1/auth", headers=key)[0], 429)
        s.fail_store()
        for method in ("GET", "POST"):
            self.assertEqual(s.request(method, "/v1/auth", headers={"X-Tenant": "t"})[0], 503)
        s.recover_store()
        self.refused_before_routing(s, "/v1/auth", ["GET", "POST"])
        self.caller_refusals([("/v1/auth", "GET"), ("/v1/auth", "POST")])
        self.assert_met("/v1/auth")

    def test_release(self):
        """Every documented status of POST /v1/release, and the hold a check answers."""
        s = self.serve()
        status, _, body = s.check({"worker": "w"})
        self.assertEqual(status, 200)
        hold = body["hold"]
        self.assertEqual(s.check({"worker": "w"})[0], 429)
        status, _, raw_body = s.request("POST", "/v1/release", json.dumps({"hold": hold}))
        self.assertEqual((status, json.loads(raw_body)), (200, {"released": True, "slots": 1}))
        status, _, raw_body = s.request("POST", "/v1/release", json.dumps({"hold": hold}))
        self.assertEqual((status, json.loads(raw_body)["error"]["code"]), (404, "unknown_hold"))
        for bad, code in (("{", "invalid_json"), ("[]", "invalid_body"), ("{}", "missing_hold"),
                          ('{"hold": 1}', "invalid_hold"), ('{"hold": "x"}', "invalid_hold"),
                          ('{"hold": "a", "x": 1}', "unknown_field"),
                          ('{"hold": "a", "hold": "b"}', "duplicate_field")):
            status, _, raw_body = s.request("POST", "/v1/release", bad)
            self.assertEqual((status, json.loads(raw_body)["error"]["code"]), (400, code), bad)
        self.assertEqual(s.request("GET", "/v1/release")[0], 405)
        status, _, raw_body = s.request("POST", "/v1/release", "x" * 70000)
        self.assertEqual(status, 413)
        hold = s.check({"worker": "w"})[2]["hold"]
        s.fail_store()
        status, headers, raw_body = s.request("POST", "/v1/release", json.dumps({"hold": hold}))
        self.assertEqual((status, json.loads(raw_body)["error"]["code"]), (503, "store_unavailable"))
        self.assertIn("retry-after", headers)
        s.recover_store()
        self.assertEqual(s.request("POST", "/v1/release", json.dumps({"hold": hold}))[0], 200)
        self.refused_before_routing(s, "/v1/release", ["POST"])
        self.caller_refusals([("/v1/release", "POST")])
        self.assert_met("/v1/release")

    def test_reserve_and_settle(self):
        """Every documented status of POST /v1/reserve and POST /v1/settle."""
        s = self.serve()

        def post(path, payload):
            status, headers, raw_body = s.request("POST", path, json.dumps(payload))
            return status, headers, json.loads(raw_body)

        status, _, body = post("/v1/reserve", {"descriptors": {"api_key": "r"}, "cost": 2})
        self.assertEqual((status, body["expires_in_ms"]), (200, 60000))
        rid = body["reservation"]
        self.assertEqual(post("/v1/reserve", {"descriptors": {"api_key": "r"}, "cost": 1})[0], 429)
        status, _, body = post("/v1/settle", {"reservation": rid, "cost": 1})
        self.assertEqual((status, body["outcome"]), (200, "settled"))
        self.assertEqual(post("/v1/settle", {"reservation": rid, "cost": 1})[2]["outcome"],
                         "repeated")
        status, _, body = post("/v1/settle", {"reservation": rid, "cost": 2})
        self.assertEqual((status, body["error"]["code"]), (409, "settled_with_another_cost"))
        forged = ("b" if rid[0] == "a" else "a") + rid[1:]
        status, _, body = post("/v1/settle", {"reservation": forged, "cost": 1})
        self.assertEqual((status, body["error"]["code"]), (404, "unknown_reservation"))
        for path, bad, code in (
                ("/v1/reserve", '{"descriptors": {"api_key": "r"}, "ttl": "0s"}', "invalid_ttl"),
                ("/v1/reserve", '{"descriptors": {"worker": "w"}}', "invalid_descriptors"),
                ("/v1/settle", '{"reservation": "x", "cost": 1}', "invalid_reservation"),
                ("/v1/settle", '{"reservation": "x", "cost": -1}', "invalid_cost"),
                ("/v1/settle", '{"reservation": "x"}', "missing_cost")):
            status, _, raw_body = s.request("POST", path, bad)
            self.assertEqual(status, 400, bad)
        for path in ("/v1/reserve", "/v1/settle"):
            self.assertEqual(s.request("GET", path)[0], 405)
            self.assertEqual(s.request("POST", path, "x" * 70000)[0], 413)
        status, _, body = post("/v1/reserve", {"descriptors": {"region": "r"}, "cost": 5})
        rid = body["reservation"]
        s.fail_store()
        status, _, body = post("/v1/reserve", {"descriptors": {"tenant": "t"}, "cost": 1})
        self.assertEqual(status, 503)
        status, headers, body = post("/v1/settle", {"reservation": rid, "cost": 1})
        self.assertEqual((status, body["error"]["code"]), (503, "store_unavailable"))
        s.recover_store()
        self.refused_before_routing(s, "/v1/reserve", ["POST"])
        self.refused_before_routing(s, "/v1/settle", ["POST"])
        self.caller_refusals([("/v1/reserve", "POST"), ("/v1/settle", "POST")])
        reserve = {"descriptors": {"api_key": "keyed"}, "cost": 1}
        self.check_idempotency("/v1/reserve", lambda _: (reserve, dict(reserve, cost=2)))

        def settles(server):
            status, _, raw_body = server.request("POST", "/v1/reserve", json.dumps(reserve))
            self.assertEqual(status, 200, raw_body)
            rid = json.loads(raw_body)["reservation"]
            return {"reservation": rid, "cost": 1}, {"reservation": rid, "cost": 2}
        self.check_idempotency("/v1/settle", settles)
        self.assert_met("/v1/reserve")
        self.assert_met("/v1/settle")

    def test_observability_endpoints(self):
        s = self.serve()
        for _ in range(3):
            s.check({"api_key": "k"})
        for path in ("/v1/top-refused", "/v1/top-refused?top=1", "/metrics", "/healthz", "/readyz"):
            self.assertEqual(s.request("GET", path)[0], 200, path)
            self.assertEqual(s.request("HEAD", path)[0], 200, path)
            self.assertEqual(s.request("POST", path.split("?")[0], "x")[0], 405, path)
        top = json.loads(s.request("GET", "/v1/top-refused")[2])
        self.assertEqual(top["checks"][0]["refused"], 1)
        s.fail_store()
        wait_until(lambda: s.request("GET", "/readyz")[0] == 503, "readiness to turn 503")
        s.recover_store()
        for path in ("/v1/top-refused", "/metrics", "/healthz", "/readyz"):
            self.refused_before_routing(s, path, ["GET"])
        self.caller_refusals([("/v1/top-refused", "GET"), ("/metrics", "GET")])
        for path in ("/v1/top-refused", "/metrics", "/healthz", "/readyz"):
            self.assert_met(path)

    def test_status_page(self):
        s = self.serve()
        s.check({"api_key": "k"})
        for path in ("/", "/v1/status", "/v1/status/chart?policy=per-key&limit=0"):
            self.assertEqual(s.request("GET", path)[0], 200, path)
            self.assertEqual(s.request("POST", path.split("?")[0], "x")[0], 405, path)
        self.assertEqual(s.request("GET", "/v1/status/chart?policy=per-key")[0], 400)
        self.assertEqual(s.request("GET", "/v1/status/chart?policy=nope&limit=0")[0], 404)
        self.assertEqual(s.request("GET", "/v1/status/chart?policy=huge&limit=0")[0], 422)
        for path in ("/", "/v1/status", "/v1/status/chart"):
            self.refused_before_routing(s, path, ["GET"])
        off = self.serve("server: {status_page: false}\n" + CONFIG)
        for path in ("/", "/v1/status", "/v1/status/chart?policy=per-key&limit=0"):
            self.assertEqual(off.request("GET", path)[0], 404, path)
            self.assertEqual(off.request("POST", path.split("?")[0], "x")[0], 404, path)
        self.caller_refusals([("/v1/status", "GET"), ("/v1/status/chart?policy=per-key&limit=0",
                                                      "GET")])
        for path in ("/", "/v1/status", "/v1/status/chart"):
            self.assert_met(path)

    def test_document_and_unknown_paths(self):
        s = self.serve()
        status, headers, body = s.request("GET", "/v1/openapi.json")
        self.assertEqual((status, headers["content-type"]), (200, "application/json"))
        with open(openapi_check.DOCUMENT, "rb") as f:
            self.assertEqual(body, f.read())  # the repository's document, byte for byte
        self.assertEqual(s.request("HEAD", "/v1/openapi.json")[0], 200)
        self.assertEqual(s.request("DELETE", "/v1/openapi.json")[0], 405)
        self.refused_before_routing(s, "/v1/openapi.json", ["GET"])
        self.assertEqual(s.request("GET", "/v2/nothing")[0], 404)
        self.assert_met("/v1/openapi.json")
        self.assert_met("*")

    def test_admin_paths_are_404_without_an_admin_token(self):
        s = self.serve()
        admin = [p for p in openapi_check.document().doc["paths"] if p.startswith(ADMIN)]
        self.assertEqual(len(admin), 2)
        for template in admin:
            path = template.replace("{policy}", "per-key") + "?api_key=k"
            for method in ("GET", "PUT", "DELETE"):
                status, _, body = s.request(method, path, "{}" if method == "PUT" else None)
                self.assertEqual((status, json.loads(body)["error"]["code"]), (404, "not_found"))
        self.assertIn((ADMIN + "policies/{policy}/overrides", "put", "404"),
                      openapi_check.document().seen())


    def test_admin_api(self):
        """Every documented status of both admin paths, each method, from a live instance on a
        real redis-server: the answers, the bad input, the credentials, the bound on overrides
        and the store gone."""
        s = self.serve("server: {admin: {max_overrides: 3}}\n" + CONFIG,
                       env={"CAUDAL_ADMIN_TOKEN": ADMIN_TOKEN})
        auth = {"Authorization": "Bearer " + ADMIN_TOKEN, "Content-Type": "application/json"}
        base = ADMIN + "policies/per-key/"
        overrides, state = base + "overrides", base + "state"
        body = json.dumps({"limits": [{"algorithm": "token_bucket", "capacity": 9,
                                       "refill": "9/1m"}], "expires_in": "1h"})
        ok = lambda method, path, data=None, want=200: self.assertEqual(
            s.request(method, path, data, auth)[0], want, (method, path))
        ok("PUT", overrides + "?api_key=k", body, 201)
        ok("PUT", overrides + "?api_key=k", body, 200)  # the same identity again: replaced
        ok("GET", overrides)
        ok("HEAD", overrides)
        ok("GET", state + "?api_key=k")
        ok("HEAD", state + "?api_key=k")
        ok("DELETE", state + "?api_key=k")
        ok("DELETE", overrides + "?api_key=k")
        for method, path, data in (("GET", overrides, None), ("PUT", overrides, body),
                                   ("DELETE", overrides, None), ("GET", state, None),
                                   ("DELETE", state, None)):
            q = "" if method == "GET" and path == overrides else "?api_key=k"
            ok(method, path + "?tenant=x" if q == "" else path + "?api_key=k&api_key=j", data, 400)
            self.assertEqual(s.request(method, path + q, data)[0], 401)
            self.assertEqual(s.request(method, path + q, data,
                                       {"Authorization": "Bearer wrong"})[0], 401)
            ok(method, path.replace("per-key", "nothing") + q, data, 404)
        ok("POST", overrides + "?api_key=k", body, 405)
        ok("PUT", state + "?api_key=k", body, 405)
        ok("PUT", overrides + "?api_key=k", "{", 400)
        self.refused_before_routing(s, overrides + "?api_key=k", ["GET", "PUT", "DELETE"])
        self.refused_before_routing(s, state + "?api_key=k", ["GET", "DELETE"])

        # The bound (server.admin.max_overrides): three held, a fourth refused, nothing changed.
        for key in ("f1", "f2", "f3"):
            ok("PUT", overrides + "?api_key=" + key, body, 201)
        ok("PUT", overrides + "?api_key=one-more", body, 409)
        listed = json.loads(s.request("GET", overrides, None, auth)[2])["overrides"]
        self.assertEqual(len(listed), 3)
        ok("PUT", overrides + "?api_key=f1", body, 200)  # replacing one held is no new one

        # A Redis that is gone: every operation is 503, nothing made up.
        redis = Redis()
        self.addCleanup(redis.close)
        s = self.serve(CONFIG.replace('url: "memory://"', "url: %s" % redis.url),
                       env={"CAUDAL_ADMIN_TOKEN": ADMIN_TOKEN})
        redis.stop()
        for method, path, data in (("GET", overrides, None), ("PUT", overrides, body),
                                   ("DELETE", overrides, None), ("GET", state, None),
                                   ("DELETE", state, None)):
            q = "" if method == "GET" and path == overrides else "?api_key=k"
            ok(method, path + q, data, 503)
        self.assert_met(ADMIN + "policies/{policy}/overrides")
        self.assert_met(ADMIN + "policies/{policy}/state")


class DocumentTest(unittest.TestCase):
    def test_every_schema_is_valid_json_schema_2020_12(self):
        doc = openapi_check.load()
        schemas = list(doc["components"]["schemas"].values())

        def walk(node):
            if isinstance(node, dict):
                for k, v in node.items():
                    if k == "schema":
                        schemas.append(v)
                    walk(v)
            elif isinstance(node, list):
                for v in node:
                    walk(v)
        walk(doc["paths"])
        walk(doc["components"]["responses"])
        walk(doc["components"]["headers"])
        walk(doc["x-caudal-unrouted"])
        self.assertGreater(len(schemas), 60)
        for schema in schemas:
            jsonschema.Draft202012Validator.check_schema(schema)

    def test_the_checker_refuses_what_the_document_does_not_describe(self):
        s = Serve(CONFIG)
        try:
            allowed = s.check({"api_key": "k"})
            status, headers, body = s.request("POST", "/v1/check",
                                              json.dumps({"descriptors": {"api_key": "k2"}}))
            _, healthz_headers, healthz = s.request("GET", "/healthz")
        finally:
            s.close()
        self.assertEqual(allowed[0], 200)
        doc = openapi_check.load()
        openapi_check.Document(doc).check("POST", "/v1/check", status, headers, body)

        wrong_type = copy.deepcopy(doc)
        wrong_type["components"]["schemas"]["LimitDecision"]["properties"]["remaining"] = {
            "type": "string"}
        missing_field = copy.deepcopy(doc)
        missing_field["components"]["schemas"]["CheckFields"]["required"].append("ticket")
        header = copy.deepcopy(doc)
        header["components"]["headers"]["RateLimit"]["schema"]["pattern"] = "^r=[0-9]+$"
        required_header = copy.deepcopy(doc)
        required_header["components"]["headers"]["Caudal-Degraded"]["required"] = True
        no_200 = copy.deepcopy(doc)
        no_200["paths"]["/v1/check"]["post"]["responses"].pop("200")
        other_type = copy.deepcopy(doc)
        ok = other_type["paths"]["/v1/check"]["post"]["responses"]["200"]["content"]
        ok["application/problem+json"] = ok.pop("application/json")
        for name, mutated in (("wrong_type", wrong_type), ("missing_field", missing_field),
                              ("header", header), ("required_header", required_header),
                              ("no_200", no_200), ("other_type", other_type)):
            with self.assertRaises(AssertionError, msg=name):
                openapi_check.Document(mutated).check("POST", "/v1/check", status, headers, body)
        text = copy.deepcopy(doc)
        text["paths"]["/healthz"]["get"]["responses"]["200"]["content"][
            "text/plain; charset=utf-8"]["schema"] = {"const": "healthy\n"}
        with self.assertRaises(AssertionError):
            openapi_check.Document(text).check("GET", "/healthz", 200, healthz_headers, healthz)
        # An undocumented status, and a method the path takes answered with 404.
        with self.assertRaises(AssertionError):
            openapi_check.Document(doc).check("GET", "/healthz", 418, healthz_headers, healthz)
        with self.assertRaises(AssertionError):
            openapi_check.Document(doc).check("GET", "/v2/x", 200, healthz_headers, healthz)


if __name__ == "__main__":
    unittest.main()
