//! Push mode over a web log, as a real run replays it: a slice of a Common
//! Log Format trace ([`crate::trace`], sweep 9's input), its times divided
//! by a compression factor, becomes a [`Plan`]: a folder of documents, a
//! popularity table (each document's share of the slice's requests, MAD's
//! p_i as sweep 9 takes it) and a schedule of visits (each object one
//! listener tuning in at its time for its documents).
//!
//! `bench/push-weblog.py` runs a plan through `repocast push` and
//! `repocast listen`; [`predict_lan`] runs the same plan on the virtual
//! LAN ([`crate::push_lan`]: the endpoints those commands run, catalogue
//! included) and [`predict_engine`] through the accounting engine with
//! sweep 9's model (clients start with the manifests; the catalogue only
//! as its share of the rate), so a
//! real run's access latency can be set next to what the simulator
//! predicts for the same inputs. The `push_weblog` example is the
//! command line.

use crate::SimError;
use crate::push_lan::{PushLan, PushListener};
use crate::trace::{Object, Trace};
use repocast_core::Instant;
use repocast_core::auth::Identity;
use repocast_core::endpoint::push::PushConfig;
use repocast_core::loss::LossSpec;
use repocast_core::rng::Rng;
use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

/// One listener of the plan.
#[derive(Debug, Clone, PartialEq)]
pub struct Visit {
    /// When it tunes in, seconds from the start (compressed).
    pub at_s: f64,
    /// The documents it wants, by name.
    pub names: Vec<String>,
}

/// A web-log workload ready to push.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// (name, bytes) of every document of the trace, sorted by name (the
    /// order `repocast push` scans a folder in).
    pub files: Vec<(String, Vec<u8>)>,
    /// Requests per document in the slice, in `files` order.
    pub requests: Vec<u64>,
    /// Listeners in time order.
    pub visits: Vec<Visit>,
}

/// Largest document a plan makes a file of (a log's byte count is
/// untrusted; larger documents are left out).
pub const MAX_DOCUMENT_BYTES: u64 = 256 << 20;

/// A document's file name: its path without the leading slash, refused
/// when it would not be a plain relative path.
fn file_name(path: &str) -> Option<String> {
    let p = path.split(['?', '#']).next()?.trim_start_matches('/');
    let ok = !p.is_empty()
        && p.split('/')
            .all(|c| !c.is_empty() && c != "." && c != ".." && !c.starts_with('.'))
        && p.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c));
    ok.then(|| p.to_string())
}

impl Plan {
    /// The objects of `trace` arriving in `[from_s, to_s)`, their times
    /// shifted to start at 0 and divided by `scale`; every document of the
    /// trace is a file (at least one byte, at most [`MAX_DOCUMENT_BYTES`])
    /// of seeded bytes. Paths that differ only after `?` or `#` are one
    /// file; a path that is not a plain relative one is left out.
    pub fn from_trace(trace: &Trace, from_s: f64, to_s: f64, scale: f64, seed: u64) -> Plan {
        let scale = if scale > 0.0 { scale } else { 1.0 };
        let mut rng = Rng::new(seed);
        let mut docs: Vec<(usize, String, u64)> = (trace.documents.iter().enumerate())
            .filter(|(_, (_, b))| *b <= MAX_DOCUMENT_BYTES)
            .filter_map(|(i, (p, b))| file_name(p).map(|n| (i, n, (*b).max(1))))
            .collect();
        docs.sort_by(|a, b| a.1.cmp(&b.1));
        docs.dedup_by(|a, b| a.1 == b.1);
        let mut slot = vec![None; trace.documents.len()];
        for (k, d) in docs.iter().enumerate() {
            slot[d.0] = Some(k);
        }
        let mut requests = vec![0u64; docs.len()];
        let in_slice = |o: &&Object| o.at_s >= from_s && o.at_s < to_s;
        let visits = (trace.objects.iter().filter(in_slice))
            .filter_map(|o| {
                let picked: Vec<usize> = (o.documents.iter())
                    .filter_map(|&d| slot.get(d as usize).copied().flatten())
                    .collect();
                for &k in &picked {
                    requests[k] += 1;
                }
                (!picked.is_empty()).then(|| Visit {
                    at_s: (o.at_s - from_s) / scale,
                    names: picked.iter().map(|&k| docs[k].1.clone()).collect(),
                })
            })
            .collect();
        let files = (docs.into_iter())
            .map(|(_, n, b)| (n, (0..b).map(|_| rng.next_u64() as u8).collect()))
            .collect();
        Plan {
            files,
            requests,
            visits,
        }
    }

