//! What a `get` and the host's shared receiver say on their local
//! socket: JSON, one message per line, at most [`MAX_LINE`] bytes each.
//! The `get` sends one [`Ask`], and may later send an [`Order`] to stop;
//! the receiver answers with [`Tell`]s, the last of which is `Done`,
//! `Refused` or `Error`.

use crate::NetError;
use crate::client::{GetOptions, GetReport, Progress};
use crate::tls::Trust;
use repocast_core::ItemId;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};

/// Longest message line (a request naming many items fits).
pub(crate) const MAX_LINE: u64 = 4 << 20;

/// A `get`'s request: its options, but for those the receiver shares
/// (interface, join mode) and the loss emulation (never shared).
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Ask {
    server: SocketAddr,
    out: PathBuf,
    items: Vec<String>,
    all: bool,
    seed: u64,
    idle_timeout_ms: u64,
    /// `None`: never (a receiver of an older version gets the default).
    #[serde(default = "default_stall_ms")]
    stall_timeout_ms: Option<u64>,
    memory_budget: u64,
    trust_key: Option<String>,
    known_servers: Option<PathBuf>,
    overwrite: bool,
    token: Option<String>,
}

impl Ask {
    /// The request of `o`, its paths made absolute (the receiver runs
    /// elsewhere).
    pub(crate) fn of(o: &GetOptions) -> std::io::Result<Ask> {
        let (trust_key, known_servers) = match &o.trust {
            Trust::Key(k) => (Some(k.to_string()), None),
            Trust::KnownServers(p) => (None, Some(std::path::absolute(p)?)),
        };
        Ok(Ask {
            server: o.server,
            out: std::path::absolute(&o.out)?,
            items: o.items.clone(),
            all: o.all,
            seed: o.seed,
            idle_timeout_ms: o.idle_timeout.as_millis() as u64,
            stall_timeout_ms: o.stall_timeout.map(|d| d.as_millis() as u64),
            memory_budget: o.memory_budget,
            trust_key,
            known_servers,
            overwrite: o.overwrite,
            token: o.token.clone(),
        })
    }

    /// The options a `get` on its own would have run with.
    pub(crate) fn options(self) -> Result<GetOptions, String> {
        let mut o = GetOptions::new(self.server, self.out, self.items);
        o.all = self.all;
        o.seed = self.seed;
        o.idle_timeout = Duration::from_millis(self.idle_timeout_ms.max(1));
        o.stall_timeout = (self.stall_timeout_ms).map(|ms| Duration::from_millis(ms.max(1)));
        o.memory_budget = self.memory_budget;
        o.trust = match (self.trust_key, self.known_servers) {
            (Some(k), _) => Trust::Key(k.parse().map_err(|e| format!("trusted key: {e}"))?),
            (None, Some(p)) => Trust::KnownServers(p),
            (None, None) => return Err("no trust given".into()),
        };
        o.overwrite = self.overwrite;
        o.token = self.token;
        Ok(o)
    }
}

fn default_stall_ms() -> Option<u64> {
    Some(repocast_core::endpoint::client::STALL_TIMEOUT.as_millis() as u64)
}

/// A `get` to the receiver, after its request.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum Order {
    /// Stop the request (a signal to the `get`): what it verified is in
    /// place, what it partly received kept, and its report follows.
    Stop,
}

/// The receiver to a `get`.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) enum Tell {
    /// Progress: the whole request's size, when known at the start.
    Requested { items: u64, bytes: u64 },
    /// Progress: an item's manifest.
    Item {
        item: u32,
        name: String,
        size: u64,
        resumed: u64,
    },
    /// Progress: bytes verified.
    Bytes { item: u32, bytes: u64 },
    /// Progress: an item verified and in place.
    Complete { item: u32 },
    /// Progress: an item failed.
    Failed { name: String, reason: String },
    /// The request's end, as a `get` on its own reports it.
    Done(Box<GetReport>),
    /// Not taken (nothing done yet): the `get` runs on its own.
    Refused(String),
    /// The request could not start, as it would have failed on its own.
    Error(String),
}

