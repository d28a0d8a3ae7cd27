"""The nginx auth_request recipe of docs/integrations.md, run as written against a real nginx:
admitted requests reach the application with their RateLimit headers; a refusal is a 429 with
Retry-After, RateLimit and RateLimit-Policy and never reaches it; the store down under a deny
policy is a 503; a malformed identity a 400; caudal down is a 503 (fail closed) or reaches the
application (fail open). The configs are the files under examples/nginx/, which the doc quotes
verbatim (checked here); only their addresses are replaced by free loopback ports."""
import http.client
import os
import re
import unittest

from harness import Serve, free_port
from nginx import Nginx, Upstream

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
EXAMPLES = os.path.join(ROOT, "examples", "nginx")
DOC = os.path.join(ROOT, "docs", "integrations.md")

CAUDAL_CONFIG = """
server:
  trusted_proxies: [127.0.0.1/32]
policies:
  - name: per-api-key
    identity: [api_key]
    on_failure: deny
    limits: [{algorithm: gcra, capacity: 3, refill: 3/1h}]
"""


def read(path):
    with open(path) as f:
        return f.read()


def error_location(conf):
    """The @caudal_error location block, its comment included, up to its closing brace."""
    start = conf.index("    # Either caudal refused")
    end = conf.index("\n    }\n", start) + len("\n    }\n")
    return conf[start:end]


def get(port, api_keys=("k1",)):
    """GET / through nginx with one X-API-Key field per key; (status, headers, body)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        c.putrequest("GET", "/hello")
        for k in api_keys:
            c.putheader("X-API-Key", k)
        c.endheaders()
        r = c.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read().decode()
    finally:
        c.close()


def show(step, response):
    status, headers, body = response
    shown = {k: headers[k] for k in ("retry-after", "ratelimit", "ratelimit-policy") if k in headers}
    print("proxy recipe: %-28s -> %d %s %s" % (step, status, shown, body.strip()[:60]))


class DocQuotesTheTestedConfigs(unittest.TestCase):
    def test_doc_quotes_both_files(self):
        doc = read(DOC)
        closed = read(os.path.join(EXAMPLES, "caudal-fail-closed.conf"))
        opened = read(os.path.join(EXAMPLES, "caudal-fail-open.conf"))
        blocks = re.findall(r"```nginx\n(.*?)```", doc, re.S)
        self.assertIn(closed, blocks, "docs/integrations.md must quote caudal-fail-closed.conf whole")
        self.assertIn(error_location(opened), blocks,
                      "docs/integrations.md must quote caudal-fail-open.conf's @caudal_error")
        # The two files differ in that one location and nowhere else.
        self.assertEqual(opened.replace(error_location(opened), error_location(closed)), closed)


class Recipe:
    """Mixed into a TestCase; `FILE` names the example config under test."""
    FILE = None

    def setUp(self):
        self.app = Upstream()
        self.caudal = Serve(CAUDAL_CONFIG)  # caudal-testing: its store fails on demand
        self.port = free_port()
        site = read(os.path.join(EXAMPLES, self.FILE))
        for address, replacement in (("127.0.0.1:8080", "127.0.0.1:%d" % self.caudal.port),
                                     ("127.0.0.1:9000", "127.0.0.1:%d" % self.app.port),
                                     ("listen 80;", "listen 127.0.0.1:%d;" % self.port)):
            self.assertEqual(site.count(address), 1, address)
            site = site.replace(address, replacement)
        self.nginx = Nginx(site, self.port)

    def tearDown(self):
        self.nginx.close()
        self.caudal.close()
        self.app.close()

    def run_until_caudal_is_down(self):
        for i in range(3):
            r = get(self.port)
            show("nginx admitted %d of 3" % (i + 1), r)
            status, h, body = r
            self.assertEqual(status, 200, self.nginx.log())
            self.assertEqual(body, "upstream /hello\n")
            self.assertEqual(h["ratelimit"], '"per-api-key";r=%d;t=%d' % (2 - i, 1200 * (i + 1)))
            self.assertEqual(h["ratelimit-policy"], '"per-api-key";q=3;w=3600')
        self.assertEqual(self.app.hits, 3)

        r = get(self.port)
        show("nginx refused", r)
        status, h, body = r
        self.assertEqual(status, 429)
        self.assertEqual(h["retry-after"], "1200")
        self.assertEqual(h["ratelimit"], '"per-api-key";r=0;t=3600')
        self.assertEqual(h["ratelimit-policy"], '"per-api-key";q=3;w=3600')
        self.assertEqual(h["content-type"], "application/problem+json")
        self.assertIn("quota-exceeded", body)
        self.assertEqual(self.app.hits, 3)  # a refused request never reaches the application

        r = get(self.port, api_keys=("k1", "k2"))
        show("nginx identity twice", r)
        self.assertEqual(r[0], 400)
        self.assertNotIn("retry-after", r[1])
        self.assertEqual(get(self.port, api_keys=("k2",))[0], 200)  # k2 was not charged before
        self.assertEqual(self.app.hits, 4)

        self.caudal.fail_store()
        r = get(self.port, api_keys=("k3",))
        show("nginx store down", r)
        status, h, body = r
        self.assertEqual(status, 503)
        self.assertEqual(h["retry-after"], "1")
        self.assertIn("store-unavailable", body)
        self.assertEqual(self.app.hits, 4)
        self.caudal.recover_store()

        self.caudal.close()  # connection refused from now on
        r = get(self.port, api_keys=("k4",))
        show("nginx caudal down", r)
        return r


class FailClosed(Recipe, unittest.TestCase):
    FILE = "caudal-fail-closed.conf"

    def test_each_outcome_has_its_status(self):
        status, h, body = self.run_until_caudal_is_down()
        self.assertEqual(status, 503)
        self.assertEqual(body, "rate limiter unavailable\n")
        self.assertEqual(self.app.hits, 4)


class FailOpen(Recipe, unittest.TestCase):
    FILE = "caudal-fail-open.conf"

    def test_each_outcome_has_its_status(self):
        status, _, body = self.run_until_caudal_is_down()
        self.assertEqual(status, 200)
        self.assertEqual(body, "upstream /hello\n")
        self.assertEqual(self.app.hits, 5)


if __name__ == "__main__":
    unittest.main()
