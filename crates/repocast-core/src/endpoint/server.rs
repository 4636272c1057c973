//! The server endpoint: the [`Server`] state machine behind a byte
//! interface, as quinn-proto's `Endpoint` is behind `handle` and
//! `poll_transmit`.
//!
//! A driver (the tokio server, the simulator's payload runs, the fuzz
//! target) only moves bytes: it reports accepted connections
//! ([`ServerEndpoint::accept`]), bytes read from one
//! ([`ServerEndpoint::handle_stream`]) and its close, wakes the endpoint at
//! [`ServerEndpoint::poll_timeout`], and after every call writes out what
//! [`ServerEndpoint::poll_transmit`] gives (a datagram for the data or the
//! announcement group, or a frame for one connection) and closes the
//! connections [`ServerEndpoint::poll_close`] names. Framing, parsing,
//! malformed input, announcement repetition and the limits on what a peer
//! can make the server hold all live here, so every driver runs them.
//! With a session key in its config the endpoint tags every data packet
//! and announcement, and signs announcements with its [`Identity`]
//! (`crate::auth`). With access tokens ([`ServerEndpoint::with_tokens`])
//! a connection's first message must be a hello carrying one of them;
//! anything else is answered with a reason and the connection closed.

use super::signing::BatchSigner;
use super::{CloseReason, Dest, EndpointStats, MAX_ONE_OFF};
use crate::auth::{self, Identity, SessionKey};
use crate::hash::FastMap;
use crate::profile::EndpointLimits;
use crate::server::{
    BlockSource, ItemInfo, Server, ServerConfig, ServerError, ServerEvent, Transmit,
};
use crate::wire::frame::{FrameDecoder, encode_frame};
use crate::wire::{self, ClientMsg, ServerMsg};
use crate::{ClientId, Instant};
use std::collections::VecDeque;

/// One open request connection.
#[derive(Default)]
struct Conn {
    frames: FrameDecoder,
    /// Hello, catalogue and request messages so far.
    one_offs: u32,
    /// It may talk to the server: no tokens are required, or its hello
    /// carried one.
    admitted: bool,
    /// The hash of the token it was admitted with.
    token: Option<[u8; 32]>,
}

/// Appends `m` to `buf` as one length-prefixed frame.
fn encode_msg(m: &ServerMsg, buf: &mut Vec<u8>) {
    let mut body = Vec::new();
    m.emit(&mut body);
    encode_frame(&body, buf);
}

/// Why a connection's messages stopped being taken.
enum Refused {
    /// Too many one-off messages.
    Repeated,
    /// Its first message was not a hello with a token.
    NoToken,
    /// Its token is not one the server knows.
    Token,
}

/// The server side of repocast as bytes in, bytes out.
pub struct ServerEndpoint {
    server: Server,
    limits: EndpointLimits,
    conns: FastMap<ClientId, Conn>,
    /// Bytes of incomplete frames across all connections.
    buffered: usize,
    closing: VecDeque<(ClientId, CloseReason)>,
    /// The announcement last emitted, and copies of it still to send.
    repeat: Option<(Vec<u8>, u8)>,
    /// Tags data and announcements (from the config's session key).
    session_key: Option<SessionKey>,
    /// Signs announcements.
    identity: Option<Identity>,
    /// Hashes of the access tokens a client must present (`None`: none
    /// required; empty: nobody gets in).
    tokens: Option<Vec<[u8; 32]>>,
    /// Messages the endpoint itself sends (a refusal's reason), before
    /// the state machine's.
    own_msgs: VecDeque<(ClientId, ServerMsg)>,
    /// Encrypt data packets' symbols under the session key.
    encrypt: bool,
    /// Data packets sealed so far: with the epoch, the next one's number
    /// (its GMAC nonce, so never repeated under a key).
    sealed: u64,
    /// The session key's epoch (the top byte of every packet number).
    epoch: u8,
    /// A rotation under way: when the key the state machine offered
    /// takes over.
    switch_at: Option<Instant>,
    /// Vouches for data packets in signed batches (`sign_symbols`).
    signer: Option<BatchSigner>,
    /// An announcement waiting behind the batches flushed before it.
    held: Option<Vec<u8>>,
    stats: EndpointStats,
}

