#!/usr/bin/env python3
"""Issue 12's request-workload benchmark on the project's network lab.

One seeded workload (the same generator as the simulator's:
`cargo run --release -p repocast-sim --example requests -- plan ...`) is
replayed through tests/lab/lab.sh (a server and HOSTS client hosts on a
bridge, multicast loss per host, a tbf cap on the server's link) against
each system in one run:

  repocast  `repocast serve` with its defaults (or --serve-args); one `repocast get --out DIR
            FILES...` per request, started at its arrival time on its host
            (the `get`s of a host share its receiver, as `get` does by
            default; its CPU counts with the receivers')
  http      nginx (Debian) serving the same folder; one `curl` per request
            fetching its files over one connection
  uftp      UFTP 4.10 (Debian): one session per request, `uftp` on the
            server sending the request's files to that request's own
            `uftpd` on its host (started before the run on a port of its
            own, so sessions never mix), TFMCC congestion control with the
            link rate as its ceiling (sessions share the link; without it
            concurrent sessions each at the link rate overrun the cap)

Per request: delay from its start to the last file on disk, checked
byte-for-byte against the original afterwards. Per system: ok, mean,
median, p95, max, bytes on the server's link, CPU seconds of the server
and of the receivers, and the CPU seconds the hypervisor took from the
machine during the run (steal: runs compare only at similar steal).
Writes OUT/summary.md and OUT/<system>.csv (per
request: host, arrival, delay, ok, the command's exit code), and the
fluid references computed from the same workload. With --runs N every
system runs N times (alternating) and the table gives each figure's median
over the runs; OUT/delays.svg charts the delay distribution (CDF) per
system, all runs pooled.

    sudo python3 bench/requests.py [--hosts 8] [--loss 0.05[,..]] [--rate 100]
        [--burst 64kb] [--seed 1] [--duration 30] [--gap 1] [--files 40] [--sizes 262144-8388608]
        [--zipf 1] [--request-files 1-3] [--runs 1] [--systems repocast,http,uftp]
        [--out results/requests] [--timeline] [--logs] [--outputs ext4|tmpfs|shared]
        [--serve-args='--batch-hold 0'] [--get-args=--no-share]

--timeline also writes OUT/<system>[-RUN]-timeline.csv: every 0.5 s the
server link's rate, the receivers running, the machine's CPU use and, for
repocast, the server's queue, clients and counters (its /metrics).

--logs keeps every process's standard error in OUT/<system>[-RUN]-logs/
(server.log, K.log for request K, and cN-receiver.log for host N's shared
receiver); set REPOCAST_LOG (for example repocast_net=debug) to choose what
repocast writes there.

--outputs picks the file system the received files go to, made afresh for
every system's run: `ext4` (the default) is a new ext4 with its journal,
as `mkfs.ext4` makes it, on a loop device (a sparse file in the run's
folder); `tmpfs` a tmpfs (`--tmpfs` says the same); `shared` the run's
folder on the disk the lab's hosts share. A file system used by the run
before carries its history into the next: on a disk without a journal
(this machine's), ext4 skips over inodes deleted in the last 5-300 s each
time it makes a file, so after one system's run deleted 26,000 small
files, making files took over a third of all CPU samples in the next
run (`perf`: `ext4_create`, `recently_deleted`), doubling that run's
delays, whichever system it was.

Needs root, iproute2, clang (the lab's loss filter), nginx, curl and uftp
(apt-get install -y nginx-light curl clang uftp), and a release build
(`cargo build --release -p repocast-cli && cargo build --release -p
repocast-sim --examples`: with `--examples` cargo builds only examples).
It warns when the binary is older than the sources.
"""
import argparse, ctypes, os, re, resource, shutil, signal, subprocess, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
LAB = os.path.join(ROOT, "tests", "lab", "lab.sh")
SRV = "10.77.0.1"
UFTP_PORT = 20000


def stale(binary):
    """Warns when `binary` is older than a source file of the workspace
    (a bench of the wrong build looks like a result)."""
    if not os.path.exists(binary):
        sys.exit(f"requests.py: {binary} not found: cargo build --release -p repocast-cli")
    built = os.path.getmtime(binary)
    for d, _, names in os.walk(os.path.join(ROOT, "crates")):
        for n in names:
            if n.endswith(".rs") and os.path.getmtime(os.path.join(d, n)) > built:
                print(f"requests.py: warning: {binary} is older than {os.path.join(d, n)}", file=sys.stderr)
                return


