#!/usr/bin/env bash
# hello-http on weir vs the identical hyper service on tokio (examples/hello-http.rs,
# examples/hello-http-tokio.rs), plus the same service on weir's NAPI-sharded listener
# (examples/sharded-http.rs: one SO_REUSEPORT listener per worker), measured with wrk in
# interleaved rounds.
#
#   scripts/wrk-compare.sh                      # 5 rounds × 5 s, wrk -t2 at -c64 and -c256
#   ROUNDS=3 DURATION=3s CONNS="32 128" WORKERS=2 scripts/wrk-compare.sh
#
# Settings (environment): ROUNDS (5), DURATION (5s, per wrk run), CONNS ("64 256"), THREADS
# (wrk threads, 2), WORKERS (server worker threads; default: the runtimes' default, one per
# CPU), PORT_WEIR (18080), PORT_TOKIO (18081), WARMUP (1s, one unrecorded run per server and
# connection count), SKIP_BUILD (1 to use the binaries already built).
#
# Both servers listen on loopback only and run for the whole script; for each connection count
# the rounds alternate weir, tokio, weir, tokio, … so drift on the machine hits both alike.
# wrk runs on the same machine as the servers and competes with them for the CPUs: numbers
# from a small machine compare the runtimes, they are not the servers' capacity.
# Prints, per contender and connection count, the median and min–max of Requests/sec and of
# the latency p50/p99 that `wrk --latency` reports, and the weir/tokio ratio of the medians.
# Total time ≈ len(CONNS) × (2 × WARMUP + 2 × ROUNDS × DURATION) plus the build.

set -euo pipefail

ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-5s}
CONNS=${CONNS:-"64 256"}
THREADS=${THREADS:-2}
WORKERS=${WORKERS:-}
PORT_WEIR=${PORT_WEIR:-18080}
PORT_TOKIO=${PORT_TOKIO:-18081}
PORT_SHARDED=${PORT_SHARDED:-18082}
WARMUP=${WARMUP:-1s}
SKIP_BUILD=${SKIP_BUILD:-0}

cd "$(dirname "$0")/.."

command -v wrk >/dev/null || { echo "wrk is not installed: apt-get install -y wrk" >&2; exit 1; }

if [[ $SKIP_BUILD != 1 ]]; then
    # The same flag set as every other release build in this workspace (shared target dir).
    cargo build --release --example hello-http --example hello-http-tokio --example sharded-http
