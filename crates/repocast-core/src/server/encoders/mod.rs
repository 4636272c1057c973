//! Where a push-mode server's symbols come from, between passes of its
//! items; and the cache of recent blocks' encoders a request-mode server's
//! transmissions share ([`EncoderCache::get_or_load`]), so a repair after
//! a send does not read and encode its blocks again, and which may hand
//! the work of preparing a block's encoder to the driver ([`PrepareJob`]).
//!
//! A fountain encoder's first repair symbol costs the block's whole
//! intermediate-symbol computation (about 6 ms for 1,000 symbols of 1,280
//! bytes). In push mode, built afresh each pass, every block of an item
//! would pay it in the same round, and the sender would stall for the sum.
//! So:
//!
//! - **An item whose blocks fit the budget** keeps its encoders across
//!   passes (least recently used out first), and
//!   [`EncoderCache::prepare_one`] lets the Fcast order (`super::fcast`)
//!   do that work one block at a time, spread over a pass of source
//!   symbols, where pacing leaves the time for it.
//! - **A larger item is streamed**: its source symbols are read from the
//!   driver's source as they go out, and its repair symbols are made ahead,
//!   a batch per block at a time ([`EncoderCache::make_ahead`]: the block
//!   is read and encoded, the batch kept, the encoder dropped), so every
//!   round of a pass still takes a symbol of every block while the server
//!   holds about a budget of symbols, whatever the item's size. Each batch
//!   costs a read and encode of its block, so an item is streamed only
//!   while that work, estimated at the sending rate, stays under half a
//!   core ([`MAKE_NS_PER_BYTE`]). A source symbol read on its own is not
//!   checked against its block's hash as a whole block's read is: a file
//!   changed in place fails its item at the block's next batch, and
//!   listeners check every block against its signed hash anyway.
//! - **Streamed through the spool** when that is too costly in memory
//!   and the driver has a spool ([`super::spool`]): a batch is up to a
//!   block's worth within the spool's budget, written to the spool and
//!   read back a symbol at a time, so each block is read and encoded about
//!   once per pass ([`SPOOL_NS_PER_SYMBOL`] for the spool's I/O). If the
//!   spool fails, the stream goes on with batches in memory.
//! - **Otherwise** (a large item at a high rate, no spool) the pass takes
//!   the item's blocks in spans of the budget, every round of one span
//!   before the next ([`Fit::Spans`]): cheap for the sender, but a
//!   listener that needs a few more symbols of every block waits for the
//!   rest of a span's pass between them.

mod prepare;

pub use prepare::{JobCounts, MIN_JOB_SYMBOLS, PrepareJob};

use super::config::BlockSource;
use super::transmission::{ReadFailed, load_encoder, read_source_symbol};
use crate::ItemId;
use crate::fec::layout::Layout;
use crate::fec::{BlockEncoder, CodeKind};
use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, VecDeque};

/// Fewest repair symbols a streamed item's block makes at a time (each
/// batch costs one read and encode of the block). Above budget / (64 x
/// symbol size) blocks (1 GiB of 1,440-byte symbols in 64 MiB), this
/// floor, not the budget, bounds the symbols held.
pub const MIN_AHEAD: u32 = 64;

/// The most sender CPU a streamed item's symbols may take, estimated at
/// the sending rate: nanoseconds per second (half a core).
const HALF_CORE_NS: u128 = 500_000_000;

/// Estimated sender CPU per symbol that goes through the spool: written
/// in its batch and read back once (the operating system's cache keeps a
/// recent spool in memory). Measured on the project machine for 1,440-byte
/// symbols, batches of 1,250 written whole over 1 GiB and symbols read
/// back one by one: 150-630 ns to write, 1.0-1.1 µs to read.
pub const SPOOL_NS_PER_SYMBOL: u64 = 1_500;

/// Estimated sender CPU per byte of a block, to read, check and encode it
/// for a batch of repair symbols (3.1 ms for 971 symbols of 1,440 bytes
/// measured on the project machine: 2.2 ns, rounded up).
pub const MAKE_NS_PER_BYTE: u64 = 3;

/// How a pass of an item gets its symbols.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fit {
    /// Its blocks fit the budget: encoders kept across passes.
    Kept,
    /// Streamed: repair symbols made ahead in memory, every block in
    /// every round.
    Streamed,
    /// The same, made ahead into the driver's spool.
    Spooled,
    /// Too large to stream at the rate: spans of the budget.
    Spans,
}

