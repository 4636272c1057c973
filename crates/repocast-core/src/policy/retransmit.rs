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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thresholds() {
        assert!(Retransmit::Always.repairs(1_000_000));
        assert!(Retransmit::Selective(5).repairs(5));
        assert!(!Retransmit::Selective(5).repairs(6));
        assert!(!Retransmit::Reschedule.repairs(1));
    }
}
