#!/usr/bin/env bash
# Instructions per request of examples/hello-http (weir::serve) and examples/hello-http-tokio
# (axum::serve), counted the way a user would count them: callgrind on the server pinned to
# CPU 0 with one worker, h2load on CPU 1.
#
#   cargo build --release --example hello-http --example hello-http-tokio
#   scripts/hello-instructions.sh OUTDIR [N] [BINARY...]
#
# For each binary (default: target/release/examples/hello-http and hello-http-tokio): start it
# under `valgrind --tool=callgrind` with `--workers 1`, warm it up with `h2load --h1 -n 2000
# -c 8`, zero the counters (`callgrind_control -z`), send exactly N (default 20000) requests
# with `h2load --h1 -n N -c 8`, dump the counters (`callgrind_control -d`), stop it with SIGINT.
# Prints the dump's total divided by N. CONNS changes h2load's 8 connections (over one, every
# request is one wait, one event and one wake-up, and the count repeats to within a few
# instructions: the setting to measure a change with). CALLGRIND_OPTS adds valgrind options
# (for example `--dump-instr=yes` on a build with debug info, to annotate by line). Loopback
# only, bounded in count. Needs valgrind, h2load (nghttp2-client), curl and taskset; skips
# without them.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: $0 OUTDIR [N] [BINARY...]}
n=${2:-20000}
shift $(($# < 2 ? $# : 2))
bins=("$@")
[ ${#bins[@]} -gt 0 ] || bins=(target/release/examples/hello-http target/release/examples/hello-http-tokio)
for tool in valgrind callgrind_control h2load curl taskset; do
  command -v "$tool" >/dev/null || { echo "skipped: $tool is not installed" >&2; exit 0; }
done
mkdir -p "$out"
conns=${CONNS:-8}
port=${PORT_BASE:-3950}
for bin in "${bins[@]}"; do
  [ -x "$bin" ] || { echo "$bin: not built" >&2; exit 1; }
  port=$((port + 1))
  name=$(basename "$(dirname "$bin")")-$(basename "$bin")
  # shellcheck disable=SC2086
  taskset -c 0 valgrind --tool=callgrind ${CALLGRIND_OPTS:-} \
    --callgrind-out-file="$out/$name.cg" "$bin" --port "$port" --workers 1 \
    >"$out/$name.log" 2>&1 &
  pid=$!
  up=
  for _ in $(seq 300); do
    curl -s -o /dev/null "http://127.0.0.1:$port/" && { up=1; break; }
    sleep 0.2
  done
  [ -n "$up" ] || { echo "$bin did not answer on port $port" >&2; cat "$out/$name.log" >&2; kill "$pid"; exit 1; }
  taskset -c 1 h2load --h1 -n 2000 -c "$conns" "http://127.0.0.1:$port/" >/dev/null
  callgrind_control -z "$pid" >/dev/null
  taskset -c 1 h2load --h1 -n "$n" -c "$conns" "http://127.0.0.1:$port/" >"$out/$name.h2load"
  callgrind_control -d counted "$pid" >/dev/null
  kill -INT "$pid"
  wait "$pid" || true
  grep -q "succeeded, 0 errored" "$out/$name.h2load" ||
    grep -q "$n succeeded" "$out/$name.h2load" ||
    { echo "$name: h2load saw errors" >&2; grep requests: "$out/$name.h2load" >&2; }
  dump=$(ls "$out/$name.cg".* | grep -v '\.cg$' | head -n 1)
  ir=$(grep -m1 '^summary:\|^totals:' "$dump" | awk '{print $2}')
  awk -v f="$name" -v ir="$ir" -v n="$n" \
    'BEGIN { printf "%-40s %9.1f instructions/request\n", f, ir / n }'
  mv "$dump" "$out/$name.counted.cg"
  rm -f "$out/$name.cg" "$out/$name.cg".*
done
