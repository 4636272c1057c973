//! ARM: adaptive redundancy with probes (SPEC 3.5) — the sender's and the
//! receiver's arithmetic, used by the server and client state machines.
//!
//! The sender keeps `maxseqno`, the last symbol it plans to send, starting
//! at K' (symbols a receiver needs), and piggy-backs probes carrying
//! PTS = maxseqno - seqno. A receiver holding RPC symbols after `seqno`
//! with loss estimate r = 1 - RPC/seqno predicts m = PTS (1 - r) + RPC; if
//! m < K' it asks for maxseqno >= seqno + (K' - RPC)/(1 - r).

/// Sender-side ARM parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ArmParams {
    /// Symbols sent after maxseqno regardless (`relax`).
    pub relax: u32,
    /// Decrease of maxseqno after a probe that drew no NAK (`d`).
    pub decrease: u32,
}

impl Default for ArmParams {
    fn default() -> Self {
        ArmParams {
            relax: 0,
            decrease: 1,
        }
    }
}

/// Receiver's verdict on a probe: `None` to stay silent, or the maxseqno to
/// ask for. `seqno` counts symbols sent so far (1-based), `rpc` symbols held,
/// `needed` is K'.
pub fn receiver_request(pts: u32, seqno: u32, rpc: u32, needed: u32) -> Option<u32> {
    if rpc >= needed || seqno == 0 {
        return None;
    }
    let r = (1.0 - rpc as f64 / seqno as f64).clamp(0.0, 0.99);
    let m = pts as f64 * (1.0 - r) + rpc as f64;
    if m >= needed as f64 {
        return None;
    }
    let want = seqno as f64 + (needed - rpc) as f64 / (1.0 - r);
    Some(want.ceil().min(u32::MAX as f64) as u32)
}

/// RTT from a probe echo: t4 - t1 - (t3 - t2), the receiver's hold time
/// (t3 - t2) taken out.
pub fn rtt_us(t1_sent: u64, hold_us: u32, t4_received: u64) -> u64 {
    t4_received
        .saturating_sub(t1_sent)
        .saturating_sub(hold_us as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn receiver_asks_only_when_prediction_falls_short() {
        // 100 needed; after 50 sent holding 40 (r = 0.2), 50 still to come:
        // m = 50 * 0.8 + 40 = 80 < 100 -> ask for 50 + 60 / 0.8 = 125.
        assert_eq!(receiver_request(50, 50, 40, 100), Some(125));
        // Lossless so far and 60 to come: m = 110 >= 100 -> silent.
        assert_eq!(receiver_request(60, 50, 50, 100), None);
        assert_eq!(receiver_request(0, 10, 100, 100), None);
        assert_eq!(rtt_us(1_000, 200, 5_000), 3_800);
    }
}
