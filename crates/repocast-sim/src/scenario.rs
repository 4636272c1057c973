//! Scenario files (TOML): the base-case parameters of SPEC 5, the schemes to
//! compare, and the swept variable. Every field has the base-case default,
//! so `base.toml` only names what it must. Documented in `docs/scenarios.md`.

use crate::SimError;
use repocast_core::fec::CodeKind;
use repocast_core::policy::Scheme;
use repocast_core::profile::Profile;
use repocast_core::sched::SchedulerKind;
use serde::Deserialize;

/// One scenario.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Name (the output files are `<name>.csv` and so on).
    pub name: String,
    /// Simulated seconds (base case: one day).
    #[serde(default = "d_duration")]
    pub duration_s: f64,
    /// Seeds per point (results are means over seeds).
    #[serde(default = "d_one")]
    pub seeds: u32,
    /// Network model.
    #[serde(default)]
    pub network: Network,
    /// Requests.
    #[serde(default)]
    pub workload: Workload,
    /// The schemes compared, one line each.
    pub series: Vec<Series>,
    /// The swept variable (none: one point, x = 0).
    #[serde(default)]
    pub sweep: Option<Sweep>,
    /// Fixed clients instead of the generated workload (for small,
    /// checkable cases such as SPEC 3.1's worked example).
    #[serde(default, rename = "client")]
    pub clients: Vec<FixedClient>,
    /// Shared links of a tree topology (none: a star), in order; fixed
    /// clients hang below them.
    #[serde(default, rename = "link")]
    pub links: Vec<Link>,
}

/// A shared link of a tree: between `parent` (an earlier link, or the
/// backbone) and what hangs below it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Link {
    /// Loss on this link (lost for every receiver below it).
    #[serde(default)]
    pub loss: f64,
    /// One-way delay, milliseconds.
    #[serde(default)]
    pub delay_ms: f64,
    /// Index of the link above (none: the backbone at the server).
    #[serde(default)]
    pub parent: Option<usize>,
}

/// A client given by hand.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FixedClient {
    /// Item ids it asks for.
    pub items: Vec<u32>,
    /// When it arrives, seconds.
    #[serde(default)]
    pub at_s: f64,
    /// Its link loss (default: the network's client loss).
    #[serde(default)]
    pub loss: Option<f64>,
    /// The tree link it hangs below (none: the backbone).
    #[serde(default)]
    pub link: Option<usize>,
}

/// Star topology: the server's link and each client's link to a lossless
/// backbone.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Network {
    /// Loss on the server's link (lost for every client).
    pub server_loss: f64,
    /// Loss on each client's link (base class).
    pub client_loss: f64,
    /// Mean burst length in packets for Gilbert-Elliott loss (1: Bernoulli).
    pub burst: f64,
    /// Time to send one packet (80 ms: 512 bytes at 50 kbit/s).
    pub packet_time_ms: f64,
    /// NAK (and all control) travel time: at least this...
    pub nak_travel_min_ms: f64,
    /// ...with this mean (exponential tail above the minimum).
    pub nak_travel_mean_ms: f64,
    /// The NAK delay window clients draw from.
    pub nak_window_ms: [f64; 2],
}

impl Default for Network {
    fn default() -> Self {
        Network {
            server_loss: 0.0,
            client_loss: 0.05,
            burst: 1.0,
            packet_time_ms: 80.0,
            nak_travel_min_ms: 80.0,
            nak_travel_mean_ms: 100.0,
            nak_window_ms: [30.0, 210.0],
        }
    }
}

/// Who asks for what, when.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Workload {
    /// Items in the repository.
    pub items: u32,
    /// Packets per item.
    pub item_packets: u32,
    /// Bytes per packet (symbol size).
    pub packet_bytes: u16,
    /// Items per request: uniform on 1..=2*mean-1 (mean 9: 1..=17).
    pub request_mean: f64,
    /// Mean time between new clients.
    pub arrival_mean_s: f64,
    /// `poisson` or `fixed` spacing.
    pub arrivals: Arrivals,
    /// `uniform` or `zipf` popularity.
    pub popularity: Popularity,
    /// Zipf exponent.
    pub zipf_s: f64,
    /// Loss of the second class of clients.
    pub high_loss: f64,
    /// Fraction of clients in the second class.
    pub high_fraction: f64,
    /// A web-server log in Common Log Format (path relative to the
    /// scenario file): its documents become the items and its objects the
    /// clients (arrivals, request sizes and popularity come from it).
    pub trace: Option<String>,
    /// Requests of one host within this many seconds form one object.
    pub trace_window_s: f64,
    /// The parsed trace (filled in by [`Scenario::load`]).
    #[serde(skip)]
    pub parsed_trace: Option<std::sync::Arc<crate::trace::Trace>>,
}

