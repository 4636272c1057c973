#!/usr/bin/env bash
# Many requests through one host's shared receiver under a low open-file
# limit, on loopback: `repocast serve` of FILES small files in GETS
# folders, then GETS `repocast get dN/` at once, which share one host
# receiver, all under `ulimit -n NOFILE` (soft and hard). Prints each
# `get`'s exit status, the wall time, the most files the receiver held
# open, each `get`'s summary line (which says whether it went through the
# shared receiver) and any "Too many open files" or other errors.
#
#   bash bench/open-files.sh                     # 8 gets of 2,000 files, limit 300
#   NOFILE=1024 bash bench/open-files.sh
#   BIN=/path/to/old/repocast GETS=4 FILES=8000 bash bench/open-files.sh
set -uo pipefail
NOFILE=${NOFILE:-300}
GETS=${GETS:-8}
FILES=${FILES:-16000}
BIN=$(realpath "${BIN:-$(dirname "$0")/../target/release/repocast}")
ulimit -n "$NOFILE" || exit 1
echo "open-file limit: soft $(ulimit -Sn), hard $(ulimit -Hn); $GETS gets of $((FILES / GETS)) files each"
W=$(mktemp -d /tmp/open-files.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null; pkill -f "host-receiver --server 127.0.0.1:$PORT" 2>/dev/null; rm -rf "$W"' EXIT
python3 - "$W/repo" "$FILES" "$GETS" <<'PY'
import os, random, sys
root, n, gets = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
r = random.Random(1)
for i in range(n):
    d = os.path.join(root, f"d{i % gets}")
    os.makedirs(d, exist_ok=True)
    open(os.path.join(d, f"f{i}"), "wb").write(r.randbytes(r.randint(0, 4000)))
PY
PORT=$((20000 + RANDOM % 20000))
"$BIN" serve "$W/repo" --rate 200M --key "$W/s.key" --listen 127.0.0.1:$PORT --no-metrics \
    --interface 127.0.0.1 --data-group 239.255.62.1:$((PORT + 1)) \
    --announce-group 239.255.62.2:$((PORT + 2)) > "$W/serve.log" 2>&1 &
for _ in $(seq 100); do [ -f "$W/s.key.pub" ] && grep -q "requests on" "$W/serve.log" && break; sleep 0.1; done
t0=$(date +%s.%N)
pids=()
for i in $(seq 0 $((GETS - 1))); do
    "$BIN" get --server 127.0.0.1:$PORT --trust "$W/s.key.pub" --out "$W/out$i" \
        --interface 127.0.0.1 "d$i/" > "$W/get$i.log" 2>&1 &
    pids+=($!)
done
most=0
while pgrep -f "get --server 127.0.0.1:$PORT" > /dev/null; do
    for p in $(pgrep -f "host-receiver --server 127.0.0.1:$PORT"); do
        n=$(ls /proc/"$p"/fd 2>/dev/null | wc -l)
        [ "$n" -gt "$most" ] && most=$n
    done
    sleep 0.1
done
for p in "${pids[@]}"; do wait "$p"; echo -n "rc=$? "; done
echo
echo "time $(echo "$(date +%s.%N) - $t0" | bc) s, the receiver held at most $most files"
for i in $(seq 0 $((GETS - 1))); do
    tail -1 "$W/get$i.log" | sed 's/([0-9.]* MiB) //' | cut -c1-140
    diff -r "$W/repo/d$i" "$W/out$i/d$i" > /dev/null || echo "get $i: files differ or missing"
done
grep -h "FAILED\|ERROR" "$W"/get*.log | sed 's/.*: //' | sort | uniq -c | head -5
