"""deploy/grafana/caudal.json, caudal's Grafana dashboard, generated from the metric list
docs/operations.md holds (itself generated from kMetricTable) and the alert rules of
deploy/prometheus/caudal.rules.yml:
  dashboard.py write ROOT    rewrites the dashboard (cmake --build build --target grafana-dashboard)
  dashboard.py check ROOT    exits 1 when the dashboard differs from what the list and rules give

One panel per metric, in the row its name's prefix names (ROWS; a name no prefix claims goes to
the last row, so no metric is left out): a counter's rate, a gauge's value, a histogram's 50th
and 99th percentiles, by the metric's labels (a metric without labels: by instance). Then one
panel per alert, in the row of the first metric it reads: the expression before the alert's
first comparison, recording rules written out, with the threshold drawn as a line. Every
selector is scoped to the dashboard's job and instance variables."""
import json
import os
import re
import sys

import yaml

DASHBOARD = "deploy/grafana/caudal.json"
OPERATIONS = "docs/operations.md"
RULES = "deploy/prometheus/caudal.rules.yml"

# (title, name prefixes): a metric's row is the first whose prefix starts its name. A row no
# metric reaches is left out, so rows for metrics still to come (shares, RLQS) appear with them.
ROWS = [
    ("Decisions and refusals by policy",
     ["caudal_decisions_", "caudal_shadow_", "caudal_failure_mode_", "caudal_rule_hits_",
      "caudal_detailed_metric_", "caudal_over_limit_cache_", "caudal_units_"]),
    ("Latency", ["caudal_decision_duration_", "caudal_store_duration_"]),
    ("Store health and breaker", ["caudal_store_", "caudal_redis_"]),
    ("Leases and shares", ["caudal_lease_", "caudal_share", "caudal_hold"]),
    ("Reservations and idempotency", ["caudal_reservation", "caudal_idempotency_"]),
    ("Admin and config changes",
     ["caudal_admin_", "caudal_runtime_overrides", "caudal_override_", "caudal_config_"]),
    ("HTTP, gRPC and RLQS traffic",
     ["caudal_http_", "caudal_tls_", "caudal_rls_", "caudal_grpc_", "caudal_rlqs_"]),
    ("Other metrics", ["caudal_"]),
]

DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
SCOPE = 'job=~"$job", instance=~"$instance"'
METRIC = re.compile(r"(?<![:\w])(caudal_[a-z0-9_]+)(?![:\w])(\{[^}]*\})?")
RECORDED = re.compile(r"(?<![\w:])([a-z_]+:[a-z0-9_]+:[a-z0-9_]+)(?![\w:])")
COMPARISON = re.compile(r"\s*(==|!=|>=|<=|>|<)\s*(?:bool\s+)?(-?[0-9.]+(?:e[-+]?[0-9]+)?)")
# A gauge whose help spells these states gets them as value mappings.
BREAKER_STATES = {"0": "closed", "1": "open", "2": "half-open"}
WIDTH, HEIGHT = 8, 8


def metrics(root):
    """[(name, type, labels, help)] in /metrics's order, from docs/operations.md's list."""
    with open(os.path.join(root, OPERATIONS)) as f:
        text = f.read()
    table = text.split("<!-- metrics:", 1)[1].split("<!-- end of metrics -->", 1)[0]
    row = re.compile(r"^\| `(caudal_[a-z0-9_]+)(?:\{([a-z_,]*)\})?` \| (\w+) \| (.*) \|$", re.M)
    out = [(name, kind, [l for l in labels.split(",") if l], help_.replace("\\|", "|"))
           for name, labels, kind, help_ in row.findall(table)]
    if not out:
        raise SystemExit("%s: no generated list of metrics" % OPERATIONS)
    return out


def scoped(expr):
    """Every caudal metric's selector narrowed to the dashboard's job and instance."""
    def narrow(m):
        inner = (m.group(2) or "{}")[1:-1].strip()
        return "%s{%s}" % (m.group(1), SCOPE + (", " + inner if inner else ""))
    return METRIC.sub(narrow, expr)


