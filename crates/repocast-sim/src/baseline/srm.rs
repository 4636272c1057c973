//! SRM, simplified and single-source (SPEC 3.7): a baseline the simulator
//! compares repocast against, not a mode of the real server.
//!
//! One [`SrmMember`] per session member: the source holds every packet of
//! one file, receivers start with none. A receiver finds gaps by sequence
//! number, waits a random request timer in [C1 d, (C1 + C2) d] (d: its
//! distance to the source), multicasts a request, and backs off x3 for the
//! next try; a member that hears someone else's request for a packet it
//! also lacks backs off its own timer instead (suppression). Any member
//! holding a requested packet answers after a repair timer in
//! [D1 d', (D1 + D2) d'] (d': its distance to the requester) unless it hears
//! a repair first, and then ignores requests for that packet for 3 d'.
//!
//! Sans-IO like the rest of the core: inputs carry `now`; requests and
//! repairs come out of [`SrmMember::poll_transmit`], the next deadline out
//! of [`SrmMember::poll_timeout`]. The driver (the simulator's
//! [`crate::baseline::srm_net`]) multicasts them with delay and loss.

use repocast_core::Instant;
use repocast_core::fec::IdSet;
use repocast_core::rng::Rng;
use std::collections::BTreeMap;
use std::time::Duration;

/// SRM's timer constants (the SRM paper's defaults).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SrmParams {
    /// Request timer: [C1 d, (C1 + C2) d].
    pub c1: f64,
    /// See `c1`.
    pub c2: f64,
    /// Repair timer: [D1 d, (D1 + D2) d].
    pub d1: f64,
    /// See `d1`.
    pub d2: f64,
    /// Request timer growth per retry or suppression.
    pub backoff: f64,
}

impl Default for SrmParams {
    fn default() -> Self {
        SrmParams {
            c1: 2.0,
            c2: 2.0,
            d1: 1.0,
            d2: 1.0,
            backoff: 3.0,
        }
    }
}

/// What a member multicasts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SrmMsg {
    /// "Who has packet `id`?"
    Request(u32),
    /// Packet `id` itself, resent.
    Repair(u32),
}

#[derive(Debug, Clone, Copy)]
struct RequestTimer {
    due: Instant,
    /// Backoff exponent: the interval is scaled by backoff^level.
    level: i32,
    /// Heard requests before this are ignored (SRM's ignore-backoff: one
    /// backoff per round of duplicate requests, not one per request).
    ignore_until: Instant,
}

/// One member of an SRM session for a file of `k` packets.
#[derive(Debug)]
pub struct SrmMember {
    k: u32,
    held: IdSet,
    /// Highest sequence number heard (gap detection).
    next_expected: u32,
    dist_source: Duration,
    params: SrmParams,
    rng: Rng,
    requests: BTreeMap<u32, RequestTimer>,
    /// Repair timers: when, and the requester's distance (for hold-down).
    repairs: BTreeMap<u32, (Instant, Duration)>,
    /// Requests for these ids are ignored until the given time.
    hold_down: BTreeMap<u32, Instant>,
    outbox: Vec<SrmMsg>,
}

impl SrmMember {
    /// A receiver `dist_source` away from the source.
    pub fn receiver(k: u32, dist_source: Duration, params: SrmParams, seed: u64) -> Self {
        SrmMember {
            k,
            held: IdSet::default(),
            next_expected: 0,
            dist_source,
            params,
            rng: Rng::new(seed),
            requests: BTreeMap::new(),
            repairs: BTreeMap::new(),
            hold_down: BTreeMap::new(),
            outbox: Vec::new(),
        }
    }

    /// The source: holds every packet.
    pub fn source(k: u32, params: SrmParams, seed: u64) -> Self {
        let mut m = SrmMember::receiver(k, Duration::ZERO, params, seed);
        for id in 0..k {
            m.held.insert(id);
        }
        m.next_expected = k;
        m
    }

    /// Whether it holds the whole file.
    pub fn is_complete(&self) -> bool {
        self.held.len() >= self.k
    }

    fn draw(&mut self, lo: f64, width: f64, d: Duration, scale: f64) -> Duration {
        let u = self.rng.next_f64();
        d.mul_f64(((lo + width * u) * scale).max(0.0))
    }

    fn arm_request(&mut self, now: Instant, id: u32, level: i32) {
        let p = self.params;
        let wait = self.draw(p.c1, p.c2, self.dist_source, p.backoff.powi(level));
        self.requests.insert(
            id,
            RequestTimer {
                due: now + wait,
                level,
                ignore_until: if level > 0 { now + wait / 2 } else { now },
            },
        );
    }

    /// Packets before `upto` not held and not yet asked for are missing.
    fn detect_gaps(&mut self, now: Instant, upto: u32) {
        let upto = upto.min(self.k);
        while self.next_expected < upto {
            let id = self.next_expected;
            self.next_expected += 1;
            if !self.held.contains(id) && !self.requests.contains_key(&id) {
                self.arm_request(now, id, 0);
            }
        }
    }

