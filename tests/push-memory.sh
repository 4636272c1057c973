#!/usr/bin/env bash
# Issue 14's memory bound, on loopback multicast (no root needed): a
# listener receiving a SIZE_MIB (default 1024) file pushed at RATE (1G)
# verifies it and keeps its peak RSS (its own getrusage, in `listen
# --json`) at most LIMIT_MIB (128). BIN=path/to/repocast tests another
# build; LISTEN_ARGS adds flags to listen (--emulate-loss 0.2), PUSH_ARGS
# to push (--spool-mib 0); KEEP=1 keeps the logs. It also prints the
# pusher's CPU seconds and peak RSS.
set -euo pipefail
cd "$(dirname "$0")/.."
SIZE_MIB=${SIZE_MIB:-1024}
RATE=${RATE:-1G}
LIMIT_MIB=${LIMIT_MIB:-128}
if [ -z "${BIN:-}" ]; then
  cargo build --release -q -p repocast-cli
  BIN=$PWD/target/release/repocast
fi
WORK=$(mktemp -d)
PUSH_PID=
cleanup() {
  [ -n "$PUSH_PID" ] && kill "$PUSH_PID" 2>/dev/null || true
  if [ -n "${KEEP:-}" ]; then echo "logs kept in $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
mkdir "$WORK/repo" "$WORK/out"
head -c $((SIZE_MIB << 20)) /dev/urandom >"$WORK/repo/big.bin"
"$BIN" keygen --out "$WORK/key" >/dev/null 2>&1
GROUP=239.255.61.1:4761
"$BIN" push "$WORK/repo" --interface 127.0.0.1 --rate "$RATE" --key "$WORK/key" \
  --group "$GROUP" --no-metrics --no-watch ${PUSH_ARGS:-} >"$WORK/push.log" 2>&1 &
PUSH_PID=$!
"$BIN" listen --interface 127.0.0.1 --group "$GROUP" --trust "$WORK/key.pub" \
  --out "$WORK/out" --timeout 60 --json ${LISTEN_ARGS:-} >"$WORK/listen.json" 2>"$WORK/listen.log" || true
echo "push-memory: pusher CPU $(ps -o times= -p "$PUSH_PID" | tr -d ' ') s, peak RSS $(awk '/^VmHWM/ { printf "%.1f", $2 / 1024 }' "/proc/$PUSH_PID/status") MiB"
cmp "$WORK/repo/big.bin" "$WORK/out/big.bin"
python3 - "$WORK/listen.json" "$LIMIT_MIB" "$SIZE_MIB" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
limit, size = int(sys.argv[2]), int(sys.argv[3])
peak = r["peak_rss_bytes"] / 2**20
print(f"push-memory: {size} MiB verified={r['verified']} in {r['elapsed_s']:.1f} s, "
      f"listener peak RSS {peak:.1f} MiB (limit {limit} MiB)")
if r["verified"] != 1 or not 0 < peak <= limit:
    sys.exit("push-memory: FAILED")
PY
