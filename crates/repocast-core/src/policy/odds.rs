//! How many symbols a block needs on air so that one receiver, losing each
//! independently with probability `p`, gets `d` of them with probability
//! at least `q`: the binomial tail behind the server's idle-link FEC
//! ([`crate::server::ServerConfig::idle_fec`]).
//!
//! A fixed expansion (`FEC(maxloss+x)`) covers a large block's loss
//! comfortably (the count received varies by about the square root of the
//! block), but a small block's only by luck: 51 symbols for 47 at 5% loss
//! decode about 89% of the time, and the other 11% wait a NAK round, which
//! on a LAN costs more than the file's whole transmission.

/// Most extra symbols [`symbols_for_odds`] searches past its estimate.
const MAX_STEPS: u32 = 64;
/// [`symbols_for_odds`] takes a higher loss as this one: the loss is a
/// receiver's own report, and the symbols needed grow as 1 / (1 - p).
/// (Taken as this, not ignored: a count that fell from the odds' to the
/// policy's as an estimate crossed 50% would make a send's length jump by
/// a quarter with each new report of a receiver near it.)
pub const MAX_LOSS: f64 = 0.5;

/// Extra symbols [`symbols_for_odds`] may give a block of a few symbols,
/// past twice its size: a one-symbol block sent twice is lost one time in
/// 400 at 5% loss, so a push pass of a thousand small files, each with its
/// share of 90% odds for the set, missed some file every other cycle (1,000
/// files of 8 MiB in all: 46% odds instead of 90%); with up to 4 more it
/// reaches them.
pub const SMALL_BLOCK_EXTRA: u32 = 4;

/// The fewest symbols `n >= at_least` with P[Binomial(n, 1 - p) >= d] >=
/// q, searched from a normal estimate; `at_least` when that already holds,
/// or when `p` or `q` leave nothing to compute (no loss, no target). A loss
/// above [`MAX_LOSS`] counts as that. Never more than twice `at_least` (or
/// `d`), or [`SMALL_BLOCK_EXTRA`] more when that is more: the odds add to a
/// policy's count, they do not replace it.
pub fn symbols_for_odds(d: u32, p: f64, q: f64, at_least: u32) -> u32 {
    // NaN fails every comparison: no loss, or no target, to compute with.
    let p = if p > 0.0 { p.min(MAX_LOSS) } else { 0.0 };
    if d == 0 || p == 0.0 || !(q > 0.0 && q < 1.0) {
        return at_least;
    }
    let base = at_least.max(d);
    let cap = base
        .saturating_mul(2)
        .max(base.saturating_add(SMALL_BLOCK_EXTRA));
    let s = 1.0 - p;
    // Normal estimate: n s - z sqrt(n s p) >= d - 0.5, solved for sqrt(n).
    let z = normal_quantile(q);
    let sd = (s * p).sqrt();
    let x = (z * sd + (z * z * sd * sd + 4.0 * s * (d as f64 - 0.5)).sqrt()) / (2.0 * s);
    let guess = (x * x).floor().min(u32::MAX as f64) as u32;
    let mut n = at_least.max(d).max(guess.saturating_sub(2)).min(cap);
    for _ in 0..MAX_STEPS {
        if n >= cap || decode_odds(n, d, p) >= q {
            return n;
        }
        n += 1;
    }
    n
}

/// Set odds [`best_set_odds`] weighs, above the configured floor.
const SET_ODDS: [f64; 7] = [0.9, 0.95, 0.98, 0.99, 0.995, 0.998, 0.999];

