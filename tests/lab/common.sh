# Shared preamble of the lab tests (tests/netlab.sh, tests/netlab-push.sh),
# sourced after `cd` to the project root with SCRIPT, NAME and LAB set:
# skips (exit 0 with a message) unless root with network namespaces,
# builds the release binary unless BIN is given, makes WORK and a cleanup
# trap that kills BG_PID (the server or pusher), runs lab_cleanup if the
# script defines one, takes the lab down and removes WORK unless KEEP is
# set. lab_rate_bps turns 100M into bits/s. steal_ms prints the CPU time
# the machine's hypervisor has taken from it so far (/proc/stat's steal,
# all CPUs, in ms): two readings around a run say how much of the run the
# machine did not have, which moves the lab's ratios (docs/benchmarks.md,
# session 45).

if [ "$(id -u)" != 0 ]; then echo "$SCRIPT: skipped (needs root)"; exit 0; fi
if ! ip netns add "${NAME}probe" 2>/dev/null; then echo "$SCRIPT: skipped (no network namespaces)"; exit 0; fi
ip netns del "${NAME}probe"

# BIN=path/to/repocast compares another build (nothing is built then).
if [ -z "${BIN:-}" ]; then
  cargo build --release -q -p repocast-cli
  BIN=$PWD/target/release/repocast
fi
WORK=$(mktemp -d)
cleanup() {
  [ -n "${BG_PID:-}" ] && kill "$BG_PID" 2>/dev/null || true
  if declare -F lab_cleanup >/dev/null; then lab_cleanup; fi
  bash "$LAB" --name "$NAME" down >/dev/null 2>&1 || true
  if [ -n "${KEEP:-}" ]; then echo "logs kept in $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

lab_rate_bps() {
  python3 -c "
s='$1'; m={'k':1e3,'K':1e3,'m':1e6,'M':1e6,'g':1e9,'G':1e9}
print(float(s[:-1])*m[s[-1]] if s[-1] in m else float(s))"
}

steal_ms() {
  awk -v hz="$(getconf CLK_TCK)" '/^cpu / { printf "%d\n", $9 * 1000 / hz }' /proc/stat
}
