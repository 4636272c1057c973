//! Data packets: one encoding symbol on the multicast data channel.
//!
//! Each packet names its session, transmission, item, block and symbol, so
//! any packet is useful on its own. ARM probes ride on data packets
//! ([`Probe`]). An authenticated session ends each packet with a keyed tag
//! over the bytes before it (`crate::auth`; checked by the client endpoint).

use super::codec::{Reader, Writer, check_max};
use super::{WireError, kind};
use crate::{BlockId, ItemId, SessionId, TransmissionId};

/// Largest symbol payload accepted, in bytes (jumbo frames fit).
pub const MAX_SYMBOL_SIZE: usize = 9000;
/// Largest authentication tag accepted, in bytes.
pub const MAX_TAG_LEN: usize = 64;
/// Bytes a data packet adds to its symbol when it carries no probe and no
/// tag: the common header, six u32 fields, flags and the payload length.
pub const DATA_OVERHEAD: usize = super::HEADER_LEN + 6 * 4 + 1 + 2;
/// Bytes an authentication tag of [`crate::auth::TAG_LEN`] adds to a
/// packet (its length byte and the tag).
pub const DATA_TAG_OVERHEAD: usize = 1 + crate::auth::TAG_LEN;
/// Bytes an ARM probe adds to the packets that carry one (PTS u32 and
/// the sender's timestamp u64).
pub const DATA_PROBE_OVERHEAD: usize = 4 + 8;
/// Largest encoding symbol id accepted (RaptorQ's ESI is 24 bits).
pub const MAX_SYMBOL_ID: u32 = (1 << 24) - 1;

const FLAG_PROBE: u8 = 1;
const FLAG_TAG: u8 = 2;
const FLAG_ENCRYPTED: u8 = 4;

/// An ARM probe: symbols still to come and the sender's timestamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Probe {
    /// PTS = maxseqno - seqno at the time of sending.
    pub pts: u32,
    /// The sender's clock in microseconds, echoed back in the ARM NAK.
    pub timestamp_us: u64,
}

/// A parsed data packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DataRepr {
    /// The server session.
    pub session: SessionId,
    /// The transmission this packet belongs to.
    pub transmission: TransmissionId,
    /// The item.
    pub item: ItemId,
    /// The source block within the item.
    pub block: BlockId,
    /// The encoding symbol id within the block (source ids first).
    pub symbol: u32,
    /// Position of this packet within its transmission (0-based).
    pub seq: u32,
    /// ARM probe, if this packet carries one.
    pub probe: Option<Probe>,
    /// The symbol bytes; empty when the core runs without payloads.
    pub payload: Vec<u8>,
    /// Authentication tag (`crate::auth::seal_data`), empty if none.
    pub tag: Vec<u8>,
    /// Whether the payload is encrypted (`crate::auth::crypt_payload`);
    /// only with a tag.
    pub encrypted: bool,
}

impl DataRepr {
    /// The session a data packet names (right after the common header),
    /// without parsing the rest: `None` if it is too short to name one.
    pub fn peek_session(buf: &[u8]) -> Option<SessionId> {
        let b = buf.get(super::HEADER_LEN..super::HEADER_LEN + 4)?;
        Some(SessionId(u32::from_be_bytes([b[0], b[1], b[2], b[3]])))
    }

    /// The item a data packet carries (after the session and the
    /// transmission), without parsing the rest: `None` if the datagram is
    /// not a data packet or too short to name one. A host's shared
    /// receiver hands a packet only to the requests that want its item.
    pub fn peek_item(buf: &[u8]) -> Option<ItemId> {
        if super::kind_of(buf) != Some(kind::DATA) {
            return None;
        }
        let at = super::HEADER_LEN + 8;
        let b = buf.get(at..at + 4)?;
        Some(ItemId(u32::from_be_bytes([b[0], b[1], b[2], b[3]])))
    }

    /// Parses a datagram; never panics.
    pub fn parse(buf: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(buf);
        let k = r.header()?;
        if k != kind::DATA {
            return Err(WireError::UnknownKind(k));
        }
        let session = SessionId(r.u32()?);
        let transmission = TransmissionId(r.u32()?);
        let item = ItemId(r.u32()?);
        let block = BlockId(r.u32()?);
        let symbol = r.u32()?;
        check_max("symbol id", symbol as u64, MAX_SYMBOL_ID as u64)?;
        let seq = r.u32()?;
        let flags = r.u8()?;
        let known = FLAG_PROBE | FLAG_TAG | FLAG_ENCRYPTED;
        // An encrypted payload is always authenticated.
        if flags & !known != 0 || (flags & FLAG_ENCRYPTED != 0 && flags & FLAG_TAG == 0) {
            return Err(WireError::OutOfRange {
                field: "data flags",
                value: flags as u64,
            });
        }
        let probe = if flags & FLAG_PROBE != 0 {
            Some(Probe {
                pts: r.u32()?,
                timestamp_us: r.u64()?,
            })
        } else {
            None
        };
        let len = r.u16()? as usize;
        check_max("payload length", len as u64, MAX_SYMBOL_SIZE as u64)?;
        let payload = r.bytes(len)?.to_vec();
        let tag = if flags & FLAG_TAG != 0 {
            let n = r.u8()? as usize;
            check_max("tag length", n as u64, MAX_TAG_LEN as u64)?;
            r.bytes(n)?.to_vec()
        } else {
            Vec::new()
        };
        r.finish()?;
        let encrypted = flags & FLAG_ENCRYPTED != 0;
        if encrypted && tag.is_empty() {
            // Flagged, but with an empty tag: nothing authenticates it.
            return Err(WireError::OutOfRange {
                field: "data flags",
                value: flags as u64,
            });
        }
        Ok(DataRepr {
            session,
            transmission,
            item,
            block,
            symbol,
            seq,
            probe,
            payload,
            tag,
            encrypted,
        })
    }

    /// Appends the packet's bytes to `buf`.
    pub fn emit(&self, buf: &mut Vec<u8>) {
        let mut w = Writer::with_header(buf, kind::DATA);
        let mut flags = 0;
        if self.probe.is_some() {
            flags |= FLAG_PROBE;
        }
        if !self.tag.is_empty() {
            flags |= FLAG_TAG;
            if self.encrypted {
                flags |= FLAG_ENCRYPTED;
            }
        }
        w.u32(self.session.0)
            .u32(self.transmission.0)
            .u32(self.item.0)
            .u32(self.block.0)
            .u32(self.symbol)
            .u32(self.seq)
            .u8(flags);
        if let Some(p) = self.probe {
            w.u32(p.pts).u64(p.timestamp_us);
        }
        let len = self.payload.len().min(MAX_SYMBOL_SIZE);
        w.u16(len as u16).bytes(&self.payload[..len]);
        if !self.tag.is_empty() {
            let n = self.tag.len().min(MAX_TAG_LEN);
            w.u8(n as u8).bytes(&self.tag[..n]);
        }
    }
}