/// Where a symbol made ahead is held.
enum Held {
    /// In memory.
    Ram(Vec<u8>),
    /// In the driver's spool, at this slot of its block's (`len` bytes).
    Spool { slot: u32, len: u32 },
}

/// One block's repair symbols made ahead.
#[derive(Default)]
struct Ahead {
    /// The id the next symbol made will have (`None`: the first repair id).
    next: Option<u32>,
    symbols: VecDeque<(u32, Held)>,
}

impl Ahead {
    /// The block's spool slot for the next symbol made (its slots are
    /// used in turn, wrapping at `per_block`; at most that many are held).
    fn next_slot(&self, per_block: u32) -> u32 {
        match self.symbols.back() {
            Some((_, Held::Spool { slot, .. })) => (slot + 1) % per_block.max(1),
            _ => 0,
        }
    }
}

/// The item being streamed and its blocks' symbols made ahead.
struct Stream {
    item: ItemId,
    /// Symbols a batch tops a block up to.
    per_block: u32,
    /// The same without a spool (the memory budget's share per block).
    ram_per_block: u32,
    /// Whether batches go to the driver's spool.
    spooled: bool,
    blocks: Vec<Ahead>,
}

impl Stream {
    /// Stops spooling: symbols in the spool are dropped (made again from
    /// their ids when due) and batches shrink to the memory budget's.
    fn unspool(&mut self) {
        self.spooled = false;
        self.per_block = self.ram_per_block;
        for a in &mut self.blocks {
            if let Some((id, Held::Spool { .. })) = a.symbols.front() {
                a.next = Some(*id);
            }
            a.symbols.retain(|(_, h)| matches!(h, Held::Ram(_)));
        }
    }
}

/// What a kept encoder of `block` counts against `serve`'s cache budget.
/// The budget is in bytes of block data, and an encoder of a block of 50
/// symbols or more holds about as many bytes again: those count their
/// block's bytes. One of a block of a few symbols holds many times its
/// block (20,000 files of a few KiB each once kept 780 MiB of encoders
/// under a budget of 32 MiB), so an encoder holding over three times its
/// block counts half what it holds: the cache's memory stays within about
/// twice its budget whatever the blocks.
pub(in crate::server) fn charge(layout: &Layout, code: CodeKind, block: u32) -> u64 {
    let (k, len) = (layout.block_symbols(block), layout.block_len(block));
    let held = code.encoder_bytes(k, layout.symbol_size());
    if held > 3 * len { held / 2 } else { len }
}

struct Kept {
    encoder: Box<dyn BlockEncoder>,
    bytes: u64,
    used: u64,
}

/// Encoders by (item, block), bounded by the bytes of their blocks, and
/// the symbols of the one item streamed (about one budget more, kept while
/// other items' passes come between, so its next pass starts made ahead).
pub struct EncoderCache {
    kept: BTreeMap<(ItemId, u32), Kept>,
    stream: Option<Stream>,
    /// The same keys by last use, oldest first.
    by_use: BTreeMap<u64, (ItemId, u32)>,
    bytes: u64,
    budget: u64,
    /// The sending rate, packets per second (what a stream must keep up
    /// with).
    packets_per_sec: u64,
    /// Bytes of symbols made ahead the driver's spool may hold (0: none).
    spool_budget: u64,
    /// Times the spool failed (the stream then held its symbols in memory).
    spool_errors: u64,
    tick: u64,
    /// Blocks being prepared off the sending path ([`PrepareJob`]).
    jobs: prepare::Jobs,
}

impl EncoderCache {
    /// The kept encoders of the items in `map` under their ids in a
    /// pusher's next version (`server::carry`: the same content and
    /// layout), so its passes need not prepare them again; the others, a
    /// streamed item's symbols made ahead and the jobs out are dropped,
    /// and new jobs are of `epoch`.
    pub fn carried(mut self, map: &BTreeMap<ItemId, ItemId>, epoch: u64) -> Self {
        let kept = std::mem::take(&mut self.kept);
        self.by_use.clear();
        self.bytes = 0;
        for ((item, block), k) in kept {
            if let Some(&to) = map.get(&item) {
                self.bytes += k.bytes;
                self.by_use.insert(k.used, (to, block));
                self.kept.insert((to, block), k);
            }
        }
        self.stream = None;
        self.renew_jobs(epoch);
        self
    }

