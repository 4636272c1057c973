//! Messages of the TCP request connection, client to server and back.
//!
//! A client says hello, may list the catalogue, requests items, and sends a
//! NAK or an item-done report after each transmission it listened to. The
//! server answers with its welcome, catalogue pages, a manifest entry per
//! requested item, notifies of transmissions in progress (for `+notify`),
//! progress, and finally done or failed with a reason.

use super::announce::AnnounceRepr;
use super::codec::{Reader, Writer};
use super::manifest::{MAX_NAME_LEN, ManifestEntry};
use super::nak::NakRepr;
use super::{WireError, kind};
use crate::{ItemId, SessionId, TransmissionId};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Most items one request may name.
pub const MAX_REQUEST_ITEMS: u32 = 1 << 20;
/// Most catalogue entries in one catalogue message.
pub const MAX_CATALOGUE_ENTRIES: u32 = 1 << 16;
/// Longest reason or client name string.
pub const MAX_TEXT_LEN: usize = 1024;
/// Longest held-blocks bitmap in a `Have` (8 Mi blocks).
pub const MAX_HAVE_BYTES: usize = 1 << 20;

/// The bitmap of a `Have` holding `blocks`: bit `b % 8` of byte `b / 8`.
pub fn held_bitmap(blocks: &[u32]) -> Vec<u8> {
    let n = blocks.iter().max().map_or(0, |&b| b as usize / 8 + 1);
    let mut v = vec![0u8; n];
    for &b in blocks {
        v[b as usize / 8] |= 1 << (b % 8);
    }
    v
}

/// Whether a `Have` bitmap holds `block`.
pub fn bitmap_holds(bitmap: &[u8], block: u32) -> bool {
    bitmap
        .get(block as usize / 8)
        .is_some_and(|x| x & (1 << (block % 8)) != 0)
}

/// An item named in a request: by catalogue id or by relative path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ItemSel {
    /// By catalogue id.
    Id(ItemId),
    /// By name (relative path).
    Name(String),
}

/// One catalogue line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogueEntry {
    /// Item id.
    pub item: ItemId,
    /// Relative path.
    pub name: String,
    /// Size in bytes.
    pub size: u64,
}

/// Client to server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientMsg {
    /// First message: the client's name (for logs) and, for a server that
    /// requires one, its access token (an optional trailing field).
    Hello { name: String, token: Option<String> },
    /// Ask for the catalogue.
    ListCatalogue,
    /// Request items.
    Request { items: Vec<ItemSel> },
    /// Symbols still needed after a transmission.
    Nak(NakRepr),
    /// The item is decoded and verified.
    ItemDone {
        item: ItemId,
        transmission: TransmissionId,
        received: u32,
        expected: u32,
    },
    /// ARM: asks the sender to raise maxseqno for the transmission.
    ArmNak {
        transmission: TransmissionId,
        item: ItemId,
        want_maxseq: u32,
        echo_timestamp_us: u64,
        hold_us: u32,
    },
    /// The client is leaving.
    Bye,
    /// Sent before a request by a client resuming an interrupted run: of
    /// the item `name` in the version with `hash`, it holds the blocks
    /// whose bits are set in `held` (bit `b % 8` of byte `b / 8`), so the
    /// server sends only the others.
    Have {
        /// The item's name, as it will be requested.
        name: String,
        /// The whole item's hash the blocks belong to.
        hash: [u8; 32],
        /// Bitmap of blocks held.
        held: Vec<u8>,
    },
    /// During a long transmission: what the client has heard of it so
    /// far (packets received of those sent since its first), so the server
    /// can size the rest of the transmission to the loss it sees. Sent on
    /// 1,024 packets, then on twice as many each time; the NAK or
    /// item-done report at the end still carries the whole transmission's
    /// counts.
    LossReport {
        transmission: TransmissionId,
        item: ItemId,
        received: u32,
        expected: u32,
    },
}

