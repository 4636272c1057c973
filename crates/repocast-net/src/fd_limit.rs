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
