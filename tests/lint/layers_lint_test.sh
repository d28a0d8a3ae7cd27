#!/usr/bin/env bash
# layers.py passes a tree whose includes keep docs/architecture.md's "may use" table and fails,
# naming the line, on an include of a layer the table does not allow (public or private
# spelling; upward or sideways), on a front end including a store implementation, and on the
# server or envoy including any store header.
set -euo pipefail
lint="$(cd "$(dirname "$0")" && pwd)/layers.py"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
printf 'set(CAUDAL_LAYERS\n  src/common\n  src/store\n  src/redis\n  src/engine\n  src/server\n  src/envoy\n  src/cli\n)\n' \
  > "$scratch/CMakeLists.txt"
mkdir -p "$scratch/docs"
cat > "$scratch/docs/architecture.md" <<'TABLE'
## Layers

| layer | folder | may use |
|---|---|---|
| common | `src/common` | the standard library |
| store | `src/store` | common |
| redis | `src/redis` | store, hiredis |
| engine | `src/engine` | store |
| server | `src/server` | engine, Beast |
| envoy | `src/envoy` | engine, gRPC |
| cli | `src/cli` | everything below |

## Next
TABLE
for d in include/caudal/common include/caudal/store include/caudal/redis include/caudal/engine \
  src/common src/store src/redis src/engine src/server src/envoy src/cli; do
  mkdir -p "$scratch/$d"
done
mkdir -p "$scratch/include/caudal/server"
touch "$scratch/src/server/server.h" "$scratch/include/caudal/common/clock.h" "$scratch/include/caudal/store/store.h" \
  "$scratch/include/caudal/store/memory_store.h" "$scratch/include/caudal/redis/redis_store.h" \
  "$scratch/include/caudal/engine/engine.h" "$scratch/src/engine/plan.h"
printf '#include "caudal/common/clock.h"\n#include "caudal/store/store.h"\n' > "$scratch/src/engine/ok.cc"
printf '#include "caudal/engine/engine.h"\n#include "engine/plan.h"\n' > "$scratch/src/server/ok.cc"
printf '#include "caudal/store/memory_store.h"\n' > "$scratch/src/server/ok_test.cc"
# server may use engine, and so what engine may use (but a store header); cli, everything below
printf '#include "caudal/common/clock.h"\n' > "$scratch/src/server/deep.cc"
printf '#include "server/server.h"\n#include "caudal/engine/engine.h"\n' > "$scratch/src/cli/all.cc"
python3 "$lint" "$scratch" > /dev/null || { echo "layers.py refused a tree that keeps its rules"; exit 1; }

refused() {  # FILE LINE WHAT: layers.py must fail on LINE as the only line of FILE, saying WHAT
  printf '%s\n' "$2" > "$scratch/$1"
  local out
  if out=$(python3 "$lint" "$scratch"); then
    echo "layers.py let through $1: $2"
    exit 1
  fi
  grep -qF "$1:1: $3" <<< "$out" || { echo "layers.py failed without naming $1:1 ($3): $out"; exit 1; }
  rm "$scratch/$1"
}
refused src/store/up.cc '#include "caudal/engine/engine.h"' 'the store layer includes'
# Listed later yet not in the row: envoy may not use server, nor engine redis.
refused src/envoy/side.cc '#include "server/server.h"' 'the envoy layer includes'
refused src/engine/side.cc '#include "caudal/redis/redis_store.h"' 'the engine layer includes'
refused src/store/private_up.cc '#include "engine/plan.h"' 'the store layer includes'
refused include/caudal/common/up.h '#include "caudal/store/store.h"' 'the common layer includes'
refused src/server/store.cc '#include "caudal/store/memory_store.h"' 'the server layer includes'
refused src/cli/store.cc '#include "caudal/redis/redis_store.h"' 'the front end cli includes'
refused src/server/state.cc '#include "caudal/store/store.h"' 'the server layer includes'
refused src/envoy/state.cc '#include "caudal/store/store.h"' 'the envoy layer includes'
# A table whose row names a layer listed after it is refused.
sed -i 's/| engine | `src\/engine` | store |/| engine | `src\/engine` | store, server |/' "$scratch/docs/architecture.md"
if python3 "$lint" "$scratch" > /dev/null 2>&1; then
  echo "layers.py took a row that may use a layer listed after it"
  exit 1
fi
echo "layers.py catches a layer using one its table row does not name, and a front end that includes a store"
