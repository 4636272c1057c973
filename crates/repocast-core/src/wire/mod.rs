//! The wire format: every message repocast puts on a socket.
//!
//! Each message kind has its own module with a typed `Repr`, `parse(&[u8])`
//! that checks every length, range and count against the named limits beside
//! it and never panics, and `emit(&self, &mut Vec<u8>)`. Every message starts
//! with the same four bytes: magic `RC`, the format [`VERSION`], and a kind
//! byte. Data and announcements travel as UDP datagrams; control messages
//! travel on the TCP request connection inside length-prefixed frames
//! ([`frame`]). The byte layout is documented in `docs/protocol.md`.

pub mod announce;
pub mod batch;
pub mod catalogue;
pub mod codec;
pub mod control;
pub mod data;
pub mod frame;
pub mod manifest;
pub mod nak;

pub use announce::{AnnounceKind, AnnounceRepr, emit_announcements, parse_announcements};
pub use control::{ClientMsg, ItemSel, ServerMsg};
pub use data::{DataRepr, Probe};
pub use manifest::{FecParams, ManifestEntry};
pub use nak::{BlockNeed, NakRepr};

/// The two magic bytes at the start of every message.
pub const MAGIC: [u8; 2] = *b"RC";
/// The wire-format version this build speaks; others are rejected.
pub const VERSION: u8 = 4;
/// Bytes of the common header (magic, version, kind).
pub const HEADER_LEN: usize = 4;

/// Why a message could not be parsed. Every variant means "drop and count".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// The message ended before a field it declares.
    #[error("message truncated")]
    Truncated,
    /// The first two bytes are not `RC`.
    #[error("bad magic")]
    BadMagic,
    /// The version byte is not one this build speaks.
    #[error("unsupported wire version {0}")]
    UnsupportedVersion(u8),
    /// The kind byte names no message of the expected family.
    #[error("unknown message kind {0}")]
    UnknownKind(u8),
    /// A length, count or value exceeds its limit.
    #[error("{field} out of range: {value}")]
    OutOfRange {
        /// The field that was out of range.
        field: &'static str,
        /// The value received.
        value: u64,
    },
    /// Bytes remain after the message's last field.
    #[error("trailing bytes after message")]
    Trailing,
    /// A string is not UTF-8.
    #[error("invalid UTF-8 in {0}")]
    BadUtf8(&'static str),
}

/// The kind byte of a datagram with a valid common header (magic,
/// version), without parsing the rest.
pub fn kind_of(buf: &[u8]) -> Option<u8> {
    codec::Reader::new(buf).header().ok()
}

/// Kind bytes, one per message.
pub mod kind {
    /// Data packet (UDP, data channel).
    pub const DATA: u8 = 1;
    /// Announcement (UDP, announcement channel; also inside `Notify`).
    pub const ANNOUNCE: u8 = 2;
    /// Several announcements in one datagram, one signature (UDP,
    /// announcement channel).
    pub const ANNOUNCE_BUNDLE: u8 = 7;
    /// A signed piece of push mode's catalogue (UDP, announcement group).
    /// (Kind 3 was its one-item form before 2026-11-27: retired, and
    /// refused as an unknown kind.)
    pub const CATALOGUE_PIECE: u8 = 5;
    /// A signed repair piece of a coded catalogue (UDP, announcement
    /// group).
    pub const CATALOGUE_REPAIR: u8 = 6;
    /// A signed batch of data packet digests (UDP, data group).
    pub const SYMBOL_BATCH: u8 = 4;
    /// A pusher's record of its items' next symbol ids, kept between runs
    /// (a local file, never on the network: `server::ResumePoint`).
    pub const PUSH_IDS: u8 = 64;
    /// Client messages on the request connection.
    pub const HELLO: u8 = 16;
    /// Ask for the catalogue.
    pub const LIST: u8 = 17;
    /// Request items.
    pub const REQUEST: u8 = 18;
    /// Negative acknowledgement.
    pub const NAK: u8 = 19;
    /// The client holds a verified item.
    pub const ITEM_DONE: u8 = 20;
    /// ARM receiver's request to raise maxseqno.
    pub const ARM_NAK: u8 = 21;
    /// The client is leaving.
    pub const BYE: u8 = 22;
    /// Mid-transmission loss report.
    pub const LOSS_REPORT: u8 = 23;
    /// Blocks a resuming client already holds of an item it will request.
    pub const HAVE: u8 = 24;
    /// Server messages on the request connection.
    pub const WELCOME: u8 = 32;
    /// Part of the catalogue.
    pub const CATALOGUE: u8 = 33;
    /// A manifest entry for a requested item.
    pub const MANIFEST: u8 = 34;
    /// A transmission in progress the client may join.
    pub const NOTIFY: u8 = 35;
    /// Progress of the client's request.
    pub const PROGRESS: u8 = 36;
    /// An item (or the request) failed.
    pub const FAILED: u8 = 37;
    /// The client's whole request is complete.
    pub const DONE: u8 = 38;
    /// The session key that takes over soon (key rotation).
    pub const REKEY: u8 = 39;
}
