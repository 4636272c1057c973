//! A block's symbols held until they decode, for the codes that solve from
//! any K of them (RaptorQ and Reed-Solomon), and their screening when the
//! bytes a solve gives fail the block's hash.
//!
//! A decoder ([`super::raptorq::RaptorQDecoder`],
//! [`super::reed_solomon::RsDecoder`]) keeps its ids and bytes here and
//! brings only its solve: which symbols to solve from is decided here.
//! One forged or corrupt symbol among a block's makes its bytes fail their
//! hash whatever the code; the symbols are kept, an eighth more than K
//! collected, and each try leaves one share of them out
//! ([`SCREEN_SHARES`]) until a solve verifies or none is left.

use super::symbols::Symbols;
use super::{IdSet, Rejected};

/// Shares a rejected block's symbols are screened in (`Held::reject`):
/// each try leaves one out, so one forged symbol among them is found with
/// an eighth more symbols than K and at most eight more decodes.
pub const SCREEN_SHARES: usize = 8;

/// One block's symbols, what was tried with them, and their screening.
pub(super) struct Held {
    k: u32,
    t: usize,
    ids: IdSet,
    /// Every symbol held, in arrival order, until the block's bytes are
    /// verified: a solve that fails (short of rank, or bytes that fail
    /// their hash) keeps them. Until a solve is tried they can be handed
    /// over (spilled to disk).
    symbols: Symbols,
    /// Symbols held at the last try without a screen (one that came
    /// short, or whose bytes were then rejected): the next waits for more.
    /// Zero until a solve is tried, and again once the block starts over.
    tried: usize,
    decoded: bool,
    /// After bytes failed their check: the share of the symbols (those
    /// whose arrival index is this modulo [`SCREEN_SHARES`]) the next try
    /// leaves out.
    screen: Option<usize>,
}

impl Held {
    /// None yet, for a block of `k` symbols of `t` bytes.
    pub(super) fn new(k: u32, t: usize) -> Self {
        Held {
            k,
            t,
            ids: IdSet::default(),
            symbols: Symbols::new(k, t),
            tried: 0,
            decoded: false,
            screen: None,
        }
    }

    pub(super) fn k(&self) -> u32 {
        self.k
    }

    pub(super) fn symbol_size(&self) -> usize {
        self.t
    }

    pub(super) fn decoded(&self) -> bool {
        self.decoded
    }

    /// Distinct ids held.
    pub(super) fn distinct(&self) -> u32 {
        self.ids.len()
    }

    /// Symbols held (with their bytes).
    pub(super) fn len(&self) -> usize {
        self.symbols.len()
    }

    /// Takes a symbol whose id is below `space` and whose bytes are a
    /// whole symbol, unless the block is decoded or has it already.
    pub(super) fn add(&mut self, esi: u32, space: u32, payload: Option<&[u8]>) -> bool {
        let Some(p) =
            payload.filter(|_| !self.decoded && super::admissible(esi, space, payload, self.t))
        else {
            return false;
        };
        if !self.ids.insert(esi) {
            return false;
        }
        self.symbols.push(esi, p);
        true
    }

    /// Missing source ids.
    pub(super) fn missing(&self) -> Vec<u32> {
        self.ids.missing_below(self.k)
    }

    /// Symbols a screening needs: with any one share left out, K + 1
    /// (RaptorQ fails at that about once in 24,000 decodes; any K decode
    /// Reed-Solomon).
    fn screen_needs(&self) -> usize {
        let k = self.k as usize + 1;
        let mut n = (k * SCREEN_SHARES).div_ceil(SCREEN_SHARES - 1);
        while n - n.div_ceil(SCREEN_SHARES) < k {
            n += 1;
        }
        n
    }

    /// While screening (and not decoded), the symbols still needed;
    /// `None` otherwise (the code's own count applies).
    pub(super) fn screen_needed(&self) -> Option<u32> {
        (self.screen.is_some() && !self.decoded).then(|| {
            let n = self.screen_needs().max(self.tried + 1);
            n.saturating_sub(self.symbols.len()) as u32
        })
    }

    /// Whether a solve has something to try: K distinct ids (while
    /// screening, enough that any share can be left out), and something
    /// new since the last try.
    pub(super) fn ready(&self) -> bool {
        let n = self.symbols.len();
        let enough = match self.screen {
            Some(_) => n >= self.screen_needs(),
            None => self.ids.len() >= self.k,
        };
        !self.decoded && enough && n > self.tried
    }

    /// Solves once ready, by `solve` over the symbols it is given; after a
    /// try that failed, again with each symbol added since. Screening,
    /// each share left out in turn until one solves (if none does, the
    /// block starts over).
    pub(super) fn try_decode<F>(&mut self, solve: F) -> Option<Vec<u8>>
    where
        F: Fn(&mut dyn Iterator<Item = (u32, &[u8])>) -> Option<Vec<u8>>,
    {
        if !self.ready() {
            return None;
        }
        let Some(first) = self.screen else {
            let bytes = solve(&mut self.symbols.iter());
            self.decoded = bytes.is_some();
            self.tried = self.symbols.len();
            return bytes;
        };
        for out in first..SCREEN_SHARES {
            let mut rest = (self.symbols.iter().enumerate())
                .filter(|(i, _)| i % SCREEN_SHARES != out)
                .map(|(_, s)| s);
            if let Some(b) = solve(&mut rest) {
                self.screen = Some(out);
                self.decoded = true;
                return Some(b);
            }
        }
        *self = Held::new(self.k, self.t);
        None
    }

    /// Bytes that failed their check: the first time (if `screen`; if not,
    /// the block starts over, [`Rejected::GiveUp`]), the symbols are kept
    /// and more collected ([`Rejected::Collect`]); then each try leaves
    /// out the next share ([`Rejected::Retry`]) until none is left
    /// ([`Rejected::Exhausted`], the symbols forgotten).
    pub(super) fn reject(&mut self, screen: bool) -> Rejected {
        self.decoded = false;
        match self.screen {
            None if !screen => {
                *self = Held::new(self.k, self.t);
                Rejected::GiveUp
            }
            None => {
                self.screen = Some(0);
                Rejected::Collect
            }
            Some(out) if out + 1 < SCREEN_SHARES => {
                self.screen = Some(out + 1);
                Rejected::Retry
            }
            Some(_) => {
                *self = Held::new(self.k, self.t);
                Rejected::Exhausted
            }
        }
    }

    pub(super) fn screening(&self) -> bool {
        self.screen.is_some()
    }

    /// Hands over the symbols held and forgets them, only before a solve
    /// was tried (a decoded or screening block has tried one).
    pub(super) fn take_symbols(&mut self) -> Option<Vec<(u32, Vec<u8>)>> {
        if self.tried > 0 {
            return None;
        }
        self.ids = IdSet::default();
        Some(self.symbols.take_pairs())
    }
}
