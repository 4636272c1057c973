//! Our own small state files (a folder's hash cache, the catalogue
//! versions a listener has taken, the known servers, a pusher's symbol
//! ids), each written whole: to a temporary file beside it, named by this
//! process so two processes never write the same one, then renamed over
//! it. A reader, or a crash at any point, sees the old file or the new
//! one, never part of one.

use std::path::Path;

/// Writes `bytes` to `path` whole (creating its folder if need be). A
/// temporary file left by a failed write is removed.
pub fn write_whole(path: &Path, bytes: impl AsRef<[u8]>) -> std::io::Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(".tmp{}", std::process::id()));
    let written = std::fs::write(&tmp, bytes).and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Reads `path` whole if it holds at most `max` bytes: `Ok(None)` when it
/// does not exist, an error when it is larger (nothing past `max + 1`
/// bytes is read).
pub fn read_bounded(path: &Path, max: u64) -> std::io::Result<Option<Vec<u8>>> {
    use std::io::Read;
    let mut bytes = Vec::new();
    match std::fs::File::open(path).and_then(|f| f.take(max + 1).read_to_end(&mut bytes)) {
        Ok(_) if bytes.len() as u64 > max => Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("over {max} bytes"),
        )),
        Ok(_) => Ok(Some(bytes)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_replaced_whole_and_no_temporary_file_stays() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("state").join("f");
        write_whole(&path, b"one").expect("first");
        write_whole(&path, "two, longer").expect("second");
        assert_eq!(std::fs::read(&path).expect("read"), b"two, longer");
        let names: Vec<_> = std::fs::read_dir(dir.path().join("state"))
            .expect("dir")
            .map(|e| e.expect("entry").file_name())
            .collect();
        assert_eq!(names, vec!["f"]);
        // A folder in the way: the write fails and leaves nothing behind.
        let blocked = dir.path().join("state").join("d");
        std::fs::create_dir_all(blocked.join("x")).expect("dir");
        assert!(write_whole(&blocked, b"x").is_err());
        assert_eq!(
            std::fs::read_dir(dir.path().join("state"))
                .expect("dir")
                .count(),
            2
        );
    }
}
