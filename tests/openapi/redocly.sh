#!/usr/bin/env bash
# The OpenAPI document's validator, @redocly/cli at the version package-lock.json pins:
#   redocly.sh install DIR            npm ci into DIR (once per lock file)
#   redocly.sh lint DIR DOCUMENT      `redocly lint` with redocly.yaml: every problem an error
#   redocly.sh catches DIR DOCUMENT   the lint fails on each of a few broken copies of DOCUMENT
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
command=$1
dir=$2
redocly="$dir/node_modules/.bin/redocly"
# Offline but for npm's registry at install: no usage data sent to Redocly, no check for a newer
# version.
export REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true

lint() {
  "$redocly" lint --config "$here/redocly.yaml" --format stylish "$1"
}

case "$command" in
  install)
    mkdir -p "$dir"
    # installed-lock.json: the lock file of the last install that completed.
    if ! cmp -s "$here/package-lock.json" "$dir/installed-lock.json"; then
      rm -f "$dir/installed-lock.json"
      cp "$here/package.json" "$here/package-lock.json" "$dir/"
      # --ignore-scripts: the one install script in the tree (core-js's) only prints a banner.
      # --prefer-offline: what npm's cache holds (shared by build trees) is not fetched again.
      (cd "$dir" && npm ci --no-audit --no-fund --ignore-scripts --prefer-offline --loglevel=error)
      cp "$here/package-lock.json" "$dir/installed-lock.json"
    fi
    "$redocly" --version
    ;;
  lint)
    lint "$3"
    ;;
  catches)
    broken=$(mktemp -d)
    trap 'rm -rf "$broken"' EXIT
    # Each a mistake a hand edit could make: two operations of one id, a reference to nothing, a
    # schema type that does not exist, a response code that is no status.
    python3 - "$3" "$broken" <<'PY'
import json, sys
source, out = sys.argv[1], sys.argv[2]
def write(name, edit):
    with open(source) as f:
        doc = json.load(f)
    edit(doc)
    with open("%s/%s.json" % (out, name), "w") as f:
        json.dump(doc, f, indent=2)
write("duplicate_id", lambda d: d["paths"]["/readyz"]["get"].__setitem__("operationId", "healthz"))
write("dangling_ref", lambda d: d["components"]["schemas"]["CheckFields"]["properties"]
      .__setitem__("policies", {"$ref": "#/components/schemas/NoSuchSchema"}))
write("bad_type", lambda d: d["components"]["schemas"]["LimitDecision"]["properties"]
      .__setitem__("remaining", {"type": "count"}))
write("bad_status", lambda d: d["paths"]["/readyz"]["get"]["responses"]
      .__setitem__("2OO", d["paths"]["/readyz"]["get"]["responses"]["200"]))
PY
    # One run for every copy (the validator's start-up is most of its time); each must have an
    # error of its own.
    "$redocly" lint --config "$here/redocly.yaml" --format json "$broken"/*.json \
      >"$broken/out" 2>"$broken/err" || true
    python3 - "$broken" <<'PY'
import glob, json, os, sys
out = sys.argv[1]
text = open(os.path.join(out, "out")).read()
errors, decoder, i = {}, json.JSONDecoder(), 0
while True:
    while i < len(text) and text[i].isspace():
        i += 1
    if i == len(text):
        break
    report, i = decoder.raw_decode(text, i)
    for p in report["problems"]:
        if p["severity"] == "error":
            name = os.path.basename(p["location"][0]["source"]["ref"])
            errors.setdefault(name, p["ruleId"])
failed = 0
for path in sorted(glob.glob(os.path.join(out, "*.json"))):
    name = os.path.basename(path)
    if name in errors:
        print("caught %s: %s" % (name[:-5], errors[name]))
    else:
        print("redocly lint accepted %s" % name[:-5], file=sys.stderr)
        failed = 1
if failed:
    sys.stderr.write(open(os.path.join(out, "err")).read())
sys.exit(failed)
PY
    ;;
  *)
    echo "usage: redocly.sh install|lint|catches DIR [DOCUMENT]" >&2
    exit 2
    ;;
esac
