//! Changing a transmission's plan while it is on air: what a receiver's
//! early loss report or NAK does to the symbols still to come (growing or
//! trimming a block's tiers, appending a coalesced NAK's symbols, sending
//! a block's symbols sooner). Only what is not yet sent changes; part of
//! the server's [`super::Transmission`].

use super::{Esis, Segment, Transmission};

impl Transmission {
    /// Symbols the plan sends (or has sent) from `block`.
    pub fn planned(&self, block: u32) -> u32 {
        self.plan
            .iter()
            .filter(|s| s.block == block)
            .map(|s| s.esis.len())
            .sum()
    }

    /// Whether id `id` of `block` is listed in the plan (exact-packet
    /// repair).
    pub fn lists(&self, block: u32, id: u32) -> bool {
        self.plan
            .iter()
            .any(|s| s.block == block && matches!(&s.esis, Esis::List(v) if v.contains(&id)))
    }

    /// Appends a segment to a running (non-ARM) transmission: coalescing a
    /// NAK into a repair that is on air.
    pub fn append(&mut self, seg: Segment) {
        let n = seg.esis.len();
        if n == 0 || self.arm.is_some() {
            return;
        }
        let last = (self.first_block + self.block_count).max(seg.block + 1);
        self.first_block = self.first_block.min(seg.block);
        self.block_count = last - self.first_block;
        self.total = self.total.saturating_add(n);
        self.plan.push(seg);
    }

    /// Sends `n` of `block`'s symbols next: the rest of the segment on
    /// air counts, and up to the remainder of its ids not yet begun move
    /// (from their first segments, in order) to right after it, ahead of
    /// everything else to come. The transmission sends the same symbols,
    /// only these sooner: a receiver that lacks a few of one block (a
    /// coalesced NAK) need not wait while a long repair for another goes
    /// through every block before it. Returns the ids moved. Not for ARM
    /// or Fcast order.
    pub fn hasten(&mut self, block: u32, n: u32) -> u32 {
        if self.arm.is_some() || self.fcast.is_some() || self.seg >= self.plan.len() {
            return 0;
        }
        // Where the moved ids go: before the segment at `seg` if nothing
        // of it is sent yet, else right after it.
        let front = if self.pos == 0 {
            self.seg
        } else {
            self.seg + 1
        };
        let on_air = (self.plan.get(self.seg))
            .filter(|s| s.block == block && self.pos > 0)
            .map_or(0, |s| s.esis.len().saturating_sub(self.pos));
        let mut want = n.saturating_sub(on_air);
        // Moved while the first tier is on air, they join it (the tier
        // boundary moves past them); else they are tail, as their donors.
        let in_first = front < self.tail_start;
        let mut moved = Vec::new();
        let mut i = front;
        while want > 0 && i < self.plan.len() {
            if self.plan[i].block != block {
                i += 1;
                continue;
            }
            let piece = self.plan[i].esis.split_front(want);
            want -= piece.len();
            moved.push(Segment { block, esis: piece });
            if self.plan[i].esis.len() == 0 {
                self.plan.remove(i);
                if i < self.tail_start {
                    self.tail_start -= 1;
                }
            } else {
                i += 1;
            }
        }
        let count = moved.iter().map(|s| s.esis.len()).sum();
        if in_first {
            self.tail_start += moved.len();
        }
        self.plan.splice(front..front, moved);
        count
    }

    /// [`Self::hasten`]s each (block, symbols) of `wants`, sent in that
    /// order after the segment on air (each call puts its ids first, so
    /// they are taken last to first).
    pub fn hasten_in_order(&mut self, wants: &[(u32, u32)]) {
        for &(block, want) in wants.iter().rev() {
            self.hasten(block, want);
        }
    }

    /// Symbols planned for `block` in the first tier.
    pub fn first_tier_planned(&self, block: u32) -> u32 {
        (self.plan.iter().take(self.tail_start))
            .filter(|s| s.block == block)
            .map(|s| s.esis.len())
            .sum()
    }

