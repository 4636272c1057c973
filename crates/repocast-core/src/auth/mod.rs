//! Keys and authentication of what travels on the multicast groups: the
//! one home of the server's Ed25519 identity (request mode's TLS key and
//! signer; push mode signs with the same key) and of the per-session key
//! that tags every data packet.
//!
//! The request connection (TLS, bound to the identity in `repocast-net`)
//! hands each client the server's [`SessionKey`] in its welcome. With it:
//! - every data packet ends with a [`TAG_LEN`]-byte tag: the sender's
//!   packet number (8 bytes, never repeated under one key: the nonce) and
//!   a 12-byte AES-128-GMAC over all the packet's bytes before the tag
//!   ([`seal_data`], [`check_data`]; AES-GCM with the packet as associated
//!   data, hardware AES, several times cheaper per packet than a keyed
//!   hash of 1.3 kB). A client drops a packet whose tag is missing or
//!   wrong before its symbol reaches a decoder, so nobody without the key
//!   can forge or corrupt a symbol;
//! - with `serve --encrypt` the symbol bytes are also encrypted
//!   ([`crypt_payload`]: AES-128-CTR under the key's second half, the
//!   packet number as nonce; encrypt-then-MAC, the tag covers the
//!   ciphertext), so only holders of the session key read the data;
//! - every announcement datagram ends with a trailer ([`seal_announce`],
//!   [`open_announce`]): the same keyed tag (cheap, checked first, so a
//!   flood of forgeries costs one hash each) and an Ed25519 signature by
//!   the identity, so even a client holding the session key cannot forge
//!   what the server announces;
//! - with signed symbols (`--sign-symbols`), batches of data packet
//!   digests ([`symbol_digest`]) signed by the identity ([`sign_batch`],
//!   [`open_batch`]; `endpoint::signing`), so that not even a holder of
//!   the session key can forge a symbol another client accepts.
//!
//! Signatures are checked through [`Verified`] ([`verified`]), which
//! remembers the ones that verified: a receiver that hears the same
//! signed bytes again (a repeat, or another request of a host's shared
//! receiver) pays one hash, not another Ed25519 check.
//!
//! Pure computation: keys come in from the driver (which draws them from
//! the operating system), nothing here reads a clock or an RNG.

pub mod verified;

pub use verified::Verified;

use ed25519_dalek::{Signer, Verifier as _};
use std::fmt;
use std::str::FromStr;

/// Bytes of a data packet's tag: packet number, then the truncated GMAC.
pub const TAG_LEN: usize = 8 + MAC_LEN;
/// Bytes of the GMAC kept in a data packet's tag (96 bits).
pub const MAC_LEN: usize = 12;
/// Bytes of the keyed BLAKE3 tag on announcements.
pub const ANNOUNCE_TAG_LEN: usize = 16;
/// Bytes of an Ed25519 signature.
pub const SIGNATURE_LEN: usize = 64;
/// Bytes an authenticated announcement adds: tag, then signature.
pub const ANNOUNCE_TRAILER_LEN: usize = ANNOUNCE_TAG_LEN + SIGNATURE_LEN;
/// How a public key is written for people (`--trust`, known-servers files).
pub const PUBLIC_KEY_PREFIX: &str = "ed25519:";

/// Why a key or an authenticated message was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// A key string is not `ed25519:` and 64 hex digits.
    #[error("not a repocast public key (expected {PUBLIC_KEY_PREFIX} and 64 hex digits)")]
    BadKeyText,
    /// The 32 bytes are not a valid Ed25519 point.
    #[error("not a valid Ed25519 public key")]
    BadKey,
    /// The message is too short to carry its tag or trailer.
    #[error("missing authentication")]
    Missing,
    /// The keyed tag does not match.
    #[error("bad authentication tag")]
    BadTag,
    /// The signature does not verify under the server's key.
    #[error("bad signature")]
    BadSignature,
}

/// The server's long-term identity: an Ed25519 signing key.
#[derive(Clone)]
pub struct Identity {
    key: ed25519_dalek::SigningKey,
}

