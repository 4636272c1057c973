//! # repocast-net: the protocol core on real sockets
//!
//! A tokio driver around `repocast-core`'s state machines: UDP multicast for
//! the data and announcement channels ([`socket`]), TCP with length-prefixed
//! frames for the request connection, files on disk on both sides
//! ([`repo`] serves blocks straight from the repository, [`store`] writes
//! verified blocks to temporary files with a resume journal). [`server`]
//! and [`client`] are the two pumps; they contain no protocol logic: every
//! decision is the core's. Pacing is the core's token bucket; this crate
//! only sleeps until the core's next deadline.

pub mod addr;
pub mod client;
pub mod error;
pub mod metrics;
pub mod repo;
pub mod server;
pub mod socket;
pub mod store;

pub use error::NetError;

/// Nanoseconds since `start`, as the core's [`repocast_core::Instant`].
pub(crate) fn core_now(start: std::time::Instant) -> repocast_core::Instant {
    repocast_core::Instant::from_nanos(start.elapsed().as_nanos() as u64)
}