impl ServerEndpoint {
    /// An endpoint serving `items` with `cfg`, bounded by `limits`.
    pub fn new(
        cfg: ServerConfig,
        limits: EndpointLimits,
        items: Vec<ItemInfo>,
    ) -> Result<Self, ServerError> {
        let session_key = cfg.session_key.clone();
        let encrypt = cfg.encrypt && session_key.is_some();
        Ok(ServerEndpoint {
            session_key,
            identity: None,
            tokens: None,
            own_msgs: VecDeque::new(),
            encrypt,
            sealed: 0,
            epoch: 0,
            switch_at: None,
            signer: None,
            held: None,
            server: Server::new(cfg, items)?,
            limits,
            conns: FastMap::default(),
            buffered: 0,
            closing: VecDeque::new(),
            repeat: None,
            stats: EndpointStats::default(),
        })
    }

    /// Signs announcements with `identity` (with a session key in the
    /// config; without one announcements go unsigned).
    /// With `sign_symbols` in the config it also signs batches of data
    /// packet digests ([`super::signing`]).
    pub fn with_identity(mut self, identity: Identity) -> Self {
        let cfg = self.server.config();
        if cfg.sign_symbols {
            self.signer = Some(BatchSigner::new(cfg.session, cfg.sign_copies));
        }
        self.identity = Some(identity);
        self
    }

    /// Requires every connection to open with a hello carrying a token
    /// whose [`auth::token_hash`] is one of `hashes` (none: no token is
    /// required). Tokens travel only inside TLS.
    pub fn with_tokens(mut self, hashes: Vec<[u8; 32]>) -> Self {
        self.tokens = (!hashes.is_empty()).then_some(hashes);
        self
    }

    /// Replaces the accepted tokens while running (the operator edited
    /// the token file): `Some` list (empty: nobody gets in) or `None` (no
    /// token needed). Every admitted connection whose token is no longer
    /// accepted, or that presented none now that tokens are required, is
    /// told why and closed. Returns how many were closed: the driver
    /// should then rotate the session key ([`Self::rotate_key`], retrying
    /// while a rotation is pending) so they lose the multicast too.
    pub fn set_tokens(&mut self, now: Instant, hashes: Option<Vec<[u8; 32]>>) -> usize {
        self.tokens = hashes;
        let tokens = &self.tokens;
        let revoked: Vec<ClientId> = (self.conns.iter_mut())
            .filter_map(|(id, c)| {
                let Some(tokens) = tokens else {
                    c.admitted = true;
                    return None;
                };
                let kept = c.token.is_some_and(|t| tokens.contains(&t));
                (c.admitted && !kept).then_some(*id)
            })
            .collect();
        for &conn in &revoked {
            self.stats.revoked += 1;
            self.refuse(
                now,
                conn,
                "access revoked: the server no longer accepts this token",
            );
        }
        revoked.len()
    }

    /// Tells `conn` why it may not talk to the server (a connection-level
    /// `Failed`: no item, no name), then closes it.
    fn refuse(&mut self, now: Instant, conn: ClientId, reason: &str) {
        let m = ServerMsg::Failed {
            item: None,
            name: String::new(),
            reason: reason.into(),
        };
        self.own_msgs.push_back((conn, m));
        self.close(now, conn, CloseReason::Unauthorized);
    }

