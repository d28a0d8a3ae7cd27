#!/usr/bin/env bash
# deploy/grafana/caudal.json against Grafana's published dashboard schema (@grafana/schema,
# through tsc, both at the versions package-lock.json pins):
#   schema.sh install DIR               npm ci into DIR (once per lock file)
#   schema.sh check DIR DASHBOARD       the dashboard as a constant of types.ts's type: tsc --noEmit
#   schema.sh catches DIR DASHBOARD     tsc fails on each of a few broken copies of DASHBOARD
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
command=$1
dir=$2

# tsc on every DASHBOARD.json given, each written as OUT/NAME.ts beside types.ts.
typecheck() {
  local out=$1
  shift
  cp "$here/types.ts" "$out/"
  local files=()
  for json in "$@"; do
    local ts="$out/$(basename "$json" .json).ts"
    {
      echo 'import type { CaudalDashboard } from "./types.js";'
      printf 'export const dashboard: CaudalDashboard = '
      cat "$json"
      echo ';'
    } >"$ts"
    files+=("$ts")
  done
  # node_modules is found from OUT's parent, DIR.
  "$dir/node_modules/.bin/tsc" --noEmit --strict --skipLibCheck --module nodenext \
    --moduleResolution nodenext --target es2022 --pretty false "${files[@]}"
}

case "$command" in
  install)
    mkdir -p "$dir"
    # installed-lock.json: the lock file of the last install that completed.
    if ! cmp -s "$here/package-lock.json" "$dir/installed-lock.json"; then
      rm -f "$dir/installed-lock.json"
      cp "$here/package.json" "$here/package-lock.json" "$dir/"
      # --prefer-offline: what npm's cache holds (shared by build trees) is not fetched again.
      (cd "$dir" && npm ci --no-audit --no-fund --ignore-scripts --prefer-offline --loglevel=error)
      cp "$here/package-lock.json" "$dir/installed-lock.json"
    fi
    echo "tsc $("$dir/node_modules/.bin/tsc" --version), @grafana/schema" \
      "$(node -p "require('$dir/node_modules/@grafana/schema/package.json').version")"
    ;;
  check)
    out=$(mktemp -d "$dir/check.XXXXXX")
    trap 'rm -rf "$out"' EXIT
    typecheck "$out" "$3"
    echo "$3: a Grafana dashboard (@grafana/schema's Dashboard, time series panels)"
    ;;
  catches)
    out=$(mktemp -d "$dir/catches.XXXXXX")
    trap 'rm -rf "$out"' EXIT
    mkdir "$out/broken"
    # Each a mistake a hand edit or a generator change could make.
    python3 - "$3" "$out/broken" <<'PY'
import json, sys
source, out = sys.argv[1], sys.argv[2]
def first_panel(d):
    return next(p for p in d["panels"] if p["type"] == "timeseries")
def write(name, edit):
    with open(source) as f:
        d = json.load(f)
    edit(d)
    with open("%s/%s.json" % (out, name), "w") as f:
        json.dump(d, f, indent=1)
write("unknown_field", lambda d: first_panel(d).__setitem__("fieldconfig", {}))
write("schema_version_text", lambda d: d.__setitem__("schemaVersion", "39"))
write("grid_without_width", lambda d: first_panel(d)["gridPos"].pop("w"))
write("threshold_mode", lambda d: first_panel(d)["fieldConfig"]["defaults"]["thresholds"]
      .__setitem__("mode", "absolut"))
write("tooltip_mode", lambda d: first_panel(d)["options"]["tooltip"].__setitem__("mode", "all"))
write("legend_incomplete", lambda d: first_panel(d)["options"]["legend"].pop("showLegend"))
write("row_without_id", lambda d: d["panels"][0].pop("id"))
PY
    # One tsc run for every copy (its start-up is most of its time); each must have an error.
    typecheck "$out" "$out"/broken/*.json >"$out/errors" 2>&1 || true
    failed=0
    for json in "$out"/broken/*.json; do
      name=$(basename "$json" .json)
      if error=$(grep -m1 "^.*/$name\.ts(" "$out/errors"); then
        echo "caught $name: ${error#*: }"
      else
        echo "tsc accepted $name" >&2
        failed=1
      fi
    done
    [ "$failed" = 0 ] || cat "$out/errors" >&2
    exit "$failed"
    ;;
  *)
    echo "usage: schema.sh install|check|catches DIR [DASHBOARD]" >&2
    exit 2
    ;;
esac
