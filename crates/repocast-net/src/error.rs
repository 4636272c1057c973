//! Errors at the network layer's boundary (sockets, files, peers).

use std::io;

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
    /// The server could not be reached or closed the connection.
    #[error("request connection: {0}")]
    Connection(String),
    /// The peer sent something this build cannot accept.
    #[error("protocol: {0}")]
    Protocol(String),
    /// The configuration or the command line is wrong.
    #[error("{0}")]
    Config(String),
    /// The server's settings or repository cannot be served.
    #[error("server configuration: {0}")]
    Server(#[from] repocast_core::server::ServerError),
    /// A background task failed.
    #[error("task: {0}")]
    Task(#[from] tokio::task::JoinError),
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
