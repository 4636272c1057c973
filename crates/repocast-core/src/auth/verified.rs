//! Signatures already checked: the same signed bytes are verified once
//! per receiver, however many of its requests hear them.
//!
//! A host's shared receiver (`repocast-net`'s `host`) hands every
//! announcement to each of its requests, and each checks the server's
//! Ed25519 signature on it: about 50 µs apiece, so a hundred requests on a
//! host spent the receiver's whole core on the same few hundred
//! signatures a second. A listener hears every catalogue piece again each
//! quarter second. [`Verified`] remembers the digests of the last
//! [`CAPACITY`] signatures that verified, so a repeat costs one BLAKE3
//! hash.
//!
//! Only successes are remembered, keyed by the signer, the signature and
//! every signed byte: a hit means exactly these bytes verified under
//! exactly this key, and a forgery is checked (and refused) every time,
//! so it can neither pass nor push anything out but genuine entries'
//! turn. Clones share one memory (the endpoints of one receiver).

use super::{AuthError, PublicKey, SIGNATURE_LEN};
use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

/// Verified signatures remembered (32 bytes each, twice: 256 KiB).
pub const CAPACITY: usize = 4096;

const DIGEST_CONTEXT: &[u8] = b"repocast verified signature\0";

type Digest = [u8; 32];

#[derive(Debug, Default)]
struct Seen {
    set: HashSet<Digest>,
    order: VecDeque<Digest>,
    checked: u64,
    hits: u64,
}

/// A memory of verified signatures, shared by its clones.
#[derive(Debug, Clone, Default)]
pub struct Verified(Arc<Mutex<Seen>>);

impl Verified {
    /// An empty memory.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether `sig` is `key`'s signature of `msg`: remembered, or
    /// checked (and, if good, remembered).
    pub fn verify(
        &self,
        key: &PublicKey,
        msg: &[u8],
        sig: &[u8; SIGNATURE_LEN],
    ) -> Result<(), AuthError> {
        let d = digest(key, msg, sig);
        {
            let mut s = self.lock();
            if s.set.contains(&d) {
                s.hits += 1;
                return Ok(());
            }
            s.checked += 1;
        }
        key.verify(msg, sig)?;
        let mut s = self.lock();
        if s.set.insert(d) {
            s.order.push_back(d);
            if s.order.len() > CAPACITY
                && let Some(old) = s.order.pop_front()
            {
                s.set.remove(&old);
            }
        }
        Ok(())
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

fn digest(key: &PublicKey, msg: &[u8], sig: &[u8; SIGNATURE_LEN]) -> Digest {
    let mut h = blake3::Hasher::new();
    h.update(DIGEST_CONTEXT);
    h.update(&key.to_bytes());
    h.update(sig);
    h.update(msg);
    *h.finalize().as_bytes()
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
}
