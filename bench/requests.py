#!/usr/bin/env python3
"""Issue 12's request-workload benchmark on the project's network lab.

One seeded workload (the same generator as the simulator's:
`cargo run --release -p repocast-sim --example requests -- plan ...`) is
replayed through tests/lab/lab.sh (a server and HOSTS client hosts on a
bridge, multicast loss per host, a tbf cap on the server's link) against
each system in one run:

  repocast  `repocast serve` with its defaults; one `repocast get --out DIR
            FILES...` per request, started at its arrival time on its host
  http      nginx (Debian) serving the same folder; one `curl` per request
            fetching its files over one connection

Per request: delay from its start to the last file on disk, checked
byte-for-byte against the original afterwards. Per system: ok, mean,
median, p95, max, bytes on the server's link, CPU seconds of the server
and of the receivers. Writes OUT/summary.md and OUT/<system>.csv, and the
fluid references computed from the same workload.

    sudo python3 bench/requests.py [--hosts 8] [--loss 0.05[,..]] [--rate 100]
        [--seed 1] [--duration 30] [--systems repocast,http] [--out results/requests]

Needs root, iproute2, clang (the lab's loss filter), nginx and curl
(apt-get install -y nginx-light curl clang), and a release build.
"""
import argparse, os, resource, shutil, subprocess, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
LAB = os.path.join(ROOT, "tests", "lab", "lab.sh")
SRV = "10.77.0.1"


def sh(*args, **kw):
    return subprocess.run(list(args), check=True, capture_output=True, text=True, **kw)


def lab(name, *args, **kw):
    return ["bash", LAB, "--name", name, *args]


def plan(bin_dir, seed, loss, hosts, rate, duration):
    out = sh(os.path.join(bin_dir, "examples", "requests"), "plan", str(seed), loss,
             str(hosts), str(rate), str(duration)).stdout
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
    r = sh(*lab(name, "exec", "srv", "--", "cat", "/sys/class/net/eth0/statistics/tx_bytes"))
    return int(r.stdout.strip())


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


def stats(xs):
    if not xs:
        return (0, 0, 0, 0)
    s = sorted(xs)
    at = lambda q: s[min(int(len(s) * q), len(s) - 1)]
    return (sum(s) / len(s), at(0.5), at(0.95), s[-1])


