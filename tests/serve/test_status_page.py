"""The status page at `/`, in a real browser (headless Chromium over the DevTools protocol): it
loads under its Content-Security-Policy, lists the configured policies, and its totals, rates
and most refused identities follow the traffic the test sends; the chart of a limit loads. A
screenshot goes to the test's output directory (CAUDAL_TEST_OUTPUT, else a temporary one) and
its path is printed. The JSON and chart endpoints are checked over plain HTTP, as is
server.status_page: false, and that no store password reaches the page."""
import json
import os
import tempfile
import unittest

from chromium import Chromium
from harness import Serve, free_port

POLICIES = """
policies:
  - name: per-key
    identity: [api_key]
    limits:
      - {algorithm: gcra, capacity: 3, refill: 3/1h}
      - {algorithm: fixed_window, limit: 100, window: 1d}
  - name: per-tenant
    identity: [tenant]
    on_failure: allow
    limits: [{algorithm: sliding_window_counter, limit: 50, window: 1m}]
  - name: huge
    identity: [account]
    limits: [{algorithm: fixed_window, limit: 1000000, window: 1h}]
"""

READ_TOTALS = """JSON.stringify({
  decisions: document.getElementById('total-decisions').textContent,
  refusals: document.getElementById('total-refusals').textContent,
  decisionRate: document.getElementById('rate-decisions').textContent,
  refusalRate: document.getElementById('rate-refusals').textContent,
  updated: document.getElementById('updated').textContent})"""


def output_dir():
    path = os.environ.get("CAUDAL_TEST_OUTPUT") or tempfile.mkdtemp(prefix="caudal-status-")
    os.makedirs(path, exist_ok=True)
    return path


class InTheBrowser(unittest.TestCase):
    def setUp(self):
        self.s = Serve(POLICIES, test_hooks=False)
        self.browser = Chromium()

    def tearDown(self):
        self.browser.close()
        self.s.close()

    def totals(self):
        return json.loads(self.browser.evaluate(READ_TOTALS))

    def test_page_shows_policies_and_live_numbers(self):
        b = self.browser
        b.open(self.s.base + "/")
        b.wait_for("document.getElementById('updated').textContent.startsWith('updated')",
                   "the first poll")
        rows = b.evaluate("[...document.querySelectorAll('#policies tbody tr')]"
                          ".map((r) => r.dataset.policy)")
        self.assertEqual(rows, ["per-key", "per-tenant", "huge"])
        limits = b.evaluate("document.querySelector('tr[data-policy=per-key] td:nth-child(3)')"
                            ".textContent")
        self.assertEqual(limits, "gcra capacity=3 refill=3/1h\nfixed_window limit=100 window=1d")
        self.assertEqual(b.evaluate("document.getElementById('store-kind').textContent"), "memory")
        self.assertEqual(b.evaluate("document.getElementById('store-ready').textContent"), "ready")
        self.assertEqual(b.evaluate("document.getElementById('store-breaker').textContent"),
                         "closed")
        before = self.totals()
        self.assertEqual((before["decisions"], before["refusals"]), ("0", "0"))

        statuses = [self.s.request("GET", "/v1/auth", headers={"X-API-Key": "k1"})[0]
                    for _ in range(5)]
        self.assertEqual(statuses, [200, 200, 200, 429, 429])
        # The first poll that sees all of it: its rates come from the poll before, which saw
        # less, so both are above zero.
        after = json.loads(b.wait_for(
            "(() => { const t = %s; const v = JSON.parse(t);"
            " return v.decisions === '5' && v.refusals === '2' ? t : null; })()" % READ_TOTALS,
            "the totals to follow the traffic"))
        self.assertGreater(float(after["decisionRate"]), 0, after)
        self.assertGreater(float(after["refusalRate"]), 0, after)
        row = b.evaluate("[...document.querySelectorAll('tr[data-policy=per-key] td')]"
                         ".map((c) => c.textContent)")
        self.assertEqual(row[4:6], ["3", "2"])  # allowed, refused
        refused = b.evaluate("[...document.querySelectorAll('#refused tbody td')]"
                             ".map((c) => c.textContent)")
        self.assertEqual(refused[0], "per-key")
        self.assertRegex(refused[1], r"^h:[0-9a-f]{16}$")  # a hash, as the refusal log shows it
        self.assertEqual(refused[2:], ["2", "0", "2"])

        # The first limit's chart is shown at once; a limit too large to simulate says so.
        width = b.wait_for("(() => { const c = document.getElementById('chart');"
                           " return c.complete && !c.hidden ? c.naturalWidth : 0; })()",
                           "the chart to load")
        self.assertGreaterEqual(width, 960)  # wider when the legend needs it
        shot = os.path.join(output_dir(), "status_page.png")
        b.screenshot(shot)
        with open(shot, "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")
        print("status page screenshot: " + shot)

        b.evaluate("const s = document.getElementById('chart-limit');"
                   "s.value = 'policy=huge&limit=0'; s.dispatchEvent(new Event('change'));")
        message = b.wait_for("document.getElementById('chart-error').textContent",
                             "the chart's refusal")
        self.assertIn("caudal simulate --limit 1000000/1h", message)

    def test_every_text_of_a_chart_lies_inside_its_canvas(self):
        # Measured by the browser with the fonts it renders (a legend entry reads
        # "sliding_window_counter  1999", one of the widest), not estimated.
        extents = """(() => {
          const c = document.documentElement.getBoundingClientRect();
          if (document.querySelectorAll('text').length < 8) return null;
          return [...document.querySelectorAll('text')].map((t) => {
            const b = t.getBoundingClientRect();  // as drawn: rotated labels too
            return [t.textContent, b.left - c.left, b.top - c.top, b.right - c.left,
                    b.bottom - c.top, c.width, c.height];
          });
        })()"""
        for choice in ("policy=per-key&limit=0", "policy=per-key&limit=1",
                       "policy=per-tenant&limit=0"):
            self.browser.open(self.s.base + "/v1/status/chart?" + choice)
            texts = self.browser.wait_for(extents, "the chart " + choice)
            self.assertIn("sliding_window_counter", " ".join(t[0] for t in texts))
            for text, left, top, right, bottom, width, height in texts:
                self.assertGreaterEqual(left, 0, (choice, text))
                self.assertGreaterEqual(top, 0, (choice, text))
                self.assertLessEqual(right, width, (choice, text, right, width))
                self.assertLessEqual(bottom, height, (choice, text))