impl Tell {
    /// The progress event to show, if this is one (never `Join`).
    pub(crate) fn of_progress(p: Progress) -> Option<Tell> {
        Some(match p {
            Progress::Requested { items, bytes } => Tell::Requested { items, bytes },
            Progress::Item {
                item,
                name,
                size,
                resumed,
            } => Tell::Item {
                item: item.0,
                name,
                size,
                resumed,
            },
            Progress::Bytes { item, bytes } => Tell::Bytes {
                item: item.0,
                bytes,
            },
            Progress::Complete { item } => Tell::Complete { item: item.0 },
            Progress::Failed { name, reason } => Tell::Failed { name, reason },
            Progress::Join(_) => return None,
        })
    }

    /// The progress event this is, if one.
    pub(crate) fn progress(self) -> Result<Progress, Tell> {
        Ok(match self {
            Tell::Requested { items, bytes } => Progress::Requested { items, bytes },
            Tell::Item {
                item,
                name,
                size,
                resumed,
            } => Progress::Item {
                item: ItemId(item),
                name,
                size,
                resumed,
            },
            Tell::Bytes { item, bytes } => Progress::Bytes {
                item: ItemId(item),
                bytes,
            },
            Tell::Complete { item } => Progress::Complete { item: ItemId(item) },
            Tell::Failed { name, reason } => Progress::Failed { name, reason },
            other => return Err(other),
        })
    }
}

/// Writes one message line.
pub(crate) async fn write<W: AsyncWrite + Unpin, T: Serialize>(
    w: &mut W,
    m: &T,
) -> Result<(), NetError> {
    let mut line = serde_json::to_vec(m).map_err(|e| NetError::Ended(e.to_string()))?;
    line.push(b'\n');
    w.write_all(&line)
        .await
        .map_err(|e| NetError::socket("write to the host's receiver socket", e))
}

/// Reads one message line: `None` at the end of the stream; an error for
/// a line too long or not a message.
pub(crate) async fn read<R: AsyncRead + Unpin, T: for<'de> Deserialize<'de>>(
    r: &mut BufReader<R>,
) -> Result<Option<T>, NetError> {
    let mut line = Vec::new();
    (&mut *r)
        .take(MAX_LINE)
        .read_until(b'\n', &mut line)
        .await
        .map_err(|e| NetError::socket("read from the host's receiver socket", e))?;
    if line.is_empty() {
        return Ok(None);
    }
    if line.last() != Some(&b'\n') {
        return Err(NetError::Ended(
            "host receiver socket: a message too long or cut off".into(),
        ));
    }
    serde_json::from_slice(&line)
        .map(Some)
        .map_err(|e| NetError::Ended(format!("host receiver socket: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(stall: Option<Duration>) -> Ask {
        let mut o = GetOptions::new(
            "127.0.0.1:4700".parse().expect("addr"),
            "out".into(),
            vec![],
        );
        o.stall_timeout = stall;
        Ask::of(&o).expect("ask")
    }

    #[test]
    fn the_stall_timeout_reaches_the_receiver_and_an_older_get_gets_the_default() {
        for stall in [Some(Duration::from_secs(5)), None] {
            let line = serde_json::to_string(&ask(stall)).expect("json");
            let back: Ask = serde_json::from_str(&line).expect("parse");
            assert_eq!(back.options().expect("options").stall_timeout, stall);
        }
        // A `get` from before the stall timeout sends no such field.
        let mut v = serde_json::to_value(ask(None)).expect("json");
        v.as_object_mut()
            .expect("object")
            .remove("stall_timeout_ms");
        let back: Ask = serde_json::from_value(v).expect("parse");
        let want = Some(repocast_core::endpoint::client::STALL_TIMEOUT);
        assert_eq!(back.options().expect("options").stall_timeout, want);
    }
}
