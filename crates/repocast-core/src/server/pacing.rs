//! The server's pacing: when the next data packet may go, so the link
//! carries the configured rate and no more.
//!
//! A token bucket of [`ServerConfig::burst`] packet slots over
//! [`ServerConfig::packet_interval`]: a driver that wakes late (timer
//! granularity, a busy CPU) still owes the link the slots it missed, up to
//! a burst, and catches up on them at once. The bucket carries over from
//! one transmission to the next; only a link that had nothing to send
//! starts afresh, so idle time earns no burst. (Starting every
//! transmission at the poll lost up to a timer tick per transmission: a
//! tenth of the link on a repository of small files.) An idle link's
//! first transmission may send [`ServerConfig::start_credit`] at once,
//! the driver's timer tick, rather than one packet and a tick's wait.
//! A slot is a packet of the configured symbol size; a packet of a
//! shorter symbol (a small item's, fitted to it by
//! `fec::layout::fitted_symbol_size`) takes its share of one by the bytes
//! it puts on the wire, headers counted.
//! Owned by
//! [`super::Server`]; no clock of its own, `now` comes in.

use super::ServerConfig;
use crate::Instant;
use std::time::Duration;

/// The pacing state of one server.
#[derive(Debug, Clone)]
pub(super) struct Pacer {
    interval: Duration,
    burst: u32,
    /// What an idle link's first transmission may send at once.
    credit: Duration,
    next_send: Instant,
    /// Whether the link has had nothing to send since its last
    /// transmission ended.
    idle: bool,
    /// The configured symbol size, whose packets take one interval.
    symbol_size: u64,
    /// Bytes a data packet adds to its symbol on the wire (its own header
    /// and tag, IP and UDP).
    headers: u64,
}

impl Pacer {
    /// Pacing at `cfg`'s packet interval and burst, the link idle.
    pub(super) fn new(cfg: &ServerConfig) -> Self {
        Pacer {
            interval: cfg.packet_interval,
            burst: cfg.burst.max(1),
            credit: cfg.start_credit.min(cfg.packet_interval * cfg.burst.max(1)),
            next_send: Instant::ZERO,
            idle: true,
            symbol_size: u64::from(cfg.symbol_size),
            headers: crate::profile::packet_bits(
                0,
                cfg.rate_set.is_some_and(|r| r.1),
                cfg.session_key.is_some(),
            ) / 8,
        }
    }

    /// When the next packet may go.
    pub(super) fn next_send(&self) -> Instant {
        self.next_send
    }

    /// Whether a packet may go at `now`.
    pub(super) fn ready(&self, now: Instant) -> bool {
        now >= self.next_send
    }

    /// One packet slot used at `now`: one interval on, never more than a
    /// burst behind `now`.
    pub(super) fn take(&mut self, now: Instant) {
        self.next_send = self.next_send.max(self.burst_floor(now)) + self.interval;
    }

    /// A data packet of a `symbol_len`-byte symbol sent at `now`: a
    /// packet of the configured symbol size takes one interval, a shorter
    /// one (an item's fitted symbols, `fec::layout::fitted_symbol_size`)
    /// its share of one by the bytes it puts on the wire, headers counted.
    pub(super) fn take_symbol(&mut self, now: Instant, symbol_len: usize) {
        self.next_send = self.next_send.max(self.burst_floor(now)) + self.slot(symbol_len);
    }

    /// The link time of a data packet of a `symbol_len`-byte symbol: one
    /// interval for the configured size or more, less for a shorter one.
    pub(super) fn slot(&self, symbol_len: usize) -> Duration {
        let (len, full) = (symbol_len as u64, self.symbol_size);
        if len >= full {
            return self.interval;
        }
        let slot = self.interval.as_nanos() * u128::from(len + self.headers)
            / u128::from(full + self.headers);
        Duration::from_nanos(u64::try_from(slot).unwrap_or(u64::MAX))
    }

    /// The link time of `packets` data packets of `symbol_size`-byte
    /// symbols, in nanoseconds ([`Pacer::slot`] each).
    pub(super) fn link_ns(&self, symbol_size: u16, packets: u64) -> u64 {
        let slot = self.slot(usize::from(symbol_size)).as_nanos();
        u64::try_from(slot.saturating_mul(u128::from(packets))).unwrap_or(u64::MAX)
    }

    /// The link had nothing to send at some poll: the next transmission
    /// starts its pacing afresh.
    pub(super) fn set_idle(&mut self) {
        self.idle = true;
    }

    /// A transmission starts at `now`: it keeps the slots owed from the
    /// last one (up to a burst) unless the link was idle, when it may send
    /// the start credit's worth at once.
    pub(super) fn start(&mut self, now: Instant) {
        if self.idle {
            let credited =
                Instant::from_nanos(now.as_nanos().saturating_sub(self.credit.as_nanos() as u64));
            self.next_send = self.next_send.max(credited);
        } else if self.next_send < self.burst_floor(now) {
            self.next_send = self.next_send.max(now);
        }
        self.idle = false;
    }

