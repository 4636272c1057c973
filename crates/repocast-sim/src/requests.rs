//! Request workloads of a repository under real load (issue 12's
//! benchmark): hosts each issuing requests as a Poisson process, each
//! request a few distinct files drawn by popularity, over a repository of
//! log-uniform file sizes; and the two fluid references the benchmark
//! reports beside measured delays: multicast with a fountain code, sending
//! the item with the most waiting requests, and processor-shared unicast.
//! One seed gives one workload, for the network benchmark, the simulator's
//! replay and the virtual-LAN replay alike.

use repocast_core::loss::LossSpec;
use repocast_core::rng::Rng;

/// What to generate.
#[derive(Debug, Clone, PartialEq)]
pub struct WorkloadParams {
    /// Client hosts.
    pub hosts: usize,
    /// Requests start within this many seconds.
    pub duration_s: f64,
    /// Mean seconds between one host's requests (Poisson).
    pub mean_gap_s: f64,
    /// Files in the repository.
    pub files: usize,
    /// Smallest and largest file, bytes (sizes log-uniform between).
    pub size_range: (u64, u64),
    /// Zipf exponent of file popularity (0: uniform).
    pub zipf_s: f64,
    /// Fewest and most distinct files per request (uniform between).
    pub request_files: (usize, usize),
    /// Seed.
    pub seed: u64,
}

impl Default for WorkloadParams {
    /// Issue 12's defaults: 8 hosts, 30 s, 1 s mean gap, 40 files of
    /// 256 KiB..8 MiB, Zipf(1), 1-3 files per request.
    fn default() -> Self {
        WorkloadParams {
            hosts: 8,
            duration_s: 30.0,
            mean_gap_s: 1.0,
            files: 40,
            size_range: (256 << 10, 8 << 20),
            zipf_s: 1.0,
            request_files: (1, 3),
            seed: 1,
        }
    }
}

/// One request: a host asks for some files at a time.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// The host asking.
    pub host: usize,
    /// When, seconds from the start.
    pub at_s: f64,
    /// File indices, distinct.
    pub files: Vec<usize>,
}

/// A repository and the requests made of it.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestWorkload {
    /// File sizes, bytes, by index.
    pub sizes: Vec<u64>,
    /// Requests, by arrival time.
    pub requests: Vec<Request>,
}

impl RequestWorkload {
    /// Generates the workload `p` describes.
    pub fn generate(p: &WorkloadParams) -> Self {
        let mut rng = Rng::new(p.seed);
        let (lo, hi) = (p.size_range.0.max(1) as f64, p.size_range.1.max(1) as f64);
        let sizes = (0..p.files)
            .map(|_| (lo * (hi / lo).powf(rng.next_f64())).round() as u64)
            .collect();
        let weights: Vec<f64> = (1..=p.files)
            .map(|i| 1.0 / (i as f64).powf(p.zipf_s))
            .collect();
        let mut requests = Vec::new();
        for host in 0..p.hosts {
            let mut t = 0.0;
            loop {
                t += -(1.0 - rng.next_f64()).ln() * p.mean_gap_s;
                if t >= p.duration_s {
                    break;
                }
                let (a, b) = p.request_files;
                let n = (rng.range_u64(a as u64, b as u64 + 1) as usize).clamp(1, p.files);
                let mut files = Vec::with_capacity(n);
                let mut avail = weights.clone();
                for _ in 0..n {
                    let total: f64 = avail.iter().sum();
                    let mut x = rng.next_f64() * total;
                    let mut pick = avail.len() - 1;
                    for (i, w) in avail.iter().enumerate() {
                        if x < *w {
                            pick = i;
                            break;
                        }
                        x -= w;
                    }
                    avail[pick] = 0.0;
                    files.push(pick);
                }
                requests.push(Request {
                    host,
                    at_s: t,
                    files,
                });
            }
        }
        requests.sort_by(|a, b| a.at_s.total_cmp(&b.at_s));
        RequestWorkload { sizes, requests }
    }