    /// MAD's weights: each document's share of the requests.
    pub fn weights(&self) -> Vec<f64> {
        let total = self.requests.iter().sum::<u64>().max(1) as f64;
        self.requests.iter().map(|&r| r as f64 / total).collect()
    }

    /// Writes `dir/files/...`, `dir/popularity.csv` (`name,weight`, read by
    /// `repocast push --popularity`) and `dir/schedule.csv`
    /// (`at_s,name name ...`).
    pub fn write(&self, dir: &Path) -> std::io::Result<()> {
        for (n, b) in &self.files {
            let at = dir.join("files").join(n);
            if let Some(parent) = at.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(at, b)?;
        }
        let mut pop = String::new();
        for ((n, _), w) in self.files.iter().zip(self.weights()) {
            let _ = writeln!(pop, "{n},{w}");
        }
        std::fs::write(dir.join("popularity.csv"), pop)?;
        let mut sched = String::from("at_s,names\n");
        for v in &self.visits {
            let _ = writeln!(sched, "{:.6},{}", v.at_s, v.names.join(" "));
        }
        std::fs::write(dir.join("schedule.csv"), sched)
    }
}

/// What a prediction found per visit: its delay, `None` when it did not
/// finish.
pub type Delays = Vec<Option<Duration>>;

/// Settings shared by the real run and its predictions.
#[derive(Debug, Clone)]
pub struct Setup {
    /// The pusher, as `repocast push` builds it ([`PushConfig::shipped`]).
    pub push: PushConfig,
    /// Each listener's loss on both groups (Bernoulli).
    pub loss: f64,
    /// Seed of the listeners' loss.
    pub seed: u64,
    /// How long after the last visit the run may go on.
    pub tail: Duration,
}

fn secs(s: f64) -> Instant {
    Instant::from_nanos((s.max(0.0) * 1e9) as u64)
}

fn end_of(plan: &Plan, tail: Duration) -> Instant {
    let last = plan.visits.last().map_or(0.0, |v| v.at_s);
    secs(last) + tail
}

/// The plan on the virtual LAN: the push endpoint `repocast push` runs and
/// one listen endpoint per visit (`repocast listen NAMES...` with
/// [`repocast_core::profile::Profile::Push`] settings), each losing `loss` of both groups.
pub fn predict_lan(plan: &Plan, setup: &Setup) -> Result<Delays, SimError> {
    let identity = Identity::from_seed([9; 32]);
    let mut lan = PushLan::new(setup.push.clone(), identity.clone(), 1, &plan.files)
        .map_err(|e| SimError::Invalid(format!("pusher: {e}")))?;
    for (i, v) in plan.visits.iter().enumerate() {
        let mut l = PushListener::shipped(identity.public(), setup.loss, secs(v.at_s));
        l.cfg.select = v.names.clone();
        l.cfg.timeout = setup.tail;
        lan.listener(l, setup.seed.wrapping_add(i as u64 * 0x9e37_79b9));
    }
    lan.run(end_of(plan, setup.tail));
    Ok(lan.reports().into_iter().map(|r| r.delay).collect())
}

