//! Block layout: how an item's symbols are grouped into source blocks.
//!
//! Both sides compute the layout from the manifest's [`FecParams`], so it is
//! never sent. For S symbols and a largest block of kmax symbols we keep
//! G = ceil(S / kmax) blocks and use sizes k = ceil(S/G) and k - 1 (the
//! Fcast variant of SPEC 3.6 that needs no padding). [`fcast_padding`]
//! gives the padding of the plain variant (all blocks of k) for comparison.

use crate::wire::FecParams;

/// The block structure of one item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    size: u64,
    symbol_size: u16,
    symbols: u64,
    blocks: u32,
    k_large: u32,
    n_large: u32,
}

/// Why a layout cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    /// The item would need more blocks than a u32 can number.
    #[error("item too large for its block size")]
    TooManyBlocks,
}

impl Layout {
    /// The layout of an item of `size` bytes under `fec`.
    pub fn new(size: u64, fec: &FecParams) -> Result<Layout, LayoutError> {
        let t = fec.symbol_size.max(1) as u64;
        let symbols = size.div_ceil(t);
        let kmax = fec.max_block_symbols.max(1) as u64;
        let g = symbols.div_ceil(kmax);
        if g > u32::MAX as u64 {
            return Err(LayoutError::TooManyBlocks);
        }
        let (k_large, n_large) = if g == 0 {
            (0, 0)
        } else {
            let k = symbols.div_ceil(g);
            // blocks of k and k-1 summing to S: n_large blocks of k.
            let n_large = symbols - (k - 1) * g;
            (k as u32, n_large as u32)
        };
        Ok(Layout {
            size,
            symbol_size: fec.symbol_size,
            symbols,
            blocks: g as u32,
            k_large,
            n_large,
        })
    }

    /// Number of source blocks (0 for an empty item).
    pub fn blocks(&self) -> u32 {
        self.blocks
    }

    /// Source symbols in the item.
    pub fn symbols(&self) -> u64 {
        self.symbols
    }

    /// Item size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Bytes per symbol.
    pub fn symbol_size(&self) -> u16 {
        self.symbol_size
    }

    /// Source symbols in block `b` (0 past the end).
    pub fn block_symbols(&self, b: u32) -> u32 {
        if b >= self.blocks {
            0
        } else if b < self.n_large {
            self.k_large
        } else {
            self.k_large - 1
        }
    }

    /// Index of block `b`'s first symbol within the item.
    pub fn block_first_symbol(&self, b: u32) -> u64 {
        let b = b.min(self.blocks) as u64;
        let large = b.min(self.n_large as u64);
        large * self.k_large as u64 + (b - large) * (self.k_large as u64).saturating_sub(1)
    }

    /// Byte offset of block `b` within the item.
    pub fn block_offset(&self, b: u32) -> u64 {
        (self.block_first_symbol(b) * self.symbol_size as u64).min(self.size)
    }

