//! The host receiver's open files, shared out among the requests it runs.
//!
//! Every request a shared receiver runs holds files open in the one
//! process: a partial file for each of its items the server has let in
//! (its request window, `repocast_core::profile::REQUEST_WINDOW`, 256),
//! a journal beside each item of several blocks, and its TLS connection
//! and local socket. Eight `get`s of 2,000 small files each made one
//! receiver hold up to 854 files at once (session 63); under an
//! open-file limit of 300 a run failed items with "Too many open files"
//! (session 64). A `get` on its own has a limit of its own.
//!
//! So the receiver takes a request only while what the requests it runs
//! may hold fits its limit: each reserves, when it asks, the most files
//! it may hold ([`crate::fd_limit::request_files`]), and gives them back
//! when it ends ([`Lease`]). A request that does not fit is refused, and
//! its `get` receives on its own, in a process of its own (the `Refused`
//! answer, see [`super`]): more CPU on a busy host, instead of items
//! failed for want of the receiver's descriptors. The first request is
//! always taken, as it would have the same limit alone.

use crate::fd_limit::FD_SPARE;
use std::sync::{Arc, Mutex, PoisonError};

#[derive(Debug)]
struct Shares {
    total: u64,
    taken: u64,
    refused: u64,
}

/// What the requests may hold between them, shared by the tasks that
/// take requests.
#[derive(Debug, Clone)]
pub struct FileBudget(Arc<Mutex<Shares>>);

impl FileBudget {
    /// A budget of `total` files.
    pub fn new(total: u64) -> Self {
        FileBudget(Arc::new(Mutex::new(Shares {
            total,
            taken: 0,
            refused: 0,
        })))
    }

    /// The budget the process's soft open-file limit leaves, less
    /// [`FD_SPARE`] (unbounded if the limit cannot be read).
    pub fn from_limit() -> Self {
        let soft = crate::fd_limit::soft().unwrap_or(u64::MAX);
        Self::new(soft.saturating_sub(FD_SPARE))
    }

    /// Reserves `files` for a request: `None` if they do not fit beside
    /// those taken (a request when none is running always fits).
    pub fn take(&self, files: u64) -> Option<Lease> {
        let mut s = self.lock();
        let fits = s.taken == 0 || s.taken.saturating_add(files) <= s.total;
        if !fits {
            s.refused += 1;
            return None;
        }
        s.taken = s.taken.saturating_add(files);
        Some(Lease {
            budget: self.clone(),
            files,
        })
    }

    /// Files reserved now, and requests refused so far.
    pub fn counts(&self) -> (u64, u64) {
        let s = self.lock();
        (s.taken, s.refused)
    }

    /// The budget's size.
    pub fn total(&self) -> u64 {
        self.lock().total
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Shares> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A request's reservation, given back when dropped.
#[derive(Debug)]
pub struct Lease {
    budget: FileBudget,
    files: u64,
}

impl Drop for Lease {
    fn drop(&mut self) {
        let mut s = self.budget.lock();
        s.taken = s.taken.saturating_sub(self.files);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_taken_while_they_fit_and_leases_give_back() {
        let b = FileBudget::new(100);
        let first = b.take(60).expect("the first always fits");
        let second = b.take(40).expect("exactly fits");
        assert!(b.take(1).is_none());
        assert_eq!(b.counts(), (100, 1));
        drop(second);
        assert_eq!(b.counts(), (60, 1));
        let third = b.take(30).expect("fits again");
        drop(first);
        drop(third);
        assert_eq!(b.counts(), (0, 1));
    }

    #[test]
    fn the_first_request_is_taken_even_past_the_budget() {
        let b = FileBudget::new(10);
        let big = b.take(500).expect("alone it would have the same limit");
        assert!(b.take(1).is_none(), "nothing beside it");
        drop(big);
        assert!(b.take(5).is_some());
    }
}
