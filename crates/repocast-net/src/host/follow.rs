//! A `get` through the host's shared receiver: finds it (or starts it),
//! hands it the request, shows its progress and returns its report; runs
//! on its own whenever the receiver cannot take the request (see
//! [`super`]).

use super::msg::{self, Ask, Order, Tell};
use super::{HostKey, same_user};
use crate::NetError;
use crate::client::{self, GetOptions, GetReport, Progress};
use repocast_core::loss::LossSpec;
use std::path::Path;
use std::time::Duration;
use tokio::io::BufReader;
use tokio::net::UnixStream;
use tokio::sync::mpsc::UnboundedSender;
use tokio::sync::watch;

/// The environment variable naming a file the receiver a `get` starts
/// appends its log to.
pub const RECEIVER_LOG: &str = "REPOCAST_RECEIVER_LOG";
/// How long a started receiver may take to answer.
const START_WAIT: Duration = Duration::from_secs(3);
/// How long a receiver told to stop a request may take to report it.
const STOP_WAIT: Duration = Duration::from_secs(10);
/// Between tries to reach a receiver being started.
const START_POLL: Duration = Duration::from_millis(20);

/// `repocast get` sharing the host's receiver. `start` is the program to
/// run as `START host-receiver ...` when none is up (none: only use one
/// already running). Runs on its own with emulated loss, or when the
/// receiver cannot take the request; the report is the same either way.
pub async fn get(
    opts: GetOptions,
    progress: Option<UnboundedSender<Progress>>,
    start: Option<&Path>,
) -> Result<GetReport, NetError> {
    get_until(opts, progress, start, None).await
}

/// [`get`], stopped early when `stop` turns true (see
/// [`client::get_until`]): through the receiver, it is told to stop the
/// request and its report comes back; a `get` stopped is never started
/// on its own.
pub async fn get_until(
    opts: GetOptions,
    progress: Option<UnboundedSender<Progress>>,
    start: Option<&Path>,
    mut stop: Option<watch::Receiver<bool>>,
) -> Result<GetReport, NetError> {
    if opts.loss != LossSpec::NONE {
        return client::get_until(opts, progress, stop).await;
    }
    let key = HostKey {
        server: opts.server,
        interface: opts.interface.spec(),
        ssm: opts.ssm,
    };
    let started = std::time::Instant::now();
    match through(&key, &opts, progress.as_ref(), start, stop.as_mut()).await {
        Ok(Some(mut rep)) => {
            rep.elapsed = started.elapsed();
            Ok(rep)
        }
        Ok(None) if stop.as_ref().is_some_and(|s| *s.borrow()) => {
            Err(NetError::Ended(client::STOPPED.into()))
        }
        Ok(None) => client::get_until(opts, progress, stop).await,
        Err(e) => Err(e),
    }
}

/// The request through the receiver: `None` when it did not take it (or
/// went away).
async fn through(
    key: &HostKey,
    opts: &GetOptions,
    progress: Option<&UnboundedSender<Progress>>,
    start: Option<&Path>,
    mut stop: Option<&mut watch::Receiver<bool>>,
) -> Result<Option<GetReport>, NetError> {
    let Some(s) = reach(key, start).await else {
        return Ok(None);
    };
    if !same_user(&s) {
        tracing::warn!("the host receiver's socket belongs to another user; running alone");
        return Ok(None);
    }
    let Ok(ask) = Ask::of(opts) else {
        return Ok(None);
    };
    let (rd, mut wr) = s.into_split();
    if msg::write(&mut wr, &ask).await.is_err() {
        return Ok(None);
    }
    let mut rd = BufReader::new(rd);
    // Told to stop: the receiver is asked to, and has a while to answer.
    let mut until: Option<tokio::time::Instant> = None;
    loop {
        // One read of a line, kept across the stop (a read cancelled
        // halfway would lose what it had).
        let read = msg::read::<_, Tell>(&mut rd);
        tokio::pin!(read);
        let t = loop {
            tokio::select! {
                t = &mut read => break t,
                _ = client::stopping(stop.as_deref_mut()), if until.is_none() => {
                    until = Some(tokio::time::Instant::now() + STOP_WAIT);
                    if msg::write(&mut wr, &Order::Stop).await.is_err() {
                        return Ok(None);
                    }
                }
                _ = crate::sleep_until(until) => {
                    return Err(NetError::Ended(format!(
                        "{}; the host receiver did not answer", client::STOPPED
                    )));
                }
            }
        };
        let t = match t {
            Ok(Some(t)) => t,
            // The receiver went away: what it verified is in the journal,
            // and a `get` on its own resumes from there.
            Ok(None) | Err(_) => {
                tracing::warn!("the host receiver went away; going on alone");
                return Ok(None);
            }
        };
        match t.progress() {
            Ok(p) => {
                if let Some(tx) = progress {
                    let _ = tx.send(p);
                }
            }
            Err(Tell::Done(rep)) => return Ok(Some(*rep)),
            Err(Tell::Error(e)) => return Err(NetError::Ended(e)),
            Err(Tell::Refused(why)) => {
                tracing::info!("the host receiver did not take the request ({why}); running alone");
                return Ok(None);
            }
            Err(_) => {}
        }
    }
}

/// The receiver's socket, starting the receiver if none answers.
async fn reach(key: &HostKey, start: Option<&Path>) -> Option<UnixStream> {
    if let Some(s) = connect(key) {
        return Some(s);
    }
    let exe = start?;
    let mut cmd = std::process::Command::new(exe);
    cmd.arg("host-receiver")
        .arg("--server")
        .arg(key.server.to_string());
    if let Some(i) = &key.interface {
        cmd.arg("--interface").arg(i);
    }
    if !key.ssm {
        cmd.arg("--no-ssm");
    }
    use std::os::unix::process::CommandExt;
    // Its log (`REPOCAST_LOG` picks what) goes to the file
    // `REPOCAST_RECEIVER_LOG` names, appended, or nowhere: it outlives
    // this `get`, whose standard error may be gone by then.
    let log = std::env::var_os(RECEIVER_LOG).and_then(|p| {
        let f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&p);
        f.map_err(|e| tracing::warn!("{RECEIVER_LOG}: {e}")).ok()
    });
    cmd.stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(log.map_or_else(std::process::Stdio::null, Into::into))
        // Its own process group: a Ctrl-C to this `get` is not its end.
        .process_group(0);
    if let Err(e) = cmd.spawn() {
        tracing::warn!("cannot start the host receiver: {e}");
        return None;
    }
    let until = tokio::time::Instant::now() + START_WAIT;
    while tokio::time::Instant::now() < until {
        tokio::time::sleep(START_POLL).await;
        if let Some(s) = connect(key) {
            return Some(s);
        }
    }
    None
}

fn connect(key: &HostKey) -> Option<UnixStream> {
    let addr = key.address().ok()?;
    let s = std::os::unix::net::UnixStream::connect_addr(&addr).ok()?;
    s.set_nonblocking(true).ok()?;
    UnixStream::from_std(s).ok()
}