def row_of(name):
    for i, (_, prefixes) in enumerate(ROWS):
        if any(name.startswith(p) for p in prefixes):
            return i
    raise SystemExit("%s: no row of ROWS claims it" % name)


def legend(labels):
    return " ".join("{{%s}}" % l for l in labels) or "__auto"


def metric_panel(name, kind, labels, help_):
    """(title, description, targets, field defaults) of one metric's panel."""
    by = labels or ["instance"]
    if kind == "counter":
        targets = [("sum by (%s) (rate(%s[$__rate_interval]))" % (", ".join(by), name),
                    legend(by))]
        unit = "cps"
    elif kind == "gauge":
        by = ["instance"] + labels
        targets = [("max by (%s) (%s)" % (", ".join(by), name), legend(by))]
        unit = "short"
    elif kind == "histogram":
        targets = [("histogram_quantile(%g, sum by (%s) (rate(%s_bucket[$__rate_interval])))"
                    % (q, ", ".join(["le"] + labels), name),
                    "p%g" % (q * 100) + (" " + legend(labels) if labels else ""))
                   for q in (0.5, 0.99)]
        unit = "s"
    else:
        raise SystemExit("%s: no panel for a metric of type %s" % (name, kind))
    defaults = {"unit": unit}
    if all("%s %s" % (v, s) in help_ for v, s in BREAKER_STATES.items()):
        defaults["mappings"] = [{"type": "value", "options": {
            v: {"text": s, "index": int(v)} for v, s in BREAKER_STATES.items()}}]
    return name, help_, targets, defaults


def top_level_comparison(expr):
    """(left-hand side, operator, threshold) at the first comparison with a number outside any
    brackets or quotes."""
    depth, quote = 0, None
    for i, c in enumerate(expr):
        if quote:
            quote = None if c == quote and expr[i - 1] != "\\" else quote
        elif c in "\"'":
            quote = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif depth == 0 and c in "=!<>":
            m = COMPARISON.match(expr, i)
            if m:
                return expr[:i].strip(), m.group(1), float(m.group(2))
    raise SystemExit("no comparison with a number in: %s" % expr)


def alert_panel(rule, recorded):
    lhs, op, threshold = top_level_comparison(rule["expr"])
    # A recording rule's name written out as its expression: the dashboard needs no rules loaded.
    while RECORDED.search(lhs):
        lhs = RECORDED.sub(lambda m: "(%s)" % recorded[m.group(1)].strip(), lhs)
    lhs = re.sub(r"\s+", " ", lhs)
    if "histogram_quantile" in lhs and "_seconds" in lhs:
        unit = "s"
    elif "/" in lhs:
        unit = "percentunit"
    else:
        unit = "short"
    title = "Alert %s (%s %g)" % (rule["alert"], op, threshold)
    text = re.sub(r"\{\{ \$labels\.(\w+) \}\}", r"`\1`", rule["annotations"]["description"])
    description = "The expression of alert %s (%s) up to its threshold, %s %g%s, drawn as a " \
                  "line. %s" % (rule["alert"], RULES, op, threshold,
                                " for " + rule["for"] if "for" in rule else "", text)
    # Red on the side that fires (Grafana colours from each step's value upwards).
    below, above = ("red", "green") if op in ("<", "<=") else ("green", "red")
    defaults = {"unit": unit, "thresholds": {"mode": "absolute", "steps": [
        {"color": below, "value": None}, {"color": above, "value": threshold}]}}
    return title, re.sub(r"\s+", " ", description), [(lhs, "__auto")], defaults


