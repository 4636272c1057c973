//! FEC expansion policies: how many symbols a transmission sends up front.
//!
//! For a block of d source symbols a transmission sends ceil(d (1 + e));
//! each policy chooses e from the receivers of the transmission.

/// How much redundancy to send up front.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FecPolicy {
    /// `FEC(f)`: e = f.
    Fixed(f64),
    /// `FEC(fR)`: e = f x (clients requesting the item).
    PerReceiver(f64),
    /// `FEC(f/R)`: e = f / (clients requesting the item).
    InversePerReceiver(f64),
    /// `FEC(maxloss+x)`: e = the largest estimated loss among them, plus x.
    MaxLoss(f64),
    /// `ARM`: adaptive, see [`super::arm`]; sends d up front and grows.
    Arm,
}

impl FecPolicy {
    /// The expansion e for a transmission to `receivers` clients whose
    /// largest estimated loss rate is `max_loss`.
    pub fn expansion(&self, receivers: u32, max_loss: f64) -> f64 {
        let r = receivers.max(1) as f64;
        let e = match *self {
            FecPolicy::Fixed(f) => f,
            FecPolicy::PerReceiver(f) => f * r,
            FecPolicy::InversePerReceiver(f) => f / r,
            FecPolicy::MaxLoss(x) => max_loss + x,
            FecPolicy::Arm => 0.0,
        };
        e.clamp(0.0, 100.0)
    }

    /// Symbols to send for a block of `d` source symbols.
    pub fn symbols(&self, d: u32, receivers: u32, max_loss: f64) -> u32 {
        let e = self.expansion(receivers, max_loss);
        // Round away float noise before the ceiling: 60 x 1.05 is 63.
        let x = (d as f64 * (1.0 + e) * 1e9).round() / 1e9;
        x.ceil().min(u32::MAX as f64) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_policy_scales_as_named() {
        assert_eq!(FecPolicy::Fixed(0.0).symbols(60, 5, 0.3), 60);
        assert_eq!(FecPolicy::Fixed(0.1).symbols(60, 5, 0.3), 66);
        assert_eq!(FecPolicy::PerReceiver(0.01).symbols(60, 5, 0.3), 63);
        assert_eq!(FecPolicy::InversePerReceiver(0.2).symbols(60, 4, 0.3), 63);
        assert_eq!(FecPolicy::MaxLoss(0.05).symbols(60, 4, 0.5), 93);
        assert_eq!(FecPolicy::Arm.symbols(60, 4, 0.5), 60);
        assert_eq!(FecPolicy::PerReceiver(0.01).symbols(1, 0, 0.0), 2);
    }
}
