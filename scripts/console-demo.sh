#!/usr/bin/env bash
# tokio-console on a weir program: builds the console probe (tests/console-probe) with
# weir's `console` feature, starts it, opens the real `tokio-console` on it inside tmux and saves
# the console's task list, then its resource list, as text.
#
#   scripts/console-demo.sh [OUT_DIR]      (default: target/console/demo)
#
# Installs tokio-console with `cargo install --locked` if it is not on PATH, and tmux with apt-get
# if it is missing. Writes OUT_DIR/tasks.txt and OUT_DIR/resources.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-target/console/demo}
PORT=${WEIR_CONSOLE_PORT:-6670}
mkdir -p "$OUT"

if ! command -v tmux >/dev/null; then
  apt-get install -y --no-install-recommends tmux
fi
if ! command -v tokio-console >/dev/null; then
  cargo install --locked tokio-console
fi

# console-subscriber starts only with this cfg (see weir's crate docs, "tokio-console").
RUSTFLAGS="--cfg console_without_tokio_unstable" CARGO_TARGET_DIR=target/console \
  CARGO_PROFILE_DEV_DEBUG=0 cargo build --locked -q -p weir-console-probe --features weir/console

SESSION=weir-console-demo
FIFO=$(mktemp -u)
mkfifo "$FIFO"
cleanup() {
  tmux kill-session -t "$SESSION" 2>/dev/null || true
  exec 3>&- || true
  [ -n "${PROBE:-}" ] && kill "$PROBE" 2>/dev/null || true
  rm -f "$FIFO"
}
trap cleanup EXIT

# The probe runs until its standard input closes: the fifo, held open by fd 3. It starts its
# tasks when it reads a first line, sent once the console is connected (console-subscriber
# forwards a timer's polls only to the consoles connected when they happen).
WEIR_CONSOLE_PORT=$PORT target/console/debug/weir-console-probe <"$FIFO" >"$OUT/probe.log" &
PROBE=$!
exec 3>"$FIFO"

tmux new-session -d -s "$SESSION" -x 200 -y 40 "tokio-console http://127.0.0.1:$PORT"
# Waits until the console's screen shows $1.
wait_for() {
  for _ in $(seq 100); do
    if tmux capture-pane -p -t "$SESSION" | grep -q "$1"; then return 0; fi
    sleep 0.2
  done
  echo "the console never showed '$1'" >&2
  tmux capture-pane -p -t "$SESSION" >&2
  exit 1
}
wait_for '(CONNECTED)'
echo go >&3
until grep -q '^ready$' "$OUT/probe.log"; do
  kill -0 "$PROBE" || { echo "the probe exited" >&2; exit 1; }
  sleep 0.1
done
# Waits until the console lists the probe's tasks (with their poll counts), then saves it.
wait_for 'probe:ticker'
sleep 1  # let the next updates (polls, warnings) arrive
tmux capture-pane -p -t "$SESSION" >"$OUT/tasks.txt"
tmux send-keys -t "$SESSION" r
wait_for 'Sleep'
tmux capture-pane -p -t "$SESSION" >"$OUT/resources.txt"
tmux send-keys -t "$SESSION" q
echo "saved $OUT/tasks.txt and $OUT/resources.txt"
cat "$OUT/tasks.txt"
