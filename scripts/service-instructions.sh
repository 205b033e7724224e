#!/usr/bin/env bash
# Instructions per request of the database-and-cache service, its weir forms (the port and the
# native form; FORMS="…" picks binaries) against the tokio form,
# counted with callgrind (deterministic, unlike CPU time on a shared VM).
#
#   cargo build --release -p weir-datastores -p weir-tests --bin service --bin service_native --bin service_tokio
#   scripts/service-instructions.sh OUTDIR [N]
#
# Starts private PostgreSQL and Redis servers (`weir-datastores up`), then runs each form under
# `valgrind --tool=callgrind` pinned to CPU 0 (1 worker), warms it with 2000 requests, zeroes
# the counters, sends N (default 4000) keep-alive requests over 8 connections with h2load
# (CPU 1) to /user/7 (a Redis hit after the first) and /db/7 (a SELECT), and dumps the counters
# after each route. Prints instructions per request. Needs valgrind, h2load (nghttp2-client),
# curl, postgresql and redis-server; loopback only, bounded in count.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: $0 OUTDIR [N]}
n=${2:-4000}
for tool in valgrind callgrind_control h2load curl taskset; do
  command -v "$tool" >/dev/null || { echo "skipped: $tool is not installed" >&2; exit 0; }
done
rel=target/release
mkdir -p "$out"
"$rel/weir-datastores" up >"$out/stores.log" 2>&1 &
stores=$!
trap 'kill -TERM $stores 2>/dev/null; wait $stores 2>/dev/null' EXIT
for _ in $(seq 100); do grep -q ready "$out/stores.log" && break; sleep 0.3; done
grep -q '^POSTGRES_URL=' "$out/stores.log" || { cat "$out/stores.log"; exit 0; }
DATABASE_URL=$(sed -n 's/^POSTGRES_URL=//p' "$out/stores.log")
REDIS_URL=$(sed -n 's/^REDIS_URL=//p' "$out/stores.log")
export DATABASE_URL REDIS_URL
port=3900
for form in ${FORMS:-service service_native service_tokio}; do
  port=$((port + 1))
  ADDR=127.0.0.1:$port taskset -c 0 valgrind --tool=callgrind \
    --callgrind-out-file="$out/$form.cg" "$rel/$form" >"$out/$form.log" 2>&1 &
  pid=$!
  for _ in $(seq 200); do curl -s -o /dev/null "http://127.0.0.1:$port/user/7" && break; sleep 0.3; done
  for route in user db; do
    taskset -c 1 h2load --h1 -n 2000 -c 8 "http://127.0.0.1:$port/$route/7" >/dev/null
    callgrind_control -z "$pid" >/dev/null
    taskset -c 1 h2load --h1 -n "$n" -c 8 "http://127.0.0.1:$port/$route/7" >"$out/$form.$route.h2load"
    callgrind_control -d "$route" "$pid" >/dev/null
  done
  kill -INT "$pid"
  wait "$pid" || true
done
for f in "$out"/service*.cg.[12]; do
  ir=$(grep -m1 '^summary:\|^totals:' "$f" | awk '{print $2}')
  route=$(grep -m1 '^desc: Trigger' "$f" | awk '{print $NF}')
  awk -v f="$(basename "$f")" -v r="$route" -v ir="$ir" -v n="$n" \
    'BEGIN { printf "%-24s %-5s %8.0f instructions/request\n", f, r, ir / n }'
done
