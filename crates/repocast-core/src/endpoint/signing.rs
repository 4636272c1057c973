//! Signed symbol batches at the endpoints: the sender's [`BatchSigner`]
//! and the receiver's [`BatchVerifier`] (wire format in
//! [`crate::wire::batch`]).
//!
//! The session key's tag keeps outsiders from forging symbols, but every
//! client of a session holds that key, so one of them could tag forged
//! symbols that every other client accepts (symbol pollution). With
//! signed symbols the sender also lists, after every [`MAX_BATCH`] data
//! packets, their digests in a batch signed with its identity key, and a
//! receiver feeds a packet to its decoder only once a verified batch lists
//! it. Until then the packet waits, within a bound ([`MAX_PENDING`]).
//!
//! Loss: each batch goes out twice, the second copy after the next batch
//! (about [`MAX_BATCH`] packets later, so one burst rarely takes both), and
//! a partial batch is sent when the stream pauses ([`BatchSigner::flush`]:
//! before every announcement, and [`FLUSH_AFTER`] after its first packet).
//! Cost: two batches of 1,105 bytes (1,133 with IP and UDP) per 64 data
//! packets, about 2.6% of the rate; one Ed25519 signature per batch at the sender and one check per
//! batch number at each receiver.

use crate::auth::{self, Identity, PublicKey};
use crate::hash::FastMap;
use crate::wire::batch::{DIGEST_LEN, MAX_BATCH, SymbolBatch};
use crate::{Instant, SessionId};
use std::collections::VecDeque;
use std::time::Duration;

/// A partial batch goes out this long after its first packet at the
/// latest (low rates, and a paused stream).
pub const FLUSH_AFTER: Duration = Duration::from_millis(50);
/// Unverified data packets a receiver keeps waiting for their batch
/// (about two batches and their repeats); past it the oldest are dropped.
pub const MAX_PENDING: usize = 512;
/// Digests a receiver remembers (the newest); a packet whose digest was
/// forgotten waits like one not yet listed.
pub const MAX_KNOWN: usize = 8192;
/// Batch numbers a receiver remembers as checked (their repeats are
/// skipped without a signature check).
const MAX_CHECKED: usize = 256;

type Digest = [u8; DIGEST_LEN];

/// The sender's side: digests of packets sent, sealed into signed batches.
#[derive(Debug)]
pub struct BatchSigner {
    session: SessionId,
    number: u64,
    digests: Vec<Digest>,
    first_at: Option<Instant>,
    /// The last batch sealed, whose second copy is still to go.
    lagging: Option<Vec<u8>>,
    out: VecDeque<Vec<u8>>,
    sealed: u64,
}

impl BatchSigner {
    /// A signer for `session`'s data packets.
    pub fn new(session: SessionId) -> Self {
        BatchSigner {
            session,
            number: 0,
            digests: Vec::with_capacity(MAX_BATCH),
            first_at: None,
            lagging: None,
            out: VecDeque::new(),
            sealed: 0,
        }
    }

    /// Records a data packet just sent; a full batch is sealed.
    pub fn add(&mut self, now: Instant, datagram: &[u8], identity: &Identity) {
        self.digests.push(auth::symbol_digest(datagram));
        self.first_at.get_or_insert(now);
        if self.digests.len() >= MAX_BATCH {
            self.seal(identity);
        }
    }

    /// Seals what is pending and releases every repeat copy (the stream
    /// pauses: an announcement follows, or [`FLUSH_AFTER`] has passed).
    pub fn flush(&mut self, identity: &Identity) {
        if !self.digests.is_empty() {
            self.seal(identity);
        }
        if let Some(b) = self.lagging.take() {
            self.out.push_back(b);
        }
    }

    /// When [`BatchSigner::flush`] is due (`None`: nothing pending).
    pub fn deadline(&self) -> Option<Instant> {
        match (self.first_at, &self.lagging) {
            (Some(t), _) => Some(t + FLUSH_AFTER),
            (None, Some(_)) => Some(Instant::ZERO),
            (None, None) => None,
        }
    }

    /// The next batch datagram to send on the data group.
    pub fn poll(&mut self) -> Option<Vec<u8>> {
        self.out.pop_front()
    }

