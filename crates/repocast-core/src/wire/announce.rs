//! Announcements: which transmission the data channel carries next.
//!
//! The server sends one when a transmission starts (kind first send, repair
//! or carousel) and one when it ends. Clients use them to decide whether to
//! listen, to know how many packets to expect, and to time their NAKs; the
//! NAK delay window rides on every announcement so the server can widen it.
//! The same bytes, inside a `Notify` control message, tell a late joiner
//! about a transmission in progress.

use super::codec::{Reader, Writer, check_max};
use super::{WireError, kind};
use crate::{ItemId, SessionId, TransmissionId};

/// Longest NAK window accepted, in microseconds (one minute).
pub const MAX_NAK_WINDOW_US: u32 = 60_000_000;
/// Longest announced transmission accepted, in microseconds (one day).
pub const MAX_DURATION_US: u64 = 86_400_000_000;

/// What a transmission is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnnounceKind {
    /// A scheduled send of the item.
    First,
    /// Repair symbols answering NAKs.
    Repair,
    /// A push-mode carousel pass.
    Carousel,
    /// The named transmission has ended.
    End,
}

impl AnnounceKind {
    fn to_u8(self) -> u8 {
        match self {
            AnnounceKind::First => 0,
            AnnounceKind::Repair => 1,
            AnnounceKind::Carousel => 2,
            AnnounceKind::End => 3,
        }
    }

    fn from_u8(v: u8) -> Result<Self, WireError> {
        Ok(match v {
            0 => AnnounceKind::First,
            1 => AnnounceKind::Repair,
            2 => AnnounceKind::Carousel,
            3 => AnnounceKind::End,
            _ => {
                return Err(WireError::OutOfRange {
                    field: "announce kind",
                    value: v as u64,
                });
            }
        })
    }
}

/// A parsed announcement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AnnounceRepr {
    /// The server session.
    pub session: SessionId,
    /// The transmission announced (or ended).
    pub transmission: TransmissionId,
    /// The item it carries.
    pub item: ItemId,
    /// Start, repair, carousel or end.
    pub kind: AnnounceKind,
    /// First block the transmission covers.
    pub first_block: u32,
    /// Number of blocks from `first_block` it covers.
    pub block_count: u32,
    /// Data packets in the whole transmission.
    pub total_packets: u32,
    /// Expected duration at the server's rate, in microseconds.
    pub duration_us: u64,
    /// NAK delay window, lower bound (microseconds).
    pub nak_window_min_us: u32,
    /// NAK delay window, upper bound (exclusive, microseconds).
    pub nak_window_max_us: u32,
}

impl AnnounceRepr {
    /// Parses an announcement; never panics.
    pub fn parse(buf: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(buf);
        let k = r.header()?;
        if k != kind::ANNOUNCE {
            return Err(WireError::UnknownKind(k));
        }
        let a = Self::parse_body(&mut r)?;
        r.finish()?;
        Ok(a)
    }

    /// Parses the fields after the header (also used inside `Notify`).
    pub(crate) fn parse_body(r: &mut Reader<'_>) -> Result<Self, WireError> {
        let session = SessionId(r.u32()?);
        let transmission = TransmissionId(r.u32()?);
        let item = ItemId(r.u32()?);
        let kind = AnnounceKind::from_u8(r.u8()?)?;
        let first_block = r.u32()?;
        let block_count = r.u32()?;
        check_max(
            "block range",
            first_block as u64 + block_count as u64,
            u32::MAX as u64,
        )?;
        let total_packets = r.u32()?;
        let duration_us = r.u64()?;
        check_max("duration", duration_us, MAX_DURATION_US)?;
        let nak_window_min_us = r.u32()?;
        let nak_window_max_us = r.u32()?;
        check_max(
            "nak window",
            nak_window_max_us as u64,
            MAX_NAK_WINDOW_US as u64,
        )?;
        check_max(
            "nak window min",
            nak_window_min_us as u64,
            nak_window_max_us as u64,
        )?;
        Ok(AnnounceRepr {
            session,
            transmission,
            item,
            kind,
            first_block,
            block_count,
            total_packets,
            duration_us,
            nak_window_min_us,
            nak_window_max_us,
        })
    }

    /// Appends the announcement's bytes to `buf`.
    pub fn emit(&self, buf: &mut Vec<u8>) {
        let mut w = Writer::with_header(buf, kind::ANNOUNCE);
        self.emit_body(&mut w);
    }

    pub(crate) fn emit_body(&self, w: &mut Writer<'_>) {
        w.u32(self.session.0)
            .u32(self.transmission.0)
            .u32(self.item.0)
            .u8(self.kind.to_u8())
            .u32(self.first_block)
            .u32(self.block_count)
            .u32(self.total_packets)
            .u64(self.duration_us)
            .u32(self.nak_window_min_us)
            .u32(self.nak_window_max_us);
    }
}
