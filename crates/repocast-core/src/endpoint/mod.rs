//! Endpoints: the state machines behind a byte interface, the one contract
//! every driver implements (the tokio server and client, the simulator's
//! payload runs, the fuzz targets).
//!
//! - [`server::ServerEndpoint`]: connections and their frames in; data and
//!   announcement datagrams and frames out; malformed input counted and
//!   dropped; announcement repetition; per-peer limits.
//! - [`client::ClientEndpoint`]: frames and datagrams in; frames out;
//!   decoded blocks to a [`store::BlockStore`] (on disk in `repocast get`,
//!   in memory in tests: [`store::MemoryStore`]); spill of partial blocks
//!   within a memory budget; one outcome per requested item.
//!
//! Drivers do sockets, timers and files, and nothing else: every protocol
//! decision is made here or below. Settings come from [`crate::profile`].

pub mod assembly;
pub mod catalogue_code;
pub mod client;
pub mod finish;
pub mod listen;
pub mod pack;
pub mod push;
pub mod select;
pub mod server;
pub mod signing;
pub mod store;
pub mod unpack;

use crate::ClientId;

/// Where a datagram or frame from [`server::ServerEndpoint::poll_transmit`]
/// goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dest {
    /// The multicast data group.
    Data,
    /// The multicast announcement group.
    Announce,
    /// One request connection.
    Conn(ClientId),
}

impl Dest {
    /// The multicast channel a datagram sent here arrives on (what a
    /// driver hands [`listen::ListenEndpoint::handle_datagram`]); `None`
    /// for a request connection.
    pub fn channel(self) -> Option<Channel> {
        match self {
            Dest::Data => Some(Channel::Data),
            Dest::Announce => Some(Channel::Announce),
            Dest::Conn(_) => None,
        }
    }
}

/// A multicast channel a datagram arrived on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Channel {
    /// The data group.
    Data,
    /// The announcement group.
    Announce,
}

/// Most hello, catalogue and request messages one connection may send
/// (a `get` sends one of each; a client that loops on them only makes
/// the server work).
pub const MAX_ONE_OFF: u32 = 16;

/// Why the server endpoint closes (or refuses) a connection.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CloseReason {
    /// [`crate::profile::EndpointLimits::max_connections`] are open.
    #[error("too many connections")]
    TooManyConnections,
    /// Its bytes would take the buffered total over its limit.
    #[error("buffered frame bytes over the server's limit")]
    OverMemory,
    /// It does not read what the server sends.
    #[error("peer does not read")]
    NotReading,
    /// Its byte stream is not framed messages.
    #[error("protocol: {0}")]
    Protocol(crate::wire::WireError),
    /// It sent more of a one-off message than any client needs.
    #[error("too many {0} messages")]
    Repeated(&'static str),
    /// Tokens are required and it did not open with a known one.
    #[error("no valid access token")]
    Unauthorized,
}

/// Counters of the server endpoint (the state machine keeps its own).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EndpointStats {
    /// Frames that did not parse (dropped), or broke framing (closed).
    pub malformed_frames: u64,
    /// Connections refused at the limit.
    pub refused_connections: u64,
    /// Connections closed for buffering too much.
    pub closed_over_memory: u64,
    /// Connections closed for not reading.
    pub closed_not_reading: u64,
    /// Connections closed for repeating one-off messages (hello, catalogue,
    /// request) past [`MAX_ONE_OFF`].
    pub closed_repeating: u64,
    /// Connections refused for a missing or unknown access token.
    pub refused_unauthorized: u64,
    /// Admitted connections closed because their token was withdrawn.
    pub revoked: u64,
}
