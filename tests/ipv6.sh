#!/usr/bin/env bash
# IPv6 end to end: a network namespace with a veth pair (IPv6 multicast
# needs a multicast-capable link), a server on IPv6 groups that names its
# source, and clients with 20% emulated loss fetching everything: one
# joining source-specifically (the default when the server names a source),
# one any-source (--no-ssm). Skips unless root with namespaces.
set -euo pipefail
cd "$(dirname "$0")/.."
NS=rc6$$
if [ "$(id -u)" != 0 ] || ! ip netns add "$NS" 2>/dev/null; then echo "ipv6.sh: skipped (needs root and network namespaces)"; exit 0; fi
WORK=$(mktemp -d)
cleanup() {
  for p in ${SPID:-} ${PPID1:-} ${PPID2:-}; do kill "$p" 2>/dev/null; done
  ip netns del "$NS" 2>/dev/null; rm -rf "$WORK"
}
trap cleanup EXIT
ip -n "$NS" link set lo up
ip -n "$NS" link add v0 type veth peer name v1
ip -n "$NS" link set v0 up
ip -n "$NS" link set v1 up
ip -n "$NS" -6 addr add fd00::1/64 dev v0 nodad
sleep 2 # IPv6 duplicate address detection on the new link
cargo build --release -q -p repocast-cli
BIN=$PWD/target/release/repocast
mkdir -p "$WORK/repo/sub"
head -c 3000000 /dev/urandom > "$WORK/repo/sub/a.bin"
head -c 1281 /dev/urandom > "$WORK/repo/b"
"$BIN" keygen --out "$WORK/server.key" >/dev/null 2>&1
KEY="$WORK/server.key.pub"
ip netns exec "$NS" "$BIN" serve "$WORK/repo" --key "$WORK/server.key" --interface v0 --listen '[::1]:4700' --no-metrics \
  --data-group '[ff15::4701]:4701' --announce-group '[ff15::4702]:4702' --rate 200M \
  --source fd00::1 > "$WORK/srv.log" 2>&1 &
SPID=$!
for _ in $(seq 1 50); do ip netns exec "$NS" "$BIN" ls --server '[::1]:4700' --trust "$KEY" >/dev/null 2>&1 && break; sleep 0.1; done
ip netns exec "$NS" "$BIN" get --server '[::1]:4700' --trust "$KEY" --interface v0 --out "$WORK/out" --all --emulate-loss 0.2 --idle-timeout 20
diff -r "$WORK/repo" "$WORK/out" --exclude=.repocast
echo "ipv6.sh: files identical over IPv6 multicast, source-specific join"
ip netns exec "$NS" "$BIN" get --server '[::1]:4700' --trust "$KEY" --interface v0 --out "$WORK/out2" --all --emulate-loss 0.2 --idle-timeout 20 --no-ssm
diff -r "$WORK/repo" "$WORK/out2" --exclude=.repocast
echo "ipv6.sh: files identical over IPv6 multicast, any-source join"

# Push over IPv6: any-source, then source-specific.
ip netns exec "$NS" "$BIN" push "$WORK/repo" --key "$WORK/server.key" --interface v0 --no-metrics --no-watch \
  --group '[ff15::4711]:4711' --rate 100M > "$WORK/push1.log" 2>&1 &
PPID1=$!
ip netns exec "$NS" "$BIN" listen --trust "$KEY" --interface v0 --group '[ff15::4711]:4711' --out "$WORK/out3" \
  --emulate-loss 0.2 --timeout 20 > /dev/null
diff -r "$WORK/repo" "$WORK/out3" --exclude=.repocast
echo "ipv6.sh: pushed files identical over IPv6 multicast, any-source join"
ip netns exec "$NS" "$BIN" push "$WORK/repo" --key "$WORK/server.key" --interface v0 --no-metrics --no-watch \
  --group '[ff3e::8000:4721]:4721' --source fd00::1 --rate 100M > "$WORK/push2.log" 2>&1 &
PPID2=$!
if ip netns exec "$NS" "$BIN" listen --trust "$KEY" --interface v0 --group '[ff3e::8000:4721]:4721' \
  --out "$WORK/out4" --timeout 5 > "$WORK/nosrc.log" 2>&1; then
  echo "ipv6.sh: a listener on a source-specific group without --source ran"; exit 1
fi
grep -q -- "--source" "$WORK/nosrc.log" || { cat "$WORK/nosrc.log"; exit 1; }
ip netns exec "$NS" "$BIN" listen --trust "$KEY" --interface v0 --group '[ff3e::8000:4721]:4721' --source fd00::1 \
  --out "$WORK/out4" --emulate-loss 0.2 --timeout 20 > /dev/null
diff -r "$WORK/repo" "$WORK/out4" --exclude=.repocast
echo "ipv6.sh: pushed files identical over IPv6 multicast, source-specific join"
# Naming another source, a listener hears nothing of this pusher.
if ip netns exec "$NS" "$BIN" listen --trust "$KEY" --interface v0 --group '[ff3e::8000:4721]:4721' --source fd00::2 \
  --out "$WORK/out5" --timeout 2 --json > "$WORK/other.json" 2>/dev/null; then
  echo "ipv6.sh: a listener naming another source received the files"; exit 1
fi
python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); sys.exit(r["datagrams"] != 0)' "$WORK/other.json" \
  || { echo "ipv6.sh: a listener naming another source heard the pusher"; exit 1; }
echo "ipv6.sh: a listener naming another source heard nothing"
