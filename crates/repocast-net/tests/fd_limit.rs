//! The open-file limit is raised to the hard limit (`fd_limit::raise`).
//! A test binary of its own: the limit is the whole process's.

use repocast_net::fd_limit::{raise, soft};

fn set_soft(n: u64) -> u64 {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit read or write the rlimit handed to
    // them, which lives for the call.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut r), 0);
        r.rlim_cur = n.min(r.rlim_max);
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &r), 0);
    }
    r.rlim_max
}

#[test]
fn the_soft_open_file_limit_is_raised_to_the_hard_one() {
    // As a shell's 1,024 would leave it, only lower.
    let hard = set_soft(256);
    let low = 256.min(hard);
    assert_eq!(soft(), Some(low));
    let l = raise().expect("the limits can be read");
    assert_eq!((l.before, l.now, l.hard), (low, hard, hard));
    assert_eq!(soft(), Some(hard));
    // Again: nothing left to raise.
    let again = raise().expect("the limits can be read");
    assert_eq!((again.before, again.now), (hard, hard));
}
