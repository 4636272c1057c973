#!/usr/bin/env bash
# The lab's multicast loss does what it says (tests/lab/lab.sh, mloss.bpf.c):
# 60,000 numbered multicast datagrams from the server host to three client
# hosts at 0.1 (independent), ge:0.1:8 and ge:0.3:3 (bursts), each host's
# measured loss within 0.03 of its mean and its mean run of lost datagrams
# within a quarter of the burst length asked for (1.1 for independent loss
# at 0.1). Unicast is never dropped: 5,000 datagrams to the lossiest host's
# own address all arrive.
# Skips (exit 0 with a message) unless run as root with network namespaces.
set -euo pipefail
cd "$(dirname "$0")/.."
LAB=tests/lab/lab.sh
NAME=rll$$
SCRIPT=lab-loss.sh
BIN=none # nothing to build
source tests/lab/common.sh
N=60000
if ! bash "$LAB" --name "$NAME" up --clients 3 --client-loss 0.1,ge:0.1:8,ge:0.3:3 >/dev/null 2>"$WORK/lab.err"; then
  echo "lab-loss.sh: skipped (the lab could not be built: $(tail -n 1 "$WORK/lab.err"))"
  exit 0
fi
for c in 1 2 3; do
  bash "$LAB" --name "$NAME" exec "c$c" -- python3 tests/lab/mcount.py recv $N > "$WORK/c$c.out" &
done
sleep 1
bash "$LAB" --name "$NAME" exec srv -- python3 tests/lab/mcount.py send $N
wait
fail=0
check() { # host mean burst
  local out
  out=$(cat "$WORK/c$1.out")
  if python3 - "$out" "$2" "$3" <<'PY'
import sys
f = sys.argv[1].split()
lost, mean_burst = float(f[1]), float(f[5])
want, burst = float(sys.argv[2]), float(sys.argv[3])
sys.exit(0 if abs(lost - want) <= 0.03 and abs(mean_burst - burst) <= burst / 4 else 1)
PY
  then echo "c$1 ($2, bursts of $3): $out: ok"
  else echo "c$1 ($2, bursts of $3): $out: WRONG"; fail=1
  fi
}
check 1 0.1 1.11
check 2 0.1 8
check 3 0.3 3
bash "$LAB" --name "$NAME" exec c3 -- python3 tests/lab/mcount.py recv 5000 10.77.0.13 > "$WORK/uni.out" &
sleep 1
bash "$LAB" --name "$NAME" exec srv -- python3 tests/lab/mcount.py send 5000 10.77.0.13
wait
if grep -q "^lost 0.0000 " "$WORK/uni.out"; then echo "c3, unicast: $(cat "$WORK/uni.out"): ok"
else echo "c3, unicast: $(cat "$WORK/uni.out"): WRONG (unicast must pass)"; fail=1
fi
exit $fail
