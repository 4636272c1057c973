//! Loss emulation as a wrapper around a receiving socket, in the manner of
//! smoltcp's `phy::FaultInjector`: every datagram the kernel hands over is
//! dropped with the seeded [`LossModel`] before anyone parses it, so the
//! pump above sees exactly what a lossy link would deliver. No protocol
//! code knows it is there.

use repocast_core::loss::{LossModel, LossSpec};
use std::net::SocketAddr;
use tokio::net::UdpSocket;

/// A receiving socket with emulated loss.
pub struct LossySocket {
    sock: UdpSocket,
    loss: LossModel,
    /// Datagrams received from the kernel.
    pub received: u64,
    /// Of which dropped by the emulation.
    pub dropped: u64,
}

impl LossySocket {
    /// Wraps `sock`, losing datagrams as `spec` says (seeded).
    pub fn new(sock: UdpSocket, spec: LossSpec, seed: u64) -> Self {
        LossySocket {
            sock,
            loss: LossModel::new(spec, seed),
            received: 0,
            dropped: 0,
        }
    }

    /// The socket itself (for socket options such as the item filter).
    pub fn socket(&self) -> &UdpSocket {
        &self.sock
    }

    /// Waits until the socket may have a datagram.
    pub async fn readable(&self) -> std::io::Result<()> {
        self.sock.readable().await
    }

    /// The next datagram that survives the emulated loss, without waiting:
    /// `None` when the socket has nothing more.
    pub fn try_recv(&mut self, buf: &mut [u8]) -> Option<(usize, SocketAddr)> {
        loop {
            let got = self.sock.try_recv_from(buf).ok()?;
            self.received += 1;
            if !self.loss.lose() {
                return Some(got);
            }
            self.dropped += 1;
        }
    }
}