/// The odds, over a whole set of blocks, that a listener at loss `p`
/// needs no second pass of any block, that make its expected time least:
/// each block gets the set's G-th root ([`symbols_for_odds`]), a pass is
/// the sum of the blocks' counts, and a listener that misses a block
/// waits about one more pass for it, so the expected time goes as
/// pass(q) x (2 - odds(q)), odds(q) what those counts give (at least q). Of large blocks a few symbols more buy odds near 1
/// (a set of packs of 1,250 symbols: 99.9% for 0.5% more); of one-symbol
/// files they cost their size again. `blocks` is (source symbols, how
/// many blocks of that size); at least `floor` (the configured odds).
pub fn best_set_odds(blocks: &[(u32, u64)], p: f64, floor: f64) -> f64 {
    let g: u64 = blocks.iter().map(|&(_, n)| n).sum();
    if g == 0 || p.is_nan() || p <= 0.0 {
        return floor;
    }
    // The odds a pass actually gives (whole symbols overshoot the target,
    // most for small blocks), and its expected time.
    let expected = |q: f64| {
        let qb = q.powf((g as f64).recip());
        let (mut pass, mut ln_odds) = (0.0, 0.0);
        for &(k, n) in blocks {
            let c = symbols_for_odds(k, p, qb, k);
            pass += c as f64 * n as f64;
            ln_odds += decode_odds(c, k, p.min(MAX_LOSS)).max(1e-300).ln() * n as f64;
        }
        pass * (2.0 - ln_odds.exp())
    };
    let mut best = (expected(floor), floor);
    for q in SET_ODDS.into_iter().filter(|&q| q > floor) {
        let e = expected(q);
        if e < best.0 {
            best = (e, q);
        }
    }
    best.1
}

/// P[at most n - d of n symbols lost], each with probability `p`: the
/// odds that a receiver gets at least `d` of `n`.
pub fn decode_odds(n: u32, d: u32, p: f64) -> f64 {
    if n < d {
        return 0.0;
    }
    let (ln_p, ln_s) = (p.ln(), (1.0 - p).ln());
    // log of C(n, j) p^j s^(n - j), summed over j = 0..=n - d in log space
    // (s^n alone underflows for large n at high loss): `sum` is the sum
    // so far scaled by e^-max, rescaled whenever a term raises the max.
    let mut term = n as f64 * ln_s;
    let (mut max, mut sum) = (term, 1.0);
    for j in 1..=(n - d) {
        term += ((n - j + 1) as f64 / j as f64).ln() + ln_p - ln_s;
        if term > max {
            sum = sum * (max - term).exp() + 1.0;
            max = term;
        } else {
            sum += (term - max).exp();
        }
    }
    (max + sum.ln()).exp().min(1.0)
}

