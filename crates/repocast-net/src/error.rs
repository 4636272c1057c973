//! Errors at the network layer's boundary (sockets, files, peers).

use std::io;
use std::net::SocketAddr;

/// What can stop a server or a client run.
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    /// A socket could not be created, bound or joined.
    #[error("socket {what}: {source}")]
    Socket {
        /// What was being done.
        what: String,
        /// The OS error.
        source: io::Error,
    },
    /// A file or directory could not be read or written.
    #[error("{path}: {source}")]
    File {
        /// The path involved.
        path: String,
        /// The OS error.
        source: io::Error,
    },
    /// The server could not be reached.
    #[error("cannot connect to {server}: {source}")]
    Connect {
        /// The server's request address.
        server: SocketAddr,
        /// The OS error.
        source: io::Error,
    },
    /// Connecting took longer than its timeout.
    #[error("cannot connect to {0}: timed out")]
    ConnectTimeout(SocketAddr),
    /// The server's welcome named no multicast groups.
    #[error("the server named no multicast groups")]
    NoGroups,
    /// The run ended before anything was received (e.g. `ls`).
    #[error("{0}")]
    Ended(String),
    /// A rate that is not a number of bits per second in range.
    #[error("bad rate {0:?} (try 100M, 1G, 250k; 1k to 1T bit/s)")]
    Rate(String),
    /// A host name that does not resolve.
    #[error("cannot resolve {host:?}: {source}")]
    Resolve {
        /// The name.
        host: String,
        /// The resolver's error.
        source: io::Error,
    },
    /// A host name that resolves to no address.
    #[error("{0:?} resolves to no address")]
    NoAddress(String),
    /// An interface that is not usable as given.
    #[error("interface {name:?}: {why}")]
    Interface {
        /// As given.
        name: String,
        /// What is wrong.
        why: &'static str,
    },
    /// A setting out of range, or settings that do not fit together.
    #[error("{0}")]
    Setting(&'static str),
    /// An address that must be a multicast group is not.
    #[error("{0} is not a multicast group")]
    NotMulticast(std::net::IpAddr),
    /// The repository folder is not a folder.
    #[error("{0} is not a directory")]
    NotADirectory(String),
    /// The server's settings or repository cannot be served.
    #[error("server configuration: {0}")]
    Server(#[from] repocast_core::server::ServerError),
    /// TLS could not be set up.
    #[error("tls: {0}")]
    Tls(#[source] rustls::Error),
    /// The TLS handshake on the request connection failed.
    #[error("secure connection failed: {0}")]
    Handshake(String),
    /// The server presented a key other than the one pinned for it.
    #[error(
        "the server at {} presented key {}, but {} is the key trusted for it: \
         refusing to connect (someone may be impersonating it; if its key really changed, \
         remove its line from the known-servers file or pass --trust with the new key)",
        .0.server, .0.got, .0.expected
    )]
    KeyChanged(Box<KeyMismatch>),
    /// A key, key file or known-servers file that cannot be used.
    #[error("{0}")]
    Key(String),
    /// The popularity file does not parse.
    #[error("popularity file {path}: {msg}")]
    Popularity {
        /// The file.
        path: String,
        /// What is wrong.
        msg: String,
    },
    /// The file watcher could not start.
    #[error("watching {path}: {source}")]
    Watch {
        /// The folder.
        path: String,
        /// Why.
        #[source]
        source: notify::Error,
    },
    /// A background task failed.
    #[error("task: {0}")]
    Task(#[from] tokio::task::JoinError),
}

/// A server key that is not the trusted one.
#[derive(Debug)]
pub struct KeyMismatch {
    /// The server's address.
    pub server: SocketAddr,
    /// The key trusted for it.
    pub expected: repocast_core::auth::PublicKey,
    /// The key it presented.
    pub got: repocast_core::auth::PublicKey,
}

impl NetError {
    pub(crate) fn socket(what: impl Into<String>, source: io::Error) -> Self {
        NetError::Socket {
            what: what.into(),
            source,
        }
    }

    pub(crate) fn file(path: impl AsRef<std::path::Path>, source: io::Error) -> Self {
        NetError::File {
            path: path.as_ref().display().to_string(),
            source,
        }
    }
}
