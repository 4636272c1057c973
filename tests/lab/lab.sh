#!/usr/bin/env bash
# lab.sh: the project's own multicast test network on one Linux host (needs
# root, iproute2 and clang; nothing outside the project).
#
# One server and N client hosts, each in its own network namespace, joined
# by a bridge (the lossless backbone of a star). Loss is on multicast only
# (IPv4 224.0.0.0/4), in the kernel: mloss.bpf.c, compiled here for each
# loss rate, drops with the given probability at a link's ingress (a tc
# direct-action classifier; this kernel has no netem or gact). TCP and
# unicast are never dropped.
#   - loss is P (each packet independently) or ge:MEAN:BURST (bursts:
#     Gilbert-Elliott, mean loss MEAN, mean burst BURST packets, the
#     state kept per link; `get --emulate-loss` spells it the same);
#   - a client's loss: on its own end of its cable (that client only);
#   - the server's loss: on the bridge's end of the server's cable, before
#     the bridge copies the packet (every client misses it);
#   - the server's rate cap (--rate, e.g. 100mbit; --burst, default 64kb:
#     the bytes the tbf lets through at once after an idle spell, which a
#     real link of that rate never does; 3kb, two frames, is close to a
#     wire): a tbf on what the
#     server sends, on the bridge's side of its cable (after its loss):
#     the server's packets are redirected there to an ifb device whose tbf
#     queues and drops them like a bottleneck switch port would. (A tbf on
#     the server's own eth0 returns its drops to the server's TCP as
#     local congestion, and Linux then aborts a connection with nothing in
#     flight after 15 failed sends, 7.5 s: with ~1,000 connections on the
#     link, most of nginx's died that way.)
#
#   tests/lab/lab.sh [--name N] up --clients 3 [--server-loss 0.02] [--client-loss 0.05,ge:0.05:8,0.5] [--rate 100mbit [--burst 64kb]]
#   tests/lab/lab.sh [--name N] exec srv|c1|c2.. -- CMD ...
#   tests/lab/lab.sh [--name N] set-loss c2 0.3
#   tests/lab/lab.sh [--name N] status
#   tests/lab/lab.sh [--name N] down
#
# Addresses: server 10.77.0.1, client i 10.77.0.(10+i), /24; a route for
# 224.0.0.0/4 on each host's link. Names are prefixed by --name (default
# "lab") so labs can coexist.
set -euo pipefail

name=lab
if [ "${1:-}" = "--name" ]; then name=$2; shift 2; fi
verb=${1:-}; shift || true

die() { echo "lab.sh: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root (network namespaces and tc)"
command -v ip >/dev/null && command -v tc >/dev/null || die "ip and tc not found: apt-get install -y iproute2"
here=$(cd "$(dirname "$0")" && pwd)

ns() { echo "$name-$1"; }
hosts() { ip netns list | awk '{print $1}' | grep "^$name-" | sed "s/^$name-//" | sort -V || true; }

# Multicast loss `spec` on packets arriving at `dev` (in netns `n`, or the
# root namespace if empty): the classifier compiled for it, or none at 0.
# `spec` is P (each packet lost with probability P) or ge:MEAN:BURST
# (Gilbert-Elliott bursts: mean loss MEAN, mean burst BURST packets; the
# same model and spelling as `get --emulate-loss` and the simulator's).
set_loss() {
  local dev=$1 n=$2 spec=$3
  local pre=()
  [ -n "$n" ] && pre=(ip netns exec "$n")
  "${pre[@]}" tc qdisc del dev "$dev" clsact 2>/dev/null || true
  local defs
  defs=$(awk -v s="$spec" 'BEGIN {
      num = "^([0-9]+[.]?[0-9]*|[.][0-9]+)$"
      if (s ~ num) {
        p = s + 0; if (p > 1) exit 1
        if (p > 0) printf "-g0 -DLOSS_Q24=%d", p * 16777216 + 0.5
        exit 0
      }
      n = split(s, f, ":")
      if (n != 3 || f[1] != "ge" || f[2] !~ num || f[3] !~ num) exit 1
      p = f[2] + 0; b = f[3] + 0
      if (p >= 1 || b < 1) exit 1
      if (p == 0) exit 0
      bg = 1 / b; gb = p * bg / (1 - p); if (gb > 1) gb = 1
      printf "-g -DGB_Q24=%d -DBG_Q24=%d", gb * 16777216 + 0.5, bg * 16777216 + 0.5 }') \
    || die "loss $spec is neither P (a probability) nor ge:MEAN:BURST (MEAN below 1, BURST at least 1 packet)"
  if [ -n "$defs" ]; then
    command -v clang >/dev/null || die "clang not found: apt-get install -y clang"
    local obj
    obj=$(mktemp --suffix=.o)
    # shellcheck disable=SC2086 # $defs is a list of flags
    clang -O2 $defs -target bpf -I"/usr/include/$(uname -m)-linux-gnu" \
      -c "$here/mloss.bpf.c" -o "$obj" || die "cannot compile mloss.bpf.c"
    "${pre[@]}" tc qdisc add dev "$dev" clsact
    "${pre[@]}" tc filter add dev "$dev" ingress prio 1 bpf da obj "$obj" sec classifier || { rm -f "$obj"; die "cannot attach the loss filter"; }
    rm -f "$obj"
  fi
  # The server's link: what the loss filter keeps goes on to the rate cap.
  if [ "$dev" = "${name}s" ] && ip link show "${name}q" >/dev/null 2>&1; then
    tc qdisc add dev "$dev" clsact 2>/dev/null || true
    tc filter add dev "$dev" ingress prio 2 u32 match u32 0 0 \
      action mirred egress redirect dev "${name}q" || die "cannot redirect to the rate cap"
  fi
}

link_of() { # prints "dev netns" where a host's multicast is dropped
  if [ "$1" = srv ]; then echo "${name}s -"; else echo "eth0 $(ns "$1")"; fi
}

up() {
  local clients=0 sloss=0 closs="" rate="" burst=64kb
  while [ $# -gt 0 ]; do
    case $1 in
      --clients) clients=$2; shift 2 ;;
      --burst) burst=$2; shift 2 ;;
      --server-loss) sloss=$2; shift 2 ;;
      --client-loss) closs=$2; shift 2 ;;
      --rate) rate=$2; shift 2 ;;
      *) die "up: unknown option $1" ;;
    esac
  done
  [ "$clients" -ge 1 ] || die "up: give --clients N"
  [ -z "$(hosts)" ] || die "a lab named $name is up; run: lab.sh --name $name down"
  IFS=, read -r -a losses <<< "${closs:-0}"
  if [ "${#losses[@]}" = 1 ]; then
    local one=${losses[0]}; losses=(); for _ in $(seq "$clients"); do losses+=("$one"); done
  fi
  [ "${#losses[@]}" = "$clients" ] || die "give one --client-loss or one per client"
  local br="${name}br"
  ip link add "$br" type bridge
  ip link set "$br" type bridge mcast_snooping 0
  ip link set "$br" up
  local i=0 h
  for h in srv $(seq -f "c%g" 1 "$clients"); do
    local n peer addr
    n=$(ns "$h")
    if [ "$h" = srv ]; then peer="${name}s"; addr=10.77.0.1; else peer="$name$h"; addr="10.77.0.$((10 + i))"; fi
    ip netns add "$n"
    ip link add "$peer" type veth peer name eth0 netns "$n"
    ip link set "$peer" master "$br"
    ip link set "$peer" up
    ip -n "$n" addr add "$addr/24" dev eth0
    ip -n "$n" link set lo up
    ip -n "$n" link set eth0 up
    ip -n "$n" route add 224.0.0.0/4 dev eth0
    i=$((i + 1))
  done
  if [ -n "$rate" ]; then
    if ip link add "${name}q" type ifb 2>/dev/null; then
      ip link set "${name}q" up
      tc qdisc add dev "${name}q" root tbf rate "$rate" burst "$burst" latency 200ms
    else
      # No ifb in this kernel: the cap on the server's own link (its TCP
      # then sees the cap's drops as local congestion; see above).
      echo "lab.sh: no ifb device; the rate cap is on the server's eth0" >&2
      ip netns exec "$(ns srv)" tc qdisc add dev eth0 root tbf rate "$rate" burst "$burst" latency 200ms
    fi
  fi
  set_loss "${name}s" "" "$sloss"
  for i in $(seq "$clients"); do
    set_loss eth0 "$(ns "c$i")" "${losses[$((i - 1))]}"
  done
  status
}