fi
target_dir=$(cargo metadata --format-version 1 --no-deps |
    sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
bin_weir="$target_dir/release/examples/hello-http"
bin_tokio="$target_dir/release/examples/hello-http-tokio"
bin_sharded="$target_dir/release/examples/sharded-http"
for b in "$bin_weir" "$bin_tokio" "$bin_sharded"; do
    [[ -x $b ]] || { echo "missing $b (build it or unset SKIP_BUILD)" >&2; exit 1; }
done

tmp=$(mktemp -d)
pids=()
cleanup() {
    for pid in "${pids[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    for pid in "${pids[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

start() { # name binary port
    local name=$1 bin=$2 port=$3
    if port_open "$port"; then
        echo "port $port is already in use; set PORT_WEIR/PORT_TOKIO" >&2
        exit 1
    fi
    local args=(--port "$port")
    [[ -n $WORKERS ]] && args+=(--workers "$WORKERS")
    "$bin" "${args[@]}" >"$tmp/$name.log" 2>&1 &
    pids+=($!)
    for _ in $(seq 100); do
        port_open "$port" && return 0
        sleep 0.05
    done
    echo "$name did not start listening on port $port:" >&2
    cat "$tmp/$name.log" >&2
    exit 1
}

start weir "$bin_weir" "$PORT_WEIR"
start tokio "$bin_tokio" "$PORT_TOKIO"
start sharded "$bin_sharded" "$PORT_SHARDED"

# Latency as wrk prints it (e.g. 245.00us, 1.05ms, 2.00s) → microseconds.
to_us() {
    awk -v v="$1" 'BEGIN {
        n = v + 0
        if (v ~ /us$/) m = 1; else if (v ~ /ms$/) m = 1000; else if (v ~ /m$/) m = 60e6;
        else if (v ~ /s$/) m = 1e6; else m = 1
        printf "%.1f", n * m
    }'
}

# One measured run: appends "rps p50_us p99_us" to $tmp/<name>-<conns>.
run() { # name port conns duration record
    local name=$1 port=$2 conns=$3 duration=$4 record=$5 out
    out=$(wrk -t"$THREADS" -c"$conns" -d"$duration" --timeout 5s --latency \
        "http://127.0.0.1:$port/")
    [[ $record == 1 ]] || return 0
    local rps p50 p99 errors non2xx
    rps=$(awk '/^Requests\/sec:/ {print $2}' <<<"$out")
    p50=$(to_us "$(awk '$1 == "50%" {print $2}' <<<"$out")")
    p99=$(to_us "$(awk '$1 == "99%" {print $2}' <<<"$out")")
    errors=$(grep -o 'Socket errors:.*' <<<"$out" || true)
    non2xx=$(grep -o 'Non-2xx or 3xx responses:.*' <<<"$out" || true)
    [[ -n $errors ]] && echo "    ($name: $errors)" >&2
    [[ -n $non2xx ]] && echo "    ($name: $non2xx)" >&2
    printf '  %-5s -c%-4s %12s req/s   p50 %9s us   p99 %9s us\n' "$name" "$conns" "$rps" "$p50" "$p99"
    echo "$rps $p50 $p99" >>"$tmp/$name-$conns"
}

# median min max of column $2 in file $1
stats() {
    awk -v col="$2" '{print $col}' "$1" | sort -g | awk '
        { v[NR] = $1 }
        END {
            med = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
            printf "%.1f %.1f %.1f", med, v[1], v[NR]
        }'
}

echo "# $(nproc) CPUs; wrk -t$THREADS, $ROUNDS rounds × $DURATION per contender and connection count"
echo "# servers: workers=${WORKERS:-default}; wrk shares the machine with them"
for conns in $CONNS; do
    echo "== -c$conns: warm-up $WARMUP each"
    run weir "$PORT_WEIR" "$conns" "$WARMUP" 0
    run tokio "$PORT_TOKIO" "$conns" "$WARMUP" 0
    run sharded "$PORT_SHARDED" "$conns" "$WARMUP" 0
    for round in $(seq "$ROUNDS"); do
        echo "  round $round"
        run weir "$PORT_WEIR" "$conns" "$DURATION" 1
        run tokio "$PORT_TOKIO" "$conns" "$DURATION" 1
        run sharded "$PORT_SHARDED" "$conns" "$DURATION" 1
    done
done

echo
echo "# median (min–max) over $ROUNDS rounds"
printf '%-6s %-6s %30s %30s %30s\n' conns rt "Requests/sec" "p50 latency (us)" "p99 latency (us)"
for conns in $CONNS; do
    for name in weir sharded tokio; do
        line=$(printf '%-6s %-6s' "-c$conns" "$name")
        for col in 1 2 3; do
            read -r med lo hi <<<"$(stats "$tmp/$name-$conns" "$col")"
            line+=$(printf ' %30s' "$med ($lo–$hi)")
        done
        echo "$line"
    done
    read -r t_rps _ <<<"$(stats "$tmp/tokio-$conns" 1)"
    read -r t_p50 _ <<<"$(stats "$tmp/tokio-$conns" 2)"
    read -r t_p99 _ <<<"$(stats "$tmp/tokio-$conns" 3)"
    for name in weir sharded; do
        read -r w_rps _ <<<"$(stats "$tmp/$name-$conns" 1)"
        read -r w_p50 _ <<<"$(stats "$tmp/$name-$conns" 2)"
        read -r w_p99 _ <<<"$(stats "$tmp/$name-$conns" 3)"
        awk -v c="$conns" -v n="${name:0:1}/t" -v wr="$w_rps" -v tr="$t_rps" -v w5="$w_p50" \
            -v t5="$t_p50" -v w9="$w_p99" -v t9="$t_p99" 'BEGIN {
            printf "%-6s %-6s %30.3f %30.3f %30.3f\n", "-c" c, n, wr / tr, w5 / t5, w9 / t9
        }'
    done
done
echo "# w/t = weir (hello-http) median / tokio median, s/t = weir sharded-http / tokio"
echo "# (Requests/sec: >1 is better for weir; latency: <1 is better)"
for name in weir sharded tokio; do
    if [[ -s $tmp/$name.log ]]; then
        echo "# $name server log (last lines):"
        tail -n 5 "$tmp/$name.log" | sed 's/^/#   /'
    fi
done