    /// Bytes requested in all (a file counted once per request asking).
    pub fn requested_bytes(&self) -> u64 {
        (self.requests.iter())
            .flat_map(|r| r.files.iter())
            .map(|&f| self.sizes[f])
            .sum()
    }

    /// Item-requests in all.
    pub fn item_requests(&self) -> usize {
        self.requests.iter().map(|r| r.files.len()).sum()
    }
}

/// Delays (seconds, by request) of the multicast fluid model: the link
/// carries `rate_bps` of payload, always of the item with the most
/// unfinished (request, file) pairs (ties: lowest index), and every byte
/// of it serves every pair waiting for it; a receiver keeps `keep` of what
/// is sent (a fountain code: any `size / keep` bytes complete a file).
pub fn fluid_multicast(w: &RequestWorkload, rate_bps: f64, keep: f64) -> Vec<f64> {
    fluid_multicast_run(w, rate_bps, keep).delays
}

/// What the multicast fluid model does with a workload.
#[derive(Debug, Clone, PartialEq)]
pub struct FluidMulticast {
    /// Delays, seconds, by request.
    pub delays: Vec<f64>,
    /// Payload bytes the link sent: the least a multicast scheme that
    /// serves every request as soon as the fluid one does must send.
    pub sent_bytes: f64,
}

/// [`fluid_multicast`] with the bytes it sent.
pub fn fluid_multicast_run(w: &RequestWorkload, rate_bps: f64, keep: f64) -> FluidMulticast {
    let rate = rate_bps / 8.0 * keep.clamp(1e-6, 1.0);
    let mut sent_bytes = 0.0;
    // Pending pairs: (request, file, bytes still to hear).
    let mut pending: Vec<(usize, usize, f64)> = Vec::new();
    let mut left: Vec<usize> = w.requests.iter().map(|r| r.files.len()).collect();
    let mut done = vec![0.0; w.requests.len()];
    let (mut now, mut next) = (0.0f64, 0usize);
    loop {
        while next < w.requests.len() && w.requests[next].at_s <= now + 1e-12 {
            for &f in &w.requests[next].files {
                pending.push((next, f, w.sizes[f] as f64));
            }
            next += 1;
        }
        let arrival = w.requests.get(next).map(|r| r.at_s);
        if pending.is_empty() {
            match arrival {
                Some(t) => {
                    now = t;
                    continue;
                }
                None => break,
            }
        }
        let mut count = vec![0usize; w.sizes.len()];
        for p in &pending {
            count[p.1] += 1;
        }
        let item = (0..count.len())
            .max_by_key(|&i| (count[i], usize::MAX - i))
            .unwrap_or(0);
        let first = (pending.iter().filter(|p| p.1 == item))
            .map(|p| p.2)
            .fold(f64::INFINITY, f64::min);
        let mut dt = first / rate;
        if let Some(t) = arrival {
            dt = dt.min(t - now);
        }
        now += dt;
        sent_bytes += dt * rate_bps / 8.0;
        for p in pending.iter_mut().filter(|p| p.1 == item) {
            p.2 -= dt * rate;
        }
        pending.retain(|p| {
            if p.2 > 1e-6 {
                return true;
            }
            left[p.0] -= 1;
            if left[p.0] == 0 {
                done[p.0] = now - w.requests[p.0].at_s;
            }
            false
        });
    }
    FluidMulticast {
        delays: done,
        sent_bytes,
    }
}