/// Server to client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerMsg {
    /// Answer to hello: the session, the catalogue size, and where the
    /// data and announcement channels are (so a client needs only the
    /// server's address) with the sending rate, and the session key that
    /// tags the session's multicast packets (`None`: unauthenticated).
    Welcome {
        session: SessionId,
        items: u32,
        channels: Channels,
        session_key: Option<[u8; 32]>,
        /// Data packets are vouched for by signed batches
        /// (`crate::wire::batch`): a client that knows the server's key
        /// takes only symbols a batch lists.
        signed_symbols: bool,
    },
    /// A page of the catalogue; `more` says whether pages follow.
    Catalogue {
        entries: Vec<CatalogueEntry>,
        more: bool,
    },
    /// The manifest of a requested item. The client listens to every
    /// transmission of the item numbered `next_transmission` or later.
    Manifest {
        entry: ManifestEntry,
        next_transmission: TransmissionId,
    },
    /// A transmission of a requested item is in progress: join it.
    Notify(AnnounceRepr),
    /// Progress of the request.
    Progress { items_done: u32, items_total: u32 },
    /// An item (or, with `item: None`, the whole request) failed.
    Failed {
        item: Option<ItemId>,
        name: String,
        reason: String,
    },
    /// Every requested item is complete.
    Done,
    /// The session key that takes over soon: multicast packets whose
    /// packet number's top byte is `epoch` are tagged (and encrypted)
    /// under `key`. Sent to every client when the server rotates its key,
    /// ahead of the switch, and after Welcome while a switch is pending.
    Rekey { epoch: u8, key: [u8; 32] },
}

impl ClientMsg {
    /// Parses one control frame; never panics.
    pub fn parse(buf: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(buf);
        let m = match r.header()? {
            kind::HELLO => ClientMsg::Hello {
                name: r.string("client name", MAX_TEXT_LEN)?,
                token: match r.remaining() {
                    0 => None,
                    _ => Some(r.string("access token", MAX_TEXT_LEN)?),
                },
            },
            kind::LIST => ClientMsg::ListCatalogue,
            kind::REQUEST => {
                // An id selector takes 5 bytes, a name selector at least 3.
                let n = r.count("request items", MAX_REQUEST_ITEMS, 3)?;
                let mut items = Vec::with_capacity(n);
                for _ in 0..n {
                    items.push(match r.u8()? {
                        0 => ItemSel::Id(ItemId(r.u32()?)),
                        1 => ItemSel::Name(r.string("item name", MAX_NAME_LEN)?),
                        v => {
                            return Err(WireError::OutOfRange {
                                field: "item selector",
                                value: v as u64,
                            });
                        }
                    });
                }
                ClientMsg::Request { items }
            }
            kind::NAK => ClientMsg::Nak(NakRepr::parse_body(&mut r)?),
            kind::ITEM_DONE => ClientMsg::ItemDone {
                item: ItemId(r.u32()?),
                transmission: TransmissionId(r.u32()?),
                received: r.u32()?,
                expected: r.u32()?,
            },
            kind::ARM_NAK => ClientMsg::ArmNak {
                transmission: TransmissionId(r.u32()?),
                item: ItemId(r.u32()?),
                want_maxseq: r.u32()?,
                echo_timestamp_us: r.u64()?,
                hold_us: r.u32()?,
            },
            kind::BYE => ClientMsg::Bye,
            kind::HAVE => {
                let name = r.string("item name", MAX_NAME_LEN)?;
                let hash = r.hash()?;
                let n = r.u32()? as usize;
                if n > MAX_HAVE_BYTES {
                    return Err(WireError::OutOfRange {
                        field: "have bitmap",
                        value: n as u64,
                    });
                }
                ClientMsg::Have {
                    name,
                    hash,
                    held: r.bytes(n)?.to_vec(),
                }
            }
            kind::LOSS_REPORT => ClientMsg::LossReport {
                transmission: TransmissionId(r.u32()?),
                item: ItemId(r.u32()?),
                received: r.u32()?,
                expected: r.u32()?,
            },
            k => return Err(WireError::UnknownKind(k)),
        };
        r.finish()?;
        Ok(m)
    }

