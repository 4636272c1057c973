//! The pusher's spool: an unnamed file in the pushed folder's state
//! directory where the core keeps repair symbols it made ahead for an item
//! too large to hold them in memory at the rate
//! ([`repocast_core::server::spool`]). The file has no name, so it goes
//! away with the process, however it ends; the core never writes past the
//! size it was given, and this refuses to.

use repocast_core::server::spool::{SpoolError, SymbolSpool};
use std::fs::File;
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;

/// A spool file of at most `limit` bytes.
pub struct FileSpool {
    file: File,
    limit: u64,
}

impl FileSpool {
    /// An unnamed spool file in `dir` (created if missing), of at most
    /// `limit` bytes.
    pub fn create(dir: &Path, limit: u64) -> io::Result<FileSpool> {
        std::fs::create_dir_all(dir)?;
        let mut o = std::fs::OpenOptions::new();
        o.read(true).write(true).mode(0o600);
        let file = match o.clone().custom_flags(libc::O_TMPFILE).open(dir) {
            Ok(f) => f,
            // Not every file system has O_TMPFILE: a named file, unlinked
            // at once.
            Err(_) => {
                let path = dir.join(format!("spool-{}", std::process::id()));
                let _ = std::fs::remove_file(&path);
                let f = o
                    .create_new(true)
                    .custom_flags(libc::O_NOFOLLOW)
                    .open(&path)?;
                std::fs::remove_file(&path)?;
                f
            }
        };
        Ok(FileSpool { file, limit })
    }

    fn check(&self, offset: u64, len: usize) -> Result<(), SpoolError> {
        match offset.checked_add(len as u64) {
            Some(end) if end <= self.limit => Ok(()),
            _ => Err(SpoolError::Io(io::Error::other(format!(
                "{len} bytes at {offset} are past the spool's {} bytes",
                self.limit
            )))),
        }
    }
}

impl SymbolSpool for FileSpool {
    fn write_at(&mut self, offset: u64, bytes: &[u8]) -> Result<(), SpoolError> {
        self.check(offset, bytes.len())?;
        Ok(self.file.write_all_at(bytes, offset)?)
    }

    fn read_at(&mut self, offset: u64, len: usize, out: &mut Vec<u8>) -> Result<(), SpoolError> {
        self.check(offset, len)?;
        let start = out.len();
        out.resize(start + len, 0);
        let read = self.file.read_exact_at(&mut out[start..], offset);
        if read.is_err() {
            out.truncate(start);
        }
        Ok(read?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spool_file_has_no_name_gives_back_what_was_written_and_keeps_its_limit() {
        let dir = tempfile::tempdir().expect("dir");
        let state = dir.path().join(".repocast");
        let mut s = FileSpool::create(&state, 1000).expect("spool");
        assert_eq!(std::fs::read_dir(&state).expect("dir").count(), 0);
        s.write_at(990, b"0123456789").expect("write");
        let mut out = vec![9];
        s.read_at(992, 3, &mut out).expect("read");
        assert_eq!(out, [9, b'2', b'3', b'4']);
        assert!(s.write_at(995, b"0123456789").is_err());
        assert!(s.read_at(998, 3, &mut out).is_err());
        assert!(s.read_at(u64::MAX, 3, &mut out).is_err());
        // Never written: a hole reads back as zeros, within the limit.
        out.clear();
        s.read_at(0, 2, &mut out).expect("read");
        assert_eq!(out, [0, 0]);
    }
}