def sh(*args, **kw):
    r = subprocess.run(list(args), capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"requests.py: `{' '.join(args)}` exited {r.returncode}: {r.stderr.strip()}")
    return r


def lab(name, *args, **kw):
    return ["bash", LAB, "--name", name, *args]


def in_host(name, host, *argv):
    """`argv` run in a lab host's namespace: what `lab.sh exec` does (it
    names them NAME-HOST), without a shell's start-up on the shared CPU for
    every request and sample. The command keeps the Popen's pid."""
    return ["ip", "netns", "exec", f"{name}-{host}", *argv]


def rcvbuf_drops(name, hosts):
    """UDP datagrams the client hosts' kernels dropped for a full receive
    buffer (each namespace's /proc/net/snmp, Udp RcvbufErrors): a
    receiver that fell behind, not loss on the link."""
    total = 0
    for h in range(1, hosts + 1):
        out = subprocess.run(in_host(name, f"c{h}", "cat", "/proc/net/snmp"),
                             capture_output=True, text=True).stdout.splitlines()
        udp = [l.split() for l in out if l.startswith("Udp:")]
        if len(udp) >= 2 and "RcvbufErrors" in udp[0]:
            total += int(udp[1][udp[0].index("RcvbufErrors")])
    return total


def plan(bin_dir, seed, loss, hosts, rate, duration, shape):
    out = sh(os.path.join(bin_dir, "examples", "requests"), "plan", str(seed), loss,
             str(hosts), str(rate), str(duration), *shape).stdout
    files, requests, fluid = {}, [], {}
    for line in out.splitlines():
        f = line.split("\t")
        if f[0] == "file":
            files[int(f[1])] = int(f[2])
        elif f[0] == "request":
            requests.append((int(f[1]), int(f[2]), float(f[3]), [int(x) for x in f[4].split(",")]))
        elif f[0] == "fluid":
            fluid[f[1]] = [float(x) for x in f[2:]]
    return files, requests, fluid


def tx_bytes(name):
    """Bytes the server's link has carried: what left its rate cap (the
    lab's ifb, NAMEq: packets the cap dropped never reached the bridge),
    or what left the server when there is no cap."""
    cap = f"/sys/class/net/{name}q/statistics/tx_bytes"
    if os.path.exists(cap):
        return int(open(cap).read().strip())
    r = sh(*in_host(name, "srv", "cat", "/sys/class/net/eth0/statistics/tx_bytes"))
    return int(r.stdout.strip())


def qdisc(name):
    """The server link's queue (the tbf of its rate cap, on the lab's ifb
    NAMEq): bytes waiting and packets dropped."""
    if os.path.exists(f"/sys/class/net/{name}q"):
        r = sh("tc", "-s", "qdisc", "show", "dev", f"{name}q")
    else:  # a lab without ifb caps the server's own eth0
        r = sh(*in_host(name, "srv", "tc", "-s", "qdisc", "show", "dev", "eth0"))
    m = re.search(r"dropped (\d+).*?backlog (\d+)([KMG]?)b", r.stdout, re.S)
    if not m:
        return 0, 0
    scale = {"": 1, "K": 1000, "M": 1000_000, "G": 1000_000_000}[m.group(3)]
    return int(m.group(2)) * scale, int(m.group(1))


def proc_cpu(pids):
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    for p in pids:
        try:
            f = open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()
            total += (int(f[11]) + int(f[12])) / tick
        except (OSError, IndexError, ValueError):
            pass
    return total


def steal_s():
    """CPU seconds the hypervisor has taken from this machine so far
    (/proc/stat's steal, all CPUs): read around a run, how much of the run
    the machine did not have (docs/benchmarks.md, session 45)."""
    f = open("/proc/stat").readline().split()
    return int(f[8]) / os.sysconf("SC_CLK_TCK") if len(f) > 8 else 0.0


def cpu_busy():
    """Busy and total jiffies of the whole machine (/proc/stat)."""
    f = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    return sum(f) - f[3] - f[4], sum(f)