impl Default for Workload {
    fn default() -> Self {
        Workload {
            items: 100,
            item_packets: 60,
            packet_bytes: 512,
            request_mean: 9.0,
            arrival_mean_s: 4.0,
            arrivals: Arrivals::Poisson,
            popularity: Popularity::Uniform,
            zipf_s: 1.0,
            high_loss: 0.5,
            high_fraction: 0.0,
            trace: None,
            trace_window_s: 1.0,
            parsed_trace: None,
        }
    }
}

/// How clients arrive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Arrivals {
    /// Exponential gaps with the mean.
    Poisson,
    /// Every mean seconds exactly.
    Fixed,
}

/// Which items clients pick.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Popularity {
    /// Every item alike.
    Uniform,
    /// Item i with weight 1 / i^s.
    Zipf,
}

/// A series' scheme: the one notation, or the SRM baseline.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(try_from = "String")]
pub enum SeriesScheme {
    /// SRM on its own driver.
    Srm,
    /// A repocast scheme.
    Scheme(Scheme),
}

impl TryFrom<String> for SeriesScheme {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        if s.trim().eq_ignore_ascii_case("srm") {
            return Ok(SeriesScheme::Srm);
        }
        s.parse()
            .map(SeriesScheme::Scheme)
            .map_err(|e| format!("{e}"))
    }
}

impl std::fmt::Display for SeriesScheme {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SeriesScheme::Srm => f.write_str("SRM"),
            SeriesScheme::Scheme(s) => s.fmt(f),
        }
    }
}

/// Which shipped settings a series runs with (see
/// `repocast_core::profile`): the study's (default), or what `repocast
/// serve` and `repocast get` run (`lan`: its NAK window, report timeout,
/// loss-aware repairs and early loss reports; the scenario's network and
/// the series' scheme still apply).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProfileName {
    /// The published study's settings.
    #[default]
    Study,
    /// The shipped LAN settings.
    Lan,
}

impl ProfileName {
    /// The core's profile.
    pub fn profile(self) -> Profile {
        match self {
            ProfileName::Study => Profile::Study,
            ProfileName::Lan => Profile::Lan,
        }
    }
}

/// One compared scheme.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Series {
    /// In the one notation: `FEC(0.01R)+R(0)`, `FEC(0)+R(inf)+notify`,
    /// `ARM`; or `SRM`.
    pub scheme: SeriesScheme,
    /// Scheduler (default `rq`).
    #[serde(default = "d_rq")]
    pub scheduler: SchedulerKind,
    /// Code (default `raptorq`).
    #[serde(default = "d_raptorq")]
    pub code: CodeKind,
    /// Settings profile (default `study`).
    #[serde(default)]
    pub profile: ProfileName,
    /// Label (default: the scheme, plus scheduler/code when not default).
    #[serde(default)]
    pub label: Option<String>,
    /// Unicast delivery: each client is sent its own copy of every item
    /// (with `fifo`, exact packets and `FEC(0)+R(inf)`: TCP-like, one
    /// client after another on the shared channel).
    #[serde(default)]
    pub unicast: bool,
}

impl Series {
    /// Whether this series is the SRM baseline (`scheme = "SRM"`), which
    /// runs on its own driver rather than the server and client.
    pub fn is_srm(&self) -> bool {
        self.scheme == SeriesScheme::Srm
    }

    /// The label used in tables and plots.
    pub fn label(&self) -> String {
        if let Some(l) = &self.label {
            return l.clone();
        }
        let mut l = self.scheme.to_string();
        if self.scheduler != SchedulerKind::Rq {
            l.push_str(&format!(" {}", self.scheduler.name()));
        }
        if self.code != CodeKind::RaptorQ {
            l.push_str(&format!(" {}", self.code.name()));
        }
        if self.profile != ProfileName::Study {
            l.push_str(" (lan profile)");
        }
        l
    }
}

