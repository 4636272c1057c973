//! An authorised client turned polluter, for the virtual LAN
//! ([`crate::lan::VirtualLan::pollute`]): it holds the session key, watches
//! the server's data packets, and for a share of them sends one of its own
//! on the data group with the same session, transmission, item and block
//! (a live one), a symbol id the server will not use soon, random symbol
//! bytes and a valid tag. Receivers' tag checks pass; only the per-block
//! hash catches the polluted block. This is what the shared session key
//! leaves open (docs/security.md). In push mode
//! ([`crate::push_lan::PushLan::pollute`]) data carries no tag, so anyone
//! on the group is such a polluter ([`Polluter::untagged`]). A code with
//! few symbol ids (Reed-Solomon's blocks have 3k) takes none that high:
//! [`Polluter::ahead`] forges the ids the sender sends next of the block.

use repocast_core::auth::{self, SessionKey};
use repocast_core::rng::Rng;
use repocast_core::wire::DataRepr;

/// The polluter's settings and state.
pub struct Polluter {
    /// Its packets per server data packet (0.01: one for every hundred).
    share: f64,
    /// The session key it tags with (`None`: push, untagged).
    key: Option<SessionKey>,
    rng: Rng,
    credit: f64,
    /// Forge the ids just after the genuine packet's, not high ones.
    ahead: bool,
    /// Packets it sent.
    pub sent: u64,
}

impl Polluter {
    /// A polluter sending `share` of the server's data packet rate,
    /// tagging with `key`, its choices seeded by `seed`.
    pub fn new(share: f64, key: SessionKey, seed: u64) -> Self {
        Self::with_key(share, Some(key), seed)
    }

    /// A polluter of push mode's untagged data: anyone on the group.
    pub fn untagged(share: f64, seed: u64) -> Self {
        Self::with_key(share, None, seed)
    }

    /// This polluter, forging the ids the sender sends next of the block
    /// (one to eight past the genuine packet's) rather than high ones:
    /// they fall within any code's ids, and beat the genuine symbols of
    /// those ids to the receivers.
    pub fn ahead(self) -> Self {
        Polluter {
            ahead: true,
            ..self
        }
    }

    fn with_key(share: f64, key: Option<SessionKey>, seed: u64) -> Self {
        Polluter {
            share: share.max(0.0),
            key,
            rng: Rng::new(seed),
            credit: 0.0,
            ahead: false,
            sent: 0,
        }
    }

    /// Its packets in answer to the server's data packet `genuine`.
    pub fn answer(&mut self, genuine: &[u8]) -> Vec<Vec<u8>> {
        self.credit += self.share;
        let mut out = Vec::new();
        if self.credit < 1.0 {
            return out;
        }
        let Ok(p) = DataRepr::parse(genuine) else {
            return out;
        };
        while self.credit >= 1.0 {
            self.credit -= 1.0;
            let mut forged = p.clone();
            let r = self.rng.next_u64() as u32;
            forged.symbol = if self.ahead {
                p.symbol.saturating_add(1 + r % 8)
            } else {
                // High repair ids: fresh to every receiver's decoder.
                (1 << 23) | (r & ((1 << 23) - 1))
            };
            (forged.payload.iter_mut()).for_each(|b| *b = self.rng.next_u64() as u8);
            forged.tag = vec![0; if self.key.is_some() { auth::TAG_LEN } else { 0 }];
            forged.encrypted = false;
            let mut b = Vec::with_capacity(genuine.len());
            forged.emit(&mut b);
            // Its own packet numbers, far from the server's.
            self.sent += 1;
            if let Some(key) = &self.key {
                auth::seal_data(key, u64::MAX - self.sent, &mut b);
            }
            out.push(b);
        }
        out
    }
}
