#!/usr/bin/env bash
# Another system in the same lab as tests/netlab.sh, for the side-by-side
# in docs/benchmarks.md: one 32 MiB file at 100 Mbit/s to 3 receivers
# with kernel-level multicast loss LOSSES. Not a test: it asserts only
# that every receiver's file is identical. Needs root; skips otherwise.
#
#   tests/netlab-peer.sh norm      # NORM (RFC 5740; apt-get install libnorm-dev)
#                                  # through tests/lab/normcast.cpp
#   tests/netlab-peer.sh udpcast   # udpcast (apt-get install udpcast)
#   LOSSES=ge:0.05:8,ge:0.05:8,ge:0.05:8 RUNS=3 tests/netlab-peer.sh norm
#   NORM_ARGS="1400 200 55 12" tests/netlab-peer.sh norm    # segment, k, parity, proactive parity
#   SILENT=1 NORM_ARGS="1400 64 191 191" tests/netlab-peer.sh norm   # no NACKs (push)
#   UDPCAST_ARGS="--fec 8x8/128" tests/netlab-peer.sh udpcast
#
# The receivers start first; each one's time runs from the sender's start
# to its file complete, divided by its ideal, size / (rate x (1 - its mean
# loss)), as tests/netlab.sh and tests/netlab-push.sh count it. (Neither
# peer hashes or fsyncs the file; repocast's times include both.)
set -euo pipefail
cd "$(dirname "$0")/.."
PEER=${1:-norm}
LAB=${LAB:-tests/lab/lab.sh}
RATE=${RATE:-100M}
SIZE_MIB=${SIZE_MIB:-32}
LOSSES=${LOSSES:-0.05,0.05,0.5}
NORM_ARGS=${NORM_ARGS:-"1400 64 32 0"}
UDPCAST_ARGS=${UDPCAST_ARGS:-}
NAME=pr$$
SCRIPT="netlab-peer.sh $PEER"
BIN=${BIN:-none} # common.sh builds repocast unless BIN is set; the peers need none
source tests/lab/common.sh
rate_bps=$(lab_rate_bps "$RATE")
case "$PEER" in
  norm)
    if ! [ -e /usr/include/normApi.h ]; then echo "$SCRIPT: skipped (no libnorm-dev)"; exit 0; fi
    c++ -O2 -o "$WORK/normcast" tests/lab/normcast.cpp -lnorm
    # shellcheck disable=SC2206
    recv_cmd=("$WORK/normcast" recv 239.77.0.9 6003 eth0 @OUT@ ${SILENT:+silent})
    # shellcheck disable=SC2206
    send_cmd=("$WORK/normcast" send 239.77.0.9 6003 eth0 "$WORK/big.bin" "$rate_bps" $NORM_ARGS)
    settings="segment, k, parity, proactive parity = $NORM_ARGS${SILENT:+; silent receivers}" ;;
  udpcast)
    if ! command -v udp-sender >/dev/null; then echo "$SCRIPT: skipped (no udpcast)"; exit 0; fi
    groups=(--interface eth0 --portbase 9000 --mcast-rdv-address 239.77.0.11 --nokbd)
    recv_cmd=(udp-receiver "${groups[@]}" --file @OUT@/big.bin)
    # shellcheck disable=SC2206
    send_cmd=(udp-sender "${groups[@]}" --mcast-data-address 239.77.0.10 --file "$WORK/big.bin"
      --max-bitrate "$RATE" --min-receivers 3 $UDPCAST_ARGS)
    settings="udp-sender --max-bitrate $RATE --min-receivers 3 $UDPCAST_ARGS" ;;
  *) echo "usage: tests/netlab-peer.sh norm|udpcast" >&2; exit 2 ;;
esac
head -c $((SIZE_MIB << 20)) /dev/urandom > "$WORK/big.bin"
bash "$LAB" --name "$NAME" up --clients 3 --client-loss "$LOSSES" >/dev/null
IFS=, read -r -a loss <<< "$LOSSES"
now() { python3 -c 'import time; print(f"{time.time():.6f}")'; }
for run in $(seq 1 "${RUNS:-1}"); do
  pids=()
  for c in 1 2 3; do
    rm -rf "$WORK/out$c"; mkdir -p "$WORK/out$c"
    ( bash "$LAB" --name "$NAME" exec "c$c" -- "${recv_cmd[@]/@OUT@/$WORK/out$c}" \
        > "$WORK/c$c.out" 2> "$WORK/c$c.err"
      echo $? > "$WORK/c$c.rc"; now > "$WORK/c$c.end" ) &
    pids+=($!)
  done
  sleep 1
  start=$(now)
  bash "$LAB" --name "$NAME" exec srv -- "${send_cmd[@]}" > "$WORK/srv.out" 2> "$WORK/srv.err" &
  BG_PID=$!
  for c in 1 2 3; do
    ok=yes
    if ! timeout "${TIMEOUT:-120}" tail --pid="${pids[$((c - 1))]}" -f /dev/null; then
      ok="no (not done after ${TIMEOUT:-120} s)"; pkill -f "$WORK/out$c" || true
    fi
    # normcast prints its own completion time; udp-receiver's is its exit.
    end=$(awk '/^completed/ {print $2}' "$WORK/c$c.out" 2>/dev/null)
    [ -n "$end" ] || end=$(cat "$WORK/c$c.end" 2>/dev/null || true)
    [ "$ok" != yes ] || cmp -s "$WORK/big.bin" "$WORK/out$c/big.bin" || ok="no"
    l=${loss[$((c - 1))]}
    python3 -c "
l='$l'; loss=float(l.split(':')[1] if l.startswith('ge:') else l)
ideal=$SIZE_MIB*2**20*8/($rate_bps*(1-loss))
t=float('${end:-nan}')-$start
print(f'run $run: $PEER receiver c$c loss {l}: {t:.2f} s, ratio {t/ideal:.2f}; ideal {ideal:.2f} s; file identical: $ok')"
  done
  kill "$BG_PID" 2>/dev/null || true
  wait "$BG_PID" 2>/dev/null || true
  BG_PID=
done
echo "$PEER: $settings"
