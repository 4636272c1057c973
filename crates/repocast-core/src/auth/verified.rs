//! Signatures already checked: the same signed bytes are verified once
//! per receiver, however many of its requests hear them.
//!
//! A host's shared receiver (`repocast-net`'s `host`) hands every
//! announcement to each of its requests, and each checks the server's
//! Ed25519 signature on it: about 50 µs apiece, so a hundred requests on a
//! host spent the receiver's whole core on the same few hundred
//! signatures a second. A listener hears every catalogue piece again each
//! quarter second. [`Verified`] remembers the last [`CAPACITY`]
//! signatures that verified (up to [`MAX_BYTES`]), so a repeat costs a
//! lookup of its bytes.
//!
//! Only successes are remembered, as the signer, the signature and every
//! signed byte: a hit means exactly these bytes verified under
//! exactly this key, and a forgery is checked (and refused) every time
//! and never enters the memory. Clones share one memory (the endpoints
//! of one receiver).

use super::{AuthError, PublicKey, SIGNATURE_LEN};
use crate::hash::FxHasher;
use std::collections::{HashSet, VecDeque};
use std::hash::BuildHasherDefault;
use std::sync::{Arc, Mutex, PoisonError};

/// Verified signatures remembered, at most.
pub const CAPACITY: usize = 4096;
/// Bytes of them remembered, at most (signer, signature and signed
/// bytes each).
pub const MAX_BYTES: usize = 1 << 20;

#[derive(Debug, Default)]
struct Seen {
    /// Signer, signature and signed bytes of each, one after the other.
    set: HashSet<Arc<[u8]>, BuildHasherDefault<FxHasher>>,
    order: VecDeque<Arc<[u8]>>,
    bytes: usize,
    /// The entry being looked up.
    scratch: Vec<u8>,
    checked: u64,
    hits: u64,
}

impl Seen {
    fn fill(&mut self, key: &PublicKey, msg: &[u8], sig: &[u8; SIGNATURE_LEN]) {
        self.scratch.clear();
        self.scratch.extend_from_slice(&key.to_bytes());
        self.scratch.extend_from_slice(sig);
        self.scratch.extend_from_slice(msg);
    }
}

/// A memory of verified signatures, shared by its clones.
#[derive(Debug, Clone, Default)]
pub struct Verified(Arc<Mutex<Seen>>);

impl Verified {
    /// An empty memory.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether `sig` is remembered as `key`'s signature of exactly `msg`
    /// (a lookup of the bytes themselves: no cryptography). The set holds
    /// only what verified, so a forger chooses what is looked up, never
    /// what is there.
    pub fn known(&self, key: &PublicKey, msg: &[u8], sig: &[u8; SIGNATURE_LEN]) -> bool {
        let hit = self.holds(key, msg, sig);
        if hit {
            self.lock().hits += 1;
        }
        hit
    }

    /// [`Verified::known`] without counting a hit: a batch leaving out
    /// what it holds answers nothing from memory (each is counted when it
    /// is handled).
    fn holds(&self, key: &PublicKey, msg: &[u8], sig: &[u8; SIGNATURE_LEN]) -> bool {
        let mut s = self.lock();
        s.fill(key, msg, sig);
        s.set.contains(&s.scratch[..])
    }

    /// Whether `sig` is `key`'s signature of `msg`: remembered, or
    /// checked (and, if good, remembered).
    pub fn verify(
        &self,
        key: &PublicKey,
        msg: &[u8],
        sig: &[u8; SIGNATURE_LEN],
    ) -> Result<(), AuthError> {
        if self.known(key, msg, sig) {
            return Ok(());
        }
        self.lock().checked += 1;
        key.verify(msg, sig)?;
        self.remember(key, msg, sig);
        Ok(())
    }

    /// Remembers a signature that verified.
    fn remember(&self, key: &PublicKey, msg: &[u8], sig: &[u8; SIGNATURE_LEN]) {
        let mut s = self.lock();
        s.fill(key, msg, sig);
        let entry: Arc<[u8]> = Arc::from(&s.scratch[..]);
        if s.set.insert(entry.clone()) {
            s.bytes += entry.len();
            s.order.push_back(entry);
            while s.order.len() > CAPACITY || s.bytes > MAX_BYTES {
                let Some(old) = s.order.pop_front() else {
                    break;
                };
                s.bytes -= old.len();
                s.set.remove(&old);
            }
        }
    }

