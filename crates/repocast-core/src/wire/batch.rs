//! Signed symbol batches: per-packet source authentication on the data
//! group (`serve --sign-symbols`, `push --sign-symbols`).
//!
//! A batch lists short digests ([`crate::auth::symbol_digest`]) of data
//! packets the sender has just sent, and ends with the sender's Ed25519
//! signature ([`crate::auth::sign_batch`]). A receiver that requires
//! signed symbols feeds a data packet to its decoder only once a batch it
//! verified lists the packet's digest, so nobody without the signing key,
//! not even a client holding the session key, can make it accept a symbol
//! (`endpoint::signing`). The session comes right after the header, where
//! a data packet has it ([`super::DataRepr::peek_session`]).

use super::codec::{Reader, Writer, check_max};
use super::{WireError, kind};
use crate::SessionId;

/// Bytes of one packet digest (truncated BLAKE3: 96 bits; a forger needs
/// a second preimage of one of the few thousand digests a receiver holds,
/// while it holds them).
pub const DIGEST_LEN: usize = 12;
/// Most digests one batch carries (a batch of 96 is 1,233 bytes: it fits
/// a 1,280-byte payload).
pub const MAX_BATCH: usize = 96;

/// A batch's signed bytes, parsed (the datagram without its signature:
/// see [`crate::auth::open_batch`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SymbolBatch {
    /// The session whose data packets it covers.
    pub session: SessionId,
    /// The sender's running batch number (a receiver checks each number's
    /// signature once and ignores repeat copies).
    pub number: u64,
    /// Digests of the packets it covers, in the order they were sent.
    pub digests: Vec<[u8; DIGEST_LEN]>,
}

impl SymbolBatch {
    /// Parses a batch's signed bytes; never panics.
    pub fn parse(buf: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(buf);
        let k = r.header()?;
        if k != kind::SYMBOL_BATCH {
            return Err(WireError::UnknownKind(k));
        }
        let session = SessionId(r.u32()?);
        let number = r.u64()?;
        let n = r.u8()? as usize;
        check_max("batch digests", n as u64, MAX_BATCH as u64)?;
        let mut digests = Vec::with_capacity(n);
        for _ in 0..n {
            let mut d = [0u8; DIGEST_LEN];
            d.copy_from_slice(r.bytes(DIGEST_LEN)?);
            digests.push(d);
        }
        r.finish()?;
        Ok(SymbolBatch {
            session,
            number,
            digests,
        })
    }

    /// Appends the batch's bytes (to be signed) to `buf`.
    pub fn emit(&self, buf: &mut Vec<u8>) {
        let mut w = Writer::with_header(buf, kind::SYMBOL_BATCH);
        w.u32(self.session.0).u64(self.number);
        let n = self.digests.len().min(MAX_BATCH);
        w.u8(n as u8);
        for d in &self.digests[..n] {
            w.bytes(d);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_round_trips_and_junk_is_refused() {
        let b = SymbolBatch {
            session: SessionId(7),
            number: 3,
            digests: vec![[1; DIGEST_LEN], [2; DIGEST_LEN]],
        };
        let mut buf = Vec::new();
        b.emit(&mut buf);
        assert_eq!(SymbolBatch::parse(&buf), Ok(b));
        assert!(SymbolBatch::parse(&buf[..buf.len() - 1]).is_err());
        let mut more = buf.clone();
        more.push(0);
        assert_eq!(SymbolBatch::parse(&more), Err(WireError::Trailing));
        let mut too_many = buf.clone();
        too_many[16] = MAX_BATCH as u8 + 1;
        assert!(SymbolBatch::parse(&too_many).is_err());
    }
}
