#!/usr/bin/env bash
# caudal serve (/v1/auth, memory store) against nginx limit_req, keyed the same way, in one run:
# caudal twice, on each HTTP transport (server.http_io: epoll, io_uring), in the same rounds.
#
# Both servers: one worker thread, loopback, keep-alive; the identity is the X-API-Key header,
# every one of 100k distinct keys once per cycle in a shuffled order (the wrk Lua script builds
# the requests once, in init, so that wrk spends its core sending and reading, not formatting);
# each key may pass 1000 per second with a burst of 1000 (so both mostly admit, and both must
# look every key up). nginx serves empty_gif behind limit_req (a `return` would answer before
# limit_req runs); the script first checks that nginx really answers 429 on a low rate, and that
# caudal does too.
#
# On a machine with two or more cores, wrk is pinned to the first and each server to the second
# (taskset), so that neither shares a core with the load and a round measures the server, not
# the scheduler's placement of the two.
#
# Usage: bench/serve_vs_nginx.sh [build/caudal | build] [seconds per round=5] [connections=64]
#                                [rounds=5]      (bench/run-all runs it as bench/serve-bench)
set -euo pipefail
bin="${1:-build/caudal}"
[ -d "$bin" ] && bin="$bin/caudal"  # a build directory (as bench/run-all passes) or the binary
bin="$(realpath "$bin")"
secs="${2:-5}"
conns="${3:-64}"
rounds="${4:-5}"
keys=100000

for tool in wrk nginx curl taskset; do
  command -v "$tool" >/dev/null || { echo "serve_vs_nginx: $tool is not installed" >&2; exit 2; }
done

dir="$(mktemp -d /tmp/caudal-bench.XXXXXX)"
chmod 755 "$dir"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT

if [ "$(nproc)" -ge 2 ]; then
  load_cpu=0; server_cpu=1
  pin_load=(taskset -c "$load_cpu")
else
  pin_load=()
fi
pin_server() {  # pid → every thread of it on server_cpu
  [ -n "${server_cpu:-}" ] || return 0
  local t
  for t in /proc/"$1"/task/*; do taskset -pc "$server_cpu" "${t##*/}" >/dev/null; done
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}
wait_http() {  # readiness only
  for _ in $(seq 1 200); do
    curl -s -o /dev/null "$1" && return 0
    sleep 0.05
  done
  echo "serve_vs_nginx: $1 never answered" >&2
  exit 1
}

# --- caudal -----------------------------------------------------------------------------------
cport="$(free_port)"
cat >"$dir/caudal.yaml" <<YAML
store: {url: "memory://", max_keys: 400000}
server: {http: "127.0.0.1:$cport", threads: 1}
policies:
  - name: per-key
    identity: [api_key]
    limits: [{algorithm: token_bucket, capacity: 1000, refill: 1000/1s}]
  - name: low
    identity: [low]
    limits: [{algorithm: token_bucket, capacity: 1, refill: 1/1m}]
YAML
"$bin" serve --config "$dir/caudal.yaml" --http-io epoll >"$dir/caudal.out" 2>"$dir/caudal.err" &
pids+=($!)
caudal_pid=$!
wait_http "http://127.0.0.1:$cport/healthz"
pin_server "$caudal_pid"
# The same server on io_uring, on its own port; it must not have fallen back to epoll.
uport="$(free_port)"
"$bin" serve --config "$dir/caudal.yaml" --http "127.0.0.1:$uport" --http-io io_uring \
  >"$dir/uring.out" 2>"$dir/uring.err" &
pids+=($!)
uring_pid=$!
wait_http "http://127.0.0.1:$uport/healthz"
pin_server "$uring_pid"
if ! grep -q "HTTP on io_uring" "$dir/uring.out"; then
  echo "serve_vs_nginx: the io_uring server runs on epoll: $(cat "$dir/uring.err")" >&2
  exit 1
fi

