//! # repocast-net: tokio driver for real UDP multicast and TCP (stub)
//!
//! Will pump `repocast-core`'s server and client state machines with real
//! sockets: multicast data and announcement channels, the TCP request
//! connection (length-prefixed frames from `repocast_core::wire::frame`),
//! rate pacing and loss emulation (`repocast_core::loss`). No protocol
//! logic lives here.

/// Placeholder; the networking issue replaces it.
pub fn not_built_yet() -> &'static str {
    "the network layer is not built yet"
}
