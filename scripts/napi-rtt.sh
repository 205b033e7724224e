#!/usr/bin/env bash
# TCP ping-pong RTT on the napi-lab testbed: a weir ShardedListener echo server in the server
# namespace, a plain blocking client in the client namespace, with and without per-worker
# kernel busy poll (EPIOCSPARAMS), interleaved rounds. Needs CAP_NET_ADMIN, iproute2, ethtool.
#
#   scripts/napi-rtt.sh            # 5 rounds x 20000 round trips of 64 B per contender
#   ROUNDS=3 N=5000 KBP=200,8,0 scripts/napi-rtt.sh
#
# The server runs 1 worker pinned to CPU 0 (--pin) and the client is pinned to CPU 1, so the
# two do not share a core on this 2-core machine. The lab is torn down on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
LAB=scripts/napi-lab.sh
PREFIX=weirrtt
ROUNDS=${ROUNDS:-5}
N=${N:-20000}
KBP=${KBP:-200,8,0}
WORKERS=${WORKERS:-1}
PORT=7001

cargo build --release --all-features --example napi-pingpong >&2
BIN=$(pwd)/target/release/examples/napi-pingpong
OUT=$(mktemp)

cleanup() {
  jobs -p | xargs -r kill 2>/dev/null || true
  bash "$LAB" down "$PREFIX" || true
  rm -f "$OUT"
}
trap cleanup EXIT
bash "$LAB" up "$PREFIX" 2 >&2

run() {
  local label=$1; shift
  ip netns exec "$PREFIX-srv" "$BIN" server --addr 198.18.0.1:$PORT --workers "$WORKERS" \
    --pin --seconds 120 "$@" 2>/dev/null &
  local spid=$!
  for _ in $(seq 100); do
    ip netns exec "$PREFIX-srv" ss -Hltn "sport = :$PORT" | grep -q LISTEN && break
    sleep 0.05
  done
  local res
  res=$(ip netns exec "$PREFIX-cli" taskset -c 1 "$BIN" client --addr 198.18.0.1:$PORT --n "$N")
  kill "$spid" 2>/dev/null || true
  wait "$spid" 2>/dev/null || true
  echo "$label $res" | tee -a "$OUT" >&2
}

for r in $(seq "$ROUNDS"); do
  run no-busy-poll
  run "kernel-busy-poll($KBP)" --kernel-busy-poll "$KBP"
done

python3 - "$OUT" <<'PY'
import sys, statistics, collections
rows = collections.defaultdict(lambda: collections.defaultdict(list))
for line in open(sys.argv[1]):
    label, _, *kv = line.split()
    for f in kv:
        k, v = f.split("=")
        rows[label][k].append(float(v))
print("| contender | p50 µs median [min–max] | p99 µs median [min–max] | p999 µs median |")
print("|---|---|---|---|")
for label, d in rows.items():
    fmt = lambda k: f"{statistics.median(d[k]):.1f} [{min(d[k]):.1f}–{max(d[k]):.1f}]"
    print(f"| {label} | {fmt('p50')} | {fmt('p99')} | {statistics.median(d['p999']):.1f} |")
labels = list(rows)
if len(labels) == 2:
    a, b = labels
    print(f"\np50 ratio {b}/{a}: {statistics.median(rows[b]['p50'])/statistics.median(rows[a]['p50']):.2f}")
PY
