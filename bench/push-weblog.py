#!/usr/bin/env python3
"""Issue 14's MAD-against-flat benchmark: push mode over a web log, real
against simulated.

A slice of sweep 9's trace (scenarios/traces/web.log), its times divided by
--scale, becomes a folder of documents, a popularity table and a schedule of
visits (`cargo run --release -p repocast-sim --example push_weblog -- plan`,
see crates/repocast-sim/src/weblog.rs). For each scheduler (flat, MAD) one
`repocast push` of that folder runs on loopback multicast at --rate, and each
visit is one `repocast listen --emulate-loss LOSS NAMES...` started at its
time; its access latency is from its start to its exit with every document
verified (and compared byte for byte with the original afterwards). The
same plan is then predicted by the simulator twice: on the virtual LAN (the
endpoints `push` and `listen` run, catalogue included) and by the
accounting engine as sweep 9 models push (clients start with the
manifests; the catalogue only as its share of the rate).

Writes OUT/summary.md (the table) and OUT/<scheduler>.csv (per visit). With
--runs N each scheduler runs N times (alternating) and the table gives the
median of each figure.

    python3 bench/push-weblog.py [--from 0] [--to 3600] [--scale 20] [--rate 1000000]
        [--loss 0.05] [--symbol 512] [--seed 1] [--runs 1] [--out results/push-weblog] [--reuse]

Needs no root; a release build (`cargo build --release -p repocast-cli &&
cargo build --release -p repocast-sim --examples`: with `--examples` cargo
builds only examples, so the CLI needs its own build).
"""
import argparse, os, shutil, statistics, subprocess, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
BIN = os.path.join(ROOT, "target", "release")
GROUP = "239.255.61.1:46100"


