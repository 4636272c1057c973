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
mod datagrams;
pub mod error;
pub mod fault;
pub mod fd_limit;
pub mod host;
mod jobs;
pub mod keys;
pub mod known;
pub mod listen;
pub mod metrics;
pub mod push;
pub mod repo;
pub mod server;
pub mod settings;
pub mod socket;
pub mod state_file;
pub mod store;
pub mod tls;

pub use error::NetError;

/// Makes every thread of this process allocate from one malloc arena
/// (glibc; elsewhere it does nothing). Call it in a receiver (`get`,
/// `listen`) before any other thread starts. A receiver allocates a
/// block's symbols on the thread receiving them and frees them on the
/// thread that decodes the block (`client::decode`); with an arena per
/// thread, what one thread frees is not reused by the others, and a
/// listener receiving 1 GiB at 1 Gbit/s peaked at 145-150 MiB instead of
/// 78 MiB (`tests/push-memory.sh`; its bound is 128 MiB).
pub fn one_malloc_arena() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets a parameter of the allocator; M_ARENA_MAX
    // is one glibc knows.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

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

/// Most core deadlines in a row that wake a driver at once
/// ([`Alarm::target`]).
const DUE_NOW_STREAK: u32 = 16;

/// Turns an endpoint's deadlines into tokio sleeps. tokio's timer rounds
/// every sleep up to its next millisecond tick, and an endpoint asks for
/// "now" whenever input it took waits on a step of its own (early data
/// replayed after a manifest): at a tick each, that was a millisecond of
/// most small requests. A deadline already due wakes at once instead, at
/// most [`DUE_NOW_STREAK`] times in a row; past that, until it asks for a
/// later time, each waits a millisecond, so an endpoint that kept asking
/// for "now" without progress could not spin a core.
#[derive(Debug, Default)]
pub(crate) struct Alarm {
    due_now: u32,
}

impl Alarm {
    /// The tokio instant to wake at for `deadline` (capped at an hour from
    /// now, so a far deadline cannot overflow the timer).
    pub(crate) fn target(
        &mut self,
        deadline: Option<repocast_core::Instant>,
        start: std::time::Instant,
    ) -> Option<tokio::time::Instant> {
        let t = deadline?;
        let now = core_now(start);
        let wait = std::time::Duration::from_nanos(t.as_nanos().saturating_sub(now.as_nanos()))
            .min(std::time::Duration::from_secs(3600));
        let at = tokio::time::Instant::now() + wait;
        if !wait.is_zero() {
            self.due_now = 0;
            return Some(at);
        }
        self.due_now = self.due_now.saturating_add(1);
        if self.due_now > DUE_NOW_STREAK {
            // Until a deadline in the future: the tick, as before.
            return Some(at + std::time::Duration::from_millis(1));
        }
        Some(at)
    }
}

/// Sleeps until `target` (not at all once it has passed: tokio would wait
/// for its next tick), or forever when there is none.
pub(crate) async fn sleep_until(target: Option<tokio::time::Instant>) {
    match target {
        Some(t) if t <= tokio::time::Instant::now() => {}
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_due_deadline_wakes_at_once_a_bounded_number_of_times_in_a_row() {
        let start = std::time::Instant::now();
        let mut a = Alarm::default();
        assert_eq!(a.target(None, start), None);
        let ms = std::time::Duration::from_millis(1);
        let due = Some(repocast_core::Instant::ZERO);
        for _ in 0..DUE_NOW_STREAK {
            let t = a.target(due, start).expect("a target");
            assert!(t <= tokio::time::Instant::now(), "due now: at once");
        }
        // Past the streak: a tick's wait, until a later deadline comes.
        for _ in 0..3 {
            let before = tokio::time::Instant::now();
            let t = a.target(due, start).expect("a target");
            assert!(t >= before + ms);
        }
        let later = Some(core_now(start) + std::time::Duration::from_secs(1));
        assert!(a.target(later, start).is_some());
        let t = a.target(due, start).expect("a target");
        assert!(t <= tokio::time::Instant::now(), "the streak starts afresh");
    }
}
