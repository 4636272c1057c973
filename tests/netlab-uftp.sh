#!/usr/bin/env bash
# UFTP (apt-get install uftp) in the same netlab setup as tests/netlab.sh:
# one 32 MiB file at 100 Mbit/s to 3 clients with kernel-level loss LOSSES.
# For the side-by-side in docs/benchmarks.md. Needs root.
set -u
LAB="$(dirname "$0")/lab/lab.sh"
LOSSES=${LOSSES:-0.05,0.05,0.5}
N=uf$$
W=$(mktemp -d)
head -c $((32 << 20)) /dev/urandom > $W/big.bin
bash "$LAB" --name $N up --clients 3 --client-loss $LOSSES >/dev/null
for c in 1 2 3; do
  mkdir -p $W/out$c $W/tmp$c
  bash "$LAB" --name $N exec c$c -- uftpd -I eth0 -D $W/out$c -T $W/tmp$c -L $W/uftpd$c.log -P $W/uftpd$c.pid
done
sleep 1
start=$(date +%s.%N)
bash "$LAB" --name $N exec srv -- uftp -R 100000 -I eth0 -Y none -L $W/uftp.log $W/big.bin
rc=$?
end=$(date +%s.%N)
for c in 1 2 3; do cmp -s $W/big.bin $W/out$c/big.bin && echo "c$c identical" || echo "c$c DIFFERS/missing"; done
python3 -c "t=$end-$start; print(f'uftp rc $rc: {t:.2f} s; ideal 5%: {32*2**20*8/(1e8*0.95):.2f} s -> ratio {t/(32*2**20*8/(1e8*0.95)):.2f}; ideal 50%: {32*2**20*8/(1e8*0.5):.2f} s -> ratio {t/(32*2**20*8/(1e8*0.5)):.2f}')"
grep -iE "transfer time|throughput|nak|Late" $W/uftp.log | tail -5
for c in 1 2 3; do kill $(cat $W/uftpd$c.pid) 2>/dev/null; done
bash "$LAB" --name $N down
rm -rf $W
