#!/usr/bin/env bash
# End-to-end through tests/lab/lab.sh: a server and 3 clients in network
# namespaces on a bridge, kernel-level multicast loss 5%, 5% and 50%
# on the clients' links. Serves a 32 MiB file plus small ones, fetches them
# all on every client, checks the files byte for byte, and prints each
# client's completion time against the ideal size / (rate x (1 - loss)).
# Skips (exit 0 with a message) unless run as root with network namespaces.
#
#   tests/netlab.sh                 # defaults below
#   SCHEME="FEC(0.01R)+R(0)" RATE=100M SIZE_MIB=32 tests/netlab.sh
#   BIN=/tmp/old/repocast LOSSES=0.05,0.05,0.05 tests/netlab.sh
#   KEEP=1 tests/netlab.sh          # keep the logs and files
#   PCAP=/tmp/data.pcap tests/netlab.sh   # record the data channel (tcpdump)
#   GET_ARGS=--no-share tests/netlab.sh   # more flags for get
#   SERVE_ARGS='--code rs' tests/netlab.sh   # more flags for serve
#   SMALL_FILES=0 tests/netlab.sh   # the big file alone (each client's
#                                   # time is then that file's)
set -euo pipefail
cd "$(dirname "$0")/.."
LAB=${LAB:-tests/lab/lab.sh}
SCHEME=${SCHEME:-"FEC(maxloss+0.02)+R(inf)+notify"}
RATE=${RATE:-100M}
SIZE_MIB=${SIZE_MIB:-32}
LOSSES=${LOSSES:-0.05,0.05,0.5}
NAME=rcl$$
SCRIPT=netlab.sh
source tests/lab/common.sh

mkdir -p "$WORK/repo/docs"
head -c $((SIZE_MIB << 20)) /dev/urandom > "$WORK/repo/big.bin"
if [ "${SMALL_FILES:-1}" != 0 ]; then
  for i in 1 2 3 4 5; do head -c $((i * 37000)) /dev/urandom > "$WORK/repo/docs/f$i"; done
  : > "$WORK/repo/docs/empty"
fi

if ! bash "$LAB" --name "$NAME" up --clients 3 --client-loss "$LOSSES" >/dev/null 2>"$WORK/netlab.err"; then
  echo "netlab.sh: skipped (the lab could not be built: $(tail -n 1 "$WORK/netlab.err"))"
  exit 0
fi
# The server's key made here, pinned by the clients.
"$BIN" keygen --out "$WORK/server.key" >/dev/null 2>&1
KEY="$WORK/server.key.pub"
bash "$LAB" --name "$NAME" exec srv -- "$BIN" serve "$WORK/repo" --interface eth0 --key "$WORK/server.key" \
  --listen 10.77.0.1:4700 --metrics 10.77.0.1:4703 --rate "$RATE" --scheme "$SCHEME" ${SERVE_ARGS:-} > "$WORK/server.log" 2>&1 &
BG_PID=$!
for _ in $(seq 1 100); do
  bash "$LAB" --name "$NAME" exec c1 -- "$BIN" ls --server 10.77.0.1 --trust "$KEY" >/dev/null 2>&1 && break
  sleep 0.1
done

# PCAP=file records the data channel on the server's link (headers only).
if [ -n "${PCAP:-}" ]; then
  bash "$LAB" --name "$NAME" exec srv -- tcpdump -i eth0 -s 96 -w "$PCAP" udp port 4701 >/dev/null 2>&1 &
  PCAP_PID=$!
  sleep 0.5
fi
IFS=, read -r -a loss <<< "$LOSSES"
steal0=$(steal_ms)
pids=()
for c in 1 2 3; do
  ( start=$(date +%s.%N)
    bash "$LAB" --name "$NAME" exec "c$c" -- "$BIN" get --server 10.77.0.1 --trust "$KEY" --interface eth0 \
      --out "$WORK/out$c" --all ${GET_ARGS:-} > "$WORK/c$c.log" 2>&1
    echo $? > "$WORK/c$c.rc"
    end=$(date +%s.%N)
    echo "$start $end" > "$WORK/c$c.time" ) &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
steal1=$(steal_ms)
if [ -n "${PCAP_PID:-}" ]; then sleep 0.2; kill "$PCAP_PID" 2>/dev/null || true; wait "$PCAP_PID" 2>/dev/null || true; fi

bytes=$(du -sb --apparent-size "$WORK/repo" | cut -f1)
rate_bps=$("$BIN" --version >/dev/null; lab_rate_bps "$RATE")
fail=0
echo "scheme $SCHEME, rate $RATE, $bytes bytes, client loss $LOSSES"
for c in 1 2 3; do
  rc=$(cat "$WORK/c$c.rc")
  read -r start end < "$WORK/c$c.time"
  ok=yes
  if [ "$rc" != 0 ] || ! diff -r "$WORK/repo" "$WORK/out$c" --exclude=.repocast >/dev/null; then ok=NO; fail=1; fi
  own=$(grep -oE 'verified \([0-9.]+ MiB\) in [0-9.]+ s' "$WORK/c$c.log" | grep -oE '[0-9.]+ s$' | tr -d ' s')
  python3 -c "
t=$end-$start; spec='${loss[$((c-1))]}'; p=float(spec.split(':')[1] if spec.startswith('ge:') else spec); ideal=$bytes*8/($rate_bps*(1-p)); own=float('${own:-0}' or 0)
print(f'client c$c loss {spec}: {own:.2f} s (connect to last file verified), ratio {own/ideal:.2f}; with process start-up {t:.2f} s, ratio {t/ideal:.2f}; ideal {ideal:.2f} s; files identical: $ok')"
done
tail -n 3 "$WORK/c3.log" | sed 's/^/  c3: /'
# Encoders prepared off the server's pump, and how many in time.
jobs=$(bash "$LAB" --name "$NAME" exec srv -- curl -s --max-time 2 http://10.77.0.1:4703/metrics 2>/dev/null \
  | awk '/^repocast_encoder_jobs/ {sub("repocast_encoder_jobs_", ""); sub("repocast_encoder_", ""); printf "%s ", $0}' || true)
echo "  server encoder jobs: ${jobs:-unknown}"
echo "  CPU time the hypervisor took from this machine during the run (steal): $((steal1 - steal0)) ms"
exit $fail