    /// Rotates the session key to `key` (the driver draws it): every
    /// welcomed client is sent it at once, and packets are sealed under it
    /// from [`EndpointLimits::rekey_grace`] on; clients welcomed meanwhile
    /// get it too. A client that left before cannot read or forge what is
    /// sent under it. Returns whether the rotation started: not without
    /// a session key, nor while another is pending (its key would never
    /// take over).
    pub fn rotate_key(&mut self, now: Instant, key: SessionKey) -> bool {
        if self.session_key.is_none() || self.switch_at.is_some() {
            return false;
        }
        self.server
            .offer_session_key(self.epoch.wrapping_add(1), key);
        self.switch_at = Some(now + self.limits.rekey_grace);
        true
    }

    /// The session key's epoch (rotations so far, modulo 256).
    pub fn key_epoch(&self) -> u8 {
        self.epoch
    }

    /// The state machine (for summaries, manifests and counters).
    pub fn server(&self) -> &Server {
        &self.server
    }

    /// The endpoint's own counters.
    pub fn stats(&self) -> EndpointStats {
        self.stats
    }

    /// The limits it runs with.
    pub fn limits(&self) -> EndpointLimits {
        self.limits
    }

    /// A request connection was accepted: its id, or the reason to refuse
    /// it (the driver then closes it at once).
    pub fn accept(&mut self, now: Instant) -> Result<ClientId, CloseReason> {
        self.accept_from(now, None)
    }

    /// A new connection from `peer` (its address, so the server can start
    /// it with the loss that address's earlier connections reported; see
    /// [`Self::accept`]).
    pub fn accept_from(
        &mut self,
        now: Instant,
        peer: Option<std::net::IpAddr>,
    ) -> Result<ClientId, CloseReason> {
        if self.conns.len() >= self.limits.max_connections {
            self.stats.refused_connections += 1;
            return Err(CloseReason::TooManyConnections);
        }
        let id = self.server.handle_connect_from(now, peer);
        let conn = Conn {
            admitted: self.tokens.is_none(),
            ..Conn::default()
        };
        self.conns.insert(id, conn);
        Ok(id)
    }

