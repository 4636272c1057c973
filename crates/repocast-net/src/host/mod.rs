//! A host's shared receiver: the `repocast get`s on one host that fetch
//! from the same server share one process that receives the groups for
//! all of them.
//!
//! Without it every `get` is a full receiver: its own multicast sockets,
//! which the kernel copies every datagram of the channel to (before each
//! socket's item filter drops what that request did not ask for), and its
//! own process woken for every packet it keeps. With many requests on a
//! host at once that is most of the host's CPU, and in a lab where the
//! hosts share a machine it starves the server's pump too (issue 12).
//!
//! The design:
//! - The first `get` (a *follower*, [`follow`]) finds no receiver on its
//!   local socket and starts one ([`agent`]: `repocast host-receiver`,
//!   detached), then asks it for its request. Later `get`s only ask.
//! - The receiver runs one core [`ClientEndpoint`] per request, exactly
//!   the one a `get` on its own runs (`client::endpoint`): its own TLS
//!   connection, its own store in that `get`'s folder, its own outcomes.
//!   Only the two multicast sockets are shared: a data packet goes to the
//!   requests that want its item (the kernel filter on the shared socket
//!   keeps the union of what they want), an announcement to all.
//! - The follower shows the same progress and returns the same report as
//!   a `get` on its own (the `msg` module), and exits the same way.
//! - The local socket is an abstract Unix socket (so it belongs to the
//!   host's network namespace, and leaves no file behind), named by the
//!   user, the server, the interface and the join mode; each side checks
//!   that the other runs as the same user.
//! - A `get` stopped by a signal tells the receiver to stop its request
//!   (`msg::Order::Stop`) and prints the report it gets back; a `get`
//!   that goes away has its request stopped all the same. Either way the
//!   request keeps what it received for a rerun, as a `get` on its own
//!   does (`ClientEndpoint::stop`), once its blocks out being decoded
//!   are back.
//! - The receiver exits once it has had no request for [`IDLE_EXIT`].
//! - It takes a request only while the files the requests it runs may
//!   hold open fit its open-file limit ([`budget`]); one that does not
//!   fit is refused, and its `get` runs on its own.
//! - Anything short of an accepted request (no receiver could start, it
//!   went away, another user holds the name) and `get` runs on its own;
//!   `get --no-share` and `--emulate-loss` (whose losses are per socket)
//!   always do. A receiver that dies mid-request leaves the store's
//!   journal, and the `get` resumes on its own.
//!
//! [`ClientEndpoint`]: repocast_core::endpoint::client::ClientEndpoint

pub mod agent;
pub mod budget;
pub mod follow;
mod msg;

use std::net::SocketAddr;
use std::os::linux::net::SocketAddrExt;
use std::time::Duration;

pub use agent::run as run_receiver;
pub use follow::{get, get_until};

/// How long the shared receiver stays up with no request.
pub const IDLE_EXIT: Duration = Duration::from_secs(10);

/// What one shared receiver serves: `get`s of one user, from one server,
/// joining on one interface the same way.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostKey {
    /// The server's request address.
    pub server: SocketAddr,
    /// `--interface` as given (none: the kernel chooses).
    pub interface: Option<String>,
    /// Source-specific joins when the server names a source.
    pub ssm: bool,
}

impl HostKey {
    /// The abstract socket's name.
    fn name(&self) -> String {
        format!(
            "repocast/host-receiver/{}/{}/{}/{}",
            uid(),
            self.server,
            self.interface.as_deref().unwrap_or("-"),
            if self.ssm { "ssm" } else { "asm" }
        )
    }

    fn address(&self) -> std::io::Result<std::os::unix::net::SocketAddr> {
        std::os::unix::net::SocketAddr::from_abstract_name(self.name().as_bytes())
    }
}

/// This process's effective user.
fn uid() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Whether the other end of a local socket runs as this user.
fn same_user(s: &tokio::net::UnixStream) -> bool {
    s.peer_cred().is_ok_and(|c| c.uid() == uid())
}