    /// The block holding byte `offset` (the last block for offsets past
    /// the end).
    pub fn block_of(&self, offset: u64) -> u32 {
        let last = self.blocks.saturating_sub(1);
        // The first block whose successor starts after `offset`.
        let (mut lo, mut hi) = (0u32, last);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.block_offset(mid + 1) <= offset {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// Bytes of the item that block `b` holds (the last block may hold less
    /// than `k * symbol_size`; the rest is zero padding).
    pub fn block_len(&self, b: u32) -> u64 {
        let start = self.block_offset(b);
        let end = (start + self.block_symbols(b) as u64 * self.symbol_size as u64).min(self.size);
        end - start
    }
}

/// Larger blocks for large items (push): an item whose blocks of the
/// configured largest size would number more than [`BlockGrowth::blocks`]
/// gets blocks large enough to keep to that many, up to
/// [`BlockGrowth::max_symbols`].
///
/// Without a back channel a listener ends when its unluckiest block has k
/// symbols. Its wait past the mean grows with the number of blocks G (the
/// largest of G block counts lies about 1.9 standard deviations out at 19
/// blocks, 2.2 at 38, 2.9 at 300) and shrinks as 1/sqrt(k), so keeping G
/// fixed while k grows keeps a high-loss listener's tail about where it is
/// for a medium file instead of letting it grow with the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockGrowth {
    /// Blocks an item keeps to while its blocks may still grow.
    pub blocks: u32,
    /// The largest block growth reaches, in symbols.
    pub max_symbols: u32,
}

/// The FEC parameters of an item of `size` bytes: `fec`'s, with the
/// largest block grown by `growth` (never shrunk, never past the code's
/// limit), and the symbols of an item of one block fitted to it
/// ([`fitted_symbol_size`]).
pub fn item_fec(fec: &FecParams, growth: Option<BlockGrowth>, size: u64) -> FecParams {
    let grown = match growth {
        None => *fec,
        Some(g) => {
            let symbols = size.div_ceil(fec.symbol_size.max(1) as u64);
            let wanted = symbols.div_ceil(g.blocks.max(1) as u64);
            let cap = g.max_symbols.min(fec.code.max_block_symbols()) as u64;
            let k = wanted.min(cap).max(fec.max_block_symbols as u64);
            FecParams {
                max_block_symbols: k as u32,
                ..*fec
            }
        }
    };
    FecParams {
        symbol_size: fitted_symbol_size(&grown, size),
        ..grown
    }
}

/// The symbol size an item of `size` bytes is sent with under `fec`: the
/// configured one, except for an item that fits in one block, whose
/// symbols shrink to the fewest bytes (even, at least
/// [`crate::wire::manifest::MIN_SYMBOL_SIZE`]) that still hold it in as
/// many symbols.
///
/// The configured size pads an item's last symbol to full length, and
/// every repair symbol is full length too: a 100-byte file sent with
/// 1,420-byte symbols is 93% padding, and 20,000 files of up to 4,000
/// bytes took 27% longer to send at a set rate than with fitted symbols
/// (`docs/benchmarks.md`, session 58). A single block's bytes, and
/// so its hash, are the same whatever its symbols' size, and items of
/// more than one block keep theirs (their blocks' boundaries follow it).
pub fn fitted_symbol_size(fec: &FecParams, size: u64) -> u16 {
    let t = fec.symbol_size.max(1) as u64;
    let symbols = size.div_ceil(t);
    if symbols == 0 || symbols > fec.max_block_symbols as u64 {
        return fec.symbol_size;
    }
    let min = crate::wire::manifest::MIN_SYMBOL_SIZE as u64;
    let fitted = size.div_ceil(symbols).next_multiple_of(2).max(min);
    // Never above the configured size (an odd one, or one below the
    // minimum, stays as configured).
    fitted.min(t) as u16
}

/// Padding overhead (fraction of S) of the plain Fcast sizing, all blocks
/// of k = ceil(S/G) symbols with G = ceil(S/kmax).
pub fn fcast_padding(s: u64, kmax: u64) -> f64 {
    if s == 0 {
        return 0.0;
    }
    let g = s.div_ceil(kmax);
    let k = s.div_ceil(g).min(kmax);
    (g * k - s) as f64 / s as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fec::CodeKind;

    #[test]
    fn growth_keeps_large_items_to_their_blocks_within_the_cap() {
        let base = FecParams {
            code: CodeKind::RaptorQ,
            symbol_size: 1000,
            max_block_symbols: 1250,
        };
        let g = Some(BlockGrowth {
            blocks: 32,
            max_symbols: 2500,
        });
        let k = |size: u64| item_fec(&base, g, size).max_block_symbols;
        let blocks = |size: u64| Layout::new(size, &item_fec(&base, g, size)).map(|l| l.blocks());
        // Small and medium items keep the configured blocks.
        assert_eq!(k(0), 1250);
        assert_eq!(k(1000), 1250);
        assert_eq!(k(32 * 1250 * 1000), 1250);
        assert_eq!(blocks(32 * 1250 * 1000), Ok(32));
        // Past 32 blocks of 1,250 the blocks grow and the count stays 32.
        assert_eq!(k(32 * 1250 * 1000 + 1), 1251);
        assert_eq!(blocks(32 * 1250 * 1000 + 1), Ok(32));
        assert_eq!(blocks(32 * 2000 * 1000), Ok(32));
        // Until the cap; then the count grows again.
        assert_eq!(k(32 * 2500 * 1000), 2500);
        assert_eq!(k(1 << 30), 2500);
        assert_eq!(blocks(1 << 30), Ok(430));
        // No growth, or a configured block above what growth asks: as set.
        assert_eq!(item_fec(&base, None, 1 << 30), base);
        let big = FecParams {
            max_block_symbols: 4000,
            ..base
        };
        assert_eq!(item_fec(&big, g, 64 << 20).max_block_symbols, 4000);
        // Never past the code's limit.
        let rs = FecParams {
            code: CodeKind::ReedSolomon,
            max_block_symbols: 8,
            ..base
        };
        let rs_k = item_fec(
            &rs,
            Some(BlockGrowth {
                blocks: 1,
                max_symbols: u32::MAX,
            }),
            1 << 40,
        );
        assert_eq!(
            rs_k.max_block_symbols,
            CodeKind::ReedSolomon.max_block_symbols()
        );
    }

    #[test]
    fn an_item_of_one_block_gets_symbols_fitted_to_it() {
        let base = FecParams {
            code: CodeKind::RaptorQ,
            symbol_size: 1420,
            max_block_symbols: 100,
        };
        let t = |size: u64| item_fec(&base, None, size).symbol_size;
        assert_eq!(t(0), 1420);
        assert_eq!(t(5), 16);
        assert_eq!(t(100), 100);
        assert_eq!(t(101), 102);
        assert_eq!(t(1420), 1420);
        assert_eq!(t(1421), 712);
        assert_eq!(t(100 * 1420), 1420);
        // Two blocks keep the configured size, and so do their bounds.
        assert_eq!(t(100 * 1420 + 1), 1420);
        for size in (1..30_000).step_by(7).chain([141_999, 142_000]) {
            let fitted = Layout::new(size, &item_fec(&base, None, size)).expect("fits");
            let plain = Layout::new(size, &base).expect("fits");
            assert_eq!((fitted.blocks(), fitted.block_len(0)), (1, size));
            assert_eq!(fitted.symbols(), plain.symbols(), "size {size}");
            let padding = fitted.symbols() * u64::from(fitted.symbol_size()) - size;
            // Under a byte a symbol, and one more to make it even.
            assert!(
                padding < 2 * fitted.symbols() + 16,
                "size {size}: {padding}"
            );
        }
        // Growth applies first: a grown block holds more, and fits too.
        let g = Some(BlockGrowth {
            blocks: 1,
            max_symbols: 1000,
        });
        // 710,002 bytes: 501 symbols of 1,420, or of 1,418, in one block.
        assert_eq!(item_fec(&base, g, 500 * 1420 + 2).symbol_size, 1418);
        assert_eq!(item_fec(&base, g, 1000 * 1420 + 1).symbol_size, 1420);
    }

    fn params(kmax: u32) -> FecParams {
        FecParams {
            code: CodeKind::ReedSolomon,
            symbol_size: 100,
            max_block_symbols: kmax,
        }
    }

    #[test]
    fn k_and_k_minus_one_blocks_cover_every_symbol_without_padding() {
        for s in [0u64, 1, 31, 32, 33, 64, 65, 100, 1000, 1023, 1024] {
            let l = Layout::new(s * 100, &params(32)).expect("fits");
            let total: u64 = (0..l.blocks()).map(|b| l.block_symbols(b) as u64).sum();
            assert_eq!(total, s);
            assert_eq!(l.blocks() as u64, s.div_ceil(32));
            for b in 0..l.blocks() {
                assert!(l.block_symbols(b) <= 32 && l.block_symbols(b) >= 1);
                assert_eq!(
                    l.block_first_symbol(b + 1),
                    l.block_first_symbol(b) + l.block_symbols(b) as u64
                );
            }
        }
    }

    #[test]
    fn last_block_holds_the_tail_bytes() {
        let l = Layout::new(1001, &params(4)).expect("fits");
        assert_eq!(l.symbols(), 11);
        let total: u64 = (0..l.blocks()).map(|b| l.block_len(b)).sum();
        assert_eq!(total, 1001);
    }

    #[test]
    fn block_of_finds_the_block_holding_each_byte() {
        for size in [1u64, 99, 100, 1001, 3_200, 3_299, 64_123] {
            let l = Layout::new(size, &params(4)).expect("fits");
            for off in (0..size).step_by(37).chain([size - 1]) {
                let b = l.block_of(off);
                assert!(
                    l.block_offset(b) <= off && off < l.block_offset(b) + l.block_len(b),
                    "size {size} offset {off} block {b}"
                );
            }
        }
    }

    /// SPEC 3.6: kmax = 32, files of 32..1024 symbols: padding at most about
    /// 3%, about 1.3% on average and about 1.25% at the median.
    #[test]
    fn fcast_padding_matches_the_spec_figures() {
        let mut v: Vec<f64> = (32..=1024).map(|s| fcast_padding(s, 32)).collect();
        let max = v.iter().cloned().fold(0.0, f64::max);
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        v.sort_by(f64::total_cmp);
        let median = v[v.len() / 2];
        eprintln!("padding max {max} mean {mean} median {median}");
        assert!(max <= 0.032, "max {max}");
        assert!((mean - 0.013).abs() < 0.002, "mean {mean}");
        assert!((median - 0.0125).abs() < 0.002, "median {median}");
    }
}