    /// Bytes read from connection `conn`. Whole frames are parsed and
    /// handed to the server; a frame that does not parse is counted and
    /// dropped; a frame over the size limit, or bytes that would take the
    /// buffered total over its limit, close the connection.
    pub fn handle_stream(&mut self, now: Instant, conn: ClientId, bytes: &[u8]) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        let before = c.frames.buffered();
        if self.buffered + bytes.len() > self.limits.max_buffered_bytes {
            self.stats.closed_over_memory += 1;
            self.close(now, conn, CloseReason::OverMemory);
            return;
        }
        c.frames.extend(bytes);
        let mut msgs = Vec::new();
        let fatal = loop {
            match c.frames.next_frame() {
                Ok(Some(f)) => match ClientMsg::parse(&f) {
                    Ok(m) if !c.admitted => match &m {
                        ClientMsg::Hello { token: Some(t), .. } => {
                            let h = auth::token_hash(t);
                            if !(self.tokens.as_ref()).is_some_and(|l| l.contains(&h)) {
                                break Some(Err(Refused::Token));
                            }
                            c.admitted = true;
                            c.token = Some(h);
                            c.one_offs += 1;
                            msgs.push(m)
                        }
                        _ => break Some(Err(Refused::NoToken)),
                    },
                    Ok(m) => {
                        if matches!(
                            m,
                            ClientMsg::Hello { .. }
                                | ClientMsg::ListCatalogue
                                | ClientMsg::Request { .. }
                        ) {
                            c.one_offs += 1;
                            if c.one_offs > MAX_ONE_OFF {
                                break Some(Err(Refused::Repeated));
                            }
                        }
                        msgs.push(m)
                    }
                    Err(_) => self.stats.malformed_frames += 1,
                },
                Ok(None) => break None,
                Err(e) => break Some(Ok(e)),
            }
        };
        let after = c.frames.buffered();
        self.buffered = (self.buffered + after).saturating_sub(before);
        for m in msgs {
            self.server.handle_client_msg(now, conn, m);
        }
        match fatal {
            Some(Ok(e)) => {
                self.stats.malformed_frames += 1;
                self.close(now, conn, CloseReason::Protocol(e));
            }
            Some(Err(Refused::Repeated)) => {
                self.stats.closed_repeating += 1;
                let what = "hello, catalogue or request";
                self.close(now, conn, CloseReason::Repeated(what));
            }
            Some(Err(why)) => {
                self.stats.refused_unauthorized += 1;
                let reason = match why {
                    Refused::Token => "access refused: the server does not know this token",
                    _ => "access refused: this server requires an access token (--token-file)",
                };
                self.refuse(now, conn, reason);
            }
            None => {}
        }
    }

    /// The connection closed (by the peer, or by the driver after a write
    /// failed or the peer stopped reading): its demand is forgotten.
    pub fn handle_close(&mut self, now: Instant, conn: ClientId) {
        if let Some(c) = self.conns.remove(&conn) {
            self.buffered = self.buffered.saturating_sub(c.frames.buffered());
            self.server.handle_disconnect(now, conn);
        }
    }

    /// The driver could not queue a frame for `conn` within
    /// [`EndpointLimits::max_queued_bytes`]: the peer does not read.
    /// A connection already closed is not counted again.
    pub fn handle_backlog(&mut self, now: Instant, conn: ClientId) {
        if self.conns.contains_key(&conn) {
            self.stats.closed_not_reading += 1;
            self.close(now, conn, CloseReason::NotReading);
        }
    }

    fn close(&mut self, now: Instant, conn: ClientId, reason: CloseReason) {
        if self.conns.contains_key(&conn) {
            self.handle_close(now, conn);
            self.closing.push_back((conn, reason));
        }
    }

    /// A connection the driver must close, and why.
    pub fn poll_close(&mut self) -> Option<(ClientId, CloseReason)> {
        self.closing.pop_front()
    }

    /// Timers (pacing, report deadlines); an early call is harmless.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.server.handle_timeout(now);
    }

    /// When to call [`ServerEndpoint::handle_timeout`] and
    /// [`ServerEndpoint::poll_transmit`] again, if nothing else happens.
    pub fn poll_timeout(&self) -> Option<Instant> {
        if self.repeat.is_some() || !self.own_msgs.is_empty() || self.held.is_some() {
            return Some(Instant::ZERO);
        }
        let batches = self.signer.as_ref().and_then(BatchSigner::next_due);
        [self.server.poll_timeout(), batches]
            .into_iter()
            .flatten()
            .min()
    }

    /// The next block encoder to prepare off the sending path
    /// ([`Server::poll_prepare`]): run it on any thread, then hand it back
    /// with [`ServerEndpoint::prepared`].
    pub fn poll_prepare(&mut self) -> Option<crate::server::encoders::PrepareJob> {
        self.server.poll_prepare()
    }

    /// A job from [`ServerEndpoint::poll_prepare`], run.
    pub fn prepared(&mut self, job: crate::server::encoders::PrepareJob) {
        self.server.prepared(job);
    }

    /// The next thing to send at `now`: its bytes replace `buf`'s (a whole
    /// datagram, or one length-prefixed frame). Call until `None`.
    pub fn poll_transmit(
        &mut self,
        now: Instant,
        source: &mut dyn BlockSource,
        buf: &mut Vec<u8>,
    ) -> Option<Dest> {
        buf.clear();
        if self.switch_at.is_some_and(|at| now >= at) {
            self.switch_at = None;
            if let Some(k) = self.server.commit_session_key() {
                self.session_key = Some(k);
                self.epoch = self.epoch.wrapping_add(1);
            }
        }
        if let Some((c, m)) = self.own_msgs.pop_front() {
            encode_msg(&m, buf);
            return Some(Dest::Conn(c));
        }
        if let (Some(s), Some(id)) = (self.signer.as_mut(), self.identity.as_ref()) {
            if let Some(b) = s.poll_due(now, id) {
                self.server.take_slot(now);
                buf.extend_from_slice(&b);
                return Some(Dest::Data);
            }
        }
        if let Some(a) = self.held.take() {
            buf.extend_from_slice(&a);
            return Some(Dest::Announce);
        }
        if let Some((bytes, left)) = self.repeat.as_mut() {
            buf.extend_from_slice(bytes);
            *left -= 1;
            if *left == 0 {
                self.repeat = None;
            }
            return Some(Dest::Announce);
        }
        loop {
            let t = self.server.poll_transmit(now, source)?;
            match t {
                Transmit::Data(mut d) => {
                    if let Some(k) = &self.session_key {
                        self.sealed += 1;
                        let number = auth::packet_number(self.epoch, self.sealed);
                        if self.encrypt {
                            auth::crypt_payload(k, number, &mut d.payload);
                            d.encrypted = true;
                        }
                        d.tag = vec![0; auth::TAG_LEN];
                        d.emit(buf);
                        auth::seal_data(k, number, buf);
                    } else {
                        d.emit(buf);
                    }
                    if let (Some(s), Some(id)) = (self.signer.as_mut(), self.identity.as_ref()) {
                        s.add(now, buf, id);
                    }
                    return Some(Dest::Data);
                }
                Transmit::Announce(a) => {
                    // With those due with it (the next transmission's
                    // start after an end): one datagram, one signature.
                    let mut list = vec![a];
                    while list.len() < wire::announce::MAX_BUNDLE {
                        match self.server.poll_announce(now) {
                            Some(b) => list.push(b),
                            None => break,
                        }
                    }
                    wire::emit_announcements(&list, buf);
                    if let Some(k) = &self.session_key {
                        match &self.identity {
                            Some(id) => auth::seal_announce(k, id, buf),
                            None => {
                                auth::seal_announce_unsigned(k, buf);
                            }
                        }
                    }
                    let copies = copies(&list, self.limits.announce_repeats) - 1;
                    if copies > 0 {
                        self.repeat = Some((buf.clone(), copies));
                    }
                    // The packets an announcement follows (the last of a
                    // transmission, before its end) are vouched for first.
                    if let (Some(s), Some(id)) = (self.signer.as_mut(), self.identity.as_ref()) {
                        s.flush(now, id);
                        if let Some(b) = s.poll() {
                            self.held = Some(std::mem::replace(buf, b));
                            self.server.take_slot(now);
                            return Some(Dest::Data);
                        }
                    }
                    return Some(Dest::Announce);
                }
                Transmit::Control(c, m) => {
                    if !self.conns.contains_key(&c) {
                        continue;
                    }
                    encode_msg(&m, buf);
                    return Some(Dest::Conn(c));
                }
            }
        }
    }

    /// The state machine's next event (for logs).
    pub fn poll_event(&mut self) -> Option<ServerEvent> {
        self.server.poll_event()
    }

    /// Connections open.
    pub fn connections(&self) -> usize {
        self.conns.len()
    }

    /// Bytes of incomplete frames held across connections.
    pub fn buffered_bytes(&self) -> usize {
        self.buffered
    }
}

/// How many copies of an announcement datagram carrying `list` go out:
/// `repeats`, unless it starts a transmission that lasts no longer than
/// the shortest NAK delay it announces, which goes out once. The next
/// announcement (that transmission's end) then comes sooner than any
/// report could, and stands in for a lost one: a receiver that missed
/// an end hears the next start (the channel moved on), and one that
/// missed a start reports from the end (`Client::missed_start`). With
/// many small items most transmissions are this short: their copies were
/// two in five of the datagrams every receiver read, and cost more than
/// the losses they covered (docs/benchmarks.md, session 65).
fn copies(list: &[wire::AnnounceRepr], repeats: u8) -> u8 {
    let short = list.last().is_some_and(|a| {
        a.kind != wire::AnnounceKind::End && a.duration_us <= u64::from(a.nak_window_min_us)
    });
    if short { 1 } else { repeats.max(1) }
}
