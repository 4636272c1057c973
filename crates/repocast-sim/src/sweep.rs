//! A sweep: every (series, x, seed) run on a `rayon` pool of `jobs`
//! threads, aggregated per (series, x). Runs are independent and seeded, and results are gathered
//! by index, so the numbers are the same bit for bit whatever `jobs` is.

use crate::SimError;
use crate::run::{RunMetrics, run};
use crate::scenario::Scenario;
use rayon::prelude::*;
use std::sync::atomic::{AtomicUsize, Ordering};

/// One point of one series, over all seeds.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// Series label.
    pub series: String,
    /// The swept variable's value.
    pub x: f64,
    /// Mean client delay, seconds (clients of all seeds pooled).
    pub avg_delay_s: f64,
    /// Half-width of its 95% confidence interval (1.96 standard errors).
    pub ci95_s: f64,
    /// 95th-percentile delay.
    pub p95_delay_s: f64,
    /// Longest delay (mean over seeds of each seed's longest): with every
    /// client arriving at once, the transmission time of sweep 8.
    pub max_delay_s: f64,
    /// Mean seek time (request to first useful packet), seconds.
    pub avg_seek_s: f64,
    /// Mean transfer time (first useful packet to completion), seconds.
    pub avg_transfer_s: f64,
    /// Mean delay weighted by each client's (1 - loss).
    pub loss_weighted_delay_s: f64,
    /// Clients that completed (mean per seed).
    pub clients: f64,
    /// Clients that arrived (mean per seed).
    pub arrived: f64,
    /// Means per seed.
    pub data_packets: f64,
    /// Repair packets.
    pub repair_packets: f64,
    /// NAKs.
    pub naks: f64,
    /// Simulated events, summed over seeds (for events per second).
    pub events: u64,
}

fn aggregate(series: String, x: f64, runs: &[RunMetrics]) -> Point {
    let delays: Vec<f64> = runs.iter().flat_map(|r| r.delays.iter().copied()).collect();
    let losses: Vec<f64> = runs.iter().flat_map(|r| r.losses.iter().copied()).collect();
    let n = delays.len().max(1) as f64;
    let mean = delays.iter().sum::<f64>() / n;
    let seek = runs.iter().flat_map(|r| r.seeks.iter()).sum::<f64>() / n;
    let var = delays.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / (n - 1.0).max(1.0);
    let mut sorted = delays.clone();
    sorted.sort_by(f64::total_cmp);
    let p95 = sorted
        .get(((sorted.len() as f64 * 0.95) as usize).min(sorted.len().saturating_sub(1)))
        .copied();
    let wsum: f64 = losses.iter().map(|p| 1.0 - p).sum();
    let lw = delays
        .iter()
        .zip(&losses)
        .map(|(d, p)| d * (1.0 - p))
        .sum::<f64>()
        / wsum.max(1e-12);
    let k = runs.len().max(1) as f64;
    let avg = |f: &dyn Fn(&RunMetrics) -> f64| runs.iter().map(f).sum::<f64>() / k;
    Point {
        series,
        x,
        avg_delay_s: mean,
        ci95_s: 1.96 * (var / n).sqrt(),
        p95_delay_s: p95.unwrap_or(0.0),
        avg_seek_s: seek,
        max_delay_s: avg(&|r| r.delays.iter().copied().fold(0.0, f64::max)),
        avg_transfer_s: mean - seek,
        loss_weighted_delay_s: lw,
        clients: avg(&|r| r.delays.len() as f64),
        arrived: avg(&|r| r.arrived as f64),
        data_packets: avg(&|r| r.data_packets as f64),
        repair_packets: avg(&|r| r.repair_packets as f64),
        naks: avg(&|r| r.naks as f64),
        events: runs.iter().map(|r| r.events).sum(),
    }
}

/// Runs the whole sweep on a pool of `jobs` threads; `progress` is called
/// after each run with (done, total). A run that cannot be built (a bad
/// series) fails the sweep.
pub fn sweep(
    s: &Scenario,
    seeds: u32,
    jobs: usize,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<Vec<Point>, SimError> {
    let xs = s.xs();
    let seeds = seeds.max(1);
    let mut tasks = Vec::new();
    for (si, _) in s.series.iter().enumerate() {
        for (xi, _) in xs.iter().enumerate() {
            for seed in 0..seeds {
                tasks.push((si, xi, seed));
            }
        }
    }
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(jobs.max(1))
        .build()?;
    let done = AtomicUsize::new(0);
    let results: Vec<RunMetrics> = pool.install(|| {
        tasks
            .par_iter()
            .map(|&(si, xi, seed)| {
                let m = run(&s.at(xs[xi]), &s.series[si], 1 + seed as u64 * 7919);
                progress(done.fetch_add(1, Ordering::Relaxed) + 1, tasks.len());
                m
            })
            .collect::<Result<_, _>>()
    })?;
    let mut points = Vec::new();
    for (si, series) in s.series.iter().enumerate() {
        for (xi, &x) in xs.iter().enumerate() {
            let runs: Vec<RunMetrics> = tasks
                .iter()
                .zip(&results)
                .filter(|((a, b, _), _)| *a == si && *b == xi)
                .map(|(_, r)| r.clone())
                .collect();
            points.push(aggregate(series.label(), x, &runs));
        }
    }
    Ok(points)
}
