//! # repocast-net: the protocol core on real sockets
//!
//! A tokio driver around `repocast-core`'s state machines: UDP multicast for
//! the data and announcement channels ([`socket`]), TLS 1.3 over TCP with
//! length-prefixed frames for the request connection ([`tls`], bound to
//! the server's key from [`keys`], pinned by clients through [`known`]), files on disk on both sides
//! ([`repo`] serves blocks straight from the repository, [`store`] writes
//! verified blocks to temporary files with a resume journal). [`server`]
//! and [`client`] are the two pumps; they contain no protocol logic: every
//! decision is the core's. Pacing is the core's token bucket; this crate
//! only sleeps until the core's next deadline.

pub mod addr;
pub mod client;
pub mod error;
pub mod fault;
pub mod host;
pub mod keys;
pub mod known;
pub mod listen;
pub mod metrics;
pub mod push;
pub mod repo;
pub mod server;
pub mod settings;
pub mod socket;
pub mod store;
pub mod tls;

pub use error::NetError;

/// This process's peak resident set size in bytes so far (`getrusage`),
/// for the memory bound `listen --json` reports.
pub fn peak_rss_bytes() -> Option<u64> {
    let mut u = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes a rusage into the pointer it is given, and
    // RUSAGE_SELF is always valid; on failure nothing is read.
    let ok = unsafe { libc::getrusage(libc::RUSAGE_SELF, u.as_mut_ptr()) } == 0;
    // SAFETY: zeroed is a valid rusage, and getrusage filled it on success.
    let u = unsafe { u.assume_init() };
    // Linux reports kibibytes.
    (ok && u.ru_maxrss >= 0).then(|| u.ru_maxrss as u64 * 1024)
}

/// Nanoseconds since `start`, as the core's [`repocast_core::Instant`].
pub(crate) fn core_now(start: std::time::Instant) -> repocast_core::Instant {
    repocast_core::Instant::from_nanos(start.elapsed().as_nanos() as u64)
}

/// The tokio instant of a core deadline (capped at an hour from now, so a
/// far deadline cannot overflow the timer).
pub(crate) fn sleep_target(
    deadline: Option<repocast_core::Instant>,
    start: std::time::Instant,
) -> Option<tokio::time::Instant> {
    deadline.map(|t| {
        let now = core_now(start);
        let wait = std::time::Duration::from_nanos(t.as_nanos().saturating_sub(now.as_nanos()))
            .min(std::time::Duration::from_secs(3600));
        tokio::time::Instant::now() + wait
    })
}

/// Sleeps until `target`, or forever when there is none.
pub(crate) async fn sleep_until(target: Option<tokio::time::Instant>) {
    match target {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}