impl Identity {
    /// The identity from its 32-byte secret seed.
    pub fn from_seed(seed: [u8; 32]) -> Self {
        Identity {
            key: ed25519_dalek::SigningKey::from_bytes(&seed),
        }
    }

    /// The secret seed (to store the key).
    pub fn seed(&self) -> [u8; 32] {
        self.key.to_bytes()
    }

    /// The public half.
    pub fn public(&self) -> PublicKey {
        PublicKey(self.key.verifying_key())
    }

    /// Signs `msg`.
    pub fn sign(&self, msg: &[u8]) -> [u8; SIGNATURE_LEN] {
        self.key.sign(msg).to_bytes()
    }
}

impl fmt::Debug for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Identity({})", self.public())
    }
}

/// A server's public key: what clients pin.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct PublicKey(ed25519_dalek::VerifyingKey);

impl PublicKey {
    /// The key from its 32 bytes.
    pub fn from_bytes(bytes: &[u8; 32]) -> Result<Self, AuthError> {
        ed25519_dalek::VerifyingKey::from_bytes(bytes)
            .map(PublicKey)
            .map_err(|_| AuthError::BadKey)
    }

    /// Its 32 bytes.
    pub fn to_bytes(&self) -> [u8; 32] {
        self.0.to_bytes()
    }

    /// Whether `sig` is this key's signature of `msg`.
    pub fn verify(&self, msg: &[u8], sig: &[u8; SIGNATURE_LEN]) -> Result<(), AuthError> {
        let sig = ed25519_dalek::Signature::from_bytes(sig);
        self.0
            .verify(msg, &sig)
            .map_err(|_| AuthError::BadSignature)
    }
}

impl fmt::Display for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{PUBLIC_KEY_PREFIX}{}",
            crate::hex::encode(&self.to_bytes())
        )
    }
}

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl FromStr for PublicKey {
    type Err = AuthError;

    fn from_str(s: &str) -> Result<Self, AuthError> {
        let hex = s
            .trim()
            .strip_prefix(PUBLIC_KEY_PREFIX)
            .ok_or(AuthError::BadKeyText)?;
        PublicKey::from_bytes(&crate::hex::decode32(hex).ok_or(AuthError::BadKeyText)?)
    }
}

/// The per-session key that tags data packets and announcements.
#[derive(Clone)]
pub struct SessionKey {
    bytes: [u8; 32],
    /// AES-128-GCM under the first half of the key (data packets' tags).
    gmac: ring::aead::LessSafeKey,
    /// AES-128-GCM under the second half, used only for its counter-mode
    /// keystream (encrypted payloads; its own GCM tag is not used).
    cipher: ring::aead::LessSafeKey,
}

impl PartialEq for SessionKey {
    fn eq(&self, other: &Self) -> bool {
        self.bytes == other.bytes
    }
}

impl Eq for SessionKey {}

impl SessionKey {
    /// The key from its bytes (the driver draws them from the OS).
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        // 16 bytes are always a valid AES-128 key.
        let aes = |half: &[u8]| {
            let unbound = ring::aead::UnboundKey::new(&ring::aead::AES_128_GCM, half)
                .unwrap_or_else(|_| unreachable!("a 16-byte AES-128 key"));
            ring::aead::LessSafeKey::new(unbound)
        };
        SessionKey {
            bytes,
            gmac: aes(&bytes[..16]),
            cipher: aes(&bytes[16..]),
        }
    }

    /// Its bytes (to hand to a client over the request connection).
    pub fn to_bytes(&self) -> [u8; 32] {
        self.bytes
    }

    /// Keyed BLAKE3 (under the whole key) of an announcement.
    fn tag(&self, msg: &[u8]) -> [u8; ANNOUNCE_TAG_LEN] {
        let h = blake3::keyed_hash(&self.bytes, msg);
        let mut t = [0u8; ANNOUNCE_TAG_LEN];
        t.copy_from_slice(&h.as_bytes()[..ANNOUNCE_TAG_LEN]);
        t
    }

    fn check(&self, msg: &[u8], tag: &[u8]) -> Result<(), AuthError> {
        if tag.len() != ANNOUNCE_TAG_LEN {
            return Err(AuthError::Missing);
        }
        ct_eq(&self.tag(msg), tag)
    }

    /// GMAC of `msg` under packet number `number` (the nonce).
    fn gmac(&self, number: u64, msg: &[u8]) -> Option<[u8; MAC_LEN]> {
        let mut nonce = [0u8; 12];
        nonce[4..].copy_from_slice(&number.to_be_bytes());
        let tag = self
            .gmac
            .seal_in_place_separate_tag(
                ring::aead::Nonce::assume_unique_for_key(nonce),
                ring::aead::Aad::from(msg),
                &mut [],
            )
            .ok()?;
        let mut t = [0u8; MAC_LEN];
        t.copy_from_slice(&tag.as_ref()[..MAC_LEN]);
        Some(t)
    }
}

