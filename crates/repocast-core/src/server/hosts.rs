//! What the server remembers of each receiving host's loss, so that a new
//! request connection from a host starts with that host's loss rather than
//! none.
//!
//! Under `FEC(maxloss+x)` a transmission carries the largest loss estimated
//! among its receivers, and a receiver's estimate comes from its own
//! reports. Every `repocast get` is a new connection, so without a memory
//! each one starts at 0: the first transmission of an item it asks for
//! carries only x of redundancy, falls short for it, and it needs a NAK
//! round (tens of milliseconds, a repair transmission) for each item too
//! large for x to cover, however often its host has been served before.
//! A host's loss is mostly its link's, so the server keeps what the
//! connections from each address reported: their packets heard and
//! expected, the most recent [`EVIDENCE`] packets' worth. A new connection
//! from that address starts with up to [`PRIOR`] packets of it, which its
//! own reports then outweigh.
//!
//! Hostile peers: a client can claim any loss in its reports (it could
//! already make the transmissions it listens to carry more); here that
//! reaches only later connections from its own address. At most
//! [`MAX_HOSTS`] addresses are kept, the least recently recorded dropped
//! first. Owned by [`super::Server`]; no I/O, no clock.

use crate::hash::FastMap;
use std::collections::VecDeque;
use std::net::IpAddr;

/// Addresses remembered at most.
pub const MAX_HOSTS: usize = 4096;
/// Packets of reports kept per address (older ones fade out).
pub const EVIDENCE: f64 = 5000.0;
/// Packets of a host's record a new connection starts with, at most.
pub const PRIOR: f64 = 1000.0;

/// Packets lost and expected (fractional once scaled).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct Tally {
    pub(super) lost: f64,
    pub(super) expected: f64,
}

impl Tally {
    fn scaled_to(self, most: f64) -> Tally {
        if self.expected <= most {
            return self;
        }
        let f = most / self.expected;
        Tally {
            lost: self.lost * f,
            expected: most,
        }
    }
}

/// The loss record of every host seen lately.
#[derive(Debug, Default)]
pub(super) struct HostLoss {
    hosts: FastMap<IpAddr, Tally>,
    /// Addresses by when they were last recorded, oldest first.
    order: VecDeque<IpAddr>,
}

impl HostLoss {
    /// What a new connection from `peer` starts with (nothing for a host
    /// not seen, or no address).
    pub(super) fn prior(&self, peer: Option<IpAddr>) -> Tally {
        (peer.and_then(|p| self.hosts.get(&p))).map_or(Tally::default(), |t| t.scaled_to(PRIOR))
    }

    /// A connection from `peer` ends having heard `received` of `expected`
    /// packets (its own reports only).
    pub(super) fn record(&mut self, peer: Option<IpAddr>, received: u64, expected: u64) {
        let Some(peer) = peer.filter(|_| expected > 0) else {
            return;
        };
        let lost = expected.saturating_sub(received.min(expected));
        let t = self.hosts.entry(peer).or_default();
        let sum = Tally {
            lost: t.lost + lost as f64,
            expected: t.expected + expected as f64,
        };
        *t = sum.scaled_to(EVIDENCE);
        if let Some(at) = self.order.iter().position(|p| *p == peer) {
            self.order.remove(at);
        }
        self.order.push_back(peer);
        while self.order.len() > MAX_HOSTS {
            if let Some(old) = self.order.pop_front() {
                self.hosts.remove(&old);
            }
        }
    }

    /// Addresses remembered.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.hosts.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn ip(n: u32) -> Option<IpAddr> {
        Some(IpAddr::V4(Ipv4Addr::from(n)))
    }

    fn loss(t: Tally) -> f64 {
        t.lost / t.expected
    }

    #[test]
    fn a_host_seen_before_starts_with_its_loss_weighted_at_most_the_prior() {
        let mut m = HostLoss::default();
        assert_eq!(m.prior(ip(1)), Tally::default());
        m.record(ip(1), 95, 100);
        let p = m.prior(ip(1));
        assert_eq!(p.expected, 100.0);
        assert!((loss(p) - 0.05).abs() < 1e-9);
        for _ in 0..100 {
            m.record(ip(1), 900, 1000);
        }
        let p = m.prior(ip(1));
        assert_eq!(p.expected, PRIOR);
        assert!((loss(p) - 0.1).abs() < 0.01, "{p:?}");
        // Other hosts, and no address, start with nothing.
        assert_eq!(m.prior(ip(2)), Tally::default());
        assert_eq!(m.prior(None), Tally::default());
        m.record(None, 0, 100);
        assert_eq!(m.len(), 1);
    }

    #[test]
    fn old_reports_fade_and_the_oldest_hosts_are_forgotten() {
        let mut m = HostLoss::default();
        m.record(ip(1), 500, 1000);
        for _ in 0..20 {
            m.record(ip(1), 1000, 1000);
        }
        assert!(loss(m.prior(ip(1))) < 0.02, "{:?}", m.prior(ip(1)));
        for n in 2..(MAX_HOSTS as u32 + 2) {
            m.record(ip(n), 1, 2);
        }
        assert_eq!(m.len(), MAX_HOSTS);
        assert_eq!(m.prior(ip(1)), Tally::default(), "the oldest went first");
        assert!(m.prior(ip(2)).expected > 0.0);
    }
}