/// The swept variable.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sweep {
    /// One of [`SWEEPABLE`].
    pub variable: String,
    /// Its values (loss rates are fractions: 0.02, not 2).
    pub values: Vec<f64>,
}

/// Variables a sweep may vary.
pub const SWEEPABLE: [&str; 7] = [
    "client_loss",
    "item_packets",
    "server_loss",
    "high_fraction",
    "high_loss",
    "packet_time_ms",
    "arrival_mean_s",
];

fn d_duration() -> f64 {
    86_400.0
}
fn d_one() -> u32 {
    1
}
fn d_rq() -> SchedulerKind {
    SchedulerKind::Rq
}
fn d_raptorq() -> CodeKind {
    CodeKind::RaptorQ
}

impl Scenario {
    /// Reads and checks a scenario file.
    pub fn load(path: &std::path::Path) -> Result<Scenario, SimError> {
        let err = |msg: String| SimError::Scenario {
            path: path.display().to_string(),
            msg,
        };
        let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
        let mut s: Scenario = toml::from_str(&text).map_err(|e| err(e.to_string()))?;
        if let Some(t) = &s.workload.trace {
            let at = path.parent().unwrap_or(std::path::Path::new(".")).join(t);
            let log = std::fs::read_to_string(&at)
                .map_err(|e| err(format!("trace {}: {e}", at.display())))?;
            let trace = crate::trace::Trace::parse(&log, s.workload.trace_window_s);
            if trace.objects.is_empty() {
                return Err(err(format!("trace {}: no usable requests", at.display())));
            }
            s.workload.parsed_trace = Some(std::sync::Arc::new(trace));
        }
        s.check()?;
        Ok(s)
    }

    /// Checks ranges and names.
    pub fn check(&self) -> Result<(), SimError> {
        let bad = |m: String| Err(SimError::Invalid(m));
        if self.series.is_empty() {
            return bad("no series".into());
        }
        for s in &self.series {
            if s.is_srm() {
                if self.workload.items != 1 || self.workload.parsed_trace.is_some() {
                    return bad("SRM series send one file: set workload.items = 1".into());
                }
                continue;
            }
        }
        if let Some(sw) = &self.sweep {
            if !SWEEPABLE.contains(&sw.variable.as_str()) {
                return bad(format!(
                    "cannot sweep {:?} (one of {SWEEPABLE:?})",
                    sw.variable
                ));
            }
        }
        if self
            .links
            .iter()
            .enumerate()
            .any(|(i, l)| l.parent.is_some_and(|p| p >= i) || !(0.0..=1.0).contains(&l.loss))
            || self
                .clients
                .iter()
                .any(|c| c.link.is_some_and(|l| l >= self.links.len()))
        {
            return bad("links: a parent must be an earlier link, a client's link must exist, loss in [0, 1]".into());
        }
        let w = &self.workload;
        if self
            .clients
            .iter()
            .any(|c| c.items.iter().any(|&i| i >= w.items) || c.at_s < 0.0)
        {
            return bad("a fixed client asks for an item outside the repository".into());
        }
        if w.items == 0 || w.item_packets == 0 || w.request_mean < 1.0 || w.arrival_mean_s <= 0.0 {
            return bad("workload sizes must be positive".into());
        }
        if self.duration_s.is_nan() || self.duration_s <= 0.0 || self.network.packet_time_ms <= 0.0
        {
            return bad("duration and packet time must be positive".into());
        }
        Ok(())
    }

    /// This scenario with the swept variable set to `x`.
    pub fn at(&self, x: f64) -> Scenario {
        let mut s = self.clone();
        if let Some(sw) = &self.sweep {
            match sw.variable.as_str() {
                "client_loss" => s.network.client_loss = x,
                "item_packets" => s.workload.item_packets = x.max(1.0) as u32,
                "server_loss" => s.network.server_loss = x,
                "high_fraction" => s.workload.high_fraction = x,
                "high_loss" => s.workload.high_loss = x,
                "packet_time_ms" => s.network.packet_time_ms = x,
                "arrival_mean_s" => s.workload.arrival_mean_s = x,
                _ => {}
            }
        }
        s
    }

    /// The x values (one point at 0 without a sweep).
    pub fn xs(&self) -> Vec<f64> {
        self.sweep.as_ref().map_or(vec![0.0], |s| s.values.clone())
    }
}