    /// The last first-tier segment of `block` not yet sent to its end.
    fn open_first(&self, block: u32) -> Option<usize> {
        (self.seg..self.tail_start)
            .rev()
            .find(|&i| self.plan[i].block == block)
    }

    /// Adds `extra` to `block`'s first tier: onto its open segment when
    /// the ids continue it, else as a segment right after it; a block whose
    /// first tier is sent gets a segment at the end of the first tier (or
    /// next, once the tail is on air).
    pub fn grow_first_tier(&mut self, block: u32, extra: Esis) {
        if self.arm.is_some() || self.fcast.is_some() || extra.len() == 0 {
            return;
        }
        let (at, in_first) = match self.open_first(block) {
            Some(i) if self.extend_segment(i, &extra) => return,
            Some(i) => (i + 1, true),
            None if self.seg < self.tail_start => (self.tail_start, true),
            // In the tail: right after the segment on air.
            None => ((self.seg + 1).min(self.plan.len()), false),
        };
        self.total = self.total.saturating_add(extra.len());
        self.plan.insert(at, Segment { block, esis: extra });
        if in_first {
            self.tail_start += 1;
        }
    }

    /// Takes up to `n` of `block`'s first-tier symbols off the plan, from
    /// its segments not yet begun (the last first), because an early loss
    /// report shows the receivers need fewer; returns how many. Their ids
    /// are left unused (a later send takes fresh ones).
    pub fn trim_first_tier(&mut self, block: u32, n: u32) -> u32 {
        if self.arm.is_some() || self.fcast.is_some() {
            return 0;
        }
        let (cut, removed) = self.cut_back(self.seg + 1, self.tail_start, block, n);
        self.tail_start -= removed;
        cut
    }

    /// Drops up to `n` of `block`'s tail symbols not yet sent (from the
    /// end of the plan back), because its first tier grows to carry them
    /// or its receivers need fewer; returns how many were dropped. A
    /// segment on air keeps its count.
    pub fn drop_tail(&mut self, block: u32, n: u32) -> u32 {
        let from = self.tail_start.max(self.seg + 1);
        self.cut_back(from, self.plan.len(), block, n).0
    }

    /// Cuts up to `n` ids of `block` from the plan's segments `from..to`,
    /// last first, removing those left empty; returns the ids cut and the
    /// segments removed.
    fn cut_back(&mut self, from: usize, to: usize, block: u32, n: u32) -> (u32, usize) {
        let (mut cut, mut removed) = (0, 0);
        let mut i = to.min(self.plan.len());
        while i > from && cut < n {
            i -= 1;
            if self.plan[i].block != block {
                continue;
            }
            let Esis::Range { count, .. } = &mut self.plan[i].esis else {
                continue;
            };
            let c = (*count).min(n - cut);
            *count -= c;
            cut += c;
            if *count == 0 {
                self.plan.remove(i);
                removed += 1;
            }
        }
        self.total = self.total.saturating_sub(cut);
        (cut, removed)
    }

    /// Adds `extra` to `block`'s tail: onto its tail segment when that is
    /// not yet sent to its end and the ids continue it, else as a new
    /// segment at the end of the plan.
    pub fn grow_tail(&mut self, block: u32, extra: Esis) {
        if self.arm.is_some() || self.fcast.is_some() || extra.len() == 0 {
            return;
        }
        let open = (self.seg.max(self.tail_start)..self.plan.len())
            .rev()
            .find(|&i| self.plan[i].block == block);
        if !open.is_some_and(|i| self.extend_segment(i, &extra)) {
            self.append(Segment { block, esis: extra });
        }
    }

