#!/usr/bin/env bash
# A `get` stopped in the middle of a large file and run again on the same
# folder. On loopback multicast, no root: `repocast serve` of one SIZE_MIB
# file at RATE, and one `repocast get` of it, sent SIGTERM (SIGNAL=KILL for
# a kill) STOP_AT seconds after it starts and run again at once with the
# same `--out`. With LOSS (emulated, seeded) the `get` receives alone;
# without, SHARE=1 runs it through the host's shared receiver (else
# `--no-share`). Prints, RUNS times for each binary in BINS, the time from
# the first run's start to the verified file, the datagrams both runs
# received (the first run's unknown when it printed no summary), and what
# the second run found.
#
#   bench/get-restart.sh                                   # 64 MiB, 5%, stopped at 2 s
#   STOP_AT=4 SIGNAL=KILL bench/get-restart.sh
#   LOSS= SHARE=1 bench/get-restart.sh
#   BINS="/tmp/old/repocast target/release/repocast" RUNS=2 bench/get-restart.sh
#   STOP_AT= bench/get-restart.sh                          # no stop, for the reference
set -euo pipefail
cd "$(dirname "$0")/.."
BINS=${BINS:-target/release/repocast}
SIZE_MIB=${SIZE_MIB:-64}
RATE=${RATE:-100M}
LOSS=${LOSS-0.05}
STOP_AT=${STOP_AT-2}
SIGNAL=${SIGNAL:-TERM}
SHARE=${SHARE:-0}
GIVE_UP=${GIVE_UP:-120}
RUNS=${RUNS:-1}
PORT=${PORT:-47960}
DATA=${DATA:-239.255.60.5:5850}
ANNOUNCE=${ANNOUNCE:-239.255.60.6:5851}
WORK=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$WORK"' EXIT
mkdir -p "$WORK/repo"
head -c $((SIZE_MIB << 20)) /dev/urandom > "$WORK/repo/big.bin"
echo "get-restart: $SIZE_MIB MiB at $RATE, loss ${LOSS:-none}, share $SHARE, SIG$SIGNAL at ${STOP_AT:-(never)} s"
n=0
for run in $(seq 1 "$RUNS"); do
  for bin in $BINS; do
    # A port of its own: the host receiver a `get` starts is that
    # server's (and that binary's), and stays 10 s after its last request.
    port=$((PORT + n)); n=$((n + 1))
    rm -rf "$WORK/out" "$WORK/repo/.repocast" && mkdir "$WORK/out"
    "$bin" serve "$WORK/repo" --rate "$RATE" --interface 127.0.0.1 --listen "127.0.0.1:$port" --no-metrics \
      --data-group "$DATA" --announce-group "$ANNOUNCE" --key "$WORK/server.key" > "$WORK/serve.log" 2>&1 &
    serve=$!
    key=""
    for _ in $(seq 1 100); do
      key=$(grep -o 'key ed25519:[0-9a-f]*' "$WORK/serve.log" | head -1 | cut -d' ' -f2 || true)
      [ -n "$key" ] && break
      sleep 0.05
    done
    args=(get --server "127.0.0.1:$port" --trust "$key" --interface 127.0.0.1 --out "$WORK/out")
    if [ -n "$LOSS" ]; then
      args+=(--emulate-loss "$LOSS")
    elif [ "$SHARE" != 1 ]; then
      args+=(--no-share)
    fi
    rm -f "$WORK"/get*.out
    t0=$(date +%s.%N)
    if [ -n "$STOP_AT" ]; then
      "$bin" "${args[@]}" --seed 1 big.bin > "$WORK/get1.out" 2> "$WORK/get1.err" &
      first=$!
      sleep "$STOP_AT"
      kill "-$SIGNAL" "$first" 2>/dev/null || true
      wait "$first" 2>/dev/null || true
    fi
    rc=0
    timeout "$GIVE_UP" "$bin" "${args[@]}" --seed 2 big.bin > "$WORK/get2.out" 2> "$WORK/get2.err" || rc=$?
    t1=$(date +%s.%N)
    kill -INT "$serve" 2>/dev/null || true; wait "$serve" 2>/dev/null || true
    cmp -s "$WORK/repo/big.bin" "$WORK/out/big.bin" && same=identical || same=MISSING
    python3 - "$bin" "$run" "$rc" "$same" "$t0" "$t1" "$WORK" "$STOP_AT" <<'PY'
import re, sys
bin_, run, rc, same, t0, t1, work, stop_at = sys.argv[1:]
def load(n):
    try:
        line = open(f"{work}/get{n}.out").read()
    except OSError:
        return None
    m = re.search(r"(\d+) datagrams", line)
    if not m:
        return None
    kept = re.search(r"(\d+) partly received blocks went on with (\d+) symbols", line)
    return {
        "datagrams": int(m.group(1)),
        "resumed": int(re.search(r"(\d+) blocks resumed", line).group(1)),
        "kept": (int(kept.group(1)), int(kept.group(2))) if kept else (0, 0),
    }
first, second = load(1), load(2)
if second is None:
    print(f"run {run} {bin_}: exit {rc}, file {same}, no summary")
    sys.exit()
dg = second["datagrams"]
if stop_at == "":
    count = f"{dg} datagrams"
elif first is None:
    count = f"datagrams unknown (no summary from the first run) + {dg}"
else:
    count = f"datagrams {first['datagrams']} + {dg} = {first['datagrams'] + dg}"
print(f"run {run} {bin_}: exit {rc}, file {same}; {float(t1) - float(t0):.3f} s from the first start, "
      f"{count}; second run: {second['kept'][0]} blocks kept ({second['kept'][1]} symbols), "
      f"{second['resumed']} resumed")
PY
  done
done
