#!/usr/bin/env bash
# Where a saturated request's CPU goes, weir beside tokio: system calls per request by kind,
# user-space instructions per request, and cache misses per request from a cache simulation
# with this CPU's L1d and L2 (callgrind's), by function.
#
#   cargo build --release --example hello-http --example hello-http-tokio
#   scripts/saturation-counts.sh OUTDIR ["64 512 2048"] [BINARY...]
#
# For each binary (default: examples/hello-http, weir::serve, and examples/hello-http-tokio,
# axum::serve) and each connection count C, with the server pinned to CPU 0 with one worker
# and the load on CPU 1:
#
# - System calls: `wrk -t1 -cC -d5s` against the server running natively, while `perf stat`
#   counts the server's system-call tracepoints (every thread): entries by kind, and reads that
#   returned EAGAIN. Divided by wrk's request count.
# - Instructions and cache misses: the server under `valgrind --tool=callgrind
#   --cache-sim=yes` with the L1d and L2 read from sysfs (the L2 stands as the simulation's
#   last level). `h2load --h1 -cC` sends C×4 requests as a warm-up, then the counters are
#   zeroed and C×PER requests are counted (PER=100 unless set: opening the C connections is
#   in the count, spread over PER requests each; about 190 instructions a request at 100).
#
# Prints one table per binary; the callgrind files stay in OUTDIR. Needs wrk, h2load
# (nghttp2-client), valgrind, perf (linux-perf, with tracepoints) and taskset; a missing tool
# skips its part with the reason. Loopback only, bounded in count and time.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: $0 OUTDIR [CONNS] [BINARY...]}
conns=${2:-"64 512 2048"}
shift $(($# < 2 ? $# : 2))
bins=("$@")
[ ${#bins[@]} -gt 0 ] || bins=(target/release/examples/hello-http target/release/examples/hello-http-tokio)
mkdir -p "$out"
have() { command -v "$1" >/dev/null; }
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

cache_kib() { # level type -> size in KiB of CPU 0's cache
  for d in /sys/devices/system/cpu/cpu0/cache/index*; do
    if [ "$(cat "$d/level")" = "$1" ] && [ "$(cat "$d/type")" = "$2" ]; then
      sed 's/K$//' "$d/size"
      return
    fi
  done
  echo 0
}
ways() {
  for d in /sys/devices/system/cpu/cpu0/cache/index*; do
    if [ "$(cat "$d/level")" = "$1" ] && [ "$(cat "$d/type")" = "$2" ]; then
      cat "$d/ways_of_associativity"
      return
    fi
  done
  echo 8
}
l1d=$(cache_kib 1 Data)
l2=$(cache_kib 2 Unified)
sim=(--cache-sim=yes "--D1=$((l1d * 1024)),$(ways 1 Data),64" "--LL=$((l2 * 1024)),$(ways 2 Unified),64")

start() { # bin port [valgrind args...] -> pid
  local bin=$1 port=$2
  shift 2
  taskset -c 0 "$@" "$bin" --port "$port" --workers 1 >"$out/server.log" 2>&1 &
  local pid=$!
  for _ in $(seq 600); do
    curl -s -o /dev/null "http://127.0.0.1:$port/" && { echo "$pid"; return; }
    sleep 0.1
  done
  echo "the server did not answer on port $port" >&2
  kill "$pid"
  exit 1
}
stop() { kill -INT "$1"; wait "$1" 2>/dev/null || true; }

per=${PER:-100}

# The functions of a callgrind file by their own last-level misses: "L2 L1d instructions
# name" per request, the top 12 (name compression `fn=(id) name`, shared with `cfn=`; the line after `calls=` is
# a callee's inclusive cost, not the function's own).
top_functions() {
  awk -v n="$2" '
    /^events:/ { for (i = 2; i <= NF; i++) col[$i] = i - 1; next }
    /^c?fn=/ {
      # `cfn=` (a callee) shares the name table of `fn=`.
      callee = substr($0, 1, 1) == "c"
      v = substr($0, callee ? 5 : 4)
      if (match(v, /^\([0-9]+\)/)) {
        id = substr(v, 1, RLENGTH); rest = substr(v, RLENGTH + 2)
        if (rest != "") names[id] = rest
        v = names[id]
      }
      if (!callee) fn = v
      next
    }
    /^calls=/ { skip = 1; next }
    /^[0-9+*-]/ {
      if (skip) { skip = 0; next }
      # The first field is the position; events follow in the order of `events:`.
      ir[fn] += $(col["Ir"] + 1)
      d1[fn] += $(col["D1mr"] + 1) + $(col["D1mw"] + 1)
      ll[fn] += $(col["DLmr"] + 1) + $(col["DLmw"] + 1)
    }
    END {
      for (f in ll) printf "%.2f\t%.2f\t%.1f\t%s\n", ll[f] / n, d1[f] / n, ir[f] / n, f
    }' "$1" | sort -t "$(printf '\t')" -k1,1 -gr |
    awk -F '\t' 'NR <= 12 { printf "   %6.2f L2 %6.2f L1d %7.1f instr  %s\n", $1, $2, $3, substr($4, 1, 110) }'
}

port=4700
for bin in "${bins[@]}"; do
  name=$(basename "$bin")
  echo "== $name (server on CPU 0, 1 worker; load on CPU 1)"
  for c in $conns; do
    port=$((port + 1))
    # --- system calls, natively under wrk ---
    if have wrk && have perf && perf stat -e raw_syscalls:sys_enter true >/dev/null 2>&1; then
      pid=$(start "$bin" "$port")
      taskset -c 1 wrk -t1 -c"$c" -d2s "http://127.0.0.1:$port/" >/dev/null
      events=syscalls:sys_enter_recvfrom,syscalls:sys_enter_read,syscalls:sys_enter_sendmsg,syscalls:sys_enter_sendto,syscalls:sys_enter_writev,syscalls:sys_enter_write,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_epoll_pwait,syscalls:sys_enter_epoll_pwait2,syscalls:sys_enter_io_uring_enter,syscalls:sys_enter_futex,raw_syscalls:sys_enter
      perf stat -x, -o "$out/$name-c$c.perf" -e "$events" -e syscalls:sys_exit_recvfrom \
        --filter 'ret == -11' -p "$pid" &
      perfpid=$!
      taskset -c 1 wrk -t1 -c"$c" -d5s "http://127.0.0.1:$port/" >"$out/$name-c$c.wrk"
      kill -INT "$perfpid"
      wait "$perfpid" 2>/dev/null || true
      stop "$pid"
      reqs=$(awk '/requests in/ {print $1}' "$out/$name-c$c.wrk")
      echo "-- c$c: system calls per request ($reqs requests under wrk)"
      awk -F, -v n="$reqs" '$3 ~ /sys_e/ {
          k = $3; sub(/^.*sys_enter_?/, "", k); sub(/^syscalls:sys_exit_recvfrom$/, "recvfrom EAGAIN", k)
          if ($3 == "syscalls:sys_exit_recvfrom") k = "recvfrom EAGAIN"
          if ($3 == "raw_syscalls:sys_enter") k = "all"
          if ($1 + 0 > 0) printf "   %-18s %8.4f\n", k, $1 / n
        }' "$out/$name-c$c.perf"
    else
      echo "-- c$c: system calls skipped: wrk or perf (with tracepoints) is missing"
    fi
    # --- instructions and cache misses, under callgrind ---
    if have h2load && have valgrind && have callgrind_control; then
      port=$((port + 1))
      cg="$out/$name-c$c.cg"
      rm -f "$cg" "$cg".*
      pid=$(start "$bin" "$port" valgrind --tool=callgrind "${sim[@]}" --callgrind-out-file="$cg")
      url="http://127.0.0.1:$port/"
      taskset -c 1 h2load --h1 -n $((c * 4)) -c "$c" "$url" >/dev/null
      callgrind_control -z "$pid" >/dev/null
      taskset -c 1 h2load --h1 -n $((c * per)) -c "$c" "$url" >"$out/$name-c$c.h2load"
      callgrind_control -d counted "$pid" >/dev/null
      stop "$pid"
      long=$(ls "$cg".* | awk 'NR == 1')
      echo "-- c$c: per request, cache simulation L1d ${l1d} KiB, last level = L2 ${l2} KiB"
      grep -m1 '^summary:' "$long" | awk -v n=$((c * per)) '{
          # summary: Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw
          printf "   instructions %8.0f\n", $2 / n
          printf "   L1d misses   %8.1f\n", ($6 + $7) / n
          printf "   L2 misses    %8.2f\n", ($9 + $10) / n
        }'
      echo "   top functions by L2 misses (per request; own code, inlined callees included):"
      top_functions "$long" $((c * per))
    else
      echo "-- c$c: cache simulation skipped: h2load or valgrind is missing"
    fi
  done
done
