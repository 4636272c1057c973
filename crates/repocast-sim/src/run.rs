//! One simulated run: a scenario point, one series, one seed, through the
//! core's state machines in accounting mode.

use crate::SimError;
use crate::engine::Harness;
use crate::scenario::{ProfileName, Scenario, Series, SeriesScheme};
use crate::workload;
use repocast_core::sched::SchedulerKind;
use repocast_core::server::ServerConfig;
use repocast_core::{Instant, SessionId};
use std::time::Duration;

/// What one run measured.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunMetrics {
    /// Delay of every client that completed, seconds.
    pub delays: Vec<f64>,
    /// Each completed client's link loss (for the loss-weighted mean).
    pub losses: Vec<f64>,
    /// Each completed client's seek time: request to its first useful
    /// packet, seconds (SPEC 4; the rest of its delay is transfer time).
    pub seeks: Vec<f64>,
    /// Clients that arrived.
    pub arrived: usize,
    /// Data packets sent.
    pub data_packets: u64,
    /// Of which repair.
    pub repair_packets: u64,
    /// NAKs received.
    pub naks: u64,
    /// Packets clients received and could not use.
    pub useless: u64,
    /// Events the engine simulated (see `Harness::events`).
    pub events: u64,
}

fn ms(x: f64) -> Duration {
    Duration::from_secs_f64(x.max(0.0) / 1000.0)
}

/// A fixed client's tree links up to the backbone, and their delay.
fn path_of(s: &Scenario, client: usize) -> (Vec<usize>, Duration) {
    let mut path = Vec::new();
    let mut delay = 0.0;
    let mut next = s.clients.get(client).and_then(|c| c.link);
    while let Some(l) = next.filter(|&l| l < s.links.len() && !path.contains(&l)) {
        path.push(l);
        delay += s.links[l].delay_ms;
        next = s.links[l].parent;
    }
    (path, ms(delay))
}

/// The SRM baseline: one file of `item_packets` to every client, all from
/// time 0, on the core's SRM driver.
fn run_srm(s: &Scenario, seed: u64) -> RunMetrics {
    use crate::baseline::srm_net::{SrmNet, SrmReceiver, run_srm};
    let n = &s.network;
    let specs = workload::clients(s, seed);
    let net = SrmNet {
        server_loss: workload::loss(n.server_loss, n.burst),
        links: (s.links.iter())
            .map(|l| workload::loss(l.loss, n.burst))
            .collect(),
        base_delay: ms(n.nak_travel_min_ms),
        packet_interval: ms(n.packet_time_ms),
    };
    let rx: Vec<SrmReceiver> = (specs.iter().enumerate())
        .map(|(i, c)| {
            let (path, path_delay) = path_of(s, i);
            SrmReceiver {
                loss: c.loss,
                path,
                path_delay,
            }
        })
        .collect();
    let limit = Instant::from_micros((s.duration_s * 1e6) as u64);
    let out = run_srm(
        s.workload.item_packets,
        &net,
        &rx,
        Default::default(),
        seed,
        limit,
    );
    let mut m = RunMetrics {
        arrived: specs.len(),
        data_packets: out.data_packets + out.repair_packets,
        repair_packets: out.repair_packets,
        naks: out.requests,
        events: out.events,
        ..Default::default()
    };
    for (d, c) in out.done.iter().zip(&specs) {
        if let Some(d) = d {
            m.delays.push(d.as_secs_f64());
            m.losses.push(c.loss.mean_loss());
            m.seeks.push(0.0);
        }
    }
    m
}

/// Runs `series` on `scenario` (already at its x) with `seed`.
pub fn run(s: &Scenario, series: &Series, seed: u64) -> Result<RunMetrics, SimError> {
    let scheme = match &series.scheme {
        SeriesScheme::Srm => return Ok(run_srm(s, seed)),
        SeriesScheme::Scheme(x) => *x,
    };
    let w = &s.workload;
    let n = &s.network;
    let code = series.code;
    let mut specs = workload::clients(s, seed);
    let mut sizes = workload::catalogue(s);
    if series.unicast {
        (specs, sizes) = workload::private_copies(specs, &sizes);
    }
    let scheduler = match &series.scheduler {
        // MAD's access probabilities: each document's share of requests.
        SchedulerKind::Mad { .. } => SchedulerKind::Mad {
            weights: workload::popularity(&specs, sizes.len()),
        },
        k => k.clone(),
    };
    let profile = series.profile.profile();
    let mut cfg = ServerConfig {
        session: SessionId(1),
        scheme,
        scheduler,
        code,
        symbol_size: w.packet_bytes.max(16) & !1,
        max_block_symbols: code.default_block_symbols(),
        packet_interval: ms(n.packet_time_ms),
        burst: 1,
        payloads: false,
        seed,
        ..profile.server()
    };
    // The study's runs take their NAK window from the scenario; a shipped
    // profile brings its own.
    if series.profile == ProfileName::Study {
        cfg.nak_window = (ms(n.nak_window_ms[0]), ms(n.nak_window_ms[1]));
    }
    let mut h = Harness::accounting(cfg, &sizes, workload::loss(n.server_loss, n.burst))
        .map_err(|e| SimError::Invalid(format!("series {}: {e}", series.label())))?;
    h.client_config = profile.client();
    h.control_delay = ms(n.nak_travel_min_ms);
    h.control_tail = ms(n.nak_travel_mean_ms - n.nak_travel_min_ms);
    let arrived = specs.len();
    let losses: Vec<f64> = specs.iter().map(|c| c.loss.mean_loss()).collect();
    let links: Vec<usize> = (s.links.iter())
        .map(|l| h.add_link(workload::loss(l.loss, n.burst)))
        .collect();
    for (i, c) in specs.into_iter().enumerate() {
        let at = h.add_client(c);
        // A fixed client below a tree link: its path up to the backbone.
        let (path, delay) = path_of(s, i);
        if !path.is_empty() {
            h.set_path(at, path.iter().map(|&l| links[l]).collect(), delay);
        }
    }
    h.run(Instant::from_micros((s.duration_s * 1e6) as u64));
    let mut m = RunMetrics {
        arrived,
        ..Default::default()
    };
    for (rep, p) in h.reports().iter().zip(losses) {
        m.useless += rep.stats.useless;
        if let Some(d) = rep.delay {
            m.delays.push(d.as_secs_f64());
            m.losses.push(p);
            m.seeks
                .push(rep.first_useful.unwrap_or(d).min(d).as_secs_f64());
        }
    }
    let st = h.server.stats();
    m.data_packets = st.data_packets;
    m.repair_packets = st.repair_packets;
    m.naks = st.naks;
    m.events = h.events();
    Ok(m)
}