    /// An empty cache holding at most `budget` bytes of blocks (one block
    /// is always kept, whatever its size), for a sender of
    /// `packets_per_sec`, with no spool.
    pub fn new(budget: u64, packets_per_sec: u64) -> Self {
        EncoderCache {
            kept: BTreeMap::new(),
            stream: None,
            by_use: BTreeMap::new(),
            bytes: 0,
            budget,
            packets_per_sec,
            spool_budget: 0,
            spool_errors: 0,
            tick: 0,
            jobs: prepare::Jobs::default(),
        }
    }

    /// The same, streaming through the driver's spool
    /// ([`super::BlockSource::spool`]) up to `bytes` of symbols made ahead
    /// when that beats holding them in memory.
    pub fn with_spool(mut self, bytes: u64) -> Self {
        self.spool_budget = bytes;
        self
    }

    /// The encoder of `block` of `item`, built by `load` (`bytes` of block
    /// data) unless kept.
    pub fn get_or_load(
        &mut self,
        item: ItemId,
        block: u32,
        bytes: u64,
        load: impl FnOnce() -> Result<Box<dyn BlockEncoder>, ReadFailed>,
    ) -> Result<&mut Box<dyn BlockEncoder>, ReadFailed> {
        self.tick += 1;
        let key = (item, block);
        if !self.kept.contains_key(&key) {
            while self.bytes + bytes > self.budget && self.evict() {}
        }
        let kept = match self.kept.entry(key) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => {
                let encoder = load()?;
                self.bytes += bytes;
                e.insert(Kept {
                    encoder,
                    bytes,
                    used: 0,
                })
            }
        };
        self.by_use.remove(&kept.used);
        kept.used = self.tick;
        self.by_use.insert(self.tick, key);
        Ok(&mut kept.encoder)
    }

    /// How `item` (laid out by `layout`) is sent: kept if its blocks fit
    /// the budget; else streamed (its symbols made ahead kept if it already
    /// was) while making them ahead costs under half a core at the rate;
    /// else in spans.
    pub fn fit(&mut self, item: ItemId, layout: &Layout) -> Fit {
        let (g, total) = (layout.blocks(), layout.size());
        if total <= self.budget {
            return Fit::Kept;
        }
        if let Some(s) = self.stream.as_ref().filter(|s| s.item == item) {
            return if s.spooled {
                Fit::Spooled
            } else {
                Fit::Streamed
            };
        }
        let t = layout.symbol_size().max(1) as u64;
        let share = |bytes: u64| bytes / (g.max(1) as u64 * t);
        let ram = share(self.budget).clamp(MIN_AHEAD as u64, u32::MAX as u64) as u32;
        // A spooled batch is at most a block's worth (the code's symbols
        // are unlimited, but a pass needs about k of each block); block 0
        // is the largest (the layout puts its longer blocks first).
        let k = layout.block_symbols(0);
        let spool = share(self.spool_budget).min(k as u64) as u32;
        // A batch tops a block up from under half to full: about 3/4 of
        // a batch per read and encode of the block.
        let block = total / g.max(1) as u64;
        let pps = self.packets_per_sec as u128;
        let ns_per_sec = |per_block: u32, spooled: bool| {
            pps * block as u128 * 4 * MAKE_NS_PER_BYTE as u128 / (3 * per_block.max(1) as u128)
                + if spooled {
                    pps * SPOOL_NS_PER_SYMBOL as u128
                } else {
                    0
                }
        };
        // In memory if that is cheap enough (no disk), else spooled.
        let (per_block, spooled) = if ns_per_sec(ram, false) <= HALF_CORE_NS {
            (ram, false)
        } else if spool > ram && ns_per_sec(spool, true) <= HALF_CORE_NS {
            (spool, true)
        } else {
            return Fit::Spans;
        };
        // Its blocks do not fit, so neither do kept encoders beside them.
        while self.evict() {}
        self.stream = Some(Stream {
            item,
            per_block,
            ram_per_block: ram,
            spooled,
            blocks: (0..g).map(|_| Ahead::default()).collect(),
        });
        if spooled { Fit::Spooled } else { Fit::Streamed }
    }

    /// Packets between two [`EncoderCache::make_ahead`] calls for a
    /// streamed item (each tops up one block by at least half a batch, so
    /// making keeps ahead of sending), `None` if `item` is not streamed.
    pub fn ahead_gap(&self, item: ItemId) -> Option<u64> {
        let s = self.stream.as_ref().filter(|s| s.item == item)?;
        Some((s.per_block as u64 / 4).max(1))
    }

    /// Writes symbol `esi` of `block` of `item` into `out`: from its kept
    /// encoder (loaded from `src` if need be), or for a streamed item, a
    /// source symbol read from `src` or a repair symbol made ahead (made
    /// now, with a batch after it, if it was not).
    #[allow(clippy::too_many_arguments)]
    pub fn symbol(
        &mut self,
        item: ItemId,
        block: u32,
        esi: u32,
        layout: &Layout,
        code: CodeKind,
        src: &mut dyn BlockSource,
        out: &mut Vec<u8>,
    ) -> Result<(), ReadFailed> {
        let Some(stream) = self.stream.as_mut().filter(|s| s.item == item) else {
            // A pass charges a block its bytes: `fit` sized the pass's
            // spans in those (a pusher packs small files, so its blocks are
            // not the few-symbol ones `charge` is for).
            let len = layout.block_len(block);
            let enc = self.get_or_load(item, block, len, || {
                load_encoder(item, block, layout, code, src)
            })?;
            enc.symbol(esi, out);
            return Ok(());
        };
        if esi < layout.block_symbols(block) {
            return read_source_symbol(item, block, esi, layout, src, out);
        }
        // A symbol the spool fails to give back is made again, in memory.
        for _ in 0..2 {
            out.clear();
            let Some(ahead) = stream.blocks.get_mut(block as usize) else {
                return Ok(());
            };
            // Ids go out in order; one not made ahead (a plan that jumped)
            // starts the batch afresh from it.
            while ahead.symbols.front().is_some_and(|(id, _)| *id != esi) {
                ahead.symbols.pop_front();
            }
            if ahead.symbols.is_empty() {
                ahead.next = Some(esi);
                let errors = &mut self.spool_errors;
                make(stream, item, block, layout, code, src, errors)?;
            }
            let front = (stream.blocks.get_mut(block as usize)).and_then(|a| a.symbols.pop_front());
            match front {
                Some((_, Held::Ram(bytes))) => *out = bytes,
                Some((_, Held::Spool { slot, len })) => {
                    let at = spool_offset(stream, block, slot, layout);
                    let sp = src.spool();
                    if sp.is_some_and(|sp| sp.read_at(at, len as usize, out).is_ok()) {
                        return Ok(());
                    }
                    self.spool_errors += 1;
                    stream.unspool();
                    continue;
                }
                None => {}
            }
            return Ok(());
        }
        Ok(())
    }

    /// Tops up the block of streamed `item` with the fewest repair symbols
    /// made ahead, if it holds under half a batch; returns whether it did.
    pub fn make_ahead(
        &mut self,
        item: ItemId,
        layout: &Layout,
        code: CodeKind,
        src: &mut dyn BlockSource,
    ) -> Result<bool, ReadFailed> {
        let Some(stream) = self.stream.as_mut().filter(|s| s.item == item) else {
            return Ok(false);
        };
        let lowest = (stream.blocks.iter().enumerate())
            .min_by_key(|(_, a)| a.symbols.len())
            .map(|(b, a)| (b as u32, a.symbols.len() as u32));
        match lowest {
            Some((b, held)) if held < stream.per_block / 2 => {
                make(stream, item, b, layout, code, src, &mut self.spool_errors)?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// Repair symbols made ahead for the streamed item held in memory.
    pub fn ahead_symbols(&self) -> usize {
        self.held(|h| matches!(h, Held::Ram(_)))
    }

    /// Repair symbols made ahead for the streamed item in the spool.
    pub fn spooled_symbols(&self) -> usize {
        self.held(|h| matches!(h, Held::Spool { .. }))
    }

    /// Times the spool failed (each time the stream went back to holding
    /// its symbols in memory).
    pub fn spool_errors(&self) -> u64 {
        self.spool_errors
    }

    fn held(&self, which: impl Fn(&Held) -> bool) -> usize {
        (self.stream.iter().flat_map(|s| &s.blocks))
            .map(|a| a.symbols.iter().filter(|(_, h)| which(h)).count())
            .sum()
    }

    /// Drops the least recently used encoder; false if none is left.
    fn evict(&mut self) -> bool {
        let Some((_, key)) = self.by_use.pop_first() else {
            return false;
        };
        if let Some(k) = self.kept.remove(&key) {
            self.bytes -= k.bytes;
        }
        true
    }

    /// Prepares one kept encoder of `item` that still needs it
    /// ([`BlockEncoder::needs_prepare`], as [`EncoderCache::offer_next_job`]
    /// picks; lowest block first); returns whether one did any work.
    pub fn prepare_one(&mut self, item: ItemId) -> bool {
        let range = (item, 0)..=(item, u32::MAX);
        for (_, k) in (self.kept.range_mut(range)).filter(|(_, k)| k.encoder.needs_prepare()) {
            if k.encoder.prepare() {
                return true;
            }
        }
        false
    }

    /// Bytes of blocks kept.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Encoders kept.
    pub fn len(&self) -> usize {
        self.kept.len()
    }

    /// Whether none is kept.
    pub fn is_empty(&self) -> bool {
        self.kept.is_empty()
    }
}

/// Where `slot` of `block`'s symbols sits in the spool.
fn spool_offset(stream: &Stream, block: u32, slot: u32, layout: &Layout) -> u64 {
    (block as u64 * stream.per_block as u64 + slot as u64) * layout.symbol_size() as u64
}

/// Reads and encodes `block` of the streamed item and tops its symbols
/// made ahead up to a batch, from the block's next id on (wrapping at the
/// code's symbol space): into the spool if the stream spools and the
/// spool takes them, else (counting the failure in `errors`) in memory.
fn make(
    stream: &mut Stream,
    item: ItemId,
    block: u32,
    layout: &Layout,
    code: CodeKind,
    src: &mut dyn BlockSource,
    errors: &mut u64,
) -> Result<(), ReadFailed> {
    let k = layout.block_symbols(block);
    let space = code.symbol_space(k).max(1) as u64;
    let Some(ahead) = stream.blocks.get(block as usize) else {
        return Ok(());
    };
    let want = (stream.per_block as usize).saturating_sub(ahead.symbols.len());
    if want == 0 {
        return Ok(());
    }
    let mut enc = load_encoder(item, block, layout, code, src)?;
    let mut id = ahead.next.unwrap_or(k);
    let step = |id: u32| ((id as u64 + 1) % space) as u32;
    if stream.spooled {
        let t = layout.symbol_size() as usize;
        let mut slot = ahead.next_slot(stream.per_block);
        let (mut run, mut buf, mut bytes) = (slot, Vec::with_capacity(want * t), Vec::new());
        let mut made = Vec::with_capacity(want);
        let mut ok = true;
        for _ in 0..want {
            let this = id;
            enc.symbol(this, &mut bytes);
            id = step(id);
            if slot == 0 && !buf.is_empty() {
                ok &= write(stream, block, run, &buf, layout, src);
                (run, buf) = (0, Vec::new());
            }
            let len = bytes.len().min(t);
            buf.extend_from_slice(&bytes[..len]);
            buf.resize(buf.len() + (t - len), 0);
            made.push((
                this,
                Held::Spool {
                    slot,
                    len: len as u32,
                },
            ));
            slot = (slot + 1) % stream.per_block.max(1);
        }
        ok &= write(stream, block, run, &buf, layout, src);
        if ok {
            if let Some(a) = stream.blocks.get_mut(block as usize) {
                a.symbols.extend(made);
                a.next = Some(id);
            }
            return Ok(());
        }
        *errors += 1;
        // The batch again, in memory, from the first id not held (the
        // spooled ones dropped, the block's next is its first).
        stream.unspool();
        id = (stream.blocks.get(block as usize)).map_or(k, |a| a.next.unwrap_or(k));
    }
    let Some(ahead) = stream.blocks.get_mut(block as usize) else {
        return Ok(());
    };
    let want = (stream.per_block as usize).saturating_sub(ahead.symbols.len());
    for _ in 0..want {
        let mut bytes = Vec::new();
        enc.symbol(id, &mut bytes);
        ahead.symbols.push_back((id, Held::Ram(bytes)));
        id = step(id);
    }
    ahead.next = Some(id);
    Ok(())
}

/// Writes `buf` (whole symbols) at `slot` of `block` in the spool; false
/// if there is none or it failed.
fn write(
    stream: &Stream,
    block: u32,
    slot: u32,
    buf: &[u8],
    layout: &Layout,
    src: &mut dyn BlockSource,
) -> bool {
    let at = spool_offset(stream, block, slot, layout);
    src.spool().is_some_and(|sp| sp.write_at(at, buf).is_ok())
}

#[cfg(test)]
mod tests;
