//! Session key rotation, the state machine's half: the key that takes
//! over is offered to every welcomed client ([`ServerMsg::Rekey`], over
//! the TLS connection) before the endpoint starts tagging with it, and to
//! each client welcomed while the switch is pending; once in use it is
//! the key new clients are welcomed with. Clients that left before the
//! offer never learn it. The pending key lives here only; the endpoint
//! (`crate::endpoint::server`) owns the timing and the tags.

use super::Server;
use crate::ClientId;
use crate::auth::SessionKey;
use crate::wire::ServerMsg;

impl Server {
    /// Offers `key`, for packets of `epoch`, to every welcomed client.
    pub fn offer_session_key(&mut self, epoch: u8, key: SessionKey) {
        self.next_key = Some((epoch, key));
        let mut clients: Vec<ClientId> = (self.clients.iter())
            .filter(|(_, c)| c.welcomed)
            .map(|(&id, _)| id)
            .collect();
        clients.sort();
        for c in clients {
            self.send_next_key(c);
        }
    }

    /// The offered key is now the one in use: clients welcomed from now
    /// on get it in their welcome. Returns it (None: none was offered).
    pub fn commit_session_key(&mut self) -> Option<SessionKey> {
        let (_, k) = self.next_key.take()?;
        self.cfg.session_key = Some(k.clone());
        Some(k)
    }

    /// Tells `client` the offered key, if one is pending.
    pub(super) fn send_next_key(&mut self, client: ClientId) {
        if let Some((epoch, k)) = &self.next_key {
            let msg = ServerMsg::Rekey {
                epoch: *epoch,
                key: k.to_bytes(),
            };
            self.send(client, msg);
        }
    }
}