def panel(pid, x, y, spec):
    title, description, targets, defaults = spec
    threshold_line = "thresholds" in defaults
    if not threshold_line:
        defaults = dict(defaults, thresholds={"mode": "absolute", "steps": [
            {"color": "green", "value": None}]})
    return {
        "id": pid,
        "type": "timeseries",
        "title": title,
        "description": description,
        "datasource": DATASOURCE,
        "gridPos": {"h": HEIGHT, "w": WIDTH, "x": x, "y": y},
        "targets": [{"refId": chr(ord("A") + i), "datasource": DATASOURCE,
                     "expr": scoped(expr), "legendFormat": fmt, "range": True}
                    for i, (expr, fmt) in enumerate(targets)],
        "fieldConfig": {
            "defaults": dict(defaults, color={"mode": "palette-classic"}, custom={
                "drawStyle": "line", "lineWidth": 1, "fillOpacity": 10, "showPoints": "never",
                "spanNulls": False,
                "thresholdsStyle": {"mode": "line" if threshold_line else "off"}}),
            "overrides": [],
        },
        "options": {
            "legend": {"calcs": [], "displayMode": "list", "placement": "bottom",
                       "showLegend": True},
            "tooltip": {"mode": "multi", "sort": "desc"},
        },
    }


def variable(name, label, query):
    return {"name": name, "label": label, "type": "query", "datasource": DATASOURCE,
            "query": {"query": query, "refId": name},
            "refresh": 2, "includeAll": True, "multi": True, "allValue": ".*",
            "current": {"text": "All", "value": "$__all"}, "sort": 1}


def generate(root):
    with open(os.path.join(root, RULES)) as f:
        rules = [r for g in yaml.safe_load(f)["groups"] for r in g["rules"]]
    recorded = {r["record"]: r["expr"] for r in rules if "record" in r}
    rows = [[] for _ in ROWS]
    for name, kind, labels, help_ in metrics(root):
        rows[row_of(name)].append(metric_panel(name, kind, labels, help_))
    alerts = [[] for _ in ROWS]  # first in their rows
    for rule in rules:
        if "alert" in rule:
            spec = alert_panel(rule, recorded)
            first = METRIC.search(spec[2][0][0])  # an alert on no caudal metric: first row
            alerts[row_of(first.group(1)) if first else 0].append(spec)
    rows = [a + r for a, r in zip(alerts, rows)]
    panels, pid, y = [], 1, 0
    for (title, _), specs in zip(ROWS, rows):
        if not specs:
            continue
        panels.append({"id": pid, "type": "row", "title": title, "collapsed": False,
                       "panels": [], "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}})
        pid, y = pid + 1, y + 1
        for i, spec in enumerate(specs):
            panels.append(panel(pid, (i % 3) * WIDTH, y + (i // 3) * HEIGHT, spec))
            pid += 1
        y += (len(specs) + 2) // 3 * HEIGHT
    return {
        "title": "caudal",
        "uid": "caudal",
        "description": "caudal's metrics and alert thresholds, generated by "
                       "tests/grafana/dashboard.py from its metric list and alert rules.",
        "tags": ["caudal", "rate-limiting"],
        "editable": True,
        "graphTooltip": 1,
        "schemaVersion": 39,
        "version": 1,
        "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "timezone": "browser",
        "annotations": {"list": []},
        "templating": {"list": [
            {"name": "datasource", "label": "Data source", "type": "datasource",
             "query": "prometheus", "current": {"text": "default", "value": "default"}},
            variable("job", "Job", "label_values(caudal_store_breaker_state, job)"),
            variable("instance", "Instance",
                     'label_values(caudal_store_breaker_state{job=~"$job"}, instance)'),
        ]},
        "panels": panels,
    }


def render(root):
    return json.dumps(generate(root), indent=2, ensure_ascii=False) + "\n"


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("write", "check"):
        raise SystemExit("usage: dashboard.py write|check ROOT")
    root = sys.argv[2]
    path = os.path.join(root, DASHBOARD)
    want = render(root)
    try:
        with open(path) as f:
            found = f.read()
    except FileNotFoundError:
        found = None
    if sys.argv[1] == "check":
        if found == want:
            print("%s matches the metric list and the alert rules" % DASHBOARD)
            return 0
        print("%s differs from what docs/operations.md's metric list and %s give; "
              "regenerate it with\n  cmake --build build --target grafana-dashboard"
              % (DASHBOARD, RULES), file=sys.stderr)
        return 1
    if found != want:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(want)
        print("%s rewritten" % DASHBOARD)
    return 0


if __name__ == "__main__":
    sys.exit(main())
