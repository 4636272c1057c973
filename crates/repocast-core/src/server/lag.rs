//! How late each receiver's reports come, and so how long the server
//! waits for the next one before it counts it missing.
//!
//! A receiver owes a report (a NAK or item-done) for each transmission it
//! was in flight for; past the transmission's end plus the NAK window plus
//! [`ServerConfig::report_timeout`](super::ServerConfig::report_timeout)
//! the server counts it missing and schedules the item again
//! (`Server::handle_timeout`). A receiver that is behind (a `get` of
//! thousands of small files spends its CPU creating files and checking
//! signatures, and reads its sockets a second late) reports late, but it
//! reports: counted missing, it is sent its items again, which puts it
//! further behind. So the server keeps, per receiver, a smoothed estimate
//! of the time from a transmission's end to that receiver's report on it
//! and its deviation, as TCP does for its retransmission timeout
//! (RFC 6298: gains 1/8 and 1/4), and waits twice the mean plus four
//! deviations when that is longer than the fixed wait, up to
//! [`ServerConfig::report_timeout_max`](super::ServerConfig::report_timeout_max).
//! Twice the mean, not TCP's once: a receiver that is behind is usually
//! falling further behind (the sender outpaces it, so its backlog grows
//! with time), and a report measured now is on a transmission that ended
//! one lateness ago; the next one's lateness is about its own plus that
//! growth. A receiver that reports on time keeps the fixed wait exactly.
//!
//! [`Ends`] remembers when recent transmissions ended, so that a report is
//! measured whether or not its wait had run out: a late report after a
//! timeout is the sample that matters most. A wait set before the
//! receiver's lateness was known is checked again when it runs out, and
//! extended if the receiver's wait has grown since.

use crate::{Instant, TransmissionId};
use std::collections::VecDeque;
use std::time::Duration;

/// Transmissions whose end times are kept for measuring reports.
pub const ENDS_KEPT: usize = 1 << 16;

/// One receiver's report lateness: smoothed mean and mean deviation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReportLag {
    mean: Option<Duration>,
    dev: Duration,
}

impl ReportLag {
    /// Takes in one report that came `lag` after its transmission ended.
    pub fn observe(&mut self, lag: Duration) {
        match self.mean {
            None => {
                self.mean = Some(lag);
                self.dev = lag / 2;
            }
            Some(m) => {
                let diff = lag.abs_diff(m);
                self.dev = (self.dev * 3 + diff) / 4;
                self.mean = Some((m * 7 + lag) / 8);
            }
        }
    }

    /// How long past a transmission's end to wait for this receiver's
    /// report: `floor` (the fixed wait), or twice its mean lateness plus
    /// four deviations when that is longer, up to `cap`. With no cap,
    /// `floor`.
    pub fn wait(&self, floor: Duration, cap: Option<Duration>) -> Duration {
        match (self.mean, cap) {
            (Some(m), Some(cap)) => floor.max((m * 2 + self.dev * 4).min(cap)),
            _ => floor,
        }
    }
}

/// End times of the last [`ENDS_KEPT`] transmissions, by id
/// (transmission ids are given in order, so a ring from the oldest kept).
#[derive(Debug, Default)]
pub struct Ends {
    /// The id of `at[0]`.
    base: u32,
    at: VecDeque<Option<Instant>>,
}

impl Ends {
    /// Records that `t` ended at `now` (forgetting the oldest past
    /// [`ENDS_KEPT`]; one already forgotten is not recorded).
    pub fn ended(&mut self, t: TransmissionId, now: Instant) {
        let Some(i) = t.0.checked_sub(self.base) else {
            return;
        };
        let mut i = i as usize;
        if i >= 2 * ENDS_KEPT {
            // Far past every kept one (ids are given in order, so only
            // after a long run of transmissions never ended): start over.
            self.at.clear();
            self.base = t.0;
            i = 0;
        }
        if i >= self.at.len() {
            self.at.resize(i + 1, None);
        }
        self.at[i] = Some(now);
        while self.at.len() > ENDS_KEPT {
            self.at.pop_front();
            self.base = self.base.wrapping_add(1);
        }
    }

    /// How long ago `t` ended, if it did and is still remembered.
    pub fn since(&self, t: TransmissionId, now: Instant) -> Option<Duration> {
        let i = t.0.checked_sub(self.base)? as usize;
        let end = (*self.at.get(i)?)?;
        Some(now.saturating_since(end))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FLOOR: Duration = Duration::from_millis(550);
    const CAP: Option<Duration> = Some(Duration::from_secs(5));

    #[test]
    fn on_time_reports_keep_the_fixed_wait() {
        let mut l = ReportLag::default();
        assert_eq!(l.wait(FLOOR, CAP), FLOOR);
        for ms in [5, 50, 20, 45, 10, 30, 50, 5] {
            l.observe(Duration::from_millis(ms));
        }
        assert_eq!(l.wait(FLOOR, CAP), FLOOR);
    }

    #[test]
    fn late_reports_lengthen_the_wait_up_to_the_cap() {
        let mut l = ReportLag::default();
        l.observe(Duration::from_millis(800));
        // 800 ms, deviation 400: 3.2 s.
        assert_eq!(l.wait(FLOOR, CAP), Duration::from_millis(3200));
        for _ in 0..40 {
            l.observe(Duration::from_millis(800));
        }
        // Steady: twice the lateness, the deviation gone.
        let w = l.wait(FLOOR, CAP);
        assert!(
            w > Duration::from_millis(1600) && w < Duration::from_millis(1700),
            "{w:?}"
        );
        for _ in 0..10 {
            l.observe(Duration::from_secs(30));
        }
        assert_eq!(l.wait(FLOOR, CAP), Duration::from_secs(5));
        // No cap: the fixed wait, whatever was seen.
        assert_eq!(l.wait(FLOOR, None), FLOOR);
    }

    #[test]
    fn a_receiver_that_catches_up_comes_back_to_the_fixed_wait() {
        let mut l = ReportLag::default();
        for _ in 0..5 {
            l.observe(Duration::from_secs(2));
        }
        assert!(l.wait(FLOOR, CAP) > Duration::from_secs(2));
        for _ in 0..60 {
            l.observe(Duration::from_millis(10));
        }
        assert_eq!(l.wait(FLOOR, CAP), FLOOR);
    }

    #[test]
    fn ends_are_kept_for_the_last_transmissions_only() {
        let mut e = Ends::default();
        let t0 = Instant::ZERO;
        for i in 0..(ENDS_KEPT as u32 + 10) {
            e.ended(TransmissionId(i), t0 + Duration::from_millis(i as u64));
        }
        assert_eq!(
            e.since(TransmissionId(3), t0 + Duration::from_secs(100)),
            None
        );
        let last = ENDS_KEPT as u32 + 9;
        let end = t0 + Duration::from_millis(last as u64);
        assert_eq!(
            e.since(TransmissionId(last), end + Duration::from_millis(7)),
            Some(Duration::from_millis(7))
        );
        assert_eq!(e.at.len(), ENDS_KEPT);
        // Not ended, or not yet sent: nothing to measure.
        assert_eq!(e.since(TransmissionId(last + 1), end), None);
    }
}