/// Delays (seconds, by request) of processor-shared unicast: every
/// unfinished request gets an equal share of `rate_bps` for its files.
pub fn fluid_unicast(w: &RequestWorkload, rate_bps: f64) -> Vec<f64> {
    let rate = rate_bps / 8.0;
    let mut active: Vec<(usize, f64)> = Vec::new();
    let mut done = vec![0.0; w.requests.len()];
    let (mut now, mut next) = (0.0f64, 0usize);
    loop {
        while next < w.requests.len() && w.requests[next].at_s <= now + 1e-12 {
            let bytes = w.requests[next]
                .files
                .iter()
                .map(|&f| w.sizes[f])
                .sum::<u64>();
            active.push((next, bytes as f64));
            next += 1;
        }
        let arrival = w.requests.get(next).map(|r| r.at_s);
        if active.is_empty() {
            match arrival {
                Some(t) => {
                    now = t;
                    continue;
                }
                None => break,
            }
        }
        let share = rate / active.len() as f64;
        let first = active.iter().map(|a| a.1).fold(f64::INFINITY, f64::min);
        let mut dt = first / share;
        if let Some(t) = arrival {
            dt = dt.min(t - now);
        }
        now += dt;
        active.retain_mut(|a| {
            a.1 -= dt * share;
            if a.1 > 1e-6 {
                return true;
            }
            done[a.0] = now - w.requests[a.0].at_s;
            false
        });
    }
    done
}

/// The hosts' losses as the command line gives them (`0.05,ge:0.05:8`).
pub fn loss_list(losses: &[LossSpec]) -> String {
    (losses.iter().map(LossSpec::to_string))
        .collect::<Vec<_>>()
        .join(",")
}

/// The hosts' mean loss (for the fluid references, which treat every
/// host alike).
pub fn mean_loss(losses: &[LossSpec]) -> f64 {
    losses.iter().map(LossSpec::mean_loss).sum::<f64>() / losses.len().max(1) as f64
}

/// The examples' command line: `[SEED] [LOSS[,LOSS..]] [HOSTS] [RATE_MBPS]
/// [DURATION_S]`, defaults 1, 0.05, 8, 100, 30: the workload, the loss per
/// host (cycled over the hosts; a probability or `ge:MEAN:BURST`, as
/// [`LossSpec`] reads it) and the rate.
pub fn from_args(args: &[String]) -> (WorkloadParams, Vec<LossSpec>, f64) {
    // Positional first; then KEY=VALUE settings of the rest of the shape.
    let pos: Vec<&str> = (args.iter().map(String::as_str))
        .filter(|a| !a.contains('='))
        .collect();
    let at = |i: usize| pos.get(i).copied();
    let losses = (at(1).unwrap_or("0.05").split(','))
        .filter_map(|x| x.parse().ok())
        .collect();
    let mut params = WorkloadParams {
        seed: at(0).and_then(|s| s.parse().ok()).unwrap_or(1),
        hosts: at(2).and_then(|s| s.parse().ok()).unwrap_or(8),
        duration_s: at(4).and_then(|s| s.parse().ok()).unwrap_or(30.0),
        ..WorkloadParams::default()
    };
    let pair = |v: &str| -> Option<(u64, u64)> {
        let (a, b) = v.split_once('-')?;
        Some((a.parse().ok()?, b.parse().ok()?))
    };
    for kv in args.iter().filter_map(|a| a.split_once('=')) {
        match kv {
            ("gap", v) => params.mean_gap_s = v.parse().unwrap_or(params.mean_gap_s),
            ("files", v) => params.files = v.parse().unwrap_or(params.files).max(1),
            ("zipf", v) => params.zipf_s = v.parse().unwrap_or(params.zipf_s),
            ("sizes", v) => {
                if let Some((lo, hi)) = pair(v).filter(|(lo, hi)| 0 < *lo && lo <= hi) {
                    params.size_range = (lo, hi);
                }
            }
            ("per-request", v) => {
                if let Some((lo, hi)) = pair(v).filter(|(lo, hi)| 0 < *lo && lo <= hi) {
                    params.request_files = (lo as usize, hi as usize);
                }
            }
            _ => {}
        }
    }
    params.request_files.1 = params.request_files.1.min(params.files);
    params.request_files.0 = params.request_files.0.min(params.request_files.1);
    let rate_mbps = at(3).and_then(|s| s.parse().ok()).unwrap_or(100.0);
    (params, losses, rate_mbps)
}