# --- nginx ------------------------------------------------------------------------------------
nport="$(free_port)"
mkdir -p "$dir/nginx/logs" "$dir/nginx/tmp"
cat >"$dir/nginx/nginx.conf" <<CONF
worker_processes 1;
daemon off;
pid $dir/nginx/nginx.pid;
error_log $dir/nginx/logs/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path $dir/nginx/tmp/body;
  proxy_temp_path $dir/nginx/tmp/proxy;
  fastcgi_temp_path $dir/nginx/tmp/fastcgi;
  uwsgi_temp_path $dir/nginx/tmp/uwsgi;
  scgi_temp_path $dir/nginx/tmp/scgi;
  keepalive_requests 1000000;
  limit_req_status 429;
  limit_req_zone \$http_x_api_key zone=perkey:32m rate=1000r/s;
  limit_req_zone \$http_x_low zone=low:1m rate=1r/m;
  server {
    listen 127.0.0.1:$nport;
    location = /auth { limit_req zone=perkey burst=1000 nodelay; empty_gif; }
    location = /low  { limit_req zone=low nodelay; empty_gif; }
    location = /up   { empty_gif; }
  }
}
CONF
chmod -R a+rwX "$dir/nginx"
run_nginx=(nginx -p "$dir/nginx" -e "$dir/nginx/logs/error.log" -c "$dir/nginx/nginx.conf")
if [ "$(id -u)" -eq 0 ]; then  # never as root: drop to nobody
  run_nginx=(setpriv --reuid=nobody --regid=nogroup --clear-groups "${run_nginx[@]}")
fi
"${run_nginx[@]}" &
pids+=($!)
nginx_master=$!
wait_http "http://127.0.0.1:$nport/up"
nginx_worker="$(pgrep -P "$nginx_master" | head -1)"
pin_server "$nginx_worker"

# --- both really limit ------------------------------------------------------------------------
status() { curl -s -o /dev/null -w '%{http_code}' "$@"; }
n1="$(status -H 'X-Low: x' "http://127.0.0.1:$nport/low")"
n2="$(status -H 'X-Low: x' "http://127.0.0.1:$nport/low")"
c1="$(status -H 'X-API-Key: probe' "http://127.0.0.1:$cport/v1/auth")"
c2="$(status -X POST -d '{"descriptors":{"low":"x"}}' "http://127.0.0.1:$cport/v1/check")"
c3="$(status -X POST -d '{"descriptors":{"low":"x"}}' "http://127.0.0.1:$cport/v1/check")"
if [ "$n1/$n2" != "200/429" ] || [ "$c1/$c2/$c3" != "200/200/429" ]; then
  echo "serve_vs_nginx: a limiter does not limit (nginx $n1/$n2, caudal $c1/$c2/$c3)" >&2
  exit 1
fi
echo "sanity: nginx low rate $n1 then $n2; caudal $c2 then $c3"

# --- load -------------------------------------------------------------------------------------
cat >"$dir/keys.lua" <<LUA
local keys = $keys
local requests = {}
local sent = 0
init = function(args)
  local order = {}
  for i = 1, keys do order[i] = i end
  for i = keys, 2, -1 do  -- Fisher-Yates
    local j = math.random(1, i)
    order[i], order[j] = order[j], order[i]
  end
  for i = 1, keys do
    requests[i] = wrk.format("GET", nil, { ["X-API-Key"] = "key" .. order[i] })
  end
end
request = function()
  sent = sent % keys + 1
  return requests[sent]
end
LUA

cpu_ticks() { awk '{ print $14 + $15, $15 }' "/proc/$1/stat"; }  # user + system, system (ticks)
run_wrk() {  # name url pid → "rps p99_ms non2xx cpu_us_per_request kernel_cpu_us_per_request"
  local out before after before_sys after_sys
  read -r before before_sys < <(cpu_ticks "$3")
  out="$("${pin_load[@]}" wrk -t1 -c"$conns" -d"${secs}s" --latency -s "$dir/keys.lua" "$2")"
  read -r after after_sys < <(cpu_ticks "$3")
  local rps p99 non2xx total
  rps="$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")"
  p99="$(awk '$1 == "99%" {print $2}' <<<"$out")"
  non2xx="$(awk '/Non-2xx or 3xx responses:/ {print $NF}' <<<"$out")"
  total="$(awk '/requests in/ {print $1}' <<<"$out")"
  echo "$rps $(to_ms "$p99") ${non2xx:-0} $(awk -v t=$((after - before)) -v s=$((after_sys - before_sys)) \
    -v n="$total" -v hz="$(getconf CLK_TCK)" 'BEGIN { printf "%.1f %.1f", t * 1e6 / hz / n, s * 1e6 / hz / n }')"
}
to_ms() {  # wrk prints 1.23ms / 456.00us / 1.02s
  awk -v v="$1" 'BEGIN {
    if (v ~ /us$/) { sub(/us$/, "", v); printf "%.3f", v / 1000 }
    else if (v ~ /ms$/) { sub(/ms$/, "", v); printf "%.3f", v }
    else if (v ~ /s$/) { sub(/s$/, "", v); printf "%.3f", v * 1000 }
  }'
}

