//! Announcements: which transmission the data channel carries next.
//!
//! The server sends one when a transmission starts (kind first send, repair
//! or carousel) and one when it ends. Clients use them to decide whether to
//! listen, to know how many packets to expect, and to time their NAKs; the
//! NAK delay window rides on every announcement so the server can widen it.
//! The same bytes, inside a `Notify` control message, tell a late joiner
//! about a transmission in progress.
//!
//! Announcements due at the same moment (a transmission's end and the
//! next one's start, or both of an empty item's) travel as one bundle
//! (kind 7), so a receiver hears, and checks the signature of, one
//! datagram where it would have had two: with many small items that is
//! most of a receiver's signature work.

use super::codec::{Reader, Writer, check_max};
use super::{WireError, kind};
use crate::{ItemId, SessionId, TransmissionId};

/// Longest NAK window accepted, in microseconds (one minute).
pub const MAX_NAK_WINDOW_US: u32 = 60_000_000;
/// Longest announced transmission accepted, in microseconds (one day).
pub const MAX_DURATION_US: u64 = 86_400_000_000;

/// Most announcements one bundle carries.
pub const MAX_BUNDLE: usize = 8;

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

/// Parses an announcement datagram into its announcements, in the order
/// they were made: one (kind 2), or a bundle of 1 to [`MAX_BUNDLE`]
/// (kind 7); never panics.
pub fn parse_announcements(buf: &[u8]) -> Result<Vec<AnnounceRepr>, WireError> {
    let mut r = Reader::new(buf);
    let k = r.header()?;
    let n = match k {
        kind::ANNOUNCE => 1,
        kind::ANNOUNCE_BUNDLE => {
            let n = r.u8()? as usize;
            if !(1..=MAX_BUNDLE).contains(&n) {
                return Err(WireError::OutOfRange {
                    field: "bundled announcements",
                    value: n as u64,
                });
            }
            n
        }
        k => return Err(WireError::UnknownKind(k)),
    };
    let list = (0..n)
        .map(|_| AnnounceRepr::parse_body(&mut r))
        .collect::<Result<Vec<_>, _>>()?;
    r.finish()?;
    Ok(list)
}

/// Appends one datagram carrying `list` (at most [`MAX_BUNDLE`]; the
/// rest are left out): a lone announcement as kind 2, more as a bundle.
pub fn emit_announcements(list: &[AnnounceRepr], buf: &mut Vec<u8>) {
    match list {
        [] => {}
        [a] => a.emit(buf),
        _ => {
            let list = &list[..list.len().min(MAX_BUNDLE)];
            let mut w = Writer::with_header(buf, kind::ANNOUNCE_BUNDLE);
            w.u8(list.len() as u8);
            for a in list {
                a.emit_body(&mut w);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(t: u32, kind: AnnounceKind) -> AnnounceRepr {
        AnnounceRepr {
            session: SessionId(1),
            transmission: TransmissionId(t),
            item: ItemId(t),
            kind,
            first_block: 0,
            block_count: 1,
            total_packets: 1,
            duration_us: 100,
            nak_window_min_us: 10,
            nak_window_max_us: 20,
        }
    }

    #[test]
    fn a_bundle_carries_its_announcements_in_order_and_bounds_their_count() {
        let list = vec![a(1, AnnounceKind::End), a(2, AnnounceKind::First)];
        let mut b = Vec::new();
        emit_announcements(&list, &mut b);
        assert_eq!(b[3], kind::ANNOUNCE_BUNDLE);
        assert_eq!(parse_announcements(&b), Ok(list.clone()));
        // Not a plain announcement.
        assert!(AnnounceRepr::parse(&b).is_err());
        // Counts of 0 and above the bound are refused; emitting more than
        // the bound leaves the rest out.
        for (n, ok) in [(0u8, false), (1, true), (8, true), (9, false)] {
            let mut w = Vec::new();
            let mut wr = Writer::with_header(&mut w, kind::ANNOUNCE_BUNDLE);
            wr.u8(n);
            for i in 0..n {
                a(i as u32, AnnounceKind::First).emit_body(&mut wr);
            }
            assert_eq!(parse_announcements(&w).is_ok(), ok, "{n}");
        }
        let many: Vec<_> = (0..12).map(|t| a(t, AnnounceKind::End)).collect();
        let mut w = Vec::new();
        emit_announcements(&many, &mut w);
        assert_eq!(parse_announcements(&w), Ok(many[..MAX_BUNDLE].to_vec()));
    }
}
