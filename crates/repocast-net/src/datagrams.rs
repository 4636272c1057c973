//! Datagrams read from a socket together, kept in one buffer, so that the
//! endpoint can look at them all before it handles each
//! (`ClientEndpoint::prepare_announcements`: their signatures checked as
//! one batch). A driver's helper; nothing here parses.

use crate::fault::LossySocket;

/// Most datagrams a driver reads from one group per wake-up (then the
/// others get a turn).
pub(crate) const RECV_BATCH: usize = 512;

/// Hands `each` the datagrams `sock` holds, in the order read, up to
/// [`RECV_BATCH`] (`buf`: room for the largest), without waiting. Every
/// receiving loop reads its groups through this.
pub(crate) fn drain(sock: &mut LossySocket, buf: &mut [u8], mut each: impl FnMut(&[u8])) {
    for _ in 0..RECV_BATCH {
        let Some((n, _)) = sock.try_recv(buf) else {
            break;
        };
        each(&buf[..n]);
    }
}

/// Datagrams in the order read, one after another in one buffer.
#[derive(Debug, Default)]
pub(crate) struct Datagrams {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

impl Datagrams {
    /// Empties it, keeping its memory.
    pub(crate) fn clear(&mut self) {
        self.bytes.clear();
        self.ends.clear();
    }

    /// Empties it, then reads into it what `sock` holds, up to
    /// [`RECV_BATCH`] datagrams (`buf`: room for the largest).
    pub(crate) fn read_from(&mut self, sock: &mut LossySocket, buf: &mut [u8]) {
        self.clear();
        drain(sock, buf, |d| self.push(d));
    }

    /// Adds one datagram.
    pub(crate) fn push(&mut self, d: &[u8]) {
        self.bytes.extend_from_slice(d);
        self.ends.push(self.bytes.len());
    }

    /// The datagrams, in the order added.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &[u8]> + '_ {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts.zip(&self.ends).map(|(s, &e)| &self.bytes[s..e])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datagrams_come_back_as_added_and_clear_keeps_nothing() {
        let mut d = Datagrams::default();
        for x in [&b"ab"[..], b"", b"cde"] {
            d.push(x);
        }
        assert_eq!(d.iter().collect::<Vec<_>>(), [&b"ab"[..], b"", b"cde"]);
        d.clear();
        assert_eq!(d.iter().count(), 0);
        d.push(b"z");
        assert_eq!(d.iter().collect::<Vec<_>>(), [&b"z"[..]]);
    }
}