/// Encrypts or decrypts (the same operation) a data packet's symbol bytes
/// in place: XOR with the AES-128-CTR keystream of the key's second half
/// under packet number `number`, the number the packet's tag carries.
/// Independent of the tag's key, so encrypt-then-MAC holds: the sender
/// encrypts, then seals; the receiver checks the tag, then decrypts.
pub fn crypt_payload(key: &SessionKey, number: u64, payload: &mut [u8]) {
    let mut nonce = [0u8; 12];
    nonce[4..].copy_from_slice(&number.to_be_bytes());
    // GCM's encryption is CTR mode; its tag (over no associated data) is
    // dropped. It fails only for inputs over 64 GiB.
    let _ = key.cipher.seal_in_place_separate_tag(
        ring::aead::Nonce::assume_unique_for_key(nonce),
        ring::aead::Aad::empty(),
        payload,
    );
}

/// Bits of a packet number below its key epoch (the top byte names the
/// session key a packet is sealed under, so receivers pick the right one
/// across a rotation).
pub const EPOCH_SHIFT: u32 = 56;

/// The packet number of the `count`th packet sealed under the key of
/// `epoch`.
pub fn packet_number(epoch: u8, count: u64) -> u64 {
    ((epoch as u64) << EPOCH_SHIFT) | (count & ((1 << EPOCH_SHIFT) - 1))
}

/// The key epoch a packet number names.
pub fn epoch_of(number: u64) -> u8 {
    (number >> EPOCH_SHIFT) as u8
}

/// The packet number a data packet's tag carries (the nonce of its tag
/// and of its payload's encryption).
pub fn tag_number(tag: &[u8]) -> Option<u64> {
    let n: [u8; 8] = tag.get(..8)?.try_into().ok()?;
    Some(u64::from_be_bytes(n))
}

/// What the server keeps of an access token (`serve --tokens`): a BLAKE3
/// hash under a context of its own, so the token itself need not stay in
/// memory and a hash from elsewhere never passes as one.
pub fn token_hash(token: &str) -> [u8; 32] {
    blake3::derive_key("repocast access token v1", token.trim().as_bytes())
}

/// Equal without an early exit on the first differing byte.
fn ct_eq(want: &[u8], got: &[u8]) -> Result<(), AuthError> {
    let diff = want.iter().zip(got).fold(0u8, |d, (a, b)| d | (a ^ b));
    if diff == 0 && want.len() == got.len() {
        Ok(())
    } else {
        Err(AuthError::BadTag)
    }
}

impl fmt::Debug for SessionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SessionKey(..)")
    }
}

/// Writes the tag of a data packet emitted with a zeroed [`TAG_LEN`]-byte
/// tag (its last bytes): `number` (the sender's packet count, which must
/// never repeat under one key), then the GMAC over everything before it.
pub fn seal_data(key: &SessionKey, number: u64, packet: &mut [u8]) {
    let Some(split) = packet.len().checked_sub(TAG_LEN) else {
        return;
    };
    let (body, tag) = packet.split_at_mut(split);
    tag[..8].copy_from_slice(&number.to_be_bytes());
    if let Some(mac) = key.gmac(number, body) {
        tag[8..].copy_from_slice(&mac);
    }
}