def stats(xs):
    if not xs:
        return dict(mean=0.0, median=0.0, p95=0.0, max=0.0)
    s = sorted(xs)
    return dict(mean=sum(s) / len(s), median=s[len(s) // 2],
                p95=s[min(len(s) - 1, int(len(s) * 0.95))], max=s[-1])


def example(cmd, args):
    return subprocess.run([os.path.join(BIN, "examples", "push_weblog"), cmd, *args],
                          check=True, capture_output=True, text=True).stdout


def real_run(sched, plan_dir, visits, files, a, run, tmp):
    """One pusher and one listener per visit; returns [(delay or None, why)]."""
    key = os.path.join(tmp, "push.key")
    if not os.path.exists(key):
        subprocess.run([os.path.join(BIN, "repocast"), "keygen", "--out", key],
                       check=True, capture_output=True)
    pub = key + ".pub"
    push = subprocess.Popen(
        [os.path.join(BIN, "repocast"), "push", os.path.join(plan_dir, "files"),
         "--rate", str(a.rate), "--symbol-size", str(a.symbol), "--scheduler", sched,
         "--popularity", os.path.join(plan_dir, "popularity.csv"), "--group", GROUP,
         "--interface", "127.0.0.1", "--key", key, "--seed", str(a.seed),
         "--no-metrics", "--no-watch"],
        stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, f"push-{sched}-{run}.log"), "w"))
    time.sleep(1.0)  # the pusher is running before the first visit, as it would be
    procs = {}
    t0 = time.monotonic()
    results = [None] * len(visits)
    pending = list(range(len(visits)))
    while pending or procs:
        now = time.monotonic() - t0
        while pending and visits[pending[0]][0] <= now:
            i = pending.pop(0)
            out = os.path.join(tmp, f"{sched}-{run}-{i}")
            os.makedirs(out)
            log = open(out + ".json", "w")
            p = subprocess.Popen(
                [os.path.join(BIN, "repocast"), "listen", "--group", GROUP,
                 "--interface", "127.0.0.1", "--out", out, "--trust", pub,
                 "--emulate-loss", str(a.loss), "--seed", str(a.seed * 100003 + i),
                 "--timeout", str(a.tail), "--json", *visits[i][1]],
                stdout=log, stderr=subprocess.DEVNULL)
            procs[i] = (p, time.monotonic(), out, log)
        for i, (p, start, out, log) in list(procs.items()):
            rc = p.poll()
            if rc is None:
                continue
            took = time.monotonic() - start
            log.close()
            bad = [n for n in visits[i][1]
                   if not os.path.exists(os.path.join(out, n))
                   or open(os.path.join(out, n), "rb").read() != files[n]]
            results[i] = (took, "") if rc == 0 and not bad else (None, f"exit {rc}, bad {bad}")
            shutil.rmtree(out, ignore_errors=True)
            del procs[i]
        time.sleep(0.002)
    push.terminate()
    push.wait()
    return results


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--from", dest="start", type=float, default=0)
    ap.add_argument("--to", type=float, default=3600)
    ap.add_argument("--scale", type=float, default=20)
    ap.add_argument("--rate", type=int, default=1_000_000)
    ap.add_argument("--loss", type=float, default=0.05)
    ap.add_argument("--symbol", type=int, default=512)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--tail", type=float, default=120)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--out", default=os.path.join(ROOT, "results", "push-weblog"))
    ap.add_argument("--reuse", action="store_true",
                    help="take the real runs from OUT/<scheduler>.csv (same arguments) and "
                         "only predict again (after a change to the simulator)")
    a = ap.parse_args()
    kv = [f"from={a.start}", f"to={a.to}", f"scale={a.scale}", f"seed={a.seed}",
          f"rate={a.rate}", f"loss={a.loss}", f"symbol={a.symbol}", f"tail={a.tail}",
          f"trace={os.path.join(ROOT, 'scenarios', 'traces', 'web.log')}"]
    tmp = tempfile.mkdtemp(prefix="push-weblog-")
    plan_dir = os.path.join(tmp, "plan")
    os.makedirs(plan_dir)
    print(example("plan", [plan_dir, *kv]).strip(), flush=True)
    files = {}
    for root, _, names in os.walk(os.path.join(plan_dir, "files")):
        for n in names:
            p = os.path.join(root, n)
            files[os.path.relpath(p, os.path.join(plan_dir, "files"))] = open(p, "rb").read()
    visits = []
    for line in open(os.path.join(plan_dir, "schedule.csv")).read().splitlines()[1:]:
        at, names = line.split(",", 1)
        visits.append((float(at), names.split()))
    predicted = {}
    for line in example("predict", kv).splitlines():
        f = line.split("\t")
        if f[0] == "predict":
            predicted[(f[1], f[2])] = dict(done=int(f[4]), mean=float(f[5]), median=float(f[6]),
                                           p95=float(f[7]), max=float(f[8]))
    runs = {"flat": [], "mad": []}
    if a.reuse:
        for sched in runs:
            rows = [l.split(",", 5) for l in
                    open(os.path.join(a.out, f"{sched}.csv")).read().splitlines()[1:]]
            for r in sorted({int(x[0]) for x in rows}):
                res = [(float(x[4]) if x[4] else None, x[5]) for x in rows if int(x[0]) == r]
                ok = [d for d, _ in res if d is not None]
                st = stats(ok)
                st["failed"] = len(res) - len(ok)
                runs[sched].append((st, res))
        a.runs = len(runs["flat"])
    for r in range(0 if a.reuse else a.runs):
        for sched in runs:
            res = real_run(sched, plan_dir, visits, files, a, r, tmp)
            ok = [d for d, _ in res if d is not None]
            s = stats(ok)
            s["failed"] = len(res) - len(ok)
            runs[sched].append((s, res))
            print(f"run {r + 1} {sched}: {len(ok)}/{len(res)} ok, mean {s['mean']:.2f} s, "
                  f"median {s['median']:.2f}, p95 {s['p95']:.2f}, max {s['max']:.2f}", flush=True)
            for d, why in res:
                if why:
                    print(f"  failed: {why}", flush=True)
    os.makedirs(a.out, exist_ok=True)
    cmd = "python3 bench/push-weblog.py " + " ".join(x for x in sys.argv[1:] if x != "--reuse")
    lines = [f"`{cmd}`", "",
             f"{len(visits)} visits over {len(files)} documents "
             f"({sum(len(b) for b in files.values())} bytes), trace seconds {a.start:g}-{a.to:g} "
             f"compressed {a.scale:g}x, {a.rate / 1e6:g} Mbit/s, {a.symbol}-byte symbols, "
             f"{a.loss:g} loss per listener; real figures are medians of {a.runs} run(s).", "",
             "| scheduler | real: ok / mean / median / p95 / max (s) | virtual LAN: mean / p95 | "
             "engine (sweep 9's model): mean / p95 | real / LAN | real / engine |",
             "|---|---|---|---|---|---|"]
    for sched, rs in runs.items():
        med = {k: statistics.median(s[k] for s, _ in rs) for k in ("mean", "median", "p95", "max", "failed")}
        lan, eng = predicted[(sched, "lan")], predicted[(sched, "engine")]
        lines.append(
            f"| {sched} | {len(visits) - med['failed']:g}/{len(visits)} / {med['mean']:.2f} / "
            f"{med['median']:.2f} / {med['p95']:.2f} / {med['max']:.2f} | {lan['mean']:.2f} / "
            f"{lan['p95']:.2f} | {eng['mean']:.2f} / {eng['p95']:.2f} | "
            f"{med['mean'] / lan['mean']:.3f} | {med['mean'] / eng['mean']:.3f} |")
        with open(os.path.join(a.out, f"{sched}.csv"), "w") as f:
            f.write("run,visit,at_s,documents,delay_s,failure\n")
            for r, (_, res) in enumerate(rs):
                for i, (d, why) in enumerate(res):
                    f.write(f"{r + 1},{i},{visits[i][0]:.3f},{len(visits[i][1])},"
                            f"{'' if d is None else f'{d:.4f}'},{why}\n")
    fm = [statistics.median(s["mean"] for s, _ in runs[k]) for k in ("flat", "mad")]
    pl = [predicted[(k, "lan")]["mean"] for k in ("flat", "mad")]
    pe = [predicted[(k, "engine")]["mean"] for k in ("flat", "mad")]
    lines += ["", f"MAD / flat: real {fm[1] / fm[0]:.3f}, virtual LAN {pl[1] / pl[0]:.3f}, "
              f"engine {pe[1] / pe[0]:.3f}"]
    text = "\n".join(lines) + "\n"
    open(os.path.join(a.out, "summary.md"), "w").write(text)
    print(text)
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