def run_system(system, a, name, repo, work, names, requests, rate_bits):
    """Starts the server, replays the requests, returns per-request rows."""
    outdir = os.path.join(work, system)
    os.makedirs(outdir)
    if system == "repocast":
        server = subprocess.Popen(lab(name, "exec", "srv", "--", a.bin, "serve", repo,
                                      "--interface", "eth0", "--listen", f"{SRV}:4700",
                                      "--metrics", f"{SRV}:4703"),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(100):
            if subprocess.run(lab(name, "exec", "c1", "--", a.bin, "ls", "--server", SRV),
                              capture_output=True).returncode == 0:
                break
            time.sleep(0.1)

        def cmd(k, files):
            return [a.bin, "get", "--server", SRV, "--interface", "eth0", "--idle-timeout", "600",
                    "--out", os.path.join(outdir, str(k))] + [names[f] for f in files]
    elif system == "http":
        conf = os.path.join(work, "nginx.conf")
        open(conf, "w").write(f"""worker_processes 2;
pid {work}/nginx.pid;
error_log {work}/nginx.err;
events {{ worker_connections 4096; }}
http {{ access_log off; sendfile on; tcp_nopush on;
  server {{ listen {SRV}:8080; root {repo}; }} }}
daemon off;
""")
        server = subprocess.Popen(lab(name, "exec", "srv", "--", "nginx", "-c", conf),
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)

        def cmd(k, files):
            c = ["curl", "-sS", "--fail", "--create-dirs"]
            for f in files:
                c += ["-o", os.path.join(outdir, str(k), names[f]), f"http://{SRV}:8080/{names[f]}"]
            return c
    else:
        sys.exit(f"unknown system {system}")
    before = tx_bytes(name)
    t0 = time.monotonic()
    running, rows = {}, {}
    pending = sorted(requests, key=lambda r: r[2])
    cpu_rx = 0.0
    while pending or running:
        now = time.monotonic() - t0
        while pending and pending[0][2] <= now:
            k, host, at, files = pending.pop(0)
            p = subprocess.Popen(lab(name, "exec", f"c{host + 1}", "--", *cmd(k, files)),
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            running[p.pid] = (p, k, host, at, files, time.monotonic())
        try:
            pid, status, ru = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            pid = 0
        if pid in running:
            p, k, host, at, files, started = running.pop(pid)
            cpu_rx += ru.ru_utime + ru.ru_stime
            rows[k] = dict(k=k, host=host, at=at, delay=time.monotonic() - started,
                           rc=os.waitstatus_to_exitcode(status), files=files)
            continue
        if pid == 0:
            time.sleep(0.002)
        if now > a.limit:
            for p, *_ in running.values():
                p.kill()
            break
    sent = tx_bytes(name) - before
    # The server process (lab.sh execs it, so it is the Popen's pid) and,
    # for nginx, its workers.
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


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hosts", type=int, default=8)
    ap.add_argument("--loss", default="0.05", help="one loss or a comma list cycled over hosts")
    ap.add_argument("--rate", type=float, default=100.0, help="server link cap, Mbit/s")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--duration", type=float, default=30.0, help="seconds of arrivals")
    ap.add_argument("--systems", default="repocast,http")
    ap.add_argument("--out", default=os.path.join(ROOT, "results", "requests"))
    ap.add_argument("--limit", type=float, default=600.0, help="seconds before a run is cut off")
    ap.add_argument("--target", default=os.path.join(ROOT, "target", "release"))
    ap.add_argument("--check", action="store_true", help="exit 1 if any request of any system failed")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("requests.py: needs root (network namespaces)")
    a.bin = os.path.join(a.target, "repocast")
    files, requests, fluid = plan(a.target, a.seed, a.loss, a.hosts, a.rate, a.duration)
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
    lines = [f"seed {a.seed}, {a.hosts} hosts, loss {a.loss}, server link {a.rate:g} Mbit/s: "
             f"{len(requests)} requests, {sum(len(r[3]) for r in requests)} item-requests, "
             f"{requested / 2**20:.0f} MiB requested", "",
             "| system | ok | mean | median | p95 | max | bytes on the server link | CPU s server | CPU s receivers |",
             "|---|---|---|---|---|---|---|---|---|"]
    failures = 0
    try:
        for system in a.systems.split(","):
            sh(*lab(name, "up", "--clients", str(a.hosts), "--client-loss", loss_list,
                    "--rate", f"{a.rate:g}mbit"))
            try:
                rows, sent, cpu_s, cpu_r = run_system(system, a, name, repo, work, names, requests,
                                                      a.rate * 1e6)
            finally:
                subprocess.run(lab(name, "down"), capture_output=True)
            with open(os.path.join(a.out, f"{system}.csv"), "w") as f:
                f.write("request,host,arrival_s,delay_s,ok\n")
                for k in sorted(rows):
                    r = rows[k]
                    f.write(f"{k},{r['host']},{r['at']:.3f},{r['delay']:.3f},{int(r['ok'])}\n")
            ok = [r for r in rows.values() if r["ok"]]
            failures += len(requests) - len(ok)
            m, med, p95, mx = stats([r["delay"] for r in rows.values()])
            lines.append(f"| {system} | {len(ok)}/{len(requests)} | {m:.2f} s | {med:.2f} s | {p95:.2f} s | "
                         f"{mx:.2f} s | {sent / 2**20:.0f} MiB ({sent / requested:.2f}x requested) | "
                         f"{cpu_s:.1f} | {cpu_r:.1f} |")
            print(lines[-1], flush=True)
    finally:
        subprocess.run(lab(name, "down"), capture_output=True)
        shutil.rmtree(work, ignore_errors=True)
    for kind in ("multicast", "unicast"):
        m, med, p95, mx = fluid[kind]
        lines.append(f"| fluid {kind} (reference) | | {m:.2f} s | {med:.2f} s | {p95:.2f} s | {mx:.2f} s | | | |")
    text = "\n".join(lines) + "\n"
    open(os.path.join(a.out, "summary.md"), "w").write(text)
    print(text)
    if a.check and failures:
        sys.exit(f"requests.py: {failures} requests failed")


if __name__ == "__main__":
    main()
