#!/usr/bin/env bash
# weir's NAPI testbed: a server and a client network namespace joined by a veth pair with
# several queues, configured so that received TCP packets go through the veth's NAPI
# instances. Sockets accepted across it then report real SO_INCOMING_NAPI_ID values (one id
# per receive queue), which loopback never does (its id is always 0).
#
# usage: scripts/napi-lab.sh up [NAME] [QUEUES]   build NAME-srv and NAME-cli (default: napilab, 2)
#        scripts/napi-lab.sh down [NAME]          remove them; safe to repeat
#        scripts/napi-lab.sh show [NAME]          print both ends' addresses and queue counts
#
# Addresses (RFC 2544 benchmarking range; they exist only inside the two namespaces):
#   NAME-srv: 198.18.0.1 on device NAME-s        NAME-cli: 198.18.0.2 on device NAME-c
# Run programs in them with `ip netns exec NAME-srv …` and `ip netns exec NAME-cli …`.
#
# Needs CAP_NET_ADMIN and CAP_SYS_ADMIN (root in the initial namespaces), iproute2 and ethtool
# (`apt-get install -y iproute2 ethtool`). Exit status 2 means a tool or a capability is
# missing, with the reason on stderr; the tests that use this script skip in that case.
#
# Why each ethtool setting: veth passes a packet to its NAPI instance only if the receiving
# device wants GRO and the packet can be GRO'd; with TSO on the sending side a TCP packet
# qualifies only when the receiver also has rx-gro-list. `ethtool -L` gives the device one
# NAPI instance per receive queue, and flows are hashed onto the queues, so different
# connections see different ids.
set -euo pipefail

action=${1:-}
name=${2:-napilab}
queues=${3:-2}

die() { echo "napi-lab: $*" >&2; exit 2; }

# Capabilities, not uid 0: a root user in a default container lacks CAP_NET_ADMIN and
# CAP_SYS_ADMIN (needed to create and enter namespaces).
has_cap() {
  local eff
  eff=$(awk '/^CapEff:/ {print $2}' /proc/self/status 2>/dev/null) || return 1
  [ -n "$eff" ] && (( (16#$eff >> $1) & 1 ))
}

require_tools() {
  has_cap 12 || die "CAP_NET_ADMIN is missing (veth devices and their settings need it)"
  has_cap 21 || die "CAP_SYS_ADMIN is missing (creating and entering network namespaces needs it)"
  command -v ip >/dev/null || die "ip is missing (apt-get install -y iproute2)"
  command -v ethtool >/dev/null || die "ethtool is missing (apt-get install -y ethtool)"
}

remove() {
  local ns
  for ns in "$name-srv" "$name-cli"; do
    ip netns del "$ns" 2>/dev/null || true
  done
}

# One end: move the device into the namespace, address it, bring it up, set queues and GRO.
setup_end() {
  local ns=$1 dev=$2 addr=$3
  ip link set "$dev" netns "$ns"
  ip -n "$ns" addr add "$addr/24" dev "$dev"
  ip -n "$ns" link set lo up
  ip -n "$ns" link set "$dev" up
  # Older kernels refuse to change the channel count of a veth; the queues given at creation
  # still apply then.
  ip netns exec "$ns" ethtool -L "$dev" rx "$queues" tx "$queues" >/dev/null 2>&1 || true
  # Toggle GRO off and on so the NAPI instances are (re)created with the settings below.
  ip netns exec "$ns" ethtool -K "$dev" gro off >/dev/null
  ip netns exec "$ns" ethtool -K "$dev" gro on rx-gro-list on tso off >/dev/null
}

build() {
  require_tools
  [[ $queues =~ ^[1-9][0-9]*$ ]] || die "QUEUES must be a positive number, not '$queues'"
  # Interface names are limited to 15 bytes; NAME-s must fit.
  (( ${#name} <= 12 )) || die "NAME '$name' is longer than 12 characters"
  remove
  ip netns add "$name-srv"
  ip netns add "$name-cli"
  ip link add "$name-s" numtxqueues "$queues" numrxqueues "$queues" type veth \
    peer name "$name-c" numtxqueues "$queues" numrxqueues "$queues"
  setup_end "$name-srv" "$name-s" 198.18.0.1
  setup_end "$name-cli" "$name-c" 198.18.0.2
  echo "napi-lab: $name-srv 198.18.0.1 ($name-s) <-> $name-cli 198.18.0.2 ($name-c), $queues queues"
}

show() {
  local pair ns dev
  for pair in "$name-srv:$name-s" "$name-cli:$name-c"; do
    ns=${pair%%:*} dev=${pair#*:}
    echo "== $ns"
    ip -n "$ns" -brief addr show dev "$dev" || die "$ns is not up (run: $0 up $name)"
    ip netns exec "$ns" ethtool -l "$dev" 2>/dev/null | sed -n '/Current/,$p' || true
  done
}

case "$action" in
  up) build ;;
  down) remove ;;
  show) show ;;
  *) sed -n '7,9p' "$0" >&2; exit 2 ;;
esac
