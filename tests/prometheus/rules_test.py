"""deploy/prometheus's rules, checked:
  rules_test.py check DIR OPERATIONS_MD    promtool's check of the rules; every metric they name is
                                           one docs/operations.md's generated list has (a
                                           histogram's _bucket, _count, _sum included), and
                                           every label they match or group by one of those
                                           metrics has; every alert and recording rule met by
                                           a test; then `promtool test rules`
  rules_test.py catches DIR OPERATIONS_MD  the check fails on each of a few broken copies
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

import yaml

RULES = "caudal.rules.yml"
TESTS = "caudal.rules.test.yml"
# A metric's name where it stands alone, not inside a recorded name (level:metric:operations).
METRIC = re.compile(r"(?<![:\w])caudal_[a-z0-9_]+(?![:\w])")


# Labels every series has once scraped (Prometheus's target labels).
TARGET_LABELS = {"job", "instance"}
GROUPING = re.compile(r"\b(?:by|without|on|ignoring)\s*\(([^)]*)\)")
MATCHER = re.compile(r"(?<![:\w])(caudal_[a-z0-9_]+)\{([^}]*)\}")


def exported(operations_md):
    """{metric name: its label names} that /metrics serves, from the list generated from
    kMetricTable."""
    with open(operations_md) as f:
        text = f.read()
    table = text.split("<!-- metrics:", 1)[1].split("<!-- end of metrics -->", 1)[0]
    names = {}
    row = re.compile(r"^\| `(caudal_[a-z0-9_]+)(?:\{([a-z_,]*)\})?` \| (\w+) \|", re.M)
    for name, labels, kind in row.findall(table):
        labels = set(filter(None, labels.split(","))) | TARGET_LABELS
        names[name] = labels
        if kind == "histogram":
            names[name + "_bucket"] = labels | {"le"}
            names[name + "_count"] = names[name + "_sum"] = labels
    if not names:
        raise SystemExit("%s: no generated list of metrics" % operations_md)
    return names


def label_problems(name, expr, known):
    """Labels the rule matches or groups by that none of its metrics has."""
    metrics = set(METRIC.findall(expr)) & set(known)
    have = set().union(*(known[m] for m in metrics)) if metrics else set()
    problems = []
    for metric, matchers in MATCHER.findall(expr):
        for label in re.findall(r"([a-z_]+)\s*[=!]~?", matchers):
            if metric in known and label not in known[metric]:
                problems.append("%s: %s has no label %s" % (name, metric, label))
    for group in GROUPING.findall(expr):
        for label in filter(None, (l.strip() for l in group.split(","))):
            if metrics and label not in have:
                problems.append("%s: groups by %s, which none of %s has" % (
                    name, label, ", ".join(sorted(metrics))))
    return problems


def check(directory, operations_md):
    problems = []
    subprocess.run(["promtool", "check", "rules", os.path.join(directory, RULES)], check=True)
    with open(os.path.join(directory, RULES)) as f:
        rules = [r for g in yaml.safe_load(f)["groups"] for r in g["rules"]]
    with open(os.path.join(directory, TESTS)) as f:
        tests = yaml.safe_load(f)["tests"]
    known = exported(operations_md)
    for rule in rules:
        name = rule.get("alert") or rule.get("record")
        texts = [rule["expr"]] + list((rule.get("annotations") or {}).values())
        for metric in sorted(set(m for t in texts for m in METRIC.findall(t))):
            if metric not in known:
                problems.append("%s: %s is not a metric caudal exports (docs/operations.md)" % (
                    name, metric))
        problems += label_problems(name, rule["expr"], known)
    fired = {a["alertname"] for t in tests for a in t.get("alert_rule_test", []) if a["exp_alerts"]}
    evaluated = {e["expr"].split("{")[0] for t in tests for e in t.get("promql_expr_test", [])
                 if e["exp_samples"]}
    for rule in rules:
        if "alert" in rule and rule["alert"] not in fired:
            problems.append("alert %s: no test expects it to fire" % rule["alert"])
        if "record" in rule and rule["record"] not in evaluated:
            problems.append("record %s: no test evaluates it" % rule["record"])
    for p in problems:
        print(p, file=sys.stderr)
    if problems:
        return 1
    return subprocess.run(["promtool", "test", "rules", TESTS], cwd=directory).returncode


def broken_copies(directory):
    """(name, edit of the rules' text): mistakes each of which the check must catch."""
    return [
        ("a threshold changed", lambda t: t.replace("rate5m > 0.01", "rate5m > 0.05")),
        ("a for: dropped", lambda t: t.replace(
            "(caudal_store_breaker_state) == 1\n        for: 1m\n",
            "(caudal_store_breaker_state) == 1\n")),
        ("no traffic floor", lambda t: t.replace(
            "\n            and on (job, policy) sum by (job, policy) "
            "(policy_outcome:caudal_decisions:rate5m) > 1", "")),
        ("a misspelt metric", lambda t: t.replace(
            "rate(caudal_config_reloads_total{", "rate(caudal_config_reload_total{").replace(
            "increase(caudal_config_reloads_total{", "increase(caudal_config_reload_total{")),
        ("a label the metric lacks", lambda t: t.replace(
            "sum by (job, instance, node) (increase(caudal_store_node_breaker_opens_total",
            "sum by (job, instance, server) (increase(caudal_store_node_breaker_opens_total")),
        ("a matcher on a label the metric lacks", lambda t: t.replace(
            'caudal_http_responses_total{code="503"}',
            'caudal_http_responses_total{status="503"}')),
        ("an untested alert", lambda t: t + (
            "      - alert: CaudalUntested\n"
            "        expr: caudal_store_degraded == 1\n")),
        ("an untested record", lambda t: t.replace(
            "  - name: caudal.alerts\n",
            "      - record: job:caudal_over_limit_cache_hits:rate5m\n"
            "        expr: sum by (job) (rate(caudal_over_limit_cache_hits_total[5m]))\n\n"
            "  - name: caudal.alerts\n")),
    ]


def catches(directory, operations_md):
    failed = 0
    with open(os.path.join(directory, RULES)) as f:
        original = f.read()
    for name, edit in broken_copies(directory):
        text = edit(original)
        if text == original:
            print("%s: the edit no longer applies to %s" % (name, RULES), file=sys.stderr)
            failed = 1
            continue
        with tempfile.TemporaryDirectory() as copy:
            shutil.copy(os.path.join(directory, TESTS), copy)
            with open(os.path.join(copy, RULES), "w") as f:
                f.write(text)
            result = subprocess.run([sys.executable, __file__, "check", copy, operations_md],
                                    capture_output=True, text=True)
        if result.returncode == 0:
            print("the check accepted %s:\n%s" % (name, result.stdout + result.stderr),
                  file=sys.stderr)
            failed = 1
        else:
            print("caught %s" % name)
    return failed


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] not in ("check", "catches"):
        raise SystemExit("usage: rules_test.py check|catches DIR OPERATIONS_MD")
    sys.exit((check if sys.argv[1] == "check" else catches)(sys.argv[2], sys.argv[3]))
