//! What a datagram must carry before the client endpoint parses it
//! further: the session key's tag on every data packet and announcement
//! (under the key of the packet's epoch, after rotations), the pinned
//! server's signature on announcements, and with signed symbols a batch
//! that lists the packet ([`crate::endpoint::signing`]). Part of
//! [`super::ClientEndpoint`]; a datagram that fails is counted as forged
//! and dropped.

use super::ClientEndpoint;
use crate::auth::{self, PublicKey, SessionKey};
use crate::endpoint::signing::{BatchVerifier, Verdict};
use crate::endpoint::store::BlockStore;
use crate::wire::{DataRepr, parse_announcements};
use crate::{Instant, SessionId};

/// Most signatures one batch checks ([`ClientEndpoint::prepare_announcements`]):
/// past a few dozen a batch saves little more, and the rest are checked as
/// they are handled.
const MAX_BATCH: usize = 64;

impl<S: BlockStore> ClientEndpoint<S> {
    /// Takes only data packets that batches signed by `signer` list
    /// ([`crate::endpoint::signing`]): the welcome says so in request
    /// mode, the signed catalogue in push mode.
    pub fn expect_signed_symbols(&mut self, signer: PublicKey, session: SessionId) {
        self.verifier = Some(BatchVerifier::new(
            signer,
            session,
            self.cfg.verified.clone(),
        ));
    }

    /// A data packet: its tag checked, then (with signed symbols, when
    /// `gate`) held until a verified batch lists it, then decrypted and
    /// handed to the state machine.
    pub(super) fn on_data_datagram(&mut self, now: Instant, bytes: &[u8], gate: bool) {
        let mut p = match DataRepr::parse(bytes) {
            Ok(p) => p,
            Err(_) => {
                self.stats.malformed += 1;
                return;
            }
        };
        let number = auth::tag_number(&p.tag);
        let key = self.key_for(number.map_or(0, auth::epoch_of));
        let forged = key
            .is_some_and(|k| p.tag.len() != auth::TAG_LEN || auth::check_data(k, bytes).is_err());
        // An encrypted symbol is read only under the key that checked its
        // tag.
        let key = key.filter(|_| p.encrypted).cloned();
        if forged || (p.encrypted && key.is_none()) {
            self.stats.forged += 1;
            return;
        }
        if let (true, Some(v)) = (gate, self.verifier.as_mut()) {
            if v.check(bytes) == Verdict::Held {
                return;
            }
        }
        if let (Some(k), Some(n)) = (key, number) {
            auth::crypt_payload(&k, n, &mut p.payload);
        }
        self.on_data(now, &p)
    }

    /// The key a packet of key epoch `epoch` is sealed under: a rotated
    /// key of that epoch, else the welcome's (None: unauthenticated).
    fn key_for(&self, epoch: u8) -> Option<&SessionKey> {
        let rotated = self.rotated.iter().find(|(e, _)| *e == epoch);
        rotated.map(|(_, k)| k).or(self.session_key.as_ref())
    }

    /// An announcement's own bytes once its trailer checks out (`None`:
    /// forged, counted): its session tag, and with `signed` the server's
    /// signature too. Announcements name no epoch: the newest key is
    /// tried first, then older ones, each a keyed hash.
    pub(super) fn open_announce<'a>(&mut self, bytes: &'a [u8], signed: bool) -> Option<&'a [u8]> {
        let body = self.check_announce(bytes, signed);
        if body.is_none() {
            self.stats.forged += 1;
        }
        body
    }

    /// [`Self::open_announce`] without counting a failure.
    fn check_announce<'a>(&self, bytes: &'a [u8], signed: bool) -> Option<&'a [u8]> {
        let Some(welcome) = &self.session_key else {
            return Some(bytes);
        };
        let keys = self.rotated.iter().rev().map(|(_, k)| k);
        let signer = self.cfg.server_key.as_ref().filter(|_| signed);
        for k in keys.chain(std::iter::once(welcome)) {
            match auth::open_announce(k, signer, &self.cfg.verified, bytes) {
                Ok(body) => return Some(body),
                Err(auth::AuthError::BadTag) => continue,
                Err(_) => break,
            }
        }
        None
    }

    /// Announcement datagrams read together, before the driver hands them
    /// over one by one ([`ClientEndpoint::handle_datagram`]): the
    /// signatures of those that bear on the request now (their tag
    /// checked) are checked as one batch, so that each is then answered
    /// from memory ([`auth::Verified::verify_batch`]: about half the work
    /// each from eight on; a receiver behind on its socket reads many at
    /// once). A batch with a forgery in it leaves nothing remembered, and
    /// each is then checked on its own as it is handled.
    pub fn prepare_announcements<'a>(&self, datagrams: impl IntoIterator<Item = &'a [u8]>) {
        let Some(signer) = self.cfg.server_key.as_ref() else {
            return;
        };
        let mut items: Vec<(&[u8], &[u8; auth::SIGNATURE_LEN])> = Vec::new();
        for d in datagrams {
            let Some(Ok(list)) = self.check_announce(d, false).map(parse_announcements) else {
                continue;
            };
            if !list.iter().any(|a| self.client.wants_announce(a)) {
                continue;
            }
            match auth::announce_signature(d) {
                Some(x) if !items.contains(&x) => items.push(x),
                _ => {}
            }
            if items.len() == MAX_BATCH {
                break;
            }
        }
        if items.len() >= 2 {
            self.cfg.verified.verify_batch(signer, &items);
        }
    }
}