    /// The earliest send time kept at `now`: a burst behind it.
    fn burst_floor(&self, now: Instant) -> Instant {
        let burst = self.interval * self.burst;
        Instant::from_nanos(now.as_nanos().saturating_sub(burst.as_nanos() as u64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pacer(burst: u32) -> Pacer {
        Pacer::new(&ServerConfig {
            packet_interval: Duration::from_millis(1),
            burst,
            ..ServerConfig::default()
        })
    }

    fn ms(n: u64) -> Instant {
        Instant::from_nanos(n * 1_000_000)
    }

    /// Sends one packet per poll while the pacer allows, polling every
    /// `every` ms from `from` until `n` have gone; returns the last send.
    fn send(p: &mut Pacer, from: u64, every: u64, n: u32) -> Instant {
        let (mut now, mut sent) = (ms(from), 0);
        loop {
            while p.ready(now) {
                p.take(now);
                sent += 1;
                if sent == n {
                    return now;
                }
            }
            now = now + Duration::from_millis(every);
        }
    }

    #[test]
    fn a_late_poll_catches_up_within_the_burst_and_no_further() {
        let mut p = pacer(5);
        p.start(ms(0));
        // Polled every 3 ms: three slots owed at each poll, all kept.
        assert_eq!(send(&mut p, 0, 3, 10), ms(9));
        // Polled 20 ms late: only the 5 slots of the burst are owed.
        let mut q = pacer(5);
        q.start(ms(0));
        assert_eq!(send(&mut q, 20, 20, 6), ms(20));
        assert!(!q.ready(ms(20)) && q.ready(ms(21)));
    }

    #[test]
    fn the_bucket_carries_over_between_transmissions_but_not_over_idle() {
        let mut p = pacer(10);
        p.start(ms(0));
        send(&mut p, 0, 7, 5);
        // The next transmission starts at a late poll: it keeps what the
        // last one was owed (its next slot is behind the poll).
        let owed = p.next_send();
        p.start(ms(7));
        assert_eq!(p.next_send(), owed);
        assert!(owed < ms(7));
        // After an idle poll the next transmission starts at its poll.
        p.set_idle();
        p.start(ms(8));
        assert_eq!(p.next_send(), ms(8));
        // A start long after the last slot never bursts past the bucket
        // (nor, without a start credit, at all).
        let mut q = pacer(10);
        q.start(ms(0));
        q.take(ms(0));
        q.start(ms(500));
        assert_eq!(q.next_send(), ms(500));
    }

    #[test]
    fn an_idle_link_may_send_its_start_credit_at_once() {
        let mut p = Pacer::new(&ServerConfig {
            packet_interval: Duration::from_millis(1),
            burst: 10,
            start_credit: Duration::from_millis(4),
            ..ServerConfig::default()
        });
        p.start(ms(100));
        // The credit's four packets and the one due at the start.
        assert_eq!(send(&mut p, 100, 1, 5), ms(100));
        assert!(!p.ready(ms(100)) && p.ready(ms(101)));
        // A transmission that follows at once gets no new credit.
        p.start(ms(101));
        assert_eq!(p.next_send(), ms(101));
        // After idling, the credit again; never more than the bucket.
        p.set_idle();
        p.start(ms(200));
        assert_eq!(p.next_send(), ms(196));
        let q = Pacer::new(&ServerConfig {
            packet_interval: Duration::from_millis(1),
            burst: 2,
            start_credit: Duration::from_millis(4),
            ..ServerConfig::default()
        });
        assert_eq!(q.credit, Duration::from_millis(2));
    }

    #[test]
    fn a_short_symbol_takes_its_share_of_a_slot_by_its_bytes_on_the_wire() {
        let cfg = ServerConfig {
            packet_interval: Duration::from_millis(1),
            burst: 1,
            ..ServerConfig::default()
        };
        let mut p = Pacer::new(&cfg);
        let headers = crate::profile::packet_bits(0, false, false) / 8;
        let full = u64::from(cfg.symbol_size) + headers;
        assert_eq!(
            p.slot(usize::from(cfg.symbol_size)),
            Duration::from_millis(1)
        );
        assert_eq!(p.slot(9000), Duration::from_millis(1));
        let half = usize::from(cfg.symbol_size / 2);
        let want = 1_000_000 * (half as u64 + headers) / full;
        assert_eq!(p.slot(half), Duration::from_nanos(want));
        // Two short packets go in the time of fewer than two full ones.
        p.start(ms(0));
        p.take_symbol(ms(0), half);
        p.take_symbol(ms(0), half);
        assert_eq!(p.next_send(), ms(0) + Duration::from_nanos(2 * want));
        assert!(2 * want < 2_000_000 && 2 * want > 1_000_000);
    }
}
