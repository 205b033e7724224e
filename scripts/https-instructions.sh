#!/usr/bin/env bash
# Instructions per HTTPS request and per TLS handshake of weir-bench's https servers (weir::serve
# through weir::tls, and tokio with tokio-rustls), counted under callgrind: deterministic where
# CPU time on a shared machine is not.
#
#   cargo build --release -p weir-bench
#   scripts/https-instructions.sh [REQUESTS] [HANDSHAKES]
#
# For each runtime (tokio, weir): start `weir-bench __server --kind https --workers 1` under
# `valgrind --tool=callgrind` on CPU 0, and from CPU 1:
#   keep-alive: warm up with `h2load --h1 -n 400 -c 8`, zero the counters, send REQUESTS
#               (default 5000) requests over 8 keep-alive TLS connections, dump;
#   handshakes: warm up with 50 connections, zero, open HANDSHAKES (default 500) connections in
#               batches of 50 (`h2load --h1 -n 50 -c 50`: one full handshake and one request
#               each), dump.
# Prints the dump's instructions divided by the count. Loopback only, bounded in count. Needs
# valgrind, h2load (nghttp2-client) and taskset; skips without them.
set -euo pipefail
cd "$(dirname "$0")/.."

requests="${1:-5000}"
handshakes="${2:-500}"
bin=target/release/weir-bench
for tool in valgrind callgrind_control h2load taskset; do
  if ! command -v "$tool" > /dev/null; then
    echo "skipped: $tool is not installed (apt-get install -y valgrind nghttp2-client util-linux)"
    exit 0
  fi
done
[ -x "$bin" ] || { echo "build it first: cargo build --release -p weir-bench"; exit 2; }

work="$(mktemp -d)"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2> /dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

# count RT MODE N: prints the instructions per operation of one server.
count() {
  local rt=$1 mode=$2 n=$3 dir="$work/$1-$2"
  mkdir -p "$dir"
  mkfifo "$dir/in"
  # The server exits at the end of its standard input: hold it open.
  sleep 100000 > "$dir/in" &
  local holder=$!
  pids+=("$holder")
  taskset -c 0 valgrind --tool=callgrind --callgrind-out-file="$dir/cg.%p" \
    "$bin" __server --kind https --rt "$rt" --workers 1 < "$dir/in" > "$dir/out" 2> "$dir/err" &
  local server=$!
  pids+=("$server")
  for _ in $(seq 600); do
    grep -q READY "$dir/out" 2> /dev/null && break
    sleep 0.1
  done
  local url
  url="https://127.0.0.1:$(awk '/READY/ {print $2}' "$dir/out")/"
  local batches=$((n / 50))
  if [ "$mode" = keep-alive ]; then
    taskset -c 1 h2load --h1 -n 400 -c 8 "$url" > /dev/null
    callgrind_control -z "$server" > /dev/null 2>&1
    taskset -c 1 h2load --h1 -n "$n" -c 8 "$url" | grep -q "$n succeeded"
  else
    taskset -c 1 h2load --h1 -n 50 -c 50 "$url" > /dev/null
    callgrind_control -z "$server" > /dev/null 2>&1
    n=$((batches * 50))
    for _ in $(seq "$batches"); do
      taskset -c 1 h2load --h1 -n 50 -c 50 "$url" | grep -q "50 succeeded"
    done
  fi
  callgrind_control -d "$server" > /dev/null 2>&1
  kill "$holder" "$server" 2> /dev/null || true
  wait "$server" 2> /dev/null || true
  local total
  total="$(grep -h '^summary:' "$dir"/cg.*.1 | awk '{print $2}')"
  printf '%-6s %-10s %6d  %12d instructions each\n' "$rt" "$mode" "$n" "$((total / n))"
}

printf '%-6s %-10s %6s  %s\n' runtime mode count "instructions per request or handshake"
for mode in keep-alive handshakes; do
  for rt in tokio weir; do
    if [ "$mode" = keep-alive ]; then count "$rt" "$mode" "$requests"; else count "$rt" "$mode" "$handshakes"; fi
  done
done
