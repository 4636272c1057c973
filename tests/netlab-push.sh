#!/usr/bin/env bash
# Push mode end to end through tests/lab/lab.sh: `repocast push` on the
# server host and 3 `repocast listen` hosts in network namespaces on a
# bridge, kernel-level multicast loss 5%, 5% and 50% on the listeners'
# links, no back channel. The pusher runs first; the listeners start
# together, mid-cycle, each pinned to the pusher's key. Checks the file
# byte for byte on every listener and prints each listener's time from
# its start to the verified file (its own `--json` elapsed_s) against the
# ideal size / (rate x (1 - its loss)) (issue 14's goal: at most 1.10 for
# every listener).
# Skips (exit 0 with a message) unless run as root with network namespaces.
#
#   tests/netlab-push.sh                      # 32 MiB at 100M, losses 0.05,0.05,0.5
#   RATE=100M SIZE_MIB=32 LOSSES=0.05,0.05,0.5 RUNS=3 tests/netlab-push.sh
#                                             # (with RUNS > 1 it ends with each
#                                             # listener's median ratio)
#   KEEP=1 tests/netlab-push.sh               # keep the logs and files
#   PUSH_ARGS='--block-symbols 4000' tests/netlab-push.sh   # more flags for push
#   SSM=1 tests/netlab-push.sh                # source-specific: groups in 232/8,
#                                             # push --source and listen --source
#                                             # the server's address
#   LISTEN_ARGS='...' tests/netlab-push.sh    # more flags for every listener
#   ADD_AT=1 tests/netlab-push.sh             # a file joins the folder 1 s into
#                                             # each run: a new catalogue version
#                                             # while the listeners are mid-file
#   SIZE_MIB=1024 TIMEOUT=300 tests/netlab-push.sh   # listeners' --timeout [60]
#   FILES=200 SIZE_MIB=8 tests/netlab-push.sh # a set of 200 files, 8 MiB in all
#   OUT_DISK=own tests/netlab-push.sh         # each listener writes to a file
#                                             # system of its own (ext4 on a
#                                             # loop device in RAM), as hosts
#                                             # do; by default all share the
#                                             # machine's disk
#   LISTEN_USER=nobody tests/netlab-push.sh   # listeners without root (their
#                                             # receive buffer then follows
#                                             # net.core.rmem_max)
set -euo pipefail
cd "$(dirname "$0")/.."
LAB=${LAB:-tests/lab/lab.sh}
RATE=${RATE:-100M}
SIZE_MIB=${SIZE_MIB:-32}
LOSSES=${LOSSES:-0.05,0.05,0.5}
RUNS=${RUNS:-1}
TIMEOUT=${TIMEOUT:-60}
CODE=${CODE:-raptorq}
NAME=rcp$$
SCRIPT=netlab-push.sh
source tests/lab/common.sh

mkdir -p "$WORK/repo"
if [ "${FILES:-1}" = 1 ]; then
  head -c $((SIZE_MIB << 20)) /dev/urandom > "$WORK/repo/big.bin"
else
  # FILES=N: a set of N files (a web site, an update set) of SIZE_MIB in
  # all, sizes spread log-uniformly over a factor of 100.
  python3 - "$WORK/repo" "$FILES" "$SIZE_MIB" <<'PY'
import os, random, sys
root, n, mib = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
r = random.Random(n)
w = [10 ** r.uniform(0, 2) for _ in range(n)]
total = mib * (1 << 20)
for i, x in enumerate(w):
    d = os.path.join(root, f"d{i % 7}")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, f"f{i:04}.bin"), "wb") as f:
        f.write(os.urandom(max(1, int(total * x / sum(w)))))
