//! A push endpoint publishing a file set as a new version: its signed
//! catalogue (coded when it takes a few pieces), a new session and
//! [`Server`] paced for the catalogue's share of the rate, and the items
//! whose content it keeps going on where they were.

use super::catalogue_rate::{MAX_CATALOGUE_SHARE, catalogue_period};
use super::{PushEndpoint, session_of};
use crate::Instant;
use crate::auth;
use crate::endpoint::catalogue_code::{self, CatalogueCoder};
use crate::endpoint::pack::{PushSet, Unit};
use crate::endpoint::signing::BatchSigner;
use crate::fec::layout::Layout;
use crate::server::{ItemInfo, Server, ServerError};
use crate::wire::catalogue::{
    CataloguePiece, HeadKind, ItemHead, MAX_PIECES, MAX_PUSH_ITEMS, pack, split_item,
};
use std::time::Duration;

impl PushEndpoint {
    /// Publishes a new file set as `version` (higher than the last): a new
    /// catalogue and session; the pass on air is dropped.
    pub fn replace(
        &mut self,
        now: Instant,
        version: u64,
        items: impl Into<PushSet>,
    ) -> Result<(), ServerError> {
        let set: PushSet = items.into();
        let units = set.units();
        let members: usize = set.packs.iter().map(|p| p.members.len()).sum();
        let heads = units.len() + members;
        if heads > MAX_PUSH_ITEMS as usize {
            return Err(ServerError::TooManyItems {
                got: heads,
                max: MAX_PUSH_ITEMS,
            });
        }
        let key = self.identity.public();
        let session = session_of(&key, version);
        let base = CataloguePiece {
            signer: key.to_bytes(),
            version,
            session,
            items: heads as u32,
            signed_symbols: self.cfg.server.sign_symbols,
            index: 0,
            count: 1,
            symbol_size: 0,
            entries: Vec::new(),
        };
        let mut entries = Vec::new();
        let mut sent = Vec::with_capacity(units.len());
        let mut infos = Vec::with_capacity(units.len());
        let head = |kind, info: &ItemInfo, mode, mtime| ItemHead {
            kind,
            name: match kind {
                HeadKind::Pack => String::new(),
                _ => info.name.clone(),
            },
            size: info.size,
            hash: info.hash,
            fec: self.cfg.server.item_fec(info.size),
            mode,
            mtime,
        };
        let mut packs = set.packs.iter();
        let mut member_id = units.len();
        for (i, u) in units.iter().enumerate() {
            let id = crate::ItemId(i as u32);
            let info = match u {
                Unit::File(f) => {
                    let Some(it) = set.files.get(*f) else { break };
                    let h = head(HeadKind::File, &it.info, it.mode, it.mtime);
                    entries.extend(split_item(id, h, &it.info.block_hashes));
                    &it.info
                }
                Unit::Pack(_) => {
                    let Some(p) = packs.next() else { break };
                    let h = head(HeadKind::Pack, &p.info, 0, 0);
                    entries.extend(split_item(id, h, &p.info.block_hashes));
                    for (&m, &offset) in p.members.iter().zip(&p.offsets) {
                        let Some(it) = set.files.get(m) else { continue };
                        let kind = HeadKind::Member { pack: id, offset };
                        let h = head(kind, &it.info, it.mode, it.mtime);
                        let mid = crate::ItemId(member_id as u32);
                        entries.extend(split_item(mid, h, &[]));
                        member_id += 1;
                    }
                    &p.info
                }
            };
            let symbols = Layout::new(info.size, &self.cfg.server.item_fec(info.size))
                .map(|l| l.symbols())
                .unwrap_or(0);
            sent.push((0, symbols));
            infos.push(info.clone());
        }
        // Many small files share a piece; an empty folder is a version
        // too, one piece with no entries: listeners learn the signer and
        // that there is nothing to fetch.
        let mut pieces = pack(&base, entries);
        if pieces.len() > MAX_PIECES as usize {
            return Err(ServerError::TooManyPieces {
                got: pieces.len(),
                max: MAX_PIECES,
            });
        }
        // A catalogue of a few pieces or more is coded (`catalogue_code`).
        let symbol = catalogue_code::symbol_size(&pieces);
        let bodies: Vec<Vec<u8>> = (pieces.iter_mut())
            .map(|p| {
                p.symbol_size = symbol;
                let mut buf = Vec::new();
                p.emit(&mut buf);
                buf
            })
            .collect();
        let coder = (pieces.first()).and_then(|first| CatalogueCoder::new(first, &bodies));
        let pieces: Vec<Vec<u8>> = (bodies.into_iter())
            .map(|mut buf| {
                auth::sign_catalogue(&self.identity, &mut buf);
                buf
            })
            .collect();
        let mut cfg = self.cfg.server.clone();
        cfg.session = session;
        // MAD's weights are the files'; a pack is wanted by whoever wants
        // any of its members.
        // (No weights at all: every item counts as equal, as before.)
        let weights = match &cfg.scheduler {
            crate::sched::SchedulerKind::Mad { weights } if !weights.is_empty() => Some(weights),
            _ => None,
        };
        if let Some(weights) = weights {
            let w = |f: &usize| weights.get(*f).copied().unwrap_or(0.0);
            let by_unit = (units.iter())
                .map(|u| match u {
                    Unit::File(f) => w(f),
                    Unit::Pack(m) => m.iter().map(|(f, _)| w(f)).sum(),
                })
                .collect();
            cfg.scheduler = crate::sched::SchedulerKind::Mad { weights: by_unit };
        }
        // The catalogue's bytes come out of the data rate, and it is sent
        // at most its catalogue_share of it.
        let bytes: u64 = pieces.iter().map(|p| p.len() as u64 + 28).sum();
        let data_bps = crate::profile::packet_bits(cfg.symbol_size, false, false) as f64
            / cfg.packet_interval.as_secs_f64().max(1e-9);
        let symbols: u64 = sent.iter().map(|&(_, k)| k).sum();
        let cycle = cfg
            .packet_interval
            .saturating_mul(symbols.min(u32::MAX as u64) as u32);
        let period = catalogue_period(bytes, cycle, data_bps).as_secs_f64();
        let share = bytes as f64 * 8.0 / period / data_bps.max(1.0);
        let share = share.min(MAX_CATALOGUE_SHARE);
        cfg.packet_interval = cfg.packet_interval.mul_f64(1.0 / (1.0 - share));
        self.signer = (cfg.sign_symbols).then(|| BatchSigner::new(session, cfg.sign_copies));
        let mut server = Server::new(cfg, infos)?;
        self.go_on(&mut server);
        self.server = server;
        self.current = set.files;
        self.units = units;
        self.failed.clear();
        self.reported.clear();
        self.piece_gap = Duration::from_secs_f64(period / pieces.len().max(1) as f64);
        self.sent = sent;
        self.pieces = pieces;
        self.coder = coder;
        self.pieces_sent = 0;
        self.piece_at = now;
        self.version = version;
        self.stats.versions += 1;
        Ok(())
    }

    /// Items of the next version (`next`) with the same content and
    /// layout as one of this version's go on where they were
    /// (`server::carry`): a listener's partly received blocks of them stay
    /// useful (it carries them over: `client::push`), no id repeats, and
    /// the items new to the version go first.
    pub(super) fn go_on(&mut self, next: &mut Server) {
        let mut old = std::collections::HashMap::new();
        for i in (0..self.units.len() as u32).map(crate::ItemId) {
            if let Some(h) = self.server.item_hash(i) {
                old.entry(h).or_insert(i);
            }
        }
        let mut kept = Vec::new();
        let mut i = crate::ItemId(0);
        while let Some(m) = next.manifest(i) {
            let same = (old.get(&m.hash))
                .and_then(|&o| self.server.manifest(o))
                .filter(|o| o.same_content(&m));
            if let Some(o) = same {
                kept.push((i, o.item));
            }
            i = crate::ItemId(i.0 + 1);
        }
        next.go_on_from(&mut self.server, &kept);
    }
}
