//! Virtual time for the sans-IO core.
//!
//! The core never reads a clock: drivers pass an [`Instant`] into every
//! `handle_*` call. An `Instant` is a count of nanoseconds since a point the
//! driver chooses (packet intervals at Gbit/s rates are a few microseconds,
//! so microsecond ticks would round pacing visibly) (the simulator's start of day, the net layer's start-up), so
//! the same values work for simulated and real time.

use std::ops::{Add, Sub};
use std::time::Duration;

/// A point in time, in nanoseconds since the driver's epoch (584 years fit).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Instant(u64);

impl Instant {
    /// The driver's epoch.
    pub const ZERO: Instant = Instant(0);

    /// An instant `us` microseconds after the epoch.
    pub const fn from_micros(us: u64) -> Self {
        Instant(us.saturating_mul(1000))
    }

    /// An instant `ns` nanoseconds after the epoch.
    pub const fn from_nanos(ns: u64) -> Self {
        Instant(ns)
    }

    /// Nanoseconds since the epoch.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// An instant `ms` milliseconds after the epoch.
    pub const fn from_millis(ms: u64) -> Self {
        Instant(ms.saturating_mul(1_000_000))
    }

    /// Microseconds since the epoch.
    pub const fn as_micros(self) -> u64 {
        self.0 / 1000
    }

    /// Seconds since the epoch, as a float (for reports).
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }

    /// The instant `d` before this one, the epoch if that is earlier.
    pub fn saturating_sub(self, d: Duration) -> Instant {
        Instant(
            self.0
                .saturating_sub(d.as_nanos().min(u64::MAX as u128) as u64),
        )
    }

    /// Time from `earlier` to `self`, zero if `earlier` is later.
    pub fn saturating_since(self, earlier: Instant) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, d: Duration) -> Instant {
        Instant(
            self.0
                .saturating_add(d.as_nanos().min(u64::MAX as u128) as u64),
        )
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;
    fn sub(self, rhs: Instant) -> Duration {
        self.saturating_since(rhs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_agree() {
        let t = Instant::from_millis(2) + Duration::from_nanos(8_930);
        assert_eq!(t.as_nanos(), 2_008_930);
        assert_eq!(t.as_micros(), 2_008);
        assert_eq!(Instant::from_micros(5).as_nanos(), 5_000);
        assert_eq!(t - Instant::from_millis(1), Duration::from_nanos(1_008_930));
        assert_eq!(Instant::ZERO - t, Duration::ZERO);
    }
}
