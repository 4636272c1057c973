#!/usr/bin/env bash
# A live folder changing while a listener is in the middle of a large file
# (issue 14: "files added, changed or removed in DIR while it runs produce
# a new catalogue version"). On loopback multicast, no root: `repocast
# push` of a folder holding one SIZE_MIB file at RATE, and one `repocast
# listen` of that file at emulated LOSS, started half a second later. A
# small file joins the folder at each of the times in CHANGES (seconds
# after the listener starts; the pusher starts a new version about a
# second later, once the folder is quiet), or, with EVERY=S, every S
# seconds until the listener ends (given up after GIVE_UP seconds). Prints
# the listener's time, datagrams and the blocks it carried over to newer
# versions, RUNS times, for each binary in BINS. With RESTART_AT=S, no file
# is added: the pusher is stopped (SIGTERM) S seconds after the listener
# starts and run again on the folder at once (an upgrade, a restart).
#
#   bench/push-versions.sh                                  # 64 MiB, 5%, changes at 1 s and 3 s
#   CHANGES= bench/push-versions.sh                         # the same without a change
#   EVERY=2 bench/push-versions.sh                          # a change every 2 s
#   BINS="/tmp/old/repocast target/release/repocast" RUNS=2 bench/push-versions.sh
#   RESTART_AT=2 bench/push-versions.sh                     # the pusher run again at 2 s
set -euo pipefail
cd "$(dirname "$0")/.."
BINS=${BINS:-target/release/repocast}
SIZE_MIB=${SIZE_MIB:-64}
RATE=${RATE:-100M}
LOSS=${LOSS:-0.05}
CHANGES=${CHANGES-1 3}
EVERY=${EVERY:-}
GIVE_UP=${GIVE_UP:-30}
RUNS=${RUNS:-1}
GROUP=${GROUP:-239.255.60.1:5800}
RESTART_AT=${RESTART_AT:-}
if [ -n "$RESTART_AT" ]; then CHANGES=""; EVERY=""; fi
WORK=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$WORK"' EXIT
mkdir -p "$WORK/src"
head -c $((SIZE_MIB << 20)) /dev/urandom > "$WORK/src/big.bin"
if [ -n "$EVERY" ]; then when="every $EVERY s"; else when="at ${CHANGES:-(none)} s"; fi
if [ -n "$RESTART_AT" ]; then when="$when, the pusher run again at $RESTART_AT s"; fi
echo "push-versions: $SIZE_MIB MiB at $RATE, listener loss $LOSS, a file added $when"
for run in $(seq 1 "$RUNS"); do
  for bin in $BINS; do
    rm -rf "$WORK/out" && mkdir "$WORK/out" && rm -f "$WORK"/src/added*
    "$bin" keygen --out "$WORK/key" > /dev/null 2>&1 || true
    rm -rf "$WORK/src/.repocast" "$WORK/push.pid"
    start_push() {
      "$bin" push "$WORK/src" --rate "$RATE" --interface lo --no-metrics --key "$WORK/key" --group "$GROUP" \
        >> "$WORK/push.log" 2>&1 &
    }
    : > "$WORK/push.log"
    start_push
    push=$!
    sleep 0.5
    timeout "$GIVE_UP" "$bin" listen --interface lo --group "$GROUP" --out "$WORK/out" --timeout 60 --json \
      --emulate-loss "$LOSS" big.bin > "$WORK/listen.json" 2> "$WORK/listen.err" &
    listener=$!
    (
      if [ -n "$RESTART_AT" ]; then
        sleep "$RESTART_AT"
        kill -TERM "$push"
        while kill -0 "$push" 2>/dev/null; do sleep 0.02; done
        start_push
        echo $! > "$WORK/push.pid"
      elif [ -n "$EVERY" ]; then
        i=0
        while sleep "$EVERY" && kill -0 "$listener" 2>/dev/null; do
          i=$((i + 1)); echo "$i" > "$WORK/src/added$i.txt"
        done
      else
        t0=0
        for t in $CHANGES; do
          sleep "$(python3 -c "print(max(0.0, $t - $t0))")"; t0=$t
          echo "$t" > "$WORK/src/added$t.txt"
        done
      fi
    ) &
    changer=$!
    rc=0; wait "$listener" || rc=$?
    kill "$changer" 2>/dev/null || true; wait "$changer" 2>/dev/null || true
    if [ -f "$WORK/push.pid" ]; then kill -INT "$(cat "$WORK/push.pid")" 2>/dev/null || true; sleep 0.3; fi
    kill -INT "$push" 2>/dev/null || true; wait "$push" 2>/dev/null || true
    cmp -s "$WORK/src/big.bin" "$WORK/out/big.bin" && same=identical || same=MISSING
    versions=$(grep -c 'catalogue version' "$WORK/listen.err" || true)
    python3 - "$bin" "$run" "$rc" "$same" "$versions" "$WORK/listen.json" "$GIVE_UP" <<'PY'
import json, sys
bin_, run, rc, same, versions, path, give_up = sys.argv[1:]
try:
    d = json.load(open(path))
    got = (f"{d['elapsed_s']:.3f} s, {d['datagrams']} datagrams, "
           f"{d.get('carried_blocks', 'no count of')} blocks carried")
except (OSError, ValueError, KeyError):
    got = f"not done after {give_up} s"
print(f"run {run} {bin_}: exit {rc}, file {same}, {versions} versions taken; {got}")
PY
  done
done
