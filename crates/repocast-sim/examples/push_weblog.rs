//! Issue 14's MAD-against-flat comparison over a web log (sweep 9's input),
//! the simulator's side of `bench/push-weblog.py`.
//!
//!     cargo run --release -p repocast-sim --example push_weblog -- plan DIR [KEY=VALUE...]
//!     cargo run --release -p repocast-sim --example push_weblog -- predict [KEY=VALUE...]
//!
//! `plan` writes the files, `popularity.csv` and `schedule.csv` of a slice
//! of the trace into DIR (see `repocast_sim::weblog`). `predict` rebuilds
//! the same plan and prints, per scheduler (flat, MAD), the access latency
//! the virtual LAN (the real endpoints, catalogue included) and the
//! accounting engine (sweep 9's model) predict, one tab-separated line
//! each: `predict SCHEDULER MODEL VISITS DONE MEAN MEDIAN P95 MAX`.
//!
//! KEY=VALUE (both commands take the same, so both see one plan):
//! `trace=` (scenarios/traces/web.log), `from=`/`to=` seconds of the trace
//! (0, 3600), `scale=` time compression (20), `seed=` (1), and for
//! `predict`: `packs=0` (every file alone), `rate=` bit/s (1000000), `loss=` (0.05), `symbol=` bytes
//! (512), `tail=` seconds a listener may take (120).

use repocast_core::endpoint::push::PushConfig;
use repocast_core::fec::CodeKind;
use repocast_core::sched::SchedulerKind;
use repocast_core::wire::FecParams;
use repocast_sim::requests::summary;
use repocast_sim::trace::Trace;
use repocast_sim::weblog::{Delays, Plan, Setup, predict_engine, predict_lan};
use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

fn fail(msg: String) -> ! {
    eprintln!("push_weblog: {msg}");
    std::process::exit(2)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (cmd, rest) = args
        .split_first()
        .unwrap_or_else(|| fail("plan DIR | predict".into()));
    let (dir, rest) = match cmd.as_str() {
        // A folder named like a flag is a slip (`plan --help`), not a
        // place to write a plan.
        "plan" => match rest.split_first() {
            Some((d, r)) if !d.starts_with('-') => (Some(PathBuf::from(d)), r),
            _ => fail("plan DIR [KEY=VALUE...]".into()),
        },
        "predict" => (None, rest),
        c => fail(format!("unknown command {c}")),
    };
    let kv: HashMap<&str, &str> = (rest.iter())
        .map(|a| {
            a.split_once('=')
                .unwrap_or_else(|| fail(format!("not KEY=VALUE: {a}")))
        })
        .collect();
    let num = |k: &str, d: f64| -> f64 {
        kv.get(k).map_or(d, |v| {
            v.parse()
                .unwrap_or_else(|_| fail(format!("{k}={v}: not a number")))
        })
    };
    let trace_path = kv
        .get("trace")
        .copied()
        .unwrap_or("scenarios/traces/web.log");
    let log =
        std::fs::read_to_string(trace_path).unwrap_or_else(|e| fail(format!("{trace_path}: {e}")));
    let trace = Trace::parse(&log, 1.0);
    let seed = num("seed", 1.0) as u64;
    let plan = Plan::from_trace(
        &trace,
        num("from", 0.0),
        num("to", 3600.0),
        num("scale", 20.0),
        seed,
    );
    if let Some(dir) = dir {
        plan.write(&dir)
            .unwrap_or_else(|e| fail(format!("{}: {e}", dir.display())));
        let bytes: usize = plan.files.iter().map(|f| f.1.len()).sum();
        println!(
            "plan\t{} files\t{bytes} bytes\t{} visits\tlast at {:.1} s",
            plan.files.len(),
            plan.visits.len(),
            plan.visits.last().map_or(0.0, |v| v.at_s)
        );
        return;
    }
    let (max_block_symbols, growth) = repocast_core::profile::push_blocks(CodeKind::RaptorQ, None);
    let fec = FecParams {
        code: CodeKind::RaptorQ,
        symbol_size: num("symbol", 512.0) as u16,
        max_block_symbols,
    };
    for (label, sched) in [
        ("flat", SchedulerKind::Flat),
        (
            "mad",
            SchedulerKind::Mad {
                weights: plan.weights(),
            },
        ),
    ] {
        let mut push = PushConfig::shipped(
            &fec,
            growth,
            sched,
            seed,
            num("rate", 1e6) as u64,
            false,
            None,
        )
        .unwrap_or_else(|e| fail(format!("pusher: {e}")));
        // `push --popularity`, as the benchmark runs both schedulers;
        // `packs=0`: `push --no-packs`.
        push.popularity = plan.weights();
        push.packs = num("packs", 1.0) != 0.0;
        let setup = Setup {
            push,
            loss: num("loss", 0.05),
            seed,
            tail: Duration::from_secs_f64(num("tail", 120.0)),
        };
        for (model, run) in [
            ("lan", predict_lan as fn(&Plan, &Setup) -> _),
            ("engine", predict_engine),
        ] {
            let d: Delays = run(&plan, &setup).unwrap_or_else(|e| fail(e.to_string()));
            let done: Vec<f64> = d.iter().flatten().map(|x| x.as_secs_f64()).collect();
            let (mean, median, p95, max) = summary(&done);
            println!(
                "predict\t{label}\t{model}\t{}\t{}\t{mean:.3}\t{median:.3}\t{p95:.3}\t{max:.3}",
                d.len(),
                done.len()
            );
        }
    }
}
