//! A pusher's symbol ids kept between runs: the record of where each item
//! stood (`repocast_core::server::ResumePoint`), in the folder's state
//! directory, one per data group (two pushers of one folder to two groups
//! keep their own). `push` reads it at start, so a run going on after a
//! stop, a crash or an upgrade sends listeners still tuned in fresh ids of
//! the files they were in the middle of, and writes it every
//! [`SAVE_EVERY`] and when it stops (`crate::state_file`). The record comes from a folder we do
//! not own: read at most [`MAX_RECORD`] bytes of it, checked by the core,
//! and a damaged or missing one means starting from id 0, as before.

use crate::repo::STATE_DIR;
use repocast_core::server::ResumePoint;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How often a running pusher writes its record (a crash loses at most
/// this much: listeners are sent that span's ids again).
pub const SAVE_EVERY: Duration = Duration::from_secs(1);
/// The largest record read (a million items of a few blocks).
pub const MAX_RECORD: u64 = 64 << 20;

/// Where the pusher of `dir` to `group` keeps its record.
pub fn record_path(dir: &Path, group: &SocketAddr) -> PathBuf {
    let g = group.to_string().replace([':', '[', ']'], "_");
    dir.join(STATE_DIR).join(format!("push-ids-{g}"))
}

/// The record at `path`, if there is a sound one (a missing, oversized or
/// damaged one is logged and read as none).
pub fn load(path: &Path) -> Vec<ResumePoint> {
    let bytes = match crate::state_file::read_bounded(path, MAX_RECORD) {
        Ok(Some(b)) => b,
        Ok(None) => return Vec::new(),
        Err(e) => {
            tracing::warn!("{}: {e}; starting from id 0", path.display());
            return Vec::new();
        }
    };
    ResumePoint::decode_all(&bytes).unwrap_or_else(|e| {
        tracing::warn!("{}: {e}; starting from id 0", path.display());
        Vec::new()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use repocast_core::fec::CodeKind;
    use repocast_core::wire::FecParams;

    fn point() -> ResumePoint {
        ResumePoint {
            hash: [9; 32],
            size: 5 << 20,
            fec: FecParams {
                code: CodeKind::RaptorQ,
                symbol_size: 1440,
                max_block_symbols: 1000,
            },
            next_ids: vec![1200, 1201, 1199, 1200],
        }
    }

    #[test]
    fn a_record_saved_is_loaded_and_a_bad_one_is_none() {
        let dir = tempfile::tempdir().expect("tempdir");
        let group: SocketAddr = "239.255.47.11:4711".parse().expect("group");
        let path = record_path(dir.path(), &group);
        assert!(load(&path).is_empty(), "no record yet");
        crate::state_file::write_whole(&path, ResumePoint::encode_all(&[point()])).expect("save");
        assert_eq!(load(&path), vec![point()]);
        // Another group keeps its own.
        let other: SocketAddr = "[ff15::1]:4711".parse().expect("group");
        assert_ne!(record_path(dir.path(), &other), path);
        assert!(load(&record_path(dir.path(), &other)).is_empty());
        // Damaged: read as none, no panic.
        let mut bytes = ResumePoint::encode_all(&[point()]);
        bytes.truncate(bytes.len() - 3);
        std::fs::write(&path, &bytes).expect("write");
        assert!(load(&path).is_empty());
        std::fs::write(&path, b"not a record").expect("write");
        assert!(load(&path).is_empty());
    }
}