PY
fi
IFS=, read -r -a loss <<< "$LOSSES"
n=${#loss[@]}
if ! bash "$LAB" --name "$NAME" up --clients "$n" --client-loss "$LOSSES" >/dev/null 2>"$WORK/netlab.err"; then
  echo "netlab-push.sh: skipped (the lab could not be built: $(tail -n 1 "$WORK/netlab.err"))"
  exit 0
fi
"$BIN" keygen --out "$WORK/push.key" >/dev/null 2>&1
KEY="$WORK/push.key.pub"
# SSM=1: both sides name the server's address and use source-specific groups.
if [ -n "${SSM:-}" ]; then SSM_ARGS="--source 10.77.0.1 --group 232.255.47.11:4711"; fi
bash "$LAB" --name "$NAME" exec srv -- "$BIN" push "$WORK/repo" --interface eth0 --key "$WORK/push.key" \
  --metrics 10.77.0.1:4713 --rate "$RATE" --code "$CODE" ${SSM_ARGS:-} ${PUSH_ARGS:-} > "$WORK/push.log" 2>&1 &
BG_PID=$!
sleep 1.3

# The files pushed (not push's hash cache in DIR/.repocast).
bytes=$(find "$WORK/repo" -path "$WORK/repo/.repocast" -prune -o -type f -printf '%s\n' | awk '{ s += $1 } END { print s }')
rate_bps=$(lab_rate_bps "$RATE")
echo "push: $CODE, rate $RATE, $bytes bytes, listener loss $LOSSES, $RUNS run(s)"
# OUT_DISK=own: a file system per listener, so the listeners do not queue
# on one disk's journal (creating a small file costs about 0.6 ms on the
# project machine's disk, 0.04 ms on such an ext4).
own=()
lab_cleanup() {
  for d in "${own[@]}"; do
    umount "$d" 2>/dev/null || true
    img="/dev/shm/$(basename "$d")-$NAME.ext4"
    # KEEP=1: the listener's files stay in its file system's image (the
    # mount point left in WORK is empty once it is unmounted).
    if [ -n "${KEEP:-}" ]; then echo "$(basename "$d")'s files kept in $img (mount -o loop to read)"; else rm -f "$img"; fi
  done
}
if [ "${OUT_DISK:-shared}" = own ]; then
  for c in $(seq 1 "$n"); do
    img=/dev/shm/out$c-$NAME.ext4
    mkdir -p "$WORK/out$c"
    truncate -s $((SIZE_MIB * 3 + 256))M "$img"
    mkfs.ext4 -q -F "$img" && mount -o loop "$img" "$WORK/out$c" || { rm -f "$img"; echo "netlab-push.sh: OUT_DISK=own: cannot mount a file system"; exit 1; }
    own+=("$WORK/out$c")
    rmdir "$WORK/out$c/lost+found"
  done
fi
fail=0
as=()
if [ -n "${LISTEN_USER:-}" ]; then
  chmod 755 "$WORK"
  as=(setpriv --reuid="$LISTEN_USER" --regid="$(id -g "$LISTEN_USER")" --clear-groups)
fi
for run in $(seq 1 "$RUNS"); do
  steal0=$(steal_ms)
  pids=()
  for c in $(seq 1 "$n"); do
    if [ ${#own[@]} -gt 0 ]; then
      find "$WORK/out$c" -mindepth 1 -delete
      if [ -n "${LISTEN_USER:-}" ]; then chown "$LISTEN_USER" "$WORK/out$c"; fi
    else
      rm -rf "$WORK/out$c"
      if [ -n "${LISTEN_USER:-}" ]; then install -d -o "$LISTEN_USER" "$WORK/out$c"; fi
    fi
    ( bash "$LAB" --name "$NAME" exec "c$c" -- "${as[@]}" "$BIN" listen --trust "$KEY" --interface eth0 \
        --out "$WORK/out$c" --timeout "$TIMEOUT" --json ${SSM_ARGS:-} ${LISTEN_ARGS:-} > "$WORK/c$c.json" 2> "$WORK/c$c.log"
      echo $? > "$WORK/c$c.rc" ) &
    pids+=($!)
  done
  # ADD_AT=S: a small file joins the pushed folder S seconds into each
  # run, so the pusher starts a new catalogue version mid-file (about a
  # second later: its rescan waits for the folder to be quiet).
  if [ -n "${ADD_AT:-}" ]; then
    ( sleep "$ADD_AT"; head -c 2000 /dev/urandom > "$WORK/repo/added$run.bin" ) &
    pids+=($!)
  fi
  for p in "${pids[@]}"; do wait "$p"; done
  steal=$(( $(steal_ms) - steal0 ))
  for c in $(seq 1 "$n"); do
    rc=$(cat "$WORK/c$c.rc")
    ok=yes
    if [ "$rc" != 0 ] || ! diff -rq --exclude=.repocast "$WORK/repo" "$WORK/out$c" >/dev/null; then ok=NO; fail=1; fi
    drops=$(bash "$LAB" --name "$NAME" exec "c$c" -- cat /proc/net/snmp | awk '/^Udp:/ { if (h) print $6; h = 1 }' || true)
    # The listener's own time, to the millisecond (its --json summary).
    python3 - "$WORK/c$c.json" <<PY
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except (OSError, ValueError):
    r = {}
spec = '${loss[$((c-1))]}'; p = float(spec.split(':')[1] if spec.startswith('ge:') else spec); ideal = $bytes * 8 / ($rate_bps * (1 - p)); own = float(r.get("elapsed_s", 0))
print(f"run $run listener c$c loss {spec}: {own:.3f} s (start to verified), ratio {own/ideal:.3f}; ideal {ideal:.3f} s; "
      f"{r.get('datagrams', '?')} datagrams; file identical: $ok; receive-buffer drops ${drops:-?} so far; "
      f"steal $steal ms")
with open("$WORK/ratios", "a") as f:
    f.write(f"c$c {spec} {own/ideal:.3f}\n")
PY
  done
done
if [ "$RUNS" -gt 1 ]; then
  # Each listener's median over the runs (what issue 14's goal is read on).
  python3 - "$WORK/ratios" <<'PY'
import statistics, sys
by = {}
for line in open(sys.argv[1]):
    c, spec, r = line.split()
    by.setdefault((c, spec), []).append(float(r))
for (c, spec), rs in sorted(by.items()):
    print(f"listener {c} loss {spec}: median ratio {statistics.median(rs):.3f} over {len(rs)} runs "
          f"(min {min(rs):.3f}, max {max(rs):.3f})")
PY
fi
tail -n 2 "$WORK/c$n.log" | sed "s/^/  c$n: /"
exit $fail
