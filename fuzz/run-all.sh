#!/usr/bin/env bash
# Runs every fuzz target for SECONDS (default 60) from its corpus in
# fuzz/corpus/, with cargo-fuzz (installed from crates.io if missing) on
# the machine's nightly toolchain (or, without one, stable with
# RUSTC_BOOTSTRAP=1). Exits non-zero on the first crash; the crashing
# input is in fuzz/artifacts/TARGET/.
set -euo pipefail
cd "$(dirname "$0")"
secs="${1:-60}"
command -v cargo-fuzz >/dev/null || cargo install cargo-fuzz --locked
if cargo +nightly --version >/dev/null 2>&1; then
    fuzz=(cargo +nightly fuzz)
else
    export RUSTC_BOOTSTRAP=1
    fuzz=(cargo fuzz)
fi
targets=$("${fuzz[@]}" list)
"${fuzz[@]}" build
for t in $targets; do
    mkdir -p "corpus/$t"
    echo "fuzz: $t for ${secs}s"
    log="target/fuzz-$t.log"
    mkdir -p target
    if ! "${fuzz[@]}" run "$t" "corpus/$t" -- -max_total_time="$secs" >"$log" 2>&1; then
        tail -n 60 "$log"
        echo "fuzz: $t crashed (input in fuzz/artifacts/$t/)"
        exit 1
    fi
    grep -E "^Done" "$log" || true
done
echo "fuzz: $(echo $targets | wc -w) targets ran ${secs}s each, no crash"
