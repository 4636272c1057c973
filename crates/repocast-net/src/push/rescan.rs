//! When the pusher scans its folder again: a quiet time after the last
//! change, so a copy of many files becomes one catalogue version, but never
//! later than a bound after the first change not yet scanned, so a file
//! written without a pause (a log) cannot hold the others' changes back.

use std::time::Duration;
use tokio::time::Instant;

/// Quiet time after a change in the folder before it is rescanned.
pub const RESCAN_QUIET: Duration = Duration::from_secs(1);
/// Longest a change waits for its rescan while changes keep coming.
pub const RESCAN_MAX_WAIT: Duration = Duration::from_secs(5);

/// The next rescan's time, if one is due.
#[derive(Debug, Default)]
pub struct Rescan {
    /// The first change since the last scan.
    first: Option<Instant>,
    at: Option<Instant>,
}

impl Rescan {
    /// Something in the folder changed at `now` (or the last scan asked
    /// for another).
    pub fn changed(&mut self, now: Instant) {
        let first = *self.first.get_or_insert(now);
        self.at = Some((now + RESCAN_QUIET).min(first + RESCAN_MAX_WAIT));
    }

    /// A rescan is asked for at once (SIGHUP).
    pub fn now(&mut self, now: Instant) {
        self.first.get_or_insert(now);
        self.at = Some(now);
    }

    /// When the next rescan is due.
    pub fn due(&self) -> Option<Instant> {
        self.at
    }

    /// The folder was scanned: nothing is due until the next change.
    pub fn scanned(&mut self) {
        *self = Rescan::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_is_scanned_once_quiet_and_endless_changes_within_the_bound() {
        let t0 = Instant::now();
        let ms = |m: u64| t0 + Duration::from_millis(m);
        let mut r = Rescan::default();
        assert_eq!(r.due(), None);
        // A copy of many files: one scan, a second after the last.
        for m in [0, 100, 300] {
            r.changed(ms(m));
        }
        assert_eq!(r.due(), Some(ms(1_300)));
        r.scanned();
        assert_eq!(r.due(), None);
        // A file written every 400 ms from 2 s on: scanned 5 s after the
        // first change, whatever comes after it, and again 5 s later.
        for m in (2_000..7_000).step_by(400) {
            r.changed(ms(m));
            assert!(r.due().is_some_and(|d| d <= ms(7_000)));
        }
        assert_eq!(r.due(), Some(ms(7_000)));
        r.scanned();
        r.changed(ms(7_200));
        assert_eq!(r.due(), Some(ms(8_200)));
        // SIGHUP: at once.
        r.now(ms(7_500));
        assert_eq!(r.due(), Some(ms(7_500)));
    }
}