/// Checks a data packet's tag: its last [`TAG_LEN`] bytes over the rest.
/// The caller has parsed the packet and seen a tag of [`TAG_LEN`] bytes.
pub fn check_data(key: &SessionKey, packet: &[u8]) -> Result<(), AuthError> {
    let split = packet
        .len()
        .checked_sub(TAG_LEN)
        .ok_or(AuthError::Missing)?;
    let (body, tag) = packet.split_at(split);
    let number = tag_number(tag).ok_or(AuthError::Missing)?;
    let mac = key.gmac(number, body).ok_or(AuthError::BadTag)?;
    ct_eq(&mac, &tag[8..])
}

/// Appends an announcement's trailer: the keyed tag over the announcement,
/// then the identity's signature over the announcement and the tag.
pub fn seal_announce(key: &SessionKey, identity: &Identity, buf: &mut Vec<u8>) {
    let t = key.tag(buf);
    buf.extend_from_slice(&t);
    let sig = identity.sign(buf);
    buf.extend_from_slice(&sig);
}

/// The trailer without a signer: the keyed tag and a zero signature
/// (accepted only by clients that pin no key).
pub fn seal_announce_unsigned(key: &SessionKey, buf: &mut Vec<u8>) {
    let t = key.tag(buf);
    buf.extend_from_slice(&t);
    buf.extend_from_slice(&[0; SIGNATURE_LEN]);
}

/// An announcement datagram's signed bytes (the announcement and its
/// tag) and its signature, unchecked: for a batch check
/// ([`Verified::verify_batch`]).
pub fn announce_signature(datagram: &[u8]) -> Option<(&[u8], &[u8; SIGNATURE_LEN])> {
    let body_len = datagram.len().checked_sub(ANNOUNCE_TRAILER_LEN)?;
    let (signed, sig) = datagram.split_at(body_len + ANNOUNCE_TAG_LEN);
    Some((signed, sig.try_into().ok()?))
}

/// Checks an authenticated announcement and gives the announcement's own
/// bytes (without the trailer). The tag is checked first; the signature
/// only when `signer` is known (through `verified`). Bytes `verified`
/// remembers as signed by `signer` are taken as they are, tag unchecked:
/// the signature covers the tag.
pub fn open_announce<'a>(
    key: &SessionKey,
    signer: Option<&PublicKey>,
    verified: &Verified,
    datagram: &'a [u8],
) -> Result<&'a [u8], AuthError> {
    let (signed, sig) = announce_signature(datagram).ok_or(AuthError::Missing)?;
    let (body, tag) = signed.split_at(signed.len() - ANNOUNCE_TAG_LEN);
    // These exact bytes verified under the signer before (a repeat, or
    // another request of the same receiver): authentic, nothing to check.
    if signer.is_some_and(|pk| verified.known(pk, signed, sig)) {
        return Ok(body);
    }
    key.check(body, tag)?;
    if let Some(pk) = signer {
        verified.verify(pk, signed, sig)?;
    }
    Ok(body)
}

/// What a catalogue piece's signature covers besides its bytes (so a
/// signature from another context never passes as one).
const CATALOGUE_CONTEXT: &[u8] = b"repocast push catalogue piece\0";

/// Appends `identity`'s signature of a catalogue piece's bytes.
pub fn sign_catalogue(identity: &Identity, buf: &mut Vec<u8>) {
    sign_in_context(identity, CATALOGUE_CONTEXT, buf);
}

/// Appends `identity`'s signature of `context` followed by `buf`.
fn sign_in_context(identity: &Identity, context: &[u8], buf: &mut Vec<u8>) {
    let sig = identity.sign(&in_context(context, buf));
    buf.extend_from_slice(&sig);
}

/// `context` followed by `body`: what a signature covers.
fn in_context(context: &[u8], body: &[u8]) -> Vec<u8> {
    let mut msg = Vec::with_capacity(context.len() + body.len());
    msg.extend_from_slice(context);
    msg.extend_from_slice(body);
    msg
}