class Timeline:
    """Every `step` seconds of a run: the server link's rate, receivers
    running, the server link's queue (tbf backlog, drops), the machine's
    CPU use and, for repocast, the server's own
    counters (its /metrics). Written as CSV, to see where a run's time
    went (an idle link while requests wait, a saturated CPU)."""

    FIELDS = ("queue", "clients", "transmissions_total", "report_timeouts_total", "naks_total", "empty_naks_total",
              "symbols_sent_total", "repair_symbols_sent_total")

    def __init__(self, path, name, metrics, step=0.5):
        self.f = open(path, "w")
        self.f.write("t_s,link_mbit_s,queue_kb,queue_drops,receivers,cpu_busy,"
                     + ",".join(self.FIELDS) + "\n")
        self.name, self.metrics, self.step = name, metrics, step
        self.next = 0.0
        self.last = (0.0, tx_bytes(name), cpu_busy())

    def sample(self, now, running):
        if now < self.next:
            return
        self.next = now + self.step
        t0, b0, (c0, n0) = self.last
        b, (c, n) = tx_bytes(self.name), cpu_busy()
        backlog, drops = qdisc(self.name)
        self.last = (now, b, (c, n))
        got = {}
        if self.metrics:
            r = subprocess.run(in_host(self.name, "c1", "curl", "-s", "-m", "0.3", self.metrics),
                               capture_output=True, text=True)
            for line in r.stdout.splitlines():
                k, _, v = line.partition(" ")
                got[k.removeprefix("repocast_")] = v
        mbit = (b - b0) * 8 / max(now - t0, 1e-3) / 1e6
        self.f.write(f"{now:.2f},{mbit:.1f},{backlog / 1000:.0f},{drops},{running},{(c - c0) / max(n - n0, 1):.2f},"
                     + ",".join(got.get(k, "") for k in self.FIELDS) + "\n")

    def close(self):
        self.f.close()


def stats(xs):
    if not xs:
        return (0, 0, 0, 0)
    s = sorted(xs)
    at = lambda q: s[min(int(len(s) * q), len(s) - 1)]
    return (sum(s) / len(s), at(0.5), at(0.95), s[-1])


def outputs(a, work):
    """Where the systems' received files go: the run's folder (--outputs
    shared), or the file system mounted in it for each system's run."""
    return work if a.outputs == "shared" else os.path.join(work, "outputs")


def mount_outputs(a, work, requested):
    """Makes a fresh file system for one system's run (--outputs): a tmpfs,
    or a new journaled ext4 on a loop device, sparse, with room for every
    host's copy of what is requested. Falls back to the shared disk, and
    says so, where loop devices cannot be had."""
    if a.outputs == "shared":
        return
    where = outputs(a, work)
    os.makedirs(where, exist_ok=True)
    if a.outputs == "tmpfs":
        sh("mount", "-t", "tmpfs", "-o", "mode=755", "tmpfs", where)
        return
    image = os.path.join(work, "outputs.img")
    size = max(2 << 30, int(requested * 1.25) + (1 << 30))
    with open(image, "wb") as f:
        f.truncate(size)
    made = subprocess.run(["mkfs.ext4", "-q", "-F", image], capture_output=True)
    mounted = made.returncode == 0 and subprocess.run(
        ["mount", "-o", "loop", image, where], capture_output=True).returncode == 0
    if not mounted:
        os.remove(image)
        print("requests.py: no loop device for a fresh ext4; received files go to the shared disk",
              file=sys.stderr, flush=True)
        return
    os.chmod(where, 0o755)


def unmount_outputs(a, work):
    """Takes one system's file system away again (see mount_outputs)."""
    if a.outputs == "shared":
        return
    where = outputs(a, work)
    if os.path.ismount(where) and subprocess.run(["umount", where], capture_output=True).returncode:
        # Still busy (a process of the run not yet gone): detach it now,
        # the kernel lets go of it (and its loop device) once it is free.
        subprocess.run(["umount", "-l", where], capture_output=True)
    image = os.path.join(work, "outputs.img")
    if os.path.exists(image):
        os.remove(image)


