#!/usr/bin/env bash
# What a request costs when it crosses into the tokio compat runtime: an axum hello-world on
# weir::serve (1 worker, compat runtime on) with no timeout layer, with tower-http's
# TimeoutLayer (a tokio timer per request) and with weir::http::TimeoutLayer (a weir timer
# per request). The server is pinned to CPU 0, wrk to CPU 1; the modes take turns for ROUNDS
# rounds. Server CPU is the sum over all its threads (workers and compat runtime) of
# /proc/PID/task/*/schedstat over the wrk run.
#
#   scripts/compat-cost.sh                 # 5 rounds x 5 s per mode
#   ROUNDS=3 SECS=3 scripts/compat-cost.sh
#
# Needs wrk (apt-get install -y wrk) and 2 CPUs. Loopback only.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-5}
SECS=${SECS:-5}
CONNS=${CONNS:-64}
PORT=${PORT:-8090}
MODES=(none tower-http weir)

command -v wrk >/dev/null || { echo "wrk is missing (apt-get install -y wrk)" >&2; exit 2; }
cargo build --release -q -p weir-tests --example compat_cost
BIN=target/release/examples/compat_cost
OUT=$(mktemp)
server=
cleanup() { [ -n "$server" ] && kill "$server" 2>/dev/null; rm -f "$OUT"; }
trap cleanup EXIT

cpu_ns() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{s += $1} END {printf "%.0f\n", s}'; }
ctxsw() { cat /proc/"$1"/task/*/status 2>/dev/null | awk '/ctxt_switches/ {s += $2} END {printf "%.0f\n", s}'; }

for round in $(seq "$ROUNDS"); do
  for mode in "${MODES[@]}"; do
    taskset -c 0 "$BIN" "$mode" "$PORT" > "$OUT.srv" &
    server=$!
    for _ in $(seq 100); do grep -q ready "$OUT.srv" 2>/dev/null && break; sleep 0.05; done
    taskset -c 1 wrk -t1 -c"$CONNS" -d1s "http://127.0.0.1:$PORT/" >/dev/null # warm-up
    c0=$(cpu_ns "$server"); s0=$(ctxsw "$server")
    res=$(taskset -c 1 wrk -t1 -c"$CONNS" -d"${SECS}s" "http://127.0.0.1:$PORT/")
    c1=$(cpu_ns "$server"); s1=$(ctxsw "$server")
    threads=$(ls /proc/"$server"/task | wc -l)
    kill "$server"; wait "$server" 2>/dev/null || true; server=
    reqs=$(echo "$res" | awk '/requests in/ {print $1}')
    errs=$(echo "$res" | awk '/Socket errors|Non-2xx/ {print}' | tr '\n' ' ')
    echo "$mode $round $reqs $((c1 - c0)) $((s1 - s0)) $threads $errs" | tee -a "$OUT" >&2
    sleep 0.5 # let the port's TIME_WAIT sockets of the last run not matter
  done
done

echo
echo "| mode | req/s median [min–max] | server CPU µs/request median [min–max] | ctx switches/request | threads |"
echo "|---|---|---|---|---|"
for mode in "${MODES[@]}"; do
  awk -v m="$mode" -v secs="$SECS" '
    $1 == m { n++; rps[n] = $3 / secs; cpu[n] = $4 / 1000 / $3; cs[n] = $5 / $3; th = $6 }
    function sort(a, k,   i, j, t) { for (i = 2; i <= k; i++) for (j = i; j > 1 && a[j-1] > a[j]; j--) { t = a[j]; a[j] = a[j-1]; a[j-1] = t } }
    function med(a, k) { return k % 2 ? a[(k+1)/2] : (a[k/2] + a[k/2+1]) / 2 }
    END {
      sort(rps, n); sort(cpu, n); sort(cs, n)
      printf "| %s | %.1fk [%.1fk–%.1fk] | %.2f [%.2f–%.2f] | %.3f | %d |\n", m, med(rps, n)/1000, rps[1]/1000, rps[n]/1000, med(cpu, n), cpu[1], cpu[n], med(cs, n), th
    }' "$OUT"
done