    /// Checks several of `key`'s signatures at once (Ed25519 batch
    /// verification: about half the work each from eight on) and
    /// remembers them if all verify; those already remembered are left
    /// out. Returns false, remembering nothing, if any fails: the caller
    /// then checks each on its own as it comes ([`Verified::verify`]), so
    /// a forgery in a batch costs the batch's work once, and never passes.
    pub fn verify_batch(&self, key: &PublicKey, items: &[(&[u8], &[u8; SIGNATURE_LEN])]) -> bool {
        let fresh: Vec<_> = (items.iter())
            .filter(|(msg, sig)| !self.holds(key, msg, sig))
            .collect();
        if fresh.len() < 2 {
            return true;
        }
        let msgs: Vec<&[u8]> = fresh.iter().map(|(m, _)| *m).collect();
        let sigs: Vec<_> = (fresh.iter())
            .map(|(_, s)| ed25519_dalek::Signature::from_bytes(s))
            .collect();
        let keys = vec![key.0; fresh.len()];
        self.lock().checked += fresh.len() as u64;
        if ed25519_dalek::verify_batch(&msgs, &sigs, &keys).is_err() {
            return false;
        }
        for (msg, sig) in fresh {
            self.remember(key, msg, sig);
        }
        true
    }

    /// Signatures checked with Ed25519, and those answered from memory.
    pub fn counts(&self) -> (u64, u64) {
        let s = self.lock();
        (s.checked, s.hits)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Seen> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::Identity;

    fn signed(id: &Identity, msg: &[u8]) -> [u8; SIGNATURE_LEN] {
        id.sign(msg)
    }

    #[test]
    fn a_repeat_is_answered_from_memory_by_every_clone() {
        let id = Identity::from_seed([7; 32]);
        let sig = signed(&id, b"announcement");
        let v = Verified::new();
        let other = v.clone();
        assert_eq!(v.verify(&id.public(), b"announcement", &sig), Ok(()));
        assert_eq!(other.verify(&id.public(), b"announcement", &sig), Ok(()));
        assert_eq!(v.counts(), (1, 1));
    }

    #[test]
    fn forgeries_are_checked_every_time_and_never_remembered() {
        let id = Identity::from_seed([7; 32]);
        let stranger = Identity::from_seed([8; 32]);
        let sig = signed(&id, b"announcement");
        let v = Verified::new();
        assert_eq!(v.verify(&id.public(), b"announcement", &sig), Ok(()));
        // Other bytes, another key, or a changed signature: checked, refused.
        for _ in 0..2 {
            assert!(v.verify(&id.public(), b"announcemenT", &sig).is_err());
            assert!(v.verify(&stranger.public(), b"announcement", &sig).is_err());
            let mut bad = sig;
            bad[3] ^= 1;
            assert!(v.verify(&id.public(), b"announcement", &bad).is_err());
        }
        assert_eq!(v.counts(), (7, 0));
    }

    #[test]
    fn the_memory_is_bounded_and_forgets_the_oldest() {
        let id = Identity::from_seed([7; 32]);
        let v = Verified::new();
        let msgs: Vec<Vec<u8>> = (0..CAPACITY as u32 + 1)
            .map(|i| i.to_be_bytes().to_vec())
            .collect();
        let sigs: Vec<_> = msgs.iter().map(|m| signed(&id, m)).collect();
        for (m, s) in msgs.iter().zip(&sigs) {
            assert_eq!(v.verify(&id.public(), m, s), Ok(()));
        }
        assert_eq!(v.lock().order.len(), CAPACITY);
        // The newest is remembered, the first is checked again.
        assert_eq!(
            v.verify(&id.public(), &msgs[CAPACITY], &sigs[CAPACITY]),
            Ok(())
        );
        assert_eq!(v.verify(&id.public(), &msgs[0], &sigs[0]), Ok(()));
        assert_eq!(v.counts(), (CAPACITY as u64 + 2, 1));
    }

    #[test]
    fn large_signed_messages_are_remembered_within_the_byte_bound() {
        let id = Identity::from_seed([7; 32]);
        let v = Verified::new();
        for i in 0..400u32 {
            let mut m = vec![0u8; 4096];
            m[..4].copy_from_slice(&i.to_be_bytes());
            assert_eq!(v.verify(&id.public(), &m, &signed(&id, &m)), Ok(()));
        }
        let s = v.lock();
        assert!(s.bytes <= MAX_BYTES, "{} bytes", s.bytes);
        // Each entry is 4,096 bytes and 96 of signer and signature.
        assert_eq!(s.order.len(), MAX_BYTES / (4096 + 96));
        assert_eq!(s.set.len(), s.order.len());
    }
}
