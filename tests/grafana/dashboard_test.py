"""dashboard.py's generation: a metric added to the table gets its panel in its prefix's row
(rows for metrics still to come appear with them), an unclaimed prefix its own row, and every
alert its threshold; run on a copy of the tree with rows added to docs/operations.md's list."""
import os
import re
import shutil
import tempfile
import unittest

import yaml

import dashboard

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
NEW_ROWS = (
    "| `caudal_shares_granted_total{policy}` | counter | Shares granted. |\n"
    "| `caudal_grpc_streams_total` | counter | gRPC streams. |\n"
    "| `caudal_frobs` | gauge | A metric no row's prefix names. |\n")


class DashboardTest(unittest.TestCase):
    def generate(self, added=""):
        root = tempfile.mkdtemp()
        self.addCleanup(shutil.rmtree, root)
        for path in (dashboard.OPERATIONS, dashboard.RULES):
            os.makedirs(os.path.join(root, os.path.dirname(path)), exist_ok=True)
            shutil.copy(os.path.join(ROOT, path), os.path.join(root, path))
        path = os.path.join(root, dashboard.OPERATIONS)
        with open(path) as f:
            text = f.read()
        with open(path, "w") as f:
            f.write(text.replace("<!-- end of metrics -->", added + "<!-- end of metrics -->"))
        return dashboard.generate(root)

    @staticmethod
    def rows(d):
        """{row title: [panel titles]}"""
        out, current = {}, None
        for p in d["panels"]:
            if p["type"] == "row":
                current = out.setdefault(p["title"], [])
            else:
                current.append(p)
        return out

    def test_new_metrics_land_in_their_prefixes_rows(self):
        before = self.rows(self.generate())
        after = self.rows(self.generate(NEW_ROWS))
        self.assertNotIn("Other metrics", before)
        titles = {row: [p["title"] for p in panels] for row, panels in after.items()}
        self.assertIn("caudal_shares_granted_total", titles["Leases and shares"])
        self.assertIn("caudal_grpc_streams_total", titles["HTTP, gRPC and RLQS traffic"])
        self.assertEqual(titles["Other metrics"], ["caudal_frobs"])
        shares = next(p for p in after["Leases and shares"]
                      if p["title"] == "caudal_shares_granted_total")
        self.assertEqual(shares["targets"][0]["expr"],
                         'sum by (policy) (rate(caudal_shares_granted_total{job=~"$job", '
                         'instance=~"$instance"}[$__rate_interval]))')
        # Nothing else moved.
        for row, panels in before.items():
            self.assertEqual([p["title"] for p in panels],
                             [t for t in titles[row] if not t.startswith(
                                 ("caudal_shares_", "caudal_grpc_streams_"))])

    def test_every_alert_has_its_threshold_drawn(self):
        with open(os.path.join(ROOT, dashboard.RULES)) as f:
            alerts = [r for g in yaml.safe_load(f)["groups"] for r in g["rules"] if "alert" in r]
        panels = {p["title"].split(" ")[1]: p for p in self.generate()["panels"]
                  if p["title"].startswith("Alert ")}
        self.assertEqual(sorted(panels), sorted(a["alert"] for a in alerts))
        for a in alerts:
            defaults = panels[a["alert"]]["fieldConfig"]["defaults"]
            line = defaults["thresholds"]["steps"][-1]["value"]
            self.assertRegex(a["expr"], r"(>|<|==)\s*%s\b" % re.escape("%g" % line))
            self.assertEqual(defaults["custom"]["thresholdsStyle"]["mode"], "line")

    def test_a_recording_rule_is_written_out(self):
        p = next(p for p in self.generate()["panels"]
                 if p["title"].startswith("Alert CaudalStoreErrors "))
        expr = p["targets"][0]["expr"]
        self.assertNotIn("instance:caudal_store_error_ratio:rate5m", expr)
        self.assertIn("rate(caudal_store_errors_total{", expr)
        self.assertEqual(p["fieldConfig"]["defaults"]["thresholds"]["steps"][-1]["value"], 0.01)


if __name__ == "__main__":
    unittest.main()
