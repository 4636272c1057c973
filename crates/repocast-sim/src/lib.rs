//! # repocast-sim: the discrete-event simulator (stub)
//!
//! Will drive `repocast-core`'s own server and client state machines over
//! simulated links (star and tree topologies, Bernoulli and Gilbert-Elliott
//! loss) with a virtual clock. It writes no protocol logic of its own.
//! Until that issue lands, [`run_day_stub`] shows the shape: it runs the
//! core's in-process harness, which is the pump this crate will replace.

pub use repocast_core::harness;

/// Placeholder entry point; the simulator issue replaces it.
pub fn run_day_stub() -> &'static str {
    "the simulator is not built yet"
}