/// The standard normal quantile (Acklam's rational approximation, relative
/// error below 1.2e-9: far finer than a symbol count needs).
fn normal_quantile(q: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969683028665376e1,
        2.209460984245205e2,
        -2.759285104469687e2,
        1.38357751867269e2,
        -3.066479806614716e1,
        2.506628277459239,
    ];
    const B: [f64; 5] = [
        -5.447609879822406e1,
        1.615858368580409e2,
        -1.556989798598866e2,
        6.680131188771972e1,
        -1.328068155288572e1,
    ];
    const C: [f64; 6] = [
        -7.784894002430293e-3,
        -3.223964580411365e-1,
        -2.400758277161838,
        -2.549732539343734,
        4.374664141464968,
        2.938163982698783,
    ];
    const D: [f64; 4] = [
        7.784695709041462e-3,
        3.224671290700398e-1,
        2.445134137142996,
        3.754408661907416,
    ];
    let tail = |r: f64| {
        (((((C[0] * r + C[1]) * r + C[2]) * r + C[3]) * r + C[4]) * r + C[5])
            / ((((D[0] * r + D[1]) * r + D[2]) * r + D[3]) * r + 1.0)
    };
    if q < 0.02425 {
        tail((-2.0 * q.ln()).sqrt())
    } else if q > 1.0 - 0.02425 {
        -tail((-2.0 * (1.0 - q).ln()).sqrt())
    } else {
        let u = q - 0.5;
        let r = u * u;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * u
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_of_large_blocks_buys_high_odds_and_one_of_tiny_files_does_not() {
        // Ten packs of 1,250 symbols: odds near 1 cost little.
        let packs = best_set_odds(&[(1250, 10)], 0.05, 0.9);
        assert!(packs >= 0.99, "{packs}");
        // A thousand one- and two-symbol files: each step up costs a
        // symbol per file, more than the misses it saves.
        let tiny = best_set_odds(&[(1, 500), (2, 500)], 0.05, 0.9);
        assert!(tiny < 0.99, "{tiny}");
        // Never below the floor; nothing to weigh without loss or blocks.
        assert!(best_set_odds(&[(1, 5000)], 0.05, 0.97) >= 0.97);
        assert_eq!(best_set_odds(&[(1250, 10)], 0.0, 0.9), 0.9);
        assert_eq!(best_set_odds(&[], 0.05, 0.9), 0.9);
    }

    #[test]
    fn decode_odds_match_hand_sums() {
        // 11 for 10 at 5%: none or one lost.
        let want = 0.95f64.powi(11) + 11.0 * 0.05 * 0.95f64.powi(10);
        assert!((decode_odds(11, 10, 0.05) - want).abs() < 1e-12);
        assert_eq!(decode_odds(9, 10, 0.05), 0.0);
        // Large and lossy: no underflow, and about one half at the mean.
        let half = decode_odds(2000, 1000, 0.5);
        assert!((0.45..0.56).contains(&half), "{half}");
    }

    #[test]
    fn the_fewest_symbols_that_reach_the_odds() {
        for (d, p, q) in [
            (3, 0.05, 0.99),
            (47, 0.05, 0.99),
            (47, 0.2, 0.9),
            (180, 0.05, 0.99),
        ] {
            let n = symbols_for_odds(d, p, q, 0);
            assert!(decode_odds(n, d, p) >= q, "{d} {p} {q}: {n}");
            assert!(
                decode_odds(n - 1, d, p) < q,
                "{d} {p} {q}: {n} is not the fewest"
            );
        }
        // 47 at 5%: 51 decode 89% of the time; 99% takes 54.
        assert_eq!(symbols_for_odds(47, 0.05, 0.99, 0), 54);
        // Never fewer than asked for; nothing to do without loss.
        assert_eq!(symbols_for_odds(47, 0.05, 0.99, 60), 60);
        assert_eq!(symbols_for_odds(47, 0.0, 0.99, 50), 50);
        // A large block at high loss: found, not given up on.
        // (FEC(maxloss+0.02) gives it 1,520.)
        let n = symbols_for_odds(1000, 0.5, 0.99, 1520);
        assert!(decode_odds(n, 1000, 0.5) >= 0.99 && n < 2200, "{n}");
    }

    /// A receiver's loss comes from its own reports: a claim above 50%
    /// counts as 50% (so the count does not jump as an estimate crosses
    /// it), and no claim doubles the policy's count.
    #[test]
    fn a_claimed_loss_cannot_multiply_a_send() {
        let at_half = symbols_for_odds(1000, 0.5, 0.99, 1510);
        assert!((2000..2200).contains(&at_half), "{at_half}");
        for p in [0.5001, 0.52, 0.99, 1.0, f64::INFINITY] {
            assert_eq!(symbols_for_odds(1000, p, 0.99, 1510), at_half, "{p}");
        }
        assert_eq!(symbols_for_odds(1000, 0.99, 0.99, 1010), 2020);
        assert_eq!(symbols_for_odds(1000, f64::NAN, 0.99, 1010), 1010);
        assert_eq!(symbols_for_odds(10, 0.5, 0.999_999, 10), 20);
        // A block of a symbol or a few may take SMALL_BLOCK_EXTRA more.
        assert_eq!(symbols_for_odds(1, 0.05, 0.9999, 1), 4);
        assert_eq!(symbols_for_odds(1, 0.5, 0.9999, 1), 1 + SMALL_BLOCK_EXTRA);
        assert_eq!(symbols_for_odds(3, 0.5, 0.9999, 3), 3 + SMALL_BLOCK_EXTRA);
        assert!(symbols_for_odds(56_403, 0.5, 0.99, 56_403) <= 112_806);
    }
}
