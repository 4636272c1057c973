#!/usr/bin/env bash
# A request for every file of a repository of many small files (a source
# tree), on loopback: `repocast serve` + one `repocast get --all`, then the
# same files from nginx with one `curl` fetching them all (-Z, 50 at a
# time). Needs nginx (apt-get install nginx-light) and curl. Prints one line per system: wall time, CPU
# seconds of the server and the client, the server's peak RSS.
#
#   bash bench/many-files.sh                 # 20,000 files of 0-4,000 bytes
#   FILES=5000 MAX_BYTES=64000 DIRS=50 SEED=2 RATE=100M bash bench/many-files.sh
#   BIN=/path/to/old/repocast bash bench/many-files.sh   # another build
#   SYSTEMS=repocast bash bench/many-files.sh
#   sudo FRESH_FS=1 bash bench/many-files.sh   # each client writes to a freshly made ext4
#
# FRESH_FS=1 (root) puts each client's output folder on an ext4 made for
# it (a loop image on the disk under /var/tmp), so every run meets the
# same filesystem: a folder where many files were made and deleted before
# makes file creation slower and noisier, and a loop image's fsync is
# dearer than the bare disk's (closer to a disk that honours it).
set -euo pipefail
FILES=${FILES:-20000}
MAX_BYTES=${MAX_BYTES:-4000}
DIRS=${DIRS:-20}
SEED=${SEED:-1}
RATE=${RATE:-200M}
LOSS=${LOSS:-0}
SYSTEMS=${SYSTEMS:-repocast,http}
BIN=${BIN:-$(dirname "$0")/../target/release/repocast}
BIN=$(realpath "$BIN")
W=$(mktemp -d /tmp/many-files.XXXXXX)
chmod 755 "$W" # nginx's workers read it as another user
FS=$W/fs
trap 'kill -9 $(jobs -p) 2>/dev/null || true; umount "$FS" 2>/dev/null || true; rm -f "/var/tmp/$(basename "$W").img"; [ -n "${KEEP:-}" ] || rm -rf "$W"' EXIT

# The folder a client writes `$1` into: on a fresh ext4 with FRESH_FS=1.
out_dir() {
    if [ -z "${FRESH_FS:-}" ]; then
        echo "$W/$1"
        return
    fi
    umount "$FS" 2>/dev/null || true
    rm -f "/var/tmp/$(basename "$W").img"
    fallocate -l 3G "/var/tmp/$(basename "$W").img"
    mkfs.ext4 -q -F "/var/tmp/$(basename "$W").img"
    mkdir -p "$FS"
    mount -o loop "/var/tmp/$(basename "$W").img" "$FS"
    chmod 755 "$FS"
    echo "$FS/$1"
}
PORT=$((20000 + RANDOM % 20000))

python3 - "$W/repo" "$FILES" "$MAX_BYTES" "$DIRS" "$SEED" <<'EOF'
import os, random, sys
root, n, mx, dirs, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
r = random.Random(seed)
for i in range(n):
    d = os.path.join(root, f"d{i % dirs}")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, f"f{i}"), "wb") as f:
        f.write(r.randbytes(r.randint(0, mx)))
EOF
echo "$FILES files, $(du -sb "$W/repo" | cut -f1) bytes in $DIRS folders (seed $SEED), rate $RATE, loss $LOSS"

cpu() { # user+system seconds of a finished process, from /usr/bin/time's file
    tail -1 "$1" | awk '{print $1 + $2}'
}

if [[ $SYSTEMS == *repocast* ]]; then
    /usr/bin/time -f "%U %S %M" -o "$W/serve.time" "$BIN" serve "$W/repo" --rate "$RATE" \
        --key "$W/s.key" --listen 127.0.0.1:$PORT --no-metrics --interface 127.0.0.1 \
        --data-group 239.255.61.1:$((PORT + 1)) --announce-group 239.255.61.2:$((PORT + 2)) \
        > "$W/serve.log" 2>&1 &
    SRV=$!
    for _ in $(seq 100); do [ -f "$W/s.key.pub" ] && grep -q "requests on" "$W/serve.log" && break; sleep 0.1; done
    OUT=$(out_dir out)
    t0=$(date +%s.%N)
    /usr/bin/time -f "%U %S %M" -o "$W/get.time" "$BIN" get --server 127.0.0.1:$PORT \
        --trust "$W/s.key.pub" --out "$OUT" --all --no-share --interface 127.0.0.1 \
        --emulate-loss "$LOSS" > "$W/get.log" 2>&1 || true
    t1=$(date +%s.%N)
    pkill -INT -P $SRV || true; wait $SRV || true
    ok=$(diff -r "$W/repo" "$OUT" --exclude=.repocast > /dev/null && echo yes || echo NO)
    printf "repocast  %7.2f s  server %6.2f CPU s, peak RSS %4d MiB  client %6.2f CPU s  identical: %s  (%s)\n" \
        "$(echo "$t1 - $t0" | bc)" "$(cpu "$W/serve.time")" $(($(tail -1 "$W/serve.time" | cut -d" " -f3) / 1024)) \
        "$(cpu "$W/get.time")" "$ok" "$(grep -E 'items verified' "$W/get.log" | head -1 | cut -c1-60)"
fi

if [[ $SYSTEMS == *http* ]]; then
    # nginx (Debian's nginx-light), as bench/requests.py runs it.
    HP=$((PORT + 3))
    cat > "$W/nginx.conf" <<CONF
worker_processes 2;
pid $W/nginx.pid;
error_log $W/nginx.err;
events { worker_connections 4096; }
http { access_log off; sendfile on; tcp_nopush on; keepalive_timeout 600s;
  server { listen 127.0.0.1:$HP; root $W/repo; } }
daemon off;
CONF
    /usr/bin/time -f "%U %S %M" -o "$W/http.time" nginx -c "$W/nginx.conf" > /dev/null 2>&1 &
    HTTP=$!
    for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$HP/" && break; sleep 0.1; done
    HOUT=$(out_dir http-out)
    (cd "$W/repo" && find . -type f | sed 's|^\./||') |
        awk -v p=$HP -v o="$HOUT" '{print "url = \"http://127.0.0.1:" p "/" $0 "\"\noutput = \"" o "/" $0 "\""}' > "$W/curl.cfg"
    t0=$(date +%s.%N)
    /usr/bin/time -f "%U %S %M" -o "$W/curl.time" curl -sSf --no-progress-meter -Z --parallel-max 50 --create-dirs \
        -K "$W/curl.cfg" > /dev/null 2> "$W/curl.err" || true
    t1=$(date +%s.%N)
    kill -QUIT "$(cat "$W/nginx.pid")" 2>/dev/null || true; wait $HTTP || true
    ok=$(diff -r "$W/repo" "$HOUT" > /dev/null && echo yes || echo NO)
    # nginx's workers are its master's children: time counts them.
    printf "http      %7.2f s  server %6.2f CPU s, peak RSS %4d MiB  client %6.2f CPU s  identical: %s\n" \
        "$(echo "$t1 - $t0" | bc)" "$(cpu "$W/http.time")" $(($(tail -1 "$W/http.time" | cut -d" " -f3) / 1024)) \
        "$(cpu "$W/curl.time")" "$ok"
fi
