//! Loss tiers: how a scheduled send to receivers of very different loss
//! is ordered (`ServerConfig::loss_tiers`).
//!
//! Under `FEC(maxloss+x)` a send carries per block what its lossiest
//! receiver needs. Sent block after block, a receiver at 5% sharing the
//! send with one at 50% decodes each block early but waits out the rest of
//! it before the next block starts, and so finishes with the 50% receiver:
//! about twice its own time. Two tiers fix that without a packet more:
//! every block first gets what the lower-loss receivers need (the first
//! tier), then every block gets the rest (the tail). A receiver within the
//! first tier's loss finishes when the first tier ends; one above it
//! finishes when it would have anyway (its last block completes at the
//! same packet either way), since the send carries the same symbols.
//!
//! This module picks the first tier's loss; `server::sends` and
//! `server::early` build and grow the two tiers.

/// The least share of the item (symbols per source symbol) the first
/// tier must save below the whole send before the send is split: a split
/// costs each block a second encoder on the server, worth it only for a
/// real gap in loss.
pub const MIN_GAP: f64 = 0.05;

/// The loss the first tier is sized for, given every receiver's loss and
/// `expansion`, the symbols per source symbol the policy sends at a loss
/// (non-decreasing in it). Each candidate is a receiver's loss below the
/// largest; the one chosen saves the most receiver-time: (receivers at or
/// below it) x (the expansion it saves against the largest). `None`: one
/// tier (every receiver at about the same loss, or the policy does not
/// depend on loss).
pub fn first_tier(losses: &[f64], expansion: impl Fn(f64) -> f64) -> Option<f64> {
    let hi = losses.iter().copied().fold(0.0, f64::max);
    let top = expansion(hi);
    let mut best: Option<(f64, f64)> = None;
    for &lo in losses {
        let saved = top - expansion(lo);
        if lo >= hi || !saved.is_finite() || saved < MIN_GAP {
            continue;
        }
        let below = losses.iter().filter(|&&p| p <= lo).count() as f64;
        let gain = below * saved;
        // Ties go to the higher loss: more receivers finish in the first tier.
        if best.is_none_or(|(g, l)| gain > g || (gain == g && lo > l)) {
            best = Some((gain, lo));
        }
    }
    best.map(|(_, lo)| lo)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `FEC(maxloss+0.02)`.
    fn maxloss(p: f64) -> f64 {
        1.0 + p + 0.02
    }

    #[test]
    fn a_lossy_outlier_gets_a_tail_of_its_own() {
        assert_eq!(first_tier(&[0.05, 0.05, 0.5], maxloss), Some(0.05));
        assert_eq!(first_tier(&[0.5, 0.05, 0.04], maxloss), Some(0.05));
    }

    #[test]
    fn the_first_tier_serves_the_most_receiver_time() {
        // 1% x3, 5% x3, 20% x2: sizing for 5% saves 0.15 for six
        // receivers, against 0.19 for three at 1%.
        let l = [0.01, 0.01, 0.01, 0.05, 0.05, 0.05, 0.2, 0.2];
        assert_eq!(first_tier(&l, maxloss), Some(0.05));
        // One receiver at 1% among 20% ones still gains.
        assert_eq!(first_tier(&[0.2, 0.01, 0.2], maxloss), Some(0.01));
    }

    #[test]
    fn close_losses_and_loss_blind_policies_stay_one_tier() {
        assert_eq!(first_tier(&[0.05, 0.06, 0.08], maxloss), None);
        assert_eq!(first_tier(&[0.05], maxloss), None);
        assert_eq!(first_tier(&[], maxloss), None);
        assert_eq!(first_tier(&[0.0, 0.5], |_| 1.1), None);
        assert_eq!(first_tier(&[0.0, 0.5], |p| 1.0 / (1.0 - p)), Some(0.0));
    }
}
