#!/usr/bin/env bash
# A listener stopped in the middle of a large file and run again on the
# same folder (issue 14: "resume: killed and restarted, it keeps every
# block it had verified"). On loopback multicast, no root: `repocast push`
# of one SIZE_MIB file at RATE, and one `repocast listen` of it at emulated
# LOSS, started half a second later, sent SIGTERM (SIGNAL=KILL for a kill)
# STOP_AT seconds after it starts and run again at once with the same
# `--out`. Prints, RUNS times for each binary in BINS, the time from the
# first run's start to the verified file, the datagrams both runs received
# (the first run's unknown after a kill), and what the second run found.
#
#   bench/listen-restart.sh                                   # 64 MiB, 5%, stopped at 2 s
#   STOP_AT=4 SIGNAL=KILL bench/listen-restart.sh
#   BINS="/tmp/old/repocast target/release/repocast" RUNS=2 bench/listen-restart.sh
#   STOP_AT= bench/listen-restart.sh                          # no stop, for the reference
set -euo pipefail
cd "$(dirname "$0")/.."
BINS=${BINS:-target/release/repocast}
SIZE_MIB=${SIZE_MIB:-64}
RATE=${RATE:-100M}
LOSS=${LOSS:-0.05}
STOP_AT=${STOP_AT-2}
SIGNAL=${SIGNAL:-TERM}
GIVE_UP=${GIVE_UP:-60}
RUNS=${RUNS:-1}
GROUP=${GROUP:-239.255.60.2:5810}
WORK=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$WORK"' EXIT
mkdir -p "$WORK/src"
head -c $((SIZE_MIB << 20)) /dev/urandom > "$WORK/src/big.bin"
echo "listen-restart: $SIZE_MIB MiB at $RATE, listener loss $LOSS, SIG$SIGNAL at ${STOP_AT:-(never)} s"
for run in $(seq 1 "$RUNS"); do
  for bin in $BINS; do
    rm -rf "$WORK/out" "$WORK/src/.repocast" && mkdir "$WORK/out"
    "$bin" keygen --out "$WORK/key" > /dev/null 2>&1 || true
    "$bin" push "$WORK/src" --rate "$RATE" --interface lo --no-metrics --key "$WORK/key" --group "$GROUP" \
      > "$WORK/push.log" 2>&1 &
    push=$!
    sleep 0.5
    args=(listen --interface lo --group "$GROUP" --out "$WORK/out" --timeout 60 --json --emulate-loss "$LOSS")
    rm -f "$WORK"/listen*.json
    t0=$(date +%s.%N)
    if [ -n "$STOP_AT" ]; then
      "$bin" "${args[@]}" --seed 1 big.bin > "$WORK/listen1.json" 2> "$WORK/listen1.err" &
      first=$!
      sleep "$STOP_AT"
      kill "-$SIGNAL" "$first" 2>/dev/null || true
      wait "$first" 2>/dev/null || true
    fi
    rc=0
    timeout "$GIVE_UP" "$bin" "${args[@]}" --seed 2 big.bin > "$WORK/listen2.json" 2> "$WORK/listen2.err" || rc=$?
    t1=$(date +%s.%N)
    kill -INT "$push" 2>/dev/null || true; wait "$push" 2>/dev/null || true
    cmp -s "$WORK/src/big.bin" "$WORK/out/big.bin" && same=identical || same=MISSING
    python3 - "$bin" "$run" "$rc" "$same" "$t0" "$t1" "$WORK" "$STOP_AT" <<'PY'
import json, sys
bin_, run, rc, same, t0, t1, work, stop_at = sys.argv[1:]
def load(n):
    try:
        return json.load(open(f"{work}/listen{n}.json"))
    except (OSError, ValueError):
        return None
first, second = load(1), load(2)
if second is None:
    print(f"run {run} {bin_}: exit {rc}, file {same}, no summary")
    sys.exit()
dg = second["datagrams"]
if stop_at == "":
    count = f"{dg} datagrams"
elif first is None:
    count = f"datagrams unknown (first run killed) + {dg}"
else:
    count = f"datagrams {first['datagrams']} + {dg} = {first['datagrams'] + dg}"
print(f"run {run} {bin_}: exit {rc}, file {same}; {float(t1) - float(t0):.3f} s from the first start, "
      f"{count}; second run: "
      f"{second.get('kept_blocks', 'no count of')} blocks kept ({second.get('kept_symbols', '-')} symbols), "
      f"{second['resumed_blocks']} resumed")
PY
  done
done