# Warm both (key tables, caches); then alternate short rounds, nginx then caudal, and take each
# one's median round, so a neighbour's burst of CPU use on a shared machine hits both alike.
"${pin_load[@]}" wrk -t1 -c"$conns" -d2s -s "$dir/keys.lua" "http://127.0.0.1:$nport/auth" >/dev/null
"${pin_load[@]}" wrk -t1 -c"$conns" -d2s -s "$dir/keys.lua" "http://127.0.0.1:$cport/v1/auth" >/dev/null
"${pin_load[@]}" wrk -t1 -c"$conns" -d2s -s "$dir/keys.lua" "http://127.0.0.1:$uport/v1/auth" >/dev/null
: >"$dir/nginx.rounds"
: >"$dir/caudal.rounds"
: >"$dir/uring.rounds"
for _ in $(seq 1 "$rounds"); do
  run_wrk nginx "http://127.0.0.1:$nport/auth" "$nginx_worker" >>"$dir/nginx.rounds"
  run_wrk caudal "http://127.0.0.1:$cport/v1/auth" "$caudal_pid" >>"$dir/caudal.rounds"
  run_wrk uring "http://127.0.0.1:$uport/v1/auth" "$uring_pid" >>"$dir/uring.rounds"
done
median() {  # file column → the median of that column over the rounds
  sort -g -k"$2" "$1" | awk -v c="$2" '{ v[NR] = $c } END { print v[int((NR + 1) / 2)] }'
}
n_rps="$(median "$dir/nginx.rounds" 1)"; n_p99="$(median "$dir/nginx.rounds" 2)"
c_rps="$(median "$dir/caudal.rounds" 1)"; c_p99="$(median "$dir/caudal.rounds" 2)"
n_cpu="$(median "$dir/nginx.rounds" 4)"; c_cpu="$(median "$dir/caudal.rounds" 4)"
u_rps="$(median "$dir/uring.rounds" 1)"; u_p99="$(median "$dir/uring.rounds" 2)"
u_cpu="$(median "$dir/uring.rounds" 4)"
n_sys="$(median "$dir/nginx.rounds" 5)"; c_sys="$(median "$dir/caudal.rounds" 5)"
u_sys="$(median "$dir/uring.rounds" 5)"
n_bad="$(awk '{ s += $3 } END { print s + 0 }' "$dir/nginx.rounds")"
c_bad="$(awk '{ s += $3 } END { print s + 0 }' "$dir/caudal.rounds")"
u_bad="$(awk '{ s += $3 } END { print s + 0 }' "$dir/uring.rounds")"
echo "rounds (requests/s, p99 ms, non-2xx, server CPU µs per request, of it in the kernel):"
paste -d' ' <(sed 's/^/  nginx  /' "$dir/nginx.rounds") <(sed 's/^/ | caudal /' "$dir/caudal.rounds") \
  <(sed 's/^/ | io_uring /' "$dir/uring.rounds")

echo
echo "wrk -t1 -c$conns -d${secs}s x $rounds rounds (medians), keep-alive, X-API-Key from $keys keys, one server thread each${server_cpu:+, wrk on cpu $load_cpu and the server on cpu $server_cpu}"
printf '%-28s %12s %10s %10s %14s %14s\n' "" "requests/s" "p99 ms" "non-2xx" "CPU µs/req" "kernel µs/req"
printf '%-28s %12s %10s %10s %14s %14s\n' "nginx limit_req + empty_gif" "$n_rps" "$n_p99" "$n_bad" "$n_cpu" "$n_sys"
printf '%-28s %12s %10s %10s %14s %14s\n' "caudal serve /v1/auth" "$c_rps" "$c_p99" "$c_bad" "$c_cpu" "$c_sys"
printf '%-28s %12s %10s %10s %14s %14s\n' "caudal, io_uring" "$u_rps" "$u_p99" "$u_bad" "$u_cpu" "$u_sys"
ratio() {  # label rps p99 cpu → its ratios to nginx
  awk -v l="$1" -v c="$2" -v n="$n_rps" -v cp="$3" -v np="$n_p99" -v cc="$4" -v nc="$n_cpu" 'BEGIN {
    printf "ratio %s/nginx: requests/s %.2f, p99 %.2f, CPU per request %.2f\n", l, c / n,
           (np > 0 ? cp / np : 0), (nc > 0 ? cc / nc : 0) }'
}
ratio caudal "$c_rps" "$c_p99" "$c_cpu"
ratio io_uring "$u_rps" "$u_p99" "$u_cpu"
