//! # repocast-core: the sans-IO protocol core
//!
//! Everything repocast *decides* lives here: the wire format ([`wire`]), the
//! erasure codes behind one trait ([`fec`]), the schedulers that pick the next
//! item ([`sched`]), the reliability policies and their notation ([`policy`]),
//! and the two state machines, [`server::Server`] and [`client::Client`].
//!
//! The crate performs no I/O, reads no clock and uses no global RNG. Time is
//! an argument ([`Instant`]) of every `handle_*` call; packets, deadlines and
//! events come out of `poll_transmit`, `poll_timeout` and `poll_event`;
//! randomness comes from a seeded [`rng::Rng`] in each config. The simulator
//! (`repocast-sim`) and the network layer (`repocast-net`) are two pumps around
//! these same values; the core holds no simulator.

pub mod auth;
pub mod client;
pub mod endpoint;
pub mod fec;
pub mod hash;
pub mod hex;
pub mod ids;
pub mod loss;
pub mod policy;
pub mod profile;
pub mod rng;
pub mod sched;
pub mod server;
pub mod time;
pub mod wire;

pub use ids::{BlockId, ClientId, ItemId, SessionId, TransmissionId};
pub use time::Instant;
