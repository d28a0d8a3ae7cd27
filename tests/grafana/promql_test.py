"""deploy/grafana/caudal.json's PromQL, checked:
  promql_test.py check DASHBOARD OPERATIONS_MD    every panel's query, Grafana's variables given
                                                  values, is a recording rule `promtool check
                                                  rules` accepts; every metric a query or a
                                                  variable names is one docs/operations.md's
                                                  generated list has, and every label it matches
                                                  or groups by one that metric has
  promql_test.py catches DASHBOARD OPERATIONS_MD  the check fails on each of a few broken copies
"""
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "prometheus"))
from rules_test import METRIC, exported, label_problems  # noqa: E402

# What Grafana puts in place of its variables before a query reaches Prometheus.
VARIABLES = [("$__rate_interval", "1m"), ("$job", ".*"), ("$instance", ".*")]
LABEL_VALUES = re.compile(r"^label_values\((.+),\s*(\w+)\)$")


def expand(expr):
    for name, value in VARIABLES:
        expr = expr.replace(name, value)
    if "$" in expr:
        raise ValueError("a variable the check does not know: %s" % expr)
    return expr


def queries(dashboard):
    """[(where, PromQL)]: every panel target's query, and every variable's selector."""
    out = []
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            out.append(("panel %d %s (%s)" % (panel["id"], target["refId"], panel["title"]),
                        target["expr"]))
    for var in dashboard["templating"]["list"]:
        if var["type"] == "query":
            m = LABEL_VALUES.match(var["query"]["query"])
            if not m:
                raise ValueError("variable %s: not label_values(SELECTOR, LABEL)" % var["name"])
            # The label it lists, matched, so the metric must have it.
            selector, label = m.groups()
            matcher = '%s!=""' % label
            out.append(("variable " + var["name"], selector[:-1] + ", " + matcher + "}"
                        if selector.endswith("}") else selector + "{" + matcher + "}"))
    return out


def check(path, operations_md):
    with open(path) as f:
        dashboard = json.load(f)
    known = exported(operations_md)
    problems, rules = [], []
    for i, (where, expr) in enumerate(queries(dashboard)):
        try:
            expr = expand(expr)
        except ValueError as e:
            problems.append("%s: %s" % (where, e))
            continue
        rules.append({"record": "dashboard:query_%d:check" % i, "expr": expr})
        for metric in sorted(set(METRIC.findall(expr))):
            if metric not in known:
                problems.append("%s: %s is not a metric caudal exports (docs/operations.md)"
                                % (where, metric))
        problems += label_problems(where, expr, known)
    if not rules:
        problems.append("%s: no queries" % path)
    with tempfile.TemporaryDirectory() as tmp:
        rules_file = os.path.join(tmp, "dashboard.rules.json")  # JSON is YAML
        with open(rules_file, "w") as f:
            json.dump({"groups": [{"name": "dashboard", "rules": rules}]}, f, indent=1)
        promtool = subprocess.run(["promtool", "check", "rules", rules_file],
                                  capture_output=True, text=True)
    if promtool.returncode != 0:
        problems.append("promtool check rules:\n" + promtool.stdout + promtool.stderr)
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        return 1
    print("%s: %d queries pass promtool and name exported metrics and labels" % (
        path, len(rules)))
    return 0


def broken_copies():
    """(name, edit of a query): mistakes each of which the check must catch."""
    def first(edit):
        def apply(d):
            for panel in d["panels"]:
                for target in panel.get("targets", []):
                    new = edit(target["expr"])
                    if new != target["expr"]:
                        target["expr"] = new
                        return True
            return False
        return apply
    return [
        ("a misspelt metric", first(lambda e: e.replace(
            "caudal_decisions_total{", "caudal_decision_total{", 1))),
        ("a PromQL syntax error", first(lambda e: e.replace(
            "[$__rate_interval])", "[$__rate_interval]", 1))),
        ("a label the metric lacks", first(lambda e: e.replace(
            "sum by (code) (rate(caudal_http_responses_total",
            "sum by (status) (rate(caudal_http_responses_total", 1))),
        ("a variable Grafana does not fill", first(lambda e: e.replace(
            "$__rate_interval", "$__range_interval", 1))),
    ]


def catches(path, operations_md):
    failed = 0
    for name, edit in broken_copies():
        with open(path) as f:
            dashboard = json.load(f)
        if not edit(dashboard):
            print("%s: the edit no longer applies to %s" % (name, path), file=sys.stderr)
            failed = 1
            continue
        with tempfile.TemporaryDirectory() as tmp:
            copy = os.path.join(tmp, "caudal.json")
            with open(copy, "w") as f:
                json.dump(dashboard, f)
            result = subprocess.run([sys.executable, __file__, "check", copy, operations_md],
                                    capture_output=True, text=True)
        if result.returncode == 0:
            print("the check accepted %s:\n%s" % (name, result.stdout), file=sys.stderr)
            failed = 1
        else:
            print("caught %s: %s" % (name, result.stderr.strip().splitlines()[0]))
    return failed


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] not in ("check", "catches"):
        raise SystemExit("usage: promql_test.py check|catches DASHBOARD OPERATIONS_MD")
    sys.exit((check if sys.argv[1] == "check" else catches)(sys.argv[2], sys.argv[3]))