    /// Appends `extra` ids to segment `i` when they continue its range
    /// (fresh ids allocated right after it) and it is not yet sent to its
    /// end; false (nothing changed) otherwise.
    fn extend_segment(&mut self, i: usize, extra: &Esis) -> bool {
        let Some(seg) = self.plan.get_mut(i).filter(|_| i >= self.seg) else {
            return false;
        };
        let (
            Esis::Range {
                start,
                count,
                space,
            },
            Esis::Range {
                start: s2,
                count: c2,
                space: sp2,
            },
        ) = (&mut seg.esis, extra)
        else {
            return false;
        };
        let next = ((*start as u64 + *count as u64) % (*space).max(1) as u64) as u32;
        if *space != *sp2 || next != *s2 {
            return false;
        }
        *count = count.saturating_add(*c2);
        self.total = self.total.saturating_add(*c2);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::super::*;
    use crate::wire::FecParams;

    fn range(start: u32, count: u32) -> Esis {
        Esis::Range {
            start,
            count,
            space: 1 << 20,
        }
    }

    fn seg(block: u32, start: u32, count: u32) -> Segment {
        Segment {
            block,
            esis: range(start, count),
        }
    }

    /// Whether `block` has symbols in the tail tier.
    fn has_tail(t: &Transmission, block: u32) -> bool {
        (t.plan.iter().skip(t.tail_start)).any(|s| s.block == block)
    }

    /// Symbols of `block` not yet sent: the rest of the segment on air
    /// and every later segment's.
    fn unsent(t: &Transmission, block: u32) -> u32 {
        let on_air = (t.plan.get(t.seg))
            .filter(|s| s.block == block)
            .map_or(0, |s| s.esis.len().saturating_sub(t.pos));
        (t.plan.iter().skip(t.seg + 1))
            .filter(|s| s.block == block)
            .fold(on_air, |n, s| n.saturating_add(s.esis.len()))
    }

    fn tiered(first: Vec<Segment>, tail: Vec<Segment>) -> Transmission {
        Transmission::tiered(
            TransmissionId(1),
            ItemId(0),
            AnnounceKind::First,
            first,
            tail,
        )
    }

    /// (block, id) of the next `n` packets.
    fn take(t: &mut Transmission, n: usize) -> Vec<(u32, u32)> {
        let fec = FecParams {
            code: CodeKind::RaptorQ,
            symbol_size: 64,
            max_block_symbols: 4,
        };
        let layout = Layout::new(64 * 12, &fec).expect("layout");
        let iv = std::time::Duration::from_micros(10);
        (0..n)
            .map_while(|_| {
                let p = t.next(
                    crate::Instant::ZERO,
                    iv,
                    SessionId(1),
                    &layout,
                    fec.code,
                    None,
                    None,
                );
                p.ok().flatten().map(|p| (p.block.0, p.symbol))
            })
            .collect()
    }

    #[test]
    fn a_tiered_send_gives_every_block_its_first_tier_before_any_tail() {
        let first = vec![seg(0, 0, 2), seg(1, 0, 2), seg(2, 0, 2)];
        let tail = vec![seg(0, 2, 1), seg(1, 2, 1), seg(2, 2, 0)];
        let mut t = tiered(first, tail);
        assert_eq!(t.total, 8);
        assert_eq!(take(&mut t, 3), [(0, 0), (0, 1), (1, 0)]);
        // Grown while block 1's first tier is on air: id 2 is its tail's,
        // so id 3 goes in a segment right after it.
        t.grow_first_tier(1, range(3, 1));
        // Block 0's first tier is sent: its growth ends the first tier.
        t.grow_first_tier(0, range(3, 1));
        // Tails grow in place when the ids continue them, else at the end.
        t.grow_tail(1, range(4, 2));
        t.grow_tail(2, range(2, 1));
        assert_eq!(t.total, 13);
        assert_eq!(t.first_tier_planned(1), 3);
        assert!(has_tail(&t, 2));
        let rest = take(&mut t, 20);
        assert_eq!(
            rest,
            [
                (1, 1),
                (1, 3),
                (2, 0),
                (2, 1),
                (0, 3),
                (0, 2),
                (1, 2),
                (1, 4),
                (1, 5),
                (2, 2)
            ]
        );
        assert!(t.finished());
    }

    #[test]
    fn a_first_tier_that_grows_takes_over_its_blocks_unsent_tail() {
        let first = vec![seg(0, 0, 2), seg(1, 0, 2)];
        let tail = vec![seg(0, 2, 2), seg(1, 2, 2)];
        let mut t = tiered(first, tail);
        assert_eq!(take(&mut t, 1), [(0, 0)]);
        // Block 1's first tier grows by 3: its tail's 2 go, 1 more is new.
        assert_eq!(t.drop_tail(1, 3), 2);
        t.grow_first_tier(1, range(4, 3));
        assert!(!has_tail(&t, 1));
        assert_eq!(t.total, 9);
        assert_eq!(
            take(&mut t, 20),
            [
                (0, 1),
                (1, 0),
                (1, 1),
                (1, 4),
                (1, 5),
                (1, 6),
                (0, 2),
                (0, 3)
            ]
        );
    }

    #[test]
    fn a_hastened_block_goes_next_and_nothing_else_changes() {
        // A repair for a lossy receiver: 3 symbols of each of blocks 0-2.
        let plan = vec![seg(0, 10, 3), seg(1, 10, 3), seg(2, 10, 3)];
        let mut t = Transmission::new(TransmissionId(1), ItemId(0), AnnounceKind::Repair, plan);
        assert_eq!(take(&mut t, 1), [(0, 10)]);
        assert_eq!((unsent(&t, 0), unsent(&t, 2)), (2, 3));
        // Another receiver lacks 2 of block 2: they come right after the
        // segment on air, then the rest as planned.
        assert_eq!(t.hasten(2, 2), 2);
        assert_eq!(t.total, 9);
        assert_eq!(
            take(&mut t, 20),
            [
                (0, 11),
                (0, 12),
                (2, 10),
                (2, 11),
                (1, 10),
                (1, 11),
                (1, 12),
                (2, 12)
            ]
        );
    }

    #[test]
    fn hastening_counts_the_segment_on_air_and_moves_no_more_than_is_planned() {
        let plan = vec![seg(0, 0, 4), seg(1, 0, 2), seg(0, 4, 2)];
        let mut t = Transmission::new(TransmissionId(1), ItemId(0), AnnounceKind::Repair, plan);
        assert_eq!(take(&mut t, 1), [(0, 0)]);
        // Block 0's rest on air (3) covers 3 of the 4 asked: one moves.
        assert_eq!(t.hasten(0, 4), 1);
        // Block 1 has 2 planned: asking 5 moves those 2 (the caller
        // appends what the plan lacks).
        assert_eq!(t.hasten(1, 5), 2);
        assert_eq!(unsent(&t, 0), 5);
        assert_eq!(
            take(&mut t, 20),
            [(0, 1), (0, 2), (0, 3), (1, 0), (1, 1), (0, 4), (0, 5)]
        );
    }

    #[test]
    fn a_hastened_tail_stays_behind_the_first_tier_boundary_it_crossed() {
        let first = vec![seg(0, 0, 2), seg(1, 0, 2)];
        let tail = vec![seg(0, 2, 2), seg(1, 2, 2)];
        let mut t = tiered(first, tail);
        assert_eq!(take(&mut t, 1), [(0, 0)]);
        // Block 1's tail moved ahead: it is first tier now, and block 0
        // keeps its tail.
        assert_eq!(t.hasten(1, 4), 4);
        assert!(!has_tail(&t, 1) && has_tail(&t, 0));
        assert_eq!(
            take(&mut t, 20),
            [(0, 1), (1, 0), (1, 1), (1, 2), (1, 3), (0, 2), (0, 3)]
        );
    }
}
