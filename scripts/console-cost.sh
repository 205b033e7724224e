#!/usr/bin/env bash
# What weir's `console` feature costs per request: a hello-world server on weir::serve
# (tests/console-probe/src/bin/console-hello.rs) built without the feature ("off"), with it
# ("on"), and with it and console-subscriber attached ("attached").
#
#   scripts/console-cost.sh [ROUNDS]     (default 5; 0 counts instructions only)
#
# 1. Instructions per request, counted with callgrind (deterministic), in the server's threads
#    and in console-subscriber's: the server pinned to CPU 0 with 1 worker, warmed with 4000 requests, then 20 000 keep-alive requests over 8
#    connections from h2load on CPU 1, between a zeroing and a dump of the counters.
# 2. CPU per request, timed: ROUNDS interleaved rounds of `wrk -t1 -c64 -d5s` on CPU 1 against
#    each server on CPU 0 (1 worker); server CPU from /proc/PID/stat. Median and range.
# Needs valgrind, h2load (nghttp2-client), wrk and curl (installed with apt-get when missing
# and possible). Loopback only; every load is bounded in count or time.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
[[ $rounds =~ ^[0-9]+$ ]] || { echo "usage: $0 [ROUNDS]" >&2; exit 2; }
out=target/console/cost
mkdir -p "$out"

need=()
command -v valgrind >/dev/null || need+=(valgrind)
command -v h2load >/dev/null || need+=(nghttp2-client)
command -v wrk >/dev/null || need+=(wrk)
command -v curl >/dev/null || need+=(curl)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  else
    echo "skipped: missing ${need[*]}" >&2
    exit 0
  fi
fi

# console-subscriber starts only with this cfg (see weir's crate docs, "tokio-console").
export RUSTFLAGS="--cfg console_without_tokio_unstable"
CARGO_TARGET_DIR=target/console/off cargo build --locked -q --release -p weir-console-probe --bin console-hello
CARGO_TARGET_DIR=target/console/on cargo build --locked -q --release -p weir-console-probe --bin console-hello \
  --features weir/console
declare -A bin=([off]=target/console/off/release/console-hello [on]=target/console/on/release/console-hello
  [attached]=target/console/on/release/console-hello)
declare -A flags=([off]="" [on]="" [attached]="--console")
variants=(off on attached)

port=4100
wait_up() {
  for _ in $(seq 300); do curl -s -o /dev/null "http://127.0.0.1:$1/" && return 0; sleep 0.2; done
  echo "the server on port $1 did not answer" >&2
  return 1
}
stop() { kill -INT "$1" 2>/dev/null; wait "$1" 2>/dev/null || true; }

echo "== instructions per request (callgrind, 20000 requests)"
n=20000
for v in "${variants[@]}"; do
  port=$((port + 1))
  rm -f "$out/$v.cg"*
  WEIR_CONSOLE_PORT=$((port + 500)) taskset -c 0 valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file="$out/$v.cg" \
    "${bin[$v]}" --port "$port" --workers 1 ${flags[$v]} >"$out/$v.cg.log" 2>&1 &
  pid=$!
  wait_up "$port"
  taskset -c 1 h2load --h1 -n 4000 -c 8 "http://127.0.0.1:$port/" >/dev/null
  callgrind_control -z "$pid" >/dev/null
  taskset -c 1 h2load --h1 -n "$n" -c 8 "http://127.0.0.1:$port/" >"$out/$v.h2load"
  callgrind_control -d measured "$pid" >/dev/null
  stop "$pid"
  grep -q "$n succeeded, 0 failed" "$out/$v.h2load" || { echo "$v: requests failed" >&2; exit 1; }
  # One dump per thread: the server's own threads, and console-subscriber's (its aggregator
  # and gRPC server run on a tokio runtime of their own, apart from the workers).
  total=0
  console=0
  for dump in $(grep -l '^desc: Trigger.*measured' "$out/$v.cg".*); do
    ir=$(grep -m1 '^summary:\|^totals:' "$dump" | awk '{print $2}')
    total=$((total + ir))
    if grep -q 'console_subscriber::aggregator' "$dump"; then console=$((console + ir)); fi
  done
  awk -v v="$v" -v t="$total" -v c="$console" -v n="$n" 'BEGIN {
      printf "%-9s %8.0f instructions/request: %8.0f in the server, %8.0f in console-subscriber\n",
        v, t / n, (t - c) / n, c / n }' | tee -a "$out/instructions.txt"
done

[ "$rounds" -gt 0 ] || exit 0
echo "== CPU per request (wrk -t1 -c64 -d5s, $rounds interleaved rounds)"
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
: >"$out/cpu.txt"
for r in $(seq "$rounds"); do
  for v in "${variants[@]}"; do
    port=$((port + 1))
    WEIR_CONSOLE_PORT=$((port + 500)) taskset -c 0 "${bin[$v]}" --port "$port" --workers 1 ${flags[$v]} \
      >"$out/$v.run.log" 2>&1 &
    pid=$!
    wait_up "$port"
    taskset -c 1 wrk -t1 -c64 -d1s "http://127.0.0.1:$port/" >/dev/null
    t0=$(cpu_ticks "$pid")
    taskset -c 1 wrk -t1 -c64 -d5s "http://127.0.0.1:$port/" >"$out/$v.wrk"
    t1=$(cpu_ticks "$pid")
    stop "$pid"
    reqs=$(awk '/requests in/ { print $1 }' "$out/$v.wrk")
    awk -v v="$v" -v r="$r" -v t="$((t1 - t0))" -v hz="$hz" -v n="$reqs" \
      'BEGIN { printf "%s %d %.3f %d\n", v, r, t / hz / n * 1e6, n }' >>"$out/cpu.txt"
  done
done
for v in "${variants[@]}"; do
  awk -v v="$v" '$1 == v { print $3 }' "$out/cpu.txt" | sort -n | awk -v v="$v" '
    { x[NR] = $1 }
    END { m = (NR % 2) ? x[(NR + 1) / 2] : (x[NR / 2] + x[NR / 2 + 1]) / 2
          printf "%-9s %6.2f us CPU/request [%.2f-%.2f]\n", v, m, x[1], x[NR] }' | tee -a "$out/cpu-summary.txt"
done