/// Mean, median, 95th percentile and max of `xs`.
pub fn summary(xs: &[f64]) -> (f64, f64, f64, f64) {
    if xs.is_empty() {
        return (0.0, 0.0, 0.0, 0.0);
    }
    let mut s = xs.to_vec();
    s.sort_by(f64::total_cmp);
    let at = |q: f64| s[((s.len() as f64 * q) as usize).min(s.len() - 1)];
    (
        s.iter().sum::<f64>() / s.len() as f64,
        at(0.5),
        at(0.95),
        s[s.len() - 1],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_after_the_positional_arguments_shape_the_workload() {
        let args: Vec<String> = ["2", "0.01,ge:0.2:4", "4", "50", "10", "gap=0.5", "files=9"]
            .iter()
            .chain(&["sizes=1000-2000", "zipf=0", "per-request=2-12"])
            .map(|s| s.to_string())
            .collect();
        let (p, losses, rate) = from_args(&args);
        assert_eq!((p.seed, p.hosts, p.duration_s, rate), (2, 4, 10.0, 50.0));
        assert_eq!(
            losses,
            vec![LossSpec::Bernoulli { p: 0.01 }, LossSpec::bursty(0.2, 4.0)]
        );
        assert_eq!((p.mean_gap_s, p.files, p.zipf_s), (0.5, 9, 0.0));
        assert_eq!(p.size_range, (1000, 2000));
        assert_eq!(
            p.request_files,
            (2, 9),
            "no more files per request than files"
        );
    }

    #[test]
    fn the_default_workload_has_the_issues_shape() {
        let w = RequestWorkload::generate(&WorkloadParams::default());
        // 8 hosts x 30 s at one a second: about 240 requests of 1-3 files.
        assert!(
            (180..300).contains(&w.requests.len()),
            "{}",
            w.requests.len()
        );
        assert!(w.requests.iter().all(|r| (1..=3).contains(&r.files.len())));
        assert!(w.sizes.iter().all(|&s| (256 << 10..=8 << 20).contains(&s)));
        // Zipf(1): file 0 is the most requested by far.
        let mut n = [0; 40];
        for f in w.requests.iter().flat_map(|r| &r.files) {
            n[*f] += 1;
        }
        assert!(n[0] > 2 * n[10] && n[0] == *n.iter().max().unwrap_or(&0));
        assert_eq!(w, RequestWorkload::generate(&WorkloadParams::default()));
    }

    #[test]
    fn fluid_models_agree_with_hand_computed_cases() {
        // Two requests for the same 1 MB file, the second 0.04 s later, at
        // 100 Mbit/s (12.5 MB/s) and no loss: multicast serves both with
        // one stream (the first done at 0.08 s, the second needs its own
        // full 1 MB after it arrives: done at 0.12 s, delay 0.08 s).
        let w = RequestWorkload {
            sizes: vec![1_000_000],
            requests: vec![
                Request {
                    host: 0,
                    at_s: 0.0,
                    files: vec![0],
                },
                Request {
                    host: 1,
                    at_s: 0.04,
                    files: vec![0],
                },
            ],
        };
        let m = fluid_multicast(&w, 100e6, 1.0);
        assert!(
            (m[0] - 0.08).abs() < 1e-9 && (m[1] - 0.08).abs() < 1e-9,
            "{m:?}"
        );
        // Unicast: alone for 0.04 s (0.5 MB), then shared: the first has
        // 0.5 MB left at half rate (0.08 s more), the second then has
        // 0.5 MB left alone (0.04 s): delays 0.12 and 0.12.
        let u = fluid_unicast(&w, 100e6);
        assert!(
            (u[0] - 0.12).abs() < 1e-9 && (u[1] - 0.12).abs() < 1e-9,
            "{u:?}"
        );
    }
}
