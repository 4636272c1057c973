//! Virtual time for the sans-IO core.
//!
//! The core never reads a clock: drivers pass an [`Instant`] into every
//! `handle_*` call. An `Instant` is a count of microseconds since a point the
//! driver chooses (the simulator's start of day, the net layer's start-up), so
//! the same values work for simulated and real time.

use std::ops::{Add, Sub};
use std::time::Duration;

/// A point in time, in microseconds since the driver's epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Instant(u64);

impl Instant {
    /// The driver's epoch.
    pub const ZERO: Instant = Instant(0);

    /// An instant `us` microseconds after the epoch.
    pub const fn from_micros(us: u64) -> Self {
        Instant(us)
    }

    /// An instant `ms` milliseconds after the epoch.
    pub const fn from_millis(ms: u64) -> Self {
        Instant(ms.saturating_mul(1000))
    }

    /// Microseconds since the epoch.
    pub const fn as_micros(self) -> u64 {
        self.0
    }

    /// Seconds since the epoch, as a float (for reports).
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e6
    }

    /// Time from `earlier` to `self`, zero if `earlier` is later.
    pub fn saturating_since(self, earlier: Instant) -> Duration {
        Duration::from_micros(self.0.saturating_sub(earlier.0))
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, d: Duration) -> Instant {
        Instant(
            self.0
                .saturating_add(d.as_micros().min(u64::MAX as u128) as u64),
        )
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;
    fn sub(self, rhs: Instant) -> Duration {
        self.saturating_since(rhs)
    }
}