def run_system(system, a, name, repo, work, names, requests, rate_bits, timeline=None, logs=None):
    """Starts the server, replays the requests, returns per-request rows.
    With `logs` (a folder), every process's standard error goes there."""
    if logs:
        os.makedirs(logs, exist_ok=True)
    err = lambda n: open(os.path.join(logs, n), "wb") if logs else subprocess.DEVNULL
    outdir = os.path.join(outputs(a, work), system)
    os.makedirs(outdir)
    receivers = []
    host_of = {k: host for k, host, _, _ in requests}
    if system == "repocast":
        key = os.path.join(work, "server.key")
        if not os.path.exists(key):
            sh(a.bin, "keygen", "--out", key)
        trust = ["--trust", key + ".pub"]
        server = subprocess.Popen(in_host(name, "srv", a.bin, "serve", repo, "--key", key,
                                      "--interface", "eth0", "--listen", f"{SRV}:4700",
                                      "--metrics", f"{SRV}:4703", *a.serve_args.split()),
                                  stdout=subprocess.DEVNULL, stderr=err("server.log"))
        for _ in range(100):
            if subprocess.run(in_host(name, "c1", a.bin, "ls", "--server", SRV, *trust),
                              capture_output=True).returncode == 0:
                break
            time.sleep(0.1)

        def cmd(k, files):
            return [a.bin, "get", "--server", SRV, *trust, "--interface", "eth0", "--idle-timeout", "600",
                    "--out", os.path.join(outdir, str(k)), *a.get_args.split()] + [names[f] for f in files]
    elif system == "http":
        conf = os.path.join(work, "nginx.conf")
        open(conf, "w").write(f"""worker_processes 2;
pid {work}/nginx.pid;
error_log {work}/nginx.err;
events {{ worker_connections 4096; }}
http {{ access_log off; sendfile on; tcp_nopush on; send_timeout 600s; keepalive_timeout 600s;
  server {{ listen {SRV}:8080; root {repo}; }} }}
daemon off;
""")
        server = subprocess.Popen(in_host(name, "srv", "nginx", "-c", conf),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)

        def cmd(k, files):
            c = ["curl", "-sS", "--fail", "--create-dirs"]
            for f in files:
                c += ["-o", os.path.join(outdir, str(k), names[f]), f"http://{SRV}:8080/{names[f]}"]
            return c
    elif system == "uftp":
        # One receiver per request, started before the run (so no session
        # races its receiver's start); one sender per request at arrival.
        server = None
        for k, host, _, _ in requests:
            os.makedirs(os.path.join(outdir, str(k)))
            receivers.append(subprocess.Popen(
                in_host(name, f"c{host + 1}", "uftpd", "-d", "-q", "-p", str(UFTP_PORT + k),
                    "-D", os.path.join(outdir, str(k)), "-I", "eth0"),
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        time.sleep(1.0)
        kbps = str(int(rate_bits / 1000))

        def launch(k, files):
            return ("srv", ["uftp", "-q", "-R", kbps, "-C", "tfmcc", "-I", "eth0",
                            "-p", str(UFTP_PORT + k), "-H", f"10.77.0.{11 + host_of[k]}"]
                    + [names[f] for f in files])
    else:
        sys.exit(f"unknown system {system}")
    if system != "uftp":
        def launch(k, files):
            return (f"c{host_of[k] + 1}", cmd(k, files))
    before = tx_bytes(name)
    tl = timeline and Timeline(timeline, name, f"http://{SRV}:4703/metrics" if system == "repocast" else None)
    t0 = time.monotonic()
    running, rows = {}, {}
    pending = sorted(requests, key=lambda r: r[2])
    cpu_req = early_rx = 0.0
    while pending or running:
        now = time.monotonic() - t0
        while pending and pending[0][2] <= now:
            k, host, at, files = pending.pop(0)
            where, argv = launch(k, files)
            if logs and system == "repocast":
                # The host's shared receiver, started by a `get`, logs here.
                argv = ["env", f"REPOCAST_RECEIVER_LOG={os.path.join(logs, where + '-receiver.log')}",
                        *argv]
            p = subprocess.Popen(in_host(name, where, *argv), cwd=repo,
                                 stdout=subprocess.DEVNULL, stderr=err(f"{k}.log"))
            running[p.pid] = (p, k, host, at, files, time.monotonic())
        try:
            pid, status, ru = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            pid = 0
        if pid in running:
            p, k, host, at, files, started = running.pop(pid)
            cpu_req += ru.ru_utime + ru.ru_stime
            rows[k] = dict(k=k, host=host, at=at, delay=time.monotonic() - started,
                           rc=os.waitstatus_to_exitcode(status), files=files)
            continue
        if pid == 0:
            time.sleep(0.002)
        elif pid:
            early_rx += ru.ru_utime + ru.ru_stime  # a receiver that quit early
        if tl:
            tl.sample(now, len(running))
        if now > a.limit:
            for p, *_ in running.values():
                p.kill()
            break
    sent = tx_bytes(name) - before
    if tl:
        tl.close()
    if server is None:
        # UFTP: the senders are the server side, the receivers were
        # started before the run and are stopped now.
        cpu_srv, cpu_rx = cpu_req, early_rx
        for p in receivers:
            p.terminate()
        for p in receivers:
            try:
                _, status, ru = os.wait4(p.pid, 0)
                cpu_rx += ru.ru_utime + ru.ru_stime
            except ChildProcessError:
                pass
    else:
        # Receivers: the `get`s, and the hosts' shared receivers they
        # started (`repocast host-receiver`, ours as a subreaper once their
        # `get` exits): those that stopped during the run (early_rx) and
        # those still up now.
        cpu_rx = cpu_req + early_rx
        left = subprocess.run(["pgrep", "-f", f"{a.bin} host-receiver"], capture_output=True,
                              text=True).stdout.split()
        for pid in map(int, left):
            try:
                os.kill(pid, signal.SIGTERM)
                _, _, ru = os.wait4(pid, 0)
                cpu_rx += ru.ru_utime + ru.ru_stime
            except (ProcessLookupError, ChildProcessError):
                pass
        # The server process (`ip netns exec` execs it, so it is the Popen's pid)
        # and, for nginx, its workers.
        kids = subprocess.run(["pgrep", "-P", str(server.pid)], capture_output=True,
                              text=True).stdout.split()
        cpu_srv = proc_cpu([server.pid] + [int(x) for x in kids])
        server.terminate()
        try:
            server.wait(timeout=5)
        except subprocess.TimeoutExpired:
            server.kill()
    if system == "http":
        subprocess.run(["pkill", "-f", os.path.join(work, "nginx.conf")])
    for r in rows.values():
        ok = r["rc"] == 0
        for f in r["files"]:
            got = os.path.join(outdir, str(r["k"]), names[f])
            ok = ok and os.path.exists(got) and open(got, "rb").read() == open(os.path.join(repo, names[f]), "rb").read()
        r["ok"] = ok
    return rows, sent, cpu_srv, cpu_rx


COLOURS = {"repocast": "#1b6ac9", "http": "#d9480f", "uftp": "#2b8a3e"}


def cdf_svg(delays, title):
    """The delay distribution per system as an SVG chart: fraction of
    requests done (y) within a delay (x, log scale)."""
    import math
    w, h, l, r, t, b = 720, 420, 60, 150, 30, 50
    xs = [d for ds in delays.values() for d in ds if d > 0]
    lo = 10 ** math.floor(math.log10(max(min(xs, default=0.1), 0.01)))
    hi = 10 ** math.ceil(math.log10(max(xs, default=1.0)))
    px = lambda d: l + (w - l - r) * (math.log10(max(d, lo)) - math.log10(lo)) / (math.log10(hi) - math.log10(lo))
    py = lambda f: h - b - (h - t - b) * f
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<text x="{l}" y="18" font-size="14">{title}</text>']
    d = lo
    while d <= hi * 1.001:
        out.append(f'<line x1="{px(d):.1f}" y1="{t}" x2="{px(d):.1f}" y2="{h - b}" stroke="#ddd"/>')
        out.append(f'<text x="{px(d):.1f}" y="{h - b + 16}" text-anchor="middle">{d:g} s</text>')
        d *= 10
    for f in (0, 0.25, 0.5, 0.75, 0.95, 1):
        out.append(f'<line x1="{l}" y1="{py(f):.1f}" x2="{w - r}" y2="{py(f):.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{l - 6}" y="{py(f) + 4:.1f}" text-anchor="end">{f:g}</text>')
    out.append(f'<text x="{(l + w - r) / 2}" y="{h - 12}" text-anchor="middle">delay from arrival to last file verified (log scale)</text>')
    for n, (system, ds) in enumerate(delays.items()):
        s = sorted(ds)
        pts = " ".join(f"{px(x):.1f},{py((i + 1) / len(s)):.1f}" for i, x in enumerate(s))
        c = COLOURS.get(system, "#555")
        out.append(f'<polyline fill="none" stroke="{c}" stroke-width="2" points="{pts}"/>')
        out.append(f'<text x="{w - r + 10}" y="{t + 20 + 18 * n}" fill="{c}">{system}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def median(xs):
    s = sorted(xs)
    return s[len(s) // 2] if len(s) % 2 else (s[len(s) // 2 - 1] + s[len(s) // 2]) / 2


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", type=int, default=8)
    ap.add_argument("--loss", default="0.05",
                    help="one loss or a comma list cycled over hosts; each P or ge:MEAN:BURST (bursts)")
    ap.add_argument("--rate", type=float, default=100.0, help="server link cap, Mbit/s")
    ap.add_argument("--burst", default="64kb",
                    help="the cap's tbf bucket (lab.sh --burst): what passes at once after an idle spell")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--duration", type=float, default=30.0, help="seconds of arrivals")
    ap.add_argument("--runs", type=int, default=1, help="runs per system; the table gives medians")
    ap.add_argument("--gap", type=float, default=1.0, help="mean seconds between one host's requests")
    ap.add_argument("--files", type=int, default=40, help="files in the repository")
    ap.add_argument("--sizes", default="262144-8388608", help="file sizes, bytes, log-uniform: LO-HI")
    ap.add_argument("--zipf", type=float, default=1.0, help="Zipf exponent of popularity (0: uniform)")
    ap.add_argument("--request-files", default="1-3", help="distinct files per request: LO-HI")
    ap.add_argument("--systems", default="repocast,http,uftp")
    ap.add_argument("--out", default=os.path.join(ROOT, "results", "requests"))
    ap.add_argument("--limit", type=float, default=600.0, help="seconds before a run is cut off")
    ap.add_argument("--target", default=os.path.join(ROOT, "target", "release"))
    ap.add_argument("--serve-args", default="", help="extra flags for `repocast serve`, e.g. '--batch-hold 0'")
    ap.add_argument("--get-args", default="", help="extra flags for `repocast get`, e.g. '--no-share'")
    ap.add_argument("--timeline", action="store_true",
                    help="write SYSTEM[-RUN]-timeline.csv: link rate, receivers, CPU, server counters every 0.5 s")
    ap.add_argument("--logs", action="store_true",
                    help="keep every process's standard error in SYSTEM[-RUN]-logs/ (REPOCAST_LOG picks what)")
    ap.add_argument("--check", action="store_true", help="exit 1 if any request of any system failed")
    ap.add_argument("--outputs", choices=["ext4", "tmpfs", "shared"], default="ext4",
                    help="the file system received files go to, new for each system's run: a "
                         "journaled ext4 on a loop device, a tmpfs, or the disk the lab shares")
    ap.add_argument("--tmpfs", action="store_true", help="the same as --outputs tmpfs")
    a = ap.parse_args()
    if a.tmpfs:
        a.outputs = "tmpfs"
    if os.geteuid() != 0:
        sys.exit("requests.py: needs root (network namespaces)")
    # Orphans come to us (a `get`'s shared receiver outlives it), so their
    # CPU is counted when they are reaped.
    PR_SET_CHILD_SUBREAPER = 36
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    a.bin = os.path.join(a.target, "repocast")
    stale(a.bin)
    shape = [f"gap={a.gap}", f"files={a.files}", f"sizes={a.sizes}", f"zipf={a.zipf}",
             f"per-request={a.request_files}"]
    files, requests, fluid = plan(a.target, a.seed, a.loss, a.hosts, a.rate, a.duration, shape)
    work = tempfile.mkdtemp(prefix="rq-")
    os.chmod(work, 0o755)
    repo = os.path.join(work, "repo")
    os.makedirs(repo)
    names = {i: f"f{i:02}.bin" for i in files}
    for i, size in files.items():
        with open(os.path.join(repo, names[i]), "wb") as f:
            f.write(os.urandom(size))
    requested = sum(files[f] for r in requests for f in r[3])
    losses = a.loss.split(",")
    loss_list = ",".join(losses[h % len(losses)] for h in range(a.hosts))
    name = f"rq{os.getpid() % 10000}"
    os.makedirs(a.out, exist_ok=True)
    systems = a.systems.split(",")
    runs = {s: [] for s in systems}
    delays = {s: [] for s in systems}
    failures = 0
    try:
        for run in range(a.runs):
            for system in systems:
                sh(*lab(name, "up", "--clients", str(a.hosts), "--client-loss", loss_list,
                        "--rate", f"{a.rate:g}mbit", "--burst", a.burst))
                suffix = f"-{run + 1}" if a.runs > 1 else ""
                timeline = os.path.join(a.out, f"{system}{suffix}-timeline.csv") if a.timeline else None
                logs = os.path.join(a.out, f"{system}{suffix}-logs") if a.logs else None
                steal0 = steal_s()
                drops = 0
                mount_outputs(a, work, requested)
                try:
                    rows, sent, cpu_s, cpu_r = run_system(system, a, name, repo, work, names,
                                                          requests, a.rate * 1e6, timeline, logs)
                    drops = rcvbuf_drops(name, a.hosts)
                finally:
                    steal = steal_s() - steal0
                    subprocess.run(lab(name, "down"), capture_output=True)
                    shutil.rmtree(os.path.join(outputs(a, work), system), ignore_errors=True)
                    unmount_outputs(a, work)
                    if os.path.exists(os.path.join(work, "nginx.conf")):
                        os.remove(os.path.join(work, "nginx.conf"))
                with open(os.path.join(a.out, f"{system}{suffix}.csv"), "w") as f:
                    f.write("request,host,arrival_s,delay_s,ok,exit\n")
                    for k in sorted(rows):
                        r = rows[k]
                        f.write(f"{k},{r['host']},{r['at']:.3f},{r['delay']:.3f},{int(r['ok'])},{r['rc']}\n")
                ok = sum(1 for r in rows.values() if r["ok"])
                failures += len(requests) - ok
                # A request cut off at --limit counts at the limit.
                ds = [rows[k]["delay"] if k in rows else a.limit for k, *_ in requests]
                delays[system] += ds
                runs[system].append((ok, *stats(ds), sent / requested, cpu_s, cpu_r, steal))
                print(f"run {run + 1} {system}: ok {ok}/{len(requests)}, mean {runs[system][-1][1]:.2f} s, "
                      f"p95 {runs[system][-1][3]:.2f} s, wire {sent / requested:.3f}x requested, "
                      f"CPU {cpu_s:.1f} + {cpu_r:.1f} s, steal {steal:.1f} s, "
                      f"receive-buffer drops {drops}", flush=True)
    finally:
        subprocess.run(lab(name, "down"), capture_output=True)
        unmount_outputs(a, work)
        shutil.rmtree(work, ignore_errors=True)
    what = "median of {} runs".format(a.runs) if a.runs > 1 else "one run"
    lines = [f"seed {a.seed}, {a.hosts} hosts, loss {a.loss}, server link {a.rate:g} Mbit/s (tbf burst {a.burst}): "
             f"{len(requests)} requests, {sum(len(r[3]) for r in requests)} item-requests, "
             f"{requested / 2**20:.0f} MiB requested; {what}; received onto "
             + {"ext4": "a fresh ext4 each run", "tmpfs": "a fresh tmpfs each run",
                "shared": "the disk the hosts share"}[a.outputs]
             + (f"; repocast serve {a.serve_args}" if a.serve_args else "")
             + (f"; repocast get {a.get_args}" if a.get_args else ""), "",
             "| system | ok | mean | median | p95 | max | server-link bytes / requested | CPU s server | CPU s receivers | steal s |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for system in systems:
        m = [median([r[i] for r in runs[system]]) for i in range(9)]
        lines.append(f"| {system} | {min(r[0] for r in runs[system])}/{len(requests)} | {m[1]:.2f} s | "
                     f"{m[2]:.2f} s | {m[3]:.2f} s | {m[4]:.2f} s | {m[5]:.3f} | {m[6]:.1f} | {m[7]:.1f} | {m[8]:.1f} |")
    for kind in ("multicast", "unicast"):
        m, med, p95, mx = fluid[kind]
        # The fluid multicast bytes: what serving every request as soon as
        # the fluid model does costs on the server link.
        wire = f"{fluid['multicast-wire'][0]:.3f}" if kind == "multicast" else ""
        lines.append(f"| fluid {kind} (reference) | | {m:.2f} s | {med:.2f} s | {p95:.2f} s | {mx:.2f} s | {wire} | | | |")
    text = "\n".join(lines) + "\n"
    open(os.path.join(a.out, "summary.md"), "w").write(text)
    open(os.path.join(a.out, "delays.svg"), "w").write(
        cdf_svg(delays, f"Request delay, {a.hosts} hosts, loss {a.loss}, seed {a.seed} ({what}, pooled)"))
    print(text)
    if a.check and failures:
        sys.exit(f"requests.py: {failures} requests failed")


if __name__ == "__main__":
    main()