/// Checks a catalogue piece's signature under the key the piece names
/// (bytes 4..36): the signer and the piece's bytes without the signature.
/// Whether the signer is trusted is the caller's question. A piece heard
/// again is answered from `verified`.
pub fn open_catalogue<'a>(
    verified: &Verified,
    datagram: &'a [u8],
) -> Result<(PublicKey, &'a [u8]), AuthError> {
    let body_len = datagram
        .len()
        .checked_sub(SIGNATURE_LEN)
        .filter(|n| *n >= 36)
        .ok_or(AuthError::Missing)?;
    let (body, sig) = datagram.split_at(body_len);
    let mut k = [0u8; 32];
    k.copy_from_slice(&body[4..36]);
    let signer = PublicKey::from_bytes(&k)?;
    let sig: &[u8; SIGNATURE_LEN] = sig.try_into().map_err(|_| AuthError::Missing)?;
    verified.verify(&signer, &in_context(CATALOGUE_CONTEXT, body), sig)?;
    Ok((signer, body))
}

/// What a symbol batch's signature covers besides its bytes.
const BATCH_CONTEXT: &[u8] = b"repocast symbol batch\0";
/// What a data packet's digest covers besides its bytes.
const DIGEST_CONTEXT: &[u8] = b"repocast symbol digest\0";

/// The digest a signed batch lists for a data packet: BLAKE3 of the whole
/// datagram as sent (tag and all), truncated to 96 bits (a forger would
/// need a second preimage of it while a receiver holds it).
pub fn symbol_digest(datagram: &[u8]) -> [u8; crate::wire::batch::DIGEST_LEN] {
    let mut h = blake3::Hasher::new();
    h.update(DIGEST_CONTEXT);
    h.update(datagram);
    let mut d = [0u8; crate::wire::batch::DIGEST_LEN];
    d.copy_from_slice(&h.finalize().as_bytes()[..crate::wire::batch::DIGEST_LEN]);
    d
}

/// Appends `identity`'s signature of a symbol batch's bytes.
pub fn sign_batch(identity: &Identity, buf: &mut Vec<u8>) {
    sign_in_context(identity, BATCH_CONTEXT, buf);
}