down() {
  local h peer pids
  for h in $(hosts); do
    # Whatever still runs in the host goes with it: a process started
    # through a wrapper (`time`, `strace`) outlives a kill of the
    # wrapper, and a pusher left behind would go on taking CPU from every
    # later run on this machine.
    pids=$(ip netns pids "$(ns "$h")" 2>/dev/null || true)
    if [ -n "$pids" ]; then
      # shellcheck disable=SC2086
      kill $pids 2>/dev/null || true
      for _ in 1 2 3 4 5 6 7 8 9 10; do
        pids=$(ip netns pids "$(ns "$h")" 2>/dev/null || true)
        [ -z "$pids" ] && break
        sleep 0.2
      done
      # shellcheck disable=SC2086
      [ -z "$pids" ] || kill -9 $pids 2>/dev/null || true
    fi
    # The cable goes first: deleting the root side of a veth removes both
    # ends at once, whereas a deleted namespace releases its links later,
    # in the kernel's own time, and a quick `up` would find the old name.
    if [ "$h" = srv ]; then peer="${name}s"; else peer="$name$h"; fi
    ip link del "$peer" 2>/dev/null || true
    ip netns del "$(ns "$h")" 2>/dev/null || true
  done
  ip link del "${name}br" 2>/dev/null || true
  ip link del "${name}q" 2>/dev/null || true
}

status() {
  local h
  for h in $(hosts); do
    read -r dev n <<< "$(link_of "$h")"
    [ "$n" = - ] && n=""
    local pre=()
    [ -n "$n" ] && pre=(ip netns exec "$n")
    local loss="no loss"
    case "$("${pre[@]}" tc filter show dev "$dev" ingress 2>/dev/null)" in *bpf*) loss="loss filter" ;; esac
    printf '%4s  netns %-12s %-16s multicast: %s\n' "$h" "$(ns "$h")" \
      "$(ip -n "$(ns "$h")" -4 -o addr show dev eth0 | awk '{print $4}')" "$loss"
  done
}

case $verb in
  up)
    trap 'down' EXIT # a half-built lab is taken down again
    up "$@"
    trap - EXIT ;;
  down) down ;;
  status) status ;;
  set-loss)
    [ $# = 2 ] || die "set-loss HOST P"
    read -r dev n <<< "$(link_of "$1")"
    [ "$n" = - ] && n=""
    set_loss "$dev" "$n" "$2" ;;
  exec)
    h=$1; shift
    [ "${1:-}" = -- ] && shift
    exec ip netns exec "$(ns "$h")" "$@" ;;
  *) die "usage: lab.sh [--name N] up|down|status|set-loss|exec ..." ;;
esac