    /// Appends the message's bytes (without the frame length) to `buf`.
    pub fn emit(&self, buf: &mut Vec<u8>) {
        match self {
            ClientMsg::Hello { name, token } => {
                let mut w = Writer::with_header(buf, kind::HELLO);
                w.string(name);
                if let Some(t) = token {
                    w.string(t);
                }
            }
            ClientMsg::ListCatalogue => {
                Writer::with_header(buf, kind::LIST);
            }
            ClientMsg::Request { items } => {
                let mut w = Writer::with_header(buf, kind::REQUEST);
                w.count(items.len());
                for it in items {
                    match it {
                        ItemSel::Id(id) => w.u8(0).u32(id.0),
                        ItemSel::Name(n) => w.u8(1).string(n),
                    };
                }
            }
            ClientMsg::Nak(n) => n.emit_body(&mut Writer::with_header(buf, kind::NAK)),
            ClientMsg::ItemDone {
                item,
                transmission,
                received,
                expected,
            } => {
                Writer::with_header(buf, kind::ITEM_DONE)
                    .u32(item.0)
                    .u32(transmission.0)
                    .u32(*received)
                    .u32(*expected);
            }
            ClientMsg::LossReport {
                transmission,
                item,
                received,
                expected,
            } => {
                Writer::with_header(buf, kind::LOSS_REPORT)
                    .u32(transmission.0)
                    .u32(item.0)
                    .u32(*received)
                    .u32(*expected);
            }
            ClientMsg::ArmNak {
                transmission,
                item,
                want_maxseq,
                echo_timestamp_us,
                hold_us,
            } => {
                Writer::with_header(buf, kind::ARM_NAK)
                    .u32(transmission.0)
                    .u32(item.0)
                    .u32(*want_maxseq)
                    .u64(*echo_timestamp_us)
                    .u32(*hold_us);
            }
            ClientMsg::Have { name, hash, held } => {
                let n = held.len().min(MAX_HAVE_BYTES);
                Writer::with_header(buf, kind::HAVE)
                    .string(name)
                    .bytes(hash)
                    .u32(n as u32)
                    .bytes(&held[..n]);
            }
            ClientMsg::Bye => {
                Writer::with_header(buf, kind::BYE);
            }
        }
    }
}

impl ServerMsg {
    /// Parses one control frame; never panics.
    pub fn parse(buf: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(buf);
        let m = match r.header()? {
            kind::WELCOME => ServerMsg::Welcome {
                session: SessionId(r.u32()?),
                items: r.u32()?,
                channels: Channels {
                    data: parse_addr(&mut r)?,
                    announce: parse_addr(&mut r)?,
                    source: parse_addr(&mut r)?.map(|a| a.ip()),
                    rate_bps: r.u64()?,
                },
                session_key: match r.u8()? {
                    0 => None,
                    1 => Some(r.hash()?),
                    v => {
                        return Err(WireError::OutOfRange {
                            field: "session key flag",
                            value: v as u64,
                        });
                    }
                },
                signed_symbols: match r.u8()? {
                    0 => false,
                    1 => true,
                    v => {
                        return Err(WireError::OutOfRange {
                            field: "signed symbols flag",
                            value: v as u64,
                        });
                    }
                },
            },
            kind::CATALOGUE => {
                let n = r.count("catalogue entries", MAX_CATALOGUE_ENTRIES, 14)?;
                let mut entries = Vec::with_capacity(n);
                for _ in 0..n {
                    entries.push(CatalogueEntry {
                        item: ItemId(r.u32()?),
                        name: r.string("item name", MAX_NAME_LEN)?,
                        size: r.u64()?,
                    });
                }
                let more = parse_bool(&mut r)?;
                ServerMsg::Catalogue { entries, more }
            }
            kind::MANIFEST => ServerMsg::Manifest {
                entry: ManifestEntry::parse_body(&mut r)?,
                next_transmission: TransmissionId(r.u32()?),
            },
            kind::NOTIFY => ServerMsg::Notify(AnnounceRepr::parse_body(&mut r)?),
            kind::PROGRESS => ServerMsg::Progress {
                items_done: r.u32()?,
                items_total: r.u32()?,
            },
            kind::FAILED => {
                let item = match r.u8()? {
                    0 => None,
                    1 => Some(ItemId(r.u32()?)),
                    v => {
                        return Err(WireError::OutOfRange {
                            field: "failed item flag",
                            value: v as u64,
                        });
                    }
                };
                ServerMsg::Failed {
                    item,
                    name: r.string("item name", MAX_NAME_LEN)?,
                    reason: r.string("reason", MAX_TEXT_LEN)?,
                }
            }
            kind::DONE => ServerMsg::Done,
            kind::REKEY => ServerMsg::Rekey {
                epoch: r.u8()?,
                key: r.hash()?,
            },
            k => return Err(WireError::UnknownKind(k)),
        };
        r.finish()?;
        Ok(m)
    }