/// Checks a symbol batch's signature under `signer`; its bytes without
/// the signature (through `verified`: the requests of a shared receiver
/// check each batch once between them).
pub fn open_batch<'a>(
    signer: &PublicKey,
    verified: &Verified,
    datagram: &'a [u8],
) -> Result<&'a [u8], AuthError> {
    let body_len = datagram
        .len()
        .checked_sub(SIGNATURE_LEN)
        .ok_or(AuthError::Missing)?;
    let (body, sig) = datagram.split_at(body_len);
    let sig: &[u8; SIGNATURE_LEN] = sig.try_into().map_err(|_| AuthError::Missing)?;
    verified.verify(signer, &in_context(BATCH_CONTEXT, body), sig)?;
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys() -> (SessionKey, Identity) {
        (
            SessionKey::from_bytes([7; 32]),
            Identity::from_seed([9; 32]),
        )
    }

    #[test]
    fn data_tag_accepts_the_sealed_packet_and_nothing_altered() {
        let (k, _) = keys();
        let mut p = b"header and symbol bytes".to_vec();
        p.extend_from_slice(&[0; TAG_LEN]);
        seal_data(&k, 41, &mut p);
        assert_eq!(check_data(&k, &p), Ok(()));
        // The same bytes under another packet number: another tag.
        let mut q = b"header and symbol bytes".to_vec();
        q.extend_from_slice(&[0; TAG_LEN]);
        seal_data(&k, 42, &mut q);
        assert_ne!(p[p.len() - MAC_LEN..], q[q.len() - MAC_LEN..]);
        for i in 0..p.len() {
            let mut q = p.clone();
            q[i] ^= 1;
            assert_eq!(check_data(&k, &q), Err(AuthError::BadTag), "byte {i}");
        }
        let other = SessionKey::from_bytes([8; 32]);
        assert_eq!(check_data(&other, &p), Err(AuthError::BadTag));
        assert_eq!(check_data(&k, &p[..3]), Err(AuthError::Missing));
    }

    #[test]
    fn payload_encryption_round_trips_and_depends_on_key_and_number() {
        let (k, _) = keys();
        let plain: Vec<u8> = (0..1280u32).map(|i| (i * 7) as u8).collect();
        let mut c = plain.clone();
        crypt_payload(&k, 5, &mut c);
        assert_ne!(c, plain);
        // No byte left in the clear beyond chance.
        let same = c.iter().zip(&plain).filter(|(a, b)| a == b).count();
        assert!(same < 30, "{same} bytes unchanged");
        let mut other_number = plain.clone();
        crypt_payload(&k, 6, &mut other_number);
        assert_ne!(other_number, c);
        let mut other_key = plain.clone();
        crypt_payload(&SessionKey::from_bytes([8; 32]), 5, &mut other_key);
        assert_ne!(other_key, c);
        crypt_payload(&k, 5, &mut c);
        assert_eq!(c, plain);
        assert_eq!(tag_number(&[0, 0, 0, 0, 0, 0, 1, 2, 9]), Some(258));
        assert_eq!(tag_number(&[1, 2]), None);
    }

    #[test]
    fn announce_trailer_checks_tag_and_signature() {
        let (k, id) = keys();
        // One memory throughout: the genuine announcement, once checked, is
        // remembered, and every forgery below is still refused.
        let v = Verified::new();
        let mut a = b"announcement".to_vec();
        seal_announce(&k, &id, &mut a);
        assert_eq!(a.len(), 12 + ANNOUNCE_TRAILER_LEN);
        let pk = id.public();
        assert_eq!(
            open_announce(&k, Some(&pk), &v, &a),
            Ok(&b"announcement"[..])
        );
        // A holder of the session key re-tags a changed announcement: the
        // tag passes, the signature does not.
        let mut forged = b"announcemenT".to_vec();
        let t = k.tag(&forged);
        forged.extend_from_slice(&t);
        forged.extend_from_slice(&a[a.len() - SIGNATURE_LEN..]);
        assert_eq!(
            open_announce(&k, None, &v, &forged),
            Ok(&b"announcemenT"[..])
        );
        assert_eq!(
            open_announce(&k, Some(&pk), &v, &forged),
            Err(AuthError::BadSignature)
        );
        let stranger = Identity::from_seed([1; 32]).public();
        assert_eq!(
            open_announce(&k, Some(&stranger), &v, &a),
            Err(AuthError::BadSignature)
        );
        let other = SessionKey::from_bytes([0; 32]);
        assert_eq!(
            open_announce(&other, Some(&pk), &Verified::new(), &a),
            Err(AuthError::BadTag)
        );
        // Bytes the memory holds as verified need no tag check: the
        // signature covers the tag.
        assert_eq!(
            open_announce(&other, Some(&pk), &v, &a),
            Ok(&b"announcement"[..])
        );
        assert_eq!(
            open_announce(&k, Some(&pk), &v, &a[..40]),
            Err(AuthError::Missing)
        );
    }

    #[test]
    fn public_keys_round_trip_as_text() {
        let pk = Identity::from_seed([3; 32]).public();
        let s = pk.to_string();
        assert!(s.starts_with(PUBLIC_KEY_PREFIX) && s.len() == 8 + 64);
        assert_eq!(s.parse::<PublicKey>(), Ok(pk));
        assert_eq!(format!(" {s}\n").parse::<PublicKey>(), Ok(pk));
        assert_eq!(
            "ed25519:zz".parse::<PublicKey>(),
            Err(AuthError::BadKeyText)
        );
        assert_eq!(s[8..].parse::<PublicKey>(), Err(AuthError::BadKeyText));
        let bad_hex = format!("{PUBLIC_KEY_PREFIX}{}", "g".repeat(64));
        assert_eq!(bad_hex.parse::<PublicKey>(), Err(AuthError::BadKeyText));
    }
}
