#!/usr/bin/env bash
# A satellite listener whose pusher's file changes while it is on air,
# again and again: what is left in the listener's partial folder. On
# loopback multicast, no root: `repocast push` of a folder with one
# SIZE_MIB file at RATE (a live folder), one `repocast listen --satellite`
# at emulated LOSS; every EVERY seconds, CHANGES times, the file is
# replaced by new content (an atomic rename) and another file is added
# and, at the next change, removed. Once the last content is in place the
# listener is stopped. Prints, for each binary in BINS, the bytes and
# files left under OUT/.repocast/partial and whether the file is the last
# content.
#
#   bench/listen-churn.sh
#   BINS="/tmp/old/repocast target/release/repocast" bench/listen-churn.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BINS=${BINS:-target/release/repocast}
SIZE_MIB=${SIZE_MIB:-32}
RATE=${RATE:-50M}
LOSS=${LOSS:-0.05}
CHANGES=${CHANGES:-5}
EVERY=${EVERY:-2}
GROUP=${GROUP:-239.255.60.8:5870}
WORK=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$WORK"' EXIT
echo "listen-churn: $SIZE_MIB MiB at $RATE, loss $LOSS, $CHANGES changes every $EVERY s"
for bin in $BINS; do
  rm -rf "$WORK/src" "$WORK/out" && mkdir -p "$WORK/src" "$WORK/out"
  head -c $((SIZE_MIB << 20)) /dev/urandom > "$WORK/src/big.bin"
  "$bin" keygen --out "$WORK/key" > /dev/null 2>&1 || true
  "$bin" push "$WORK/src" --rate "$RATE" --interface lo --no-metrics --key "$WORK/key" --group "$GROUP" \
    > "$WORK/push.log" 2>&1 &
  push=$!
  sleep 0.5
  "$bin" listen --satellite --interface lo --group "$GROUP" --trust "$WORK/key.pub" --out "$WORK/out" \
    --emulate-loss "$LOSS" > "$WORK/listen.log" 2>&1 &
  listen=$!
  for i in $(seq 1 "$CHANGES"); do
    sleep "$EVERY"
    head -c $((SIZE_MIB << 20)) /dev/urandom > "$WORK/new.bin"
    mv "$WORK/new.bin" "$WORK/src/big.bin"
    rm -f "$WORK/src/extra-$((i - 1)).bin"
    head -c $((SIZE_MIB << 19)) /dev/urandom > "$WORK/src/extra-$i.bin"
  done
  rm -f "$WORK/src/extra-$CHANGES.bin"
  # The last content in place (at most a minute).
  for _ in $(seq 1 600); do
    cmp -s "$WORK/src/big.bin" "$WORK/out/big.bin" && break
    sleep 0.1
  done
  cmp -s "$WORK/src/big.bin" "$WORK/out/big.bin" && same=identical || same=DIFFERENT
  kill -TERM "$listen" 2>/dev/null || true; wait "$listen" 2>/dev/null || true
  kill -INT "$push" 2>/dev/null || true; wait "$push" 2>/dev/null || true
  left=$(find "$WORK/out/.repocast/partial" -type f | wc -l)
  # On disk (the partial files are sparse until written) and as listed.
  disk=$(du -sB1 "$WORK/out/.repocast/partial" | cut -f1)
  listed=$(du -sb "$WORK/out/.repocast/partial" | cut -f1)
  echo "$bin: big.bin $same; partial folder: $left files, $((disk >> 20)) MiB on disk ($((listed >> 20)) MiB listed)"
done