    /// Appends the message's bytes (without the frame length) to `buf`.
    pub fn emit(&self, buf: &mut Vec<u8>) {
        match self {
            ServerMsg::Welcome {
                session,
                items,
                channels,
                session_key,
                signed_symbols,
            } => {
                let mut w = Writer::with_header(buf, kind::WELCOME);
                w.u32(session.0).u32(*items);
                emit_addr(&mut w, channels.data);
                emit_addr(&mut w, channels.announce);
                emit_addr(&mut w, channels.source.map(|ip| SocketAddr::new(ip, 0)));
                w.u64(channels.rate_bps);
                match session_key {
                    None => w.u8(0),
                    Some(k) => w.u8(1).bytes(k),
                };
                w.u8(*signed_symbols as u8);
            }
            ServerMsg::Catalogue { entries, more } => {
                let mut w = Writer::with_header(buf, kind::CATALOGUE);
                w.count(entries.len());
                for e in entries {
                    w.u32(e.item.0).string(&e.name).u64(e.size);
                }
                w.u8(*more as u8);
            }
            ServerMsg::Manifest {
                entry,
                next_transmission,
            } => {
                let mut w = Writer::with_header(buf, kind::MANIFEST);
                entry.emit_body(&mut w);
                w.u32(next_transmission.0);
            }
            ServerMsg::Notify(a) => a.emit_body(&mut Writer::with_header(buf, kind::NOTIFY)),
            ServerMsg::Progress {
                items_done,
                items_total,
            } => {
                Writer::with_header(buf, kind::PROGRESS)
                    .u32(*items_done)
                    .u32(*items_total);
            }
            ServerMsg::Failed { item, name, reason } => {
                let mut w = Writer::with_header(buf, kind::FAILED);
                match item {
                    None => w.u8(0),
                    Some(i) => w.u8(1).u32(i.0),
                };
                w.string(name).string(reason);
            }
            ServerMsg::Rekey { epoch, key } => {
                Writer::with_header(buf, kind::REKEY).u8(*epoch).bytes(key);
            }
            ServerMsg::Done => {
                Writer::with_header(buf, kind::DONE);
            }
        }
    }
}

/// Where a session's multicast channels are (carried in `Welcome`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Channels {
    /// Data channel group and port.
    pub data: Option<SocketAddr>,
    /// Announcement channel group and port.
    pub announce: Option<SocketAddr>,
    /// The sender's address, for a source-specific join.
    pub source: Option<IpAddr>,
    /// The data rate cap, bits per second (0: unknown).
    pub rate_bps: u64,
}

fn parse_addr(r: &mut Reader<'_>) -> Result<Option<SocketAddr>, WireError> {
    Ok(match r.u8()? {
        0 => None,
        4 => {
            let b = r.bytes(4)?;
            let ip = Ipv4Addr::new(b[0], b[1], b[2], b[3]);
            Some(SocketAddr::new(IpAddr::V4(ip), r.u16()?))
        }
        6 => {
            let mut a = [0u8; 16];
            a.copy_from_slice(r.bytes(16)?);
            Some(SocketAddr::new(IpAddr::V6(Ipv6Addr::from(a)), r.u16()?))
        }
        v => {
            return Err(WireError::OutOfRange {
                field: "address family",
                value: v as u64,
            });
        }
    })
}

fn emit_addr(w: &mut Writer<'_>, a: Option<SocketAddr>) {
    match a {
        None => {
            w.u8(0);
        }
        Some(SocketAddr::V4(a)) => {
            w.u8(4).bytes(&a.ip().octets()).u16(a.port());
        }
        Some(SocketAddr::V6(a)) => {
            w.u8(6).bytes(&a.ip().octets()).u16(a.port());
        }
    }
}

fn parse_bool(r: &mut Reader<'_>) -> Result<bool, WireError> {
    match r.u8()? {
        0 => Ok(false),
        1 => Ok(true),
        v => Err(WireError::OutOfRange {
            field: "bool",
            value: v as u64,
        }),
    }
}

#[cfg(test)]
mod have_tests {
    use super::*;

    #[test]
    fn a_have_bitmap_holds_exactly_its_blocks() {
        let blocks = [0u32, 3, 8, 17];
        let bm = held_bitmap(&blocks);
        assert_eq!(bm.len(), 3);
        for b in 0..40 {
            assert_eq!(bitmap_holds(&bm, b), blocks.contains(&b), "block {b}");
        }
        assert!(held_bitmap(&[]).is_empty());
    }
}