    /// A data packet (original or repair) arrived. Returns true if new.
    pub fn handle_data(&mut self, now: Instant, id: u32, repair: bool) -> bool {
        if id >= self.k {
            return false;
        }
        if repair {
            // Someone answered: no need for our own repair of it.
            self.repairs.remove(&id);
        } else {
            self.detect_gaps(now, id);
            self.next_expected = self.next_expected.max(id + 1);
        }
        let new = self.held.insert(id);
        if new {
            self.requests.remove(&id);
        }
        new
    }

    /// The source has sent its last original packet (SRM's session
    /// messages carry the highest sequence number): everything after the
    /// last packet heard is missing too.
    pub fn handle_source_end(&mut self, now: Instant) {
        self.detect_gaps(now, self.k);
    }

    /// Someone `dist` away multicast a request for `id`.
    pub fn handle_request(&mut self, now: Instant, id: u32, dist: Duration) {
        if id >= self.k {
            return;
        }
        if self.held.contains(id) {
            let held_down = self.hold_down.get(&id).is_some_and(|&t| t > now);
            if !held_down && !self.repairs.contains_key(&id) {
                let p = self.params;
                let wait = self.draw(p.d1, p.d2, dist, 1.0);
                self.repairs.insert(id, (now + wait, dist));
            }
            return;
        }
        // We lack it too: suppress our own request, backing off (once per
        // round: until half the new interval, further requests are echoes).
        self.detect_gaps(now, id + 1);
        match self.requests.get(&id) {
            Some(t) if t.ignore_until > now => {}
            Some(t) => {
                let level = t.level + 1;
                self.arm_request(now, id, level);
            }
            None => self.arm_request(now, id, 1),
        }
    }

    /// The earliest timer.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let r = self.requests.values().map(|t| t.due).min();
        let p = self.repairs.values().map(|r| r.0).min();
        r.into_iter().chain(p).min()
    }

    /// Fires the timers that are due.
    pub fn handle_timeout(&mut self, now: Instant) {
        let due: Vec<(u32, i32)> = (self.requests.iter())
            .filter(|(_, t)| t.due <= now)
            .map(|(&id, t)| (id, t.level))
            .collect();
        for (id, level) in due {
            self.outbox.push(SrmMsg::Request(id));
            // Try again later if no repair comes.
            self.arm_request(now, id, level + 1);
        }
        let due: Vec<(u32, Duration)> = (self.repairs.iter())
            .filter(|(_, r)| r.0 <= now)
            .map(|(&id, r)| (id, r.1))
            .collect();
        for (id, dist) in due {
            self.repairs.remove(&id);
            self.outbox.push(SrmMsg::Repair(id));
            self.hold_down.insert(id, now + dist * 3);
        }
    }

    /// The next message to multicast.
    pub fn poll_transmit(&mut self) -> Option<SrmMsg> {
        self.outbox.pop()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gap_asks_after_the_request_timer_and_suppression_backs_off() {
        let d = Duration::from_millis(100);
        let mut m = SrmMember::receiver(10, d, SrmParams::default(), 1);
        let t0 = Instant::ZERO;
        assert!(m.handle_data(t0, 0, false));
        assert!(m.handle_data(t0, 3, false)); // 1 and 2 missing
        let due = m.poll_timeout().expect("request timer");
        assert!(due >= t0 + d * 2 && due <= t0 + d * 4, "{due:?}");
        // Another member asks for 1 first: ours for 1 backs off (x3).
        m.handle_request(t0, 1, d);
        m.handle_timeout(due);
        let mut sent = Vec::new();
        while let Some(x) = m.poll_transmit() {
            sent.push(x);
        }
        assert!(sent.contains(&SrmMsg::Request(2)));
        assert!(!sent.contains(&SrmMsg::Request(1)), "suppressed");
        // A repair of 2 completes nothing yet; the end exposes 4..10.
        assert!(m.handle_data(due, 2, true));
        m.handle_source_end(due);
        assert!(!m.is_complete());
    }

    #[test]
    fn a_holder_answers_once_and_a_heard_repair_cancels_its_own() {
        let d = Duration::from_millis(50);
        let mut s = SrmMember::source(4, SrmParams::default(), 2);
        s.handle_request(Instant::ZERO, 2, d);
        s.handle_request(Instant::ZERO, 2, d); // a duplicate: still one timer
        let due = s.poll_timeout().expect("repair timer");
        assert!(due >= Instant::ZERO + d && due <= Instant::ZERO + d * 2);
        s.handle_timeout(due);
        assert_eq!(s.poll_transmit(), Some(SrmMsg::Repair(2)));
        assert_eq!(s.poll_transmit(), None);
        // Held down: a request right after is ignored.
        s.handle_request(due, 2, d);
        assert_eq!(s.poll_timeout(), None);
        // Another holder's repair heard first cancels ours.
        s.handle_request(due + d * 10, 3, d);
        s.handle_data(due + d * 10, 3, true);
        assert_eq!(s.poll_timeout(), None);
    }
}