    /// The next batch datagram due at `now`: flushes first if
    /// [`BatchSigner::deadline`] has passed.
    pub fn poll_due(&mut self, now: Instant, identity: &Identity) -> Option<Vec<u8>> {
        if self.deadline().is_some_and(|d| d <= now) {
            self.flush(identity);
        }
        self.poll()
    }

    /// When the driver should poll for a batch next: now if one waits,
    /// else the flush deadline (`None`: nothing pending).
    pub fn next_due(&self) -> Option<Instant> {
        match self.out.is_empty() {
            false => Some(Instant::ZERO),
            true => self.deadline(),
        }
    }

    /// Batches sealed so far.
    pub fn sealed(&self) -> u64 {
        self.sealed
    }

    fn seal(&mut self, identity: &Identity) {
        let batch = SymbolBatch {
            session: self.session,
            number: self.number,
            digests: std::mem::take(&mut self.digests),
        };
        self.number += 1;
        self.sealed += 1;
        self.first_at = None;
        let mut buf = Vec::with_capacity(1200);
        batch.emit(&mut buf);
        auth::sign_batch(identity, &mut buf);
        self.out.push_back(buf.clone());
        if let Some(old) = self.lagging.replace(buf) {
            self.out.push_back(old);
        }
    }
}

/// What the receiver does with a data packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// A verified batch lists it: feed it on.
    Signed,
    /// Not listed yet: it waits in the verifier.
    Held,
}

/// Counters of the receiver's side.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct VerifierStats {
    /// Batches whose signature checked out.
    pub batches: u64,
    /// Batch datagrams refused (malformed, wrong session, bad signature).
    pub bad_batches: u64,
    /// Data packets dropped unlisted (waited past the bound).
    pub unsigned_dropped: u64,
}

/// The receiver's side: which digests verified batches listed, and the
/// packets waiting for theirs.
#[derive(Debug)]
pub struct BatchVerifier {
    signer: PublicKey,
    session: SessionId,
    known: FastMap<Digest, ()>,
    known_order: VecDeque<Digest>,
    checked: VecDeque<u64>,
    pending: VecDeque<(Digest, Vec<u8>)>,
    ready: VecDeque<Vec<u8>>,
    stats: VerifierStats,
}

impl BatchVerifier {
    /// A verifier of `session`'s batches signed by `signer`.
    pub fn new(signer: PublicKey, session: SessionId) -> Self {
        BatchVerifier {
            signer,
            session,
            known: FastMap::default(),
            known_order: VecDeque::new(),
            checked: VecDeque::new(),
            pending: VecDeque::new(),
            ready: VecDeque::new(),
            stats: VerifierStats::default(),
        }
    }

    /// Counters.
    pub fn stats(&self) -> VerifierStats {
        self.stats
    }

    /// A data packet: [`Verdict::Signed`] if a verified batch listed it,
    /// else it is kept until one does (the oldest dropped past the bound).
    pub fn check(&mut self, datagram: &[u8]) -> Verdict {
        let d = auth::symbol_digest(datagram);
        if self.known.contains_key(&d) {
            return Verdict::Signed;
        }
        if self.pending.len() >= MAX_PENDING {
            self.pending.pop_front();
            self.stats.unsigned_dropped += 1;
        }
        self.pending.push_back((d, datagram.to_vec()));
        Verdict::Held
    }

    /// A batch datagram: checked (once per batch number), its digests
    /// remembered, and the packets waiting for them released
    /// ([`BatchVerifier::take_ready`]).
    pub fn on_batch(&mut self, datagram: &[u8]) {
        let Some(body) = datagram.len().checked_sub(auth::SIGNATURE_LEN) else {
            self.stats.bad_batches += 1;
            return;
        };
        let batch = match SymbolBatch::parse(&datagram[..body]) {
            Ok(b) if b.session == self.session => b,
            _ => {
                self.stats.bad_batches += 1;
                return;
            }
        };
        if self.checked.contains(&batch.number) {
            // The repeat copy; identical bytes if genuine, and a forged one
            // under a checked number adds nothing either way.
            return;
        }
        if auth::open_batch(&self.signer, datagram).is_err() {
            self.stats.bad_batches += 1;
            return;
        }
        self.stats.batches += 1;
        self.checked.push_back(batch.number);
        if self.checked.len() > MAX_CHECKED {
            self.checked.pop_front();
        }
        for d in batch.digests {
            if self.known.insert(d, ()).is_none() {
                self.known_order.push_back(d);
            }
        }
        while self.known_order.len() > MAX_KNOWN {
            if let Some(old) = self.known_order.pop_front() {
                self.known.remove(&old);
            }
        }
        let known = &self.known;
        let (now_signed, still): (Vec<_>, Vec<_>) =
            (self.pending.drain(..)).partition(|(d, _)| known.contains_key(d));
        self.pending = still.into();
        self.ready.extend(now_signed.into_iter().map(|(_, b)| b));
    }

