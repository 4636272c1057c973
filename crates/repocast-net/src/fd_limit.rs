//! The process's open-file limit, raised to what the system allows.
//!
//! Every process starts with the soft limit of its parent, on most Linux
//! systems 1,024, far below the hard limit (524,288 under systemd). A
//! server holds a socket per connection (up to
//! `EndpointLimits::max_connections`, 4,096 by default), and a host's
//! shared receiver a partial file per open item of each request on it
//! (about 140 for one request of many small files, session 63): at 1,024,
//! `accept` or a file's `open` fails long before either bound the core
//! sets. Raising the soft limit to the hard one is what the process may
//! do without privilege; the core's bounds stay what limits the work.
//! Called once at start-up by the CLI, before any thread starts.
//!
//! What one request may hold open ([`request_files`]) is what a host's
//! shared receiver reserves for each request it takes
//! (`crate::host::budget`), and what a `get` warns about when its limit
//! is lower.

use repocast_core::endpoint::finish::MAX_FINISH_JOBS;
use repocast_core::endpoint::select;
use repocast_core::profile::REQUEST_WINDOW;

/// Open files a process keeps for itself besides what its work holds:
/// its sockets, the runtime's, the standard streams, a library's.
pub const FD_SPARE: u64 = 64;

/// Files one item may hold open while it is received: its partial file
/// and its journal.
pub const PER_ITEM: u64 = 2;
/// Files a request holds besides its items: its TLS connection, its
/// local socket, and room for what its finish jobs and logs open.
pub const PER_REQUEST: u64 = 8 + MAX_FINISH_JOBS as u64;

/// The most files a request for `items` (or `all`) may hold open: a file
/// for each item the server lets in at once (all of them if fewer are
/// named by exact name; the server's request window for `all` or a
/// pattern, whose items are known only later), and the request's own.
pub fn request_files(all: bool, items: &[String]) -> u64 {
    let window = u64::from(REQUEST_WINDOW);
    let open = if all || items.iter().any(|s| select::is_pattern(s)) {
        window
    } else {
        (items.len() as u64).min(window)
    };
    PER_REQUEST + PER_ITEM * open
}

/// Warns when the soft limit is below what a `get` of `items` (or
/// `all`) may hold open, with [`FD_SPARE`]: items could then fail with
/// "Too many open files".
pub fn warn_if_low(all: bool, items: &[String]) {
    let need = request_files(all, items) + FD_SPARE;
    if let Some(fds) = soft().filter(|&n| n < need) {
        tracing::warn!(
            "the open-file limit ({fds}) is below the {need} files this request may hold \
             open at once: items may fail with \"Too many open files\" (raise `ulimit -n`)"
        );
    }
}

/// The open-file limit before and after [`raise`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FdLimit {
    /// The soft limit the process started with.
    pub before: u64,
    /// The soft limit now.
    pub now: u64,
    /// The hard limit (the most `now` can be).
    pub hard: u64,
}

/// Raises the soft open-file limit (`RLIMIT_NOFILE`) to the hard limit.
/// `None` if the limits cannot be read; a limit that cannot be raised
/// stays as it was (`now == before`).
pub fn raise() -> Option<FdLimit> {
    let mut r = get()?;
    let before = r.rlim_cur;
    if r.rlim_cur < r.rlim_max {
        r.rlim_cur = r.rlim_max;
        // SAFETY: setrlimit reads the rlimit it is handed, which lives
        // for the call; RLIMIT_NOFILE is a valid resource.
        unsafe {
            libc::setrlimit(libc::RLIMIT_NOFILE, &r);
        }
    }
    let after = get()?;
    let l = FdLimit {
        before,
        now: after.rlim_cur,
        hard: after.rlim_max,
    };
    tracing::debug!(
        "open-file limit {} (was {}, hard {})",
        l.now,
        l.before,
        l.hard
    );
    Some(l)
}

fn get() -> Option<libc::rlimit> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes an rlimit into the pointer it is given,
    // which is valid for the call; RLIMIT_NOFILE is a valid resource.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } == 0;
    ok.then_some(r)
}

/// The soft open-file limit now.
pub fn soft() -> Option<u64> {
    get().map(|r| r.rlim_cur)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("f{i}")).collect()
    }

    #[test]
    fn a_request_may_hold_its_items_up_to_the_window() {
        assert_eq!(request_files(false, &names(3)), PER_REQUEST + 3 * PER_ITEM);
        let most = PER_REQUEST + u64::from(REQUEST_WINDOW) * PER_ITEM;
        assert_eq!(request_files(false, &names(5000)), most);
        // Items known only later: the window.
        assert_eq!(request_files(true, &[]), most);
        assert_eq!(request_files(false, &["d/".into()]), most);
        assert_eq!(request_files(false, &["a".into(), "*.txt".into()]), most);
    }
}