/// The plan through the accounting engine, as sweep 9 models push mode:
/// the pusher's settings (scheduler, code, and its data packet interval,
/// which leaves the catalogue its share of the rate) and the items it
/// sends (files alone, and packs of small ones), clients that start with
/// the manifests and need any k symbols of a block of each item that
/// carries a file they want. The wait for the catalogue is what it leaves
/// out.
pub fn predict_engine(plan: &Plan, setup: &Setup) -> Result<Delays, SimError> {
    use crate::engine::{ClientSpec, Harness};
    let identity = Identity::from_seed([9; 32]);
    let pusher = PushLan::new(setup.push.clone(), identity, 1, &plan.files)
        .map_err(|e| SimError::Invalid(format!("pusher: {e}")))?;
    // The items on the channel, and the settings the pusher runs once its
    // catalogue is built (its interval; MAD's weights by item).
    let items = pusher.pusher().channel_items();
    let sizes: Vec<u64> = items.iter().map(|i| i.0).collect();
    let mut cfg = setup.push.server.clone();
    let running = pusher.pusher().server().config();
    cfg.packet_interval = running.packet_interval;
    cfg.scheduler = running.scheduler.clone();
    let mut h = Harness::accounting(cfg, &sizes, LossSpec::Bernoulli { p: 0.0 })
        .map_err(|e| SimError::Invalid(format!("pusher: {e}")))?;
    let carrier = |n: &str| {
        let f = plan.files.iter().position(|f| f.0 == n)?;
        items.iter().position(|i| i.1.contains(&f))
    };
    for v in &plan.visits {
        let mut wanted: Vec<usize> = v.names.iter().filter_map(|n| carrier(n)).collect();
        wanted.sort_unstable();
        wanted.dedup();
        h.add_client(ClientSpec {
            items: (wanted.into_iter())
                .map(|k| repocast_core::ItemId(k as u32))
                .collect(),
            loss: LossSpec::Bernoulli { p: setup.loss },
            join_at: secs(v.at_s),
        });
    }
    h.run(end_of(plan, setup.tail));
    Ok(h.reports().into_iter().map(|r| r.delay).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use repocast_core::sched::SchedulerKind;

    const LOG: &str = "\
a - - [10/Oct/2000:13:55:36 +0000] \"GET /index.html HTTP/1.0\" 200 2326
a - - [10/Oct/2000:13:55:36 +0000] \"GET /img/logo.gif HTTP/1.0\" 200 900
b - - [10/Oct/2000:13:55:46 +0000] \"GET /index.html HTTP/1.0\" 200 2326
c - - [10/Oct/2000:13:56:36 +0000] \"GET /../etc/passwd HTTP/1.0\" 200 20
d - - [10/Oct/2000:13:57:36 +0000] \"GET /late.html HTTP/1.0\" 200 10
e - - [10/Oct/2000:13:58:36 +0000] \"GET /huge.iso HTTP/1.0\" 200 99999999999999
";

    #[test]
    fn a_plan_is_the_slice_compressed_with_every_safe_document() {
        let t = Trace::parse(LOG, 1.0);
        let p = Plan::from_trace(&t, 0.0, 100.0, 10.0, 1);
        let names: Vec<&str> = p.files.iter().map(|f| f.0.as_str()).collect();
        assert_eq!(names, ["img/logo.gif", "index.html", "late.html"]);
        assert_eq!(p.files[0].1.len(), 900);
        assert_eq!(p.requests, [1, 2, 0]);
        assert_eq!(
            p.visits,
            vec![
                Visit {
                    at_s: 0.0,
                    names: vec!["index.html".into(), "img/logo.gif".into()]
                },
                Visit {
                    at_s: 1.0,
                    names: vec!["index.html".into()]
                },
            ]
        );
        let w = p.weights();
        assert!((w[1] - 2.0 / 3.0).abs() < 1e-12 && w[2] == 0.0);
    }

    #[test]
    fn both_predictions_finish_every_visit_of_a_small_plan() {
        let t = Trace::parse(LOG, 1.0);
        let plan = Plan::from_trace(&t, 0.0, 1000.0, 10.0, 1);
        let fec = repocast_core::wire::FecParams {
            code: repocast_core::fec::CodeKind::RaptorQ,
            symbol_size: 512,
            max_block_symbols: 1024,
        };
        for sched in [
            SchedulerKind::Flat,
            SchedulerKind::Mad {
                weights: plan.weights(),
            },
        ] {
            let setup = Setup {
                push: PushConfig::shipped(&fec, None, sched, 1, 1_000_000, false, None)
                    .expect("pusher"),
                loss: 0.1,
                seed: 3,
                tail: Duration::from_secs(30),
            };
            for d in [
                predict_lan(&plan, &setup).expect("lan"),
                predict_engine(&plan, &setup).expect("engine"),
            ] {
                assert_eq!(d.len(), 3);
                // 3 KiB at 1 Mbit/s with 10% loss: well under a second
                // of data, plus the catalogue for the real endpoints.
                assert!(
                    d.iter()
                        .all(|x| x.is_some_and(|x| x < Duration::from_secs(3))),
                    "{d:?}"
                );
            }
        }
    }
}