    /// The next packet a batch has just vouched for.
    pub fn take_ready(&mut self) -> Option<Vec<u8>> {
        self.ready.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packet(i: u8) -> Vec<u8> {
        vec![i; 100]
    }

    fn run(signer: &mut BatchSigner, id: &Identity, n: u8) -> Vec<Vec<u8>> {
        let mut batches = Vec::new();
        for i in 0..n {
            signer.add(Instant::ZERO, &packet(i), id);
            while let Some(b) = signer.poll() {
                batches.push(b);
            }
        }
        signer.flush(id);
        while let Some(b) = signer.poll() {
            batches.push(b);
        }
        batches
    }

    #[test]
    fn listed_packets_pass_forged_ones_wait_and_are_dropped() {
        let id = Identity::from_seed([3; 32]);
        let mut signer = BatchSigner::new(SessionId(1));
        let batches = run(&mut signer, &id, 100);
        // Two batches (64 + 36), each sent twice.
        assert_eq!(signer.sealed(), 2);
        assert_eq!(batches.len(), 4);
        let mut v = BatchVerifier::new(id.public(), SessionId(1));
        // Packets before their batch wait; a forged one never passes.
        for i in 0..10 {
            assert_eq!(v.check(&packet(i)), Verdict::Held);
        }
        assert_eq!(v.check(&[9; 99]), Verdict::Held);
        v.on_batch(&batches[0]);
        let released: Vec<_> = std::iter::from_fn(|| v.take_ready()).collect();
        assert_eq!(released, (0..10).map(packet).collect::<Vec<_>>());
        assert_eq!(v.check(&packet(20)), Verdict::Signed);
        assert_eq!(v.check(&packet(80)), Verdict::Held);
        // A batch under another key, or tampered with, is refused.
        let other = Identity::from_seed([4; 32]);
        let forged = run(&mut BatchSigner::new(SessionId(1)), &other, 70);
        // (Its batch 0 would be taken as a repeat of a checked number.)
        v.on_batch(&forged[1]);
        let mut tampered = batches[1].clone();
        tampered[20] ^= 1;
        v.on_batch(&tampered);
        assert_eq!(v.stats().bad_batches, 2);
        v.on_batch(&batches[1]);
        assert_eq!(v.take_ready(), Some(packet(80)));
        assert_eq!(v.take_ready(), None);
        assert_eq!(v.stats().batches, 2);
        // The forged packet is still unlisted, and goes past the bound.
        for i in 0..MAX_PENDING {
            v.check(&[i as u8, 1, 2]);
        }
        assert!(v.stats().unsigned_dropped >= 1);
    }

    #[test]
    fn each_batch_goes_out_twice_the_copy_one_batch_later() {
        let id = Identity::from_seed([3; 32]);
        let mut signer = BatchSigner::new(SessionId(1));
        let mut order = Vec::new();
        for i in 0..(3 * MAX_BATCH) {
            signer.add(Instant::ZERO, &[i as u8, (i >> 8) as u8], &id);
            while let Some(b) = signer.poll() {
                order.push(SymbolBatch::parse(&b[..b.len() - 64]).map(|b| b.number));
            }
        }
        assert_eq!(order, vec![Ok(0), Ok(1), Ok(0), Ok(2), Ok(1)]);
        assert_eq!(signer.deadline(), Some(Instant::ZERO));
        signer.flush(&id);
        // The last batch's repeat: header, session, number, count, digests, signature.
        assert_eq!(
            signer.poll().map(|b| b.len()),
            Some(4 + 4 + 8 + 1 + 64 * 16 + 64)
        );
        assert_eq!(signer.deadline(), None);
    }
}
