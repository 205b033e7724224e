#!/usr/bin/env bash
# Runs the whole test suite N times while a CPU stressor keeps every core busy, and reports
# each test that failed: how often, and where its output is.
#
#   scripts/flake-hunt.sh N
#
# The tests are built first (unloaded). Each run is `cargo test --workspace --no-fail-fast`
# (every test binary runs, whatever failed before it), its output in target/flake-hunt/run-K.log.
# A run that outlives FLAKE_HUNT_TIMEOUT seconds (default 900) is a hang: its process group is
# killed and the tests still running are named. The stressor is `stress-ng --cpu $(nproc)`
# (installed with apt-get when missing and possible), else a busy loop per core; it is stopped
# whenever the script exits. Exit status: 0 if every run passed, 1 if any failed, 2 if the
# build failed.
set -uo pipefail
cd "$(dirname "$0")/.."

usage() {
  echo "usage: $0 N   (N >= 1 runs of cargo test --workspace under CPU load)" >&2
  exit 2
}
[ $# -eq 1 ] || usage
runs=$1
[[ $runs =~ ^[1-9][0-9]*$ ]] || usage
timeout_s=${FLAKE_HUNT_TIMEOUT:-900}
[[ $timeout_s =~ ^[1-9][0-9]*$ ]] || {
  echo "FLAKE_HUNT_TIMEOUT must be a number of seconds, not '$timeout_s'" >&2
  exit 2
}
out=target/flake-hunt
cores=$(nproc)

say() { printf '[flake-hunt %s] %s\n' "$(date -u +%H:%M:%S)" "$*"; }

# --- build, unloaded -------------------------------------------------------------------------
say "building the tests"
if ! cargo test --workspace --no-run; then
  say "the build failed"
  exit 2
fi
rm -rf "$out"
mkdir -p "$out"
# The trybuild tests build crates of their own (in target/tests/) when they run: run them once
# now, so that a loaded run does not spend its time compiling them. `--workspace`, as the runs
# do, so that every package is built with the same features and nothing is rebuilt.
trybuild_tests=()
for f in tests/tests/*.rs tests/*/tests/*.rs; do
  [ -f "$f" ] && grep -q 'trybuild::' "$f" && trybuild_tests+=(--test "$(basename "$f" .rs)")
done
if [ ${#trybuild_tests[@]} -gt 0 ]; then
  say "building the trybuild tests' crates (${trybuild_tests[*]})"
  cargo test --workspace "${trybuild_tests[@]}" >"$out/warm-up.log" 2>&1 ||
    say "the trybuild tests failed unloaded (see $out/warm-up.log); the runs will tell"
fi

# --- the stressor ----------------------------------------------------------------------------
# Started as a job of its own (monitor mode), so that its process group id is its pid and the
# whole group, workers included, can be stopped at once.
stress_pgid=
stop_stress() {
  if [ -n "$stress_pgid" ]; then
    kill -TERM -- "-$stress_pgid" 2>/dev/null
    wait "$stress_pgid" 2>/dev/null
    stress_pgid=
  fi
}
# The run in progress (its `timeout`, which passes a TERM on to the run's process group).
run_pid=
stop_run() {
  if [ -n "$run_pid" ]; then
    kill -TERM "$run_pid" 2>/dev/null
    wait "$run_pid" 2>/dev/null
    run_pid=
  fi
}
trap stop_stress EXIT
trap 'stop_run; stop_stress; exit 130' INT
trap 'stop_run; stop_stress; exit 143' TERM

if ! command -v stress-ng >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  say "installing stress-ng"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends stress-ng \
    >"$out/apt.log" 2>&1 || say "apt-get install stress-ng failed (see $out/apt.log)"
fi
set -m
if command -v stress-ng >/dev/null; then
  stressor="stress-ng --cpu $cores"
  stress-ng --cpu "$cores" --quiet >"$out/stressor.log" 2>&1 &
else
  stressor="$cores busy loops (stress-ng is not available)"
  bash -c 'for _ in $(seq "$1"); do while :; do :; done & done; wait' _ "$cores" \
    >"$out/stressor.log" 2>&1 &
fi
stress_pgid=$!
set +m
say "load: $stressor"

# --- the runs --------------------------------------------------------------------------------
# Prints one line per failing test of a log, `<test binary> <test name>`, and for a hang the
# tests the harness reported as still running (`<binary> <name> (hang)`).
failures_of() {
  awk '
    # "Running tests/uring.rs (target/debug/deps/uring-0123abcd)": the binary, less its hash.
    /^ *Running / {
      bin = $NF; sub(/^\(.*\//, "", bin); sub(/\)$/, "", bin); sub(/-[0-9a-f]+$/, "", bin); next
    }
    /^ *Doc-tests / { bin = "doctest:" $2; next }
    /^test .* \.\.\. FAILED$/ {
      sub(/^test /, ""); sub(/ \.\.\. FAILED$/, ""); print bin " " $0; delete running[bin " " $0]; next
    }
    /^test .* has been running for over [0-9]+ seconds$/ {
      sub(/^test /, ""); sub(/ has been running for over [0-9]+ seconds$/, "")
      running[bin " " $0] = 1; next
    }
    /^test .* \.\.\. (ok|ignored|FAILED)/ { n = $0; sub(/^test /, "", n); sub(/ \.\.\. .*$/, "", n); delete running[bin " " n] }
    END { if (hang) for (t in running) print t " (hang)" }
  ' hang="$2" "$1"
}

start=$(date +%s)
failed_runs=0
: >"$out/failures.txt"
for k in $(seq "$runs"); do
  log="$out/run-$k.log"
  say "run $k/$runs -> $log"
  t0=$(date +%s)
  # timeout puts the run in a process group of its own and signals the whole group.
  # In the background, so that a signal to this script is handled at once (trap) and stops it.
  timeout --kill-after=30 "$timeout_s" cargo test --workspace --no-fail-fast >"$log" 2>&1 &
  run_pid=$!
  wait "$run_pid"
  status=$?
  run_pid=
  hang=0
  if [ $status -eq 124 ] || [ $status -eq 137 ]; then
    hang=1
    echo "flake-hunt: run $k killed after ${timeout_s}s (FLAKE_HUNT_TIMEOUT)" >>"$log"
  fi
  found=$(failures_of "$log" "$hang")
  if [ $status -ne 0 ]; then
    failed_runs=$((failed_runs + 1))
    if [ -n "$found" ]; then
      printf '%s\n' "$found" | sed "s|\$| $k|" >>"$out/failures.txt"
    elif [ $hang -eq 1 ]; then
      echo "<hang: no test named> - $k" >>"$out/failures.txt"
    else
      echo "<exit status $status: no test named> - $k" >>"$out/failures.txt"
    fi
  fi
  say "run $k: exit status $status in $(($(date +%s) - t0)) s$([ $hang -eq 1 ] && echo ' (hang)')"
done
stop_stress
elapsed=$(($(date +%s) - start))

# --- the report ------------------------------------------------------------------------------
echo
say "$runs run(s) under $stressor in $elapsed s; $failed_runs failed"
if [ "$failed_runs" -eq 0 ]; then
  exit 0
fi
# failures.txt: `<binary> <test...> <run>`; group by everything but the run.
sed -E 's/ [0-9]+$//' "$out/failures.txt" | sort | uniq -c | sort -rn | while read -r count what; do
  run_list=$(grep -F -- "$what " "$out/failures.txt" | awk '{ print $NF }' | sort -nu | tr '\n' ' ')
  echo
  echo "== $what: failed $count/$runs (runs: ${run_list% })"
  first=${run_list%% *}
  log="$out/run-$first.log"
  echo "   output: $log"
  name=${what#* }
  name=${name% (hang)}
  # The test's captured output from the harness's failure section, else the log's tail.
  excerpt=$(awk -v want="---- $name stdout ----" '
    $0 == want { on = 1; print; next }
    on && (/^---- .* stdout ----$/ || /^failures:$/ || /^successes:$/) { exit }
    on { print }
  ' "$log" | head -n 60)
  if [ -z "$excerpt" ]; then
    excerpt=$(grep -E "process didn't exit successfully|error: |$name" "$log" | tail -n 20)
  fi
  [ -n "$excerpt" ] || excerpt=$(tail -n 20 "$log")
  printf '%s\n' "$excerpt" | sed 's/^/   | /'
done
exit 1