class Endpoints(unittest.TestCase):
    def test_json_chart_and_headers(self):
        s = Serve(POLICIES, test_hooks=False)
        try:
            status, h, body = s.request("GET", "/")
            self.assertEqual(status, 200)
            self.assertEqual(h["content-type"], "text/html; charset=utf-8")
            csp = h["content-security-policy"]
            self.assertIn("default-src 'none'", csp)
            self.assertIn("script-src 'sha256-", csp)
            self.assertNotIn("unsafe", csp)
            self.assertNotIn(b"http://", body.replace(b'xmlns="http://www.w3.org', b""))
            self.assertEqual(s.request("POST", "/v1/status")[0], 405)

            status, _, body = s.request("GET", "/v1/status")
            self.assertEqual(status, 200)
            st = json.loads(body)
            self.assertEqual(st["store"]["kind"], "memory")
            self.assertEqual([p["name"] for p in st["policies"]], ["per-key", "per-tenant", "huge"])
            self.assertEqual(st["policies"][1]["on_failure"], "allow")
            self.assertEqual(st["refused"], [])

            status, h, body = s.request("GET", "/v1/status/chart?policy=per-tenant&limit=0")
            self.assertEqual((status, h["content-type"]), (200, "image/svg+xml"))
            self.assertIn(b"sliding_window_counter", body)
            for query, code in (("policy=per-key&limit=2", 404), ("policy=nope&limit=0", 404),
                                ("policy=per-key", 400), ("policy=per-key&limit=x", 400),
                                ("policy=huge&limit=0", 422)):
                self.assertEqual(s.request("GET", "/v1/status/chart?" + query)[0], code, query)
        finally:
            s.close()

    def test_off_when_configured_off(self):
        s = Serve("server: {status_page: false}\n" + POLICIES, test_hooks=False)
        try:
            for path in ("/", "/v1/status", "/v1/status/chart?policy=per-key&limit=0"):
                self.assertEqual(s.request("GET", path)[0], 404, path)
        finally:
            s.close()

    def test_no_store_password_on_the_page(self):
        closed_port = free_port()  # nothing listens: the store is unreachable
        s = Serve("store: {url: 'redis://caudal:s3cret-pw@127.0.0.1:%d'}\n" % closed_port +
                  POLICIES, test_hooks=False)
        try:
            status, _, body = s.request("GET", "/v1/status")
            self.assertEqual(status, 200)
            st = json.loads(body)
            self.assertEqual(st["store"]["kind"], "redis")
            self.assertNotIn(b"s3cret-pw", body)
            self.assertNotIn(b"s3cret-pw", s.request("GET", "/")[2])
        finally:
            s.close()


if __name__ == "__main__":
    unittest.main()
