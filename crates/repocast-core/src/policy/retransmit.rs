//! Retransmission policies: what the server does with a NAK (SPEC 3.3).

/// What a NAK triggers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retransmit {
    /// `R(inf)`: always multicast fresh repair, as many per block as the
    /// largest NAK asked for; several rounds if needed.
    Always,
    /// `R(p)`: repair only NAKs asking for at most p symbols in total
    /// (coalesced into a pending repair of the same item); larger NAKs are
    /// answered by rescheduling.
    Selective(u32),
    /// `R(0)`: never repair; the item goes back on the client's list and is
    /// sent again when the scheduler picks it.
    Reschedule,
}

impl Retransmit {
    /// Whether a NAK asking for `total` symbols is answered with repair.
    pub fn repairs(&self, total: u64) -> bool {
        match *self {
            Retransmit::Always => true,
            Retransmit::Selective(p) => total <= p as u64,
            Retransmit::Reschedule => false,
        }
    }
}

/// Standard deviations of margin in [`repair_size`]: a receiver completes
/// a block from one repair with probability about 99.9%, so one with 27
/// blocks short after a pass still has a 96% chance of needing no further
/// round.
const REPAIR_Z: f64 = 3.0;

/// Loss-aware repair size: how many fresh symbols to send so that a
/// receiver that loses a fraction `loss` of packets (capped at 0.9) gets
/// the `count` it lacks in one round with high probability. The smallest
/// n with n(1-p) - z*sqrt(n p (1-p)) >= count (the binomial count's normal
/// approximation, z = 3), never less than count/(1-p), plus one for
/// RaptorQ's 0.5% chance of failing to decode with exactly K symbols. 0
/// for 0.
///
/// Sizing a repair only by the mean (count/(1-p), plus one) leaves a block
/// short one time in eleven (31 symbols at 5% loss) to nearly one in two
/// (hundreds of symbols at 20-50% loss): with tens of blocks per item a
/// second and third NAK round (each a NAK window plus a round trip) is
/// then nearly certain, and costs more than the few extra symbols.
pub fn repair_size(count: u32, loss: f64) -> u32 {
    if count == 0 {
        return 0;
    }
    let p = if loss.is_finite() {
        loss.clamp(0.0, 0.9)
    } else {
        0.0
    };
    let q = 1.0 - p;
    let c = count as f64;
    let a = REPAIR_Z * (p * q).sqrt();
    let s = (a + (a * a + 4.0 * q * c).sqrt()) / (2.0 * q);
    // (Less a hair: with no loss s*s is count plus rounding error.)
    let n = (s * s - 1e-9).max(c / q).ceil();
    (n.min(u32::MAX as f64) as u32).saturating_add(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// P(Binomial(n, q) >= k), exactly (log-space terms).
    fn tail(n: u32, q: f64, k: u32) -> f64 {
        let ln_fact = |m: u32| (1..=m).map(|i| (i as f64).ln()).sum::<f64>();
        (k..=n)
            .map(|i| {
                let ln = ln_fact(n) - ln_fact(i) - ln_fact(n - i)
                    + i as f64 * q.ln()
                    + (n - i) as f64 * (1.0 - q).ln();
                ln.exp()
            })
            .sum()
    }

    #[test]
    fn repairs_complete_a_block_in_one_round_with_high_probability() {
        for loss in [0.01, 0.05, 0.2, 0.5] {
            for count in [1u32, 5, 31, 100, 400] {
                let n = repair_size(count, loss);
                let p = tail(n, 1.0 - loss, count);
                assert!(p > 0.997, "count {count} loss {loss}: {n} sent, P = {p}");
                // ...and not far past the point of need: three fewer
                // would already fall short more than once in 10,000.
                let fewer = tail(n.saturating_sub(3), 1.0 - loss, count);
                assert!(fewer < 0.9999, "count {count} loss {loss}: {n} sent");
            }
        }
        // The mean-only rule this replaces (34 for 31 at 5%) leaves the
        // block short one time in eleven.
        assert!(tail(34, 0.95, 31) < 0.92);
        assert_eq!(repair_size(0, 0.3), 0);
        assert_eq!(repair_size(10, 0.0), 11);
        assert_eq!(repair_size(10, f64::NAN), 11);
        assert!(repair_size(u32::MAX, 0.9) == u32::MAX);
    }

    #[test]
    fn thresholds() {
        assert!(Retransmit::Always.repairs(1_000_000));
        assert!(Retransmit::Selective(5).repairs(5));
        assert!(!Retransmit::Selective(5).repairs(6));
        assert!(!Retransmit::Reschedule.repairs(1));
    }
}
