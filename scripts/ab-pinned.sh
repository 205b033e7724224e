#!/usr/bin/env bash
# Server CPU per request of several HTTP servers at one fixed offered rate, pinned and
# interleaved: each server on CPU 0, weir-bench's open-loop generator on CPU 1.
#
#   scripts/ab-pinned.sh [--rate R] [--rounds N] [--secs S] NAME='COMMAND {port}' ...
#
# Each COMMAND starts a server that answers `GET /` with 200 on 127.0.0.1:{port} (the
# placeholder is replaced by a free port). For every round, every server in turn is started,
# loaded for a 0.5 s warm-up and S seconds (default 5) at R requests/s (default 30000) over 64
# keep-alive connections, and stopped with SIGINT. Its CPU time (all threads, from
# /proc/PID/schedstat) over the whole load, divided by the requests sent in it, is its CPU per
# request. Prints each round, then per server the median [min-max] CPU/request, its ratio to
# the first server's median, and the median p50/p99 latency. Needs curl; builds weir-bench.
# Loopback only; every run is bounded in time.
set -euo pipefail
cd "$(dirname "$0")/.."
rate=30000 rounds=5 secs=5
names=() cmds=()
while [ $# -gt 0 ]; do
  case $1 in
    --rate) rate=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --secs) secs=$2; shift 2 ;;
    *=*) names+=("${1%%=*}"); cmds+=("${1#*=}"); shift ;;
    *) echo "usage: $0 [--rate R] [--rounds N] [--secs S] NAME='COMMAND {port}' ..." >&2; exit 2 ;;
  esac
done
[ ${#names[@]} -gt 0 ] || { echo "no server given" >&2; exit 2; }
command -v curl >/dev/null || { echo "skipped: curl is not installed" >&2; exit 0; }
cargo build --release -q -p weir-bench
load=target/release/weir-bench
out=target/ab-pinned
mkdir -p "$out"
: >"$out/rounds.txt"
port=4600
cpu_ns() { awk '{ s += $1 } END { printf "%.0f\n", s }' /proc/"$1"/task/*/schedstat; }
for r in $(seq "$rounds"); do
  for i in "${!names[@]}"; do
    port=$((port + 1))
    cmd=${cmds[$i]//\{port\}/$port}
    # shellcheck disable=SC2086
    taskset -c 0 $cmd >"$out/${names[$i]}.log" 2>&1 &
    pid=$!
    for _ in $(seq 300); do curl -s -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.1; done
    t0=$(cpu_ns "$pid")
    res=$("$load" load --addr "127.0.0.1:$port" --rate "$rate" --secs "$secs" --cpu 1)
    t1=$(cpu_ns "$pid")
    kill -INT "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null || true
    # The generator sends for the warm-up and the measured seconds; it reports the latter.
    echo "$res" | awk -v n="${names[$i]}" -v r="$r" -v c="$((t1 - t0))" -v rate="$rate" -v s="$secs" '
      { sent = rate * (s + 0.5); printf "%s %d %.3f %s %s %s\n", n, r, c / sent / 1000, $4, $10, $13 }' |
      tee -a "$out/rounds.txt"
  done
done
# Medians with python3 (present wherever the rest of the toolchain is; mawk has no sort).
python3 - "$out/rounds.txt" "${names[@]}" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
base = None
print("server           rounds  CPU us/req median [min-max]  vs first  p50 us  p99 us")
for name in sys.argv[2:]:
    mine = [r for r in rows if r[0] == name]
    cpu = [float(r[2]) for r in mine]
    med = statistics.median(cpu)
    base = base or med
    p50 = statistics.median(float(r[4]) for r in mine)
    p99 = statistics.median(float(r[5]) for r in mine)
    print(f"{name:<16} {len(cpu):>6}  {med:6.2f} [{min(cpu):.2f}-{max(cpu):.2f}]  {med / base:8.3f}x  {p50:6.0f}  {p99:6.0f}")
PY
