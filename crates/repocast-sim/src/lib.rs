//! # repocast-sim: the simulator
//!
//! Two kinds of run, both on a virtual clock. Accounting runs drive the
//! core's server and client state machines without payload bytes over a
//! simulated star or tree network ([`engine`]: per-link seeded loss, NAK
//! travel time with a minimum and an exponential tail, clients joining at
//! their arrival times; [`baseline`] holds SRM), fast enough for a
//! simulated day in under a second. Payload runs drive the core's
//! endpoints through their byte interfaces, exactly as the network driver
//! does: [`lan`] for `serve`/`get`, [`push_lan`] for `push`/`listen`, over
//! items held by [`source`]. No scheduling, FEC or retransmission logic
//! lives here: this crate turns a [`scenario::Scenario`] into workloads
//! ([`workload`]), runs them ([`run`]), sweeps a variable across series and
//! seeds on all cores ([`sweep`]) and writes the results ([`output`]).
//! [`weblog`] turns a web log into a push run that real commands and both
//! kinds of simulated run can replay alike.

pub mod baseline;
pub mod engine;
pub mod insider;
pub mod lan;
pub mod output;
pub mod plot;
pub mod push_lan;
mod raster;
pub mod requests;
pub mod run;
pub mod scenario;
pub mod source;
pub mod sweep;
pub mod trace;
pub mod weblog;
pub mod workload;

/// Errors of the simulator's boundary (scenario files, output).
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The scenario file cannot be read or parsed.
    #[error("scenario {path}: {msg}")]
    Scenario {
        /// The file.
        path: String,
        /// What is wrong.
        msg: String,
    },
    /// A value in the scenario is out of range or unknown.
    #[error("scenario: {0}")]
    Invalid(String),
    /// The sweep's thread pool could not start.
    #[error("thread pool: {0}")]
    Threads(#[from] rayon::ThreadPoolBuildError),
    /// Results cannot be written.
    #[error("{path}: {source}")]
    Output {
        /// The file.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
}
