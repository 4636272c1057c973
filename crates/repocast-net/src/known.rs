//! The known-servers file: which key each server address presented the
//! first time (trust on first use, as SSH's `known_hosts`). One line per
//! server: `ADDRESS ed25519:HEX`. Written whole (`crate::state_file`), so
//! concurrent `get`s never leave it half-written.

use crate::NetError;
use repocast_core::auth::PublicKey;
use std::net::SocketAddr;
use std::path::Path;

/// Largest known-servers file read (a hostile or broken file cannot make
/// a client read without bound).
const MAX_FILE: u64 = 4 << 20;

fn read(path: &Path) -> Result<Vec<(String, String)>, NetError> {
    let io = |e| NetError::file(path, e);
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io(e)),
        Ok(m) if m.len() > MAX_FILE => {
            return Err(NetError::Key(format!(
                "{} is over {MAX_FILE} bytes",
                path.display()
            )));
        }
        Ok(_) => {}
    }
    let text = std::fs::read_to_string(path).map_err(io)?;
    Ok(text
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            Some((f.next()?.to_owned(), f.next()?.to_owned()))
        })
        .collect())
}

/// The key recorded for `server`, if any.
pub fn lookup(path: &Path, server: SocketAddr) -> Result<Option<PublicKey>, NetError> {
    let want = server.to_string();
    match read(path)?.into_iter().find(|(a, _)| *a == want) {
        None => Ok(None),
        Some((_, k)) => k
            .parse()
            .map(Some)
            .map_err(|e| NetError::Key(format!("{}: entry for {want}: {e}", path.display()))),
    }
}

/// Records `key` for `server` (replacing nothing: a changed key is refused
/// before this is called).
pub fn record(path: &Path, server: SocketAddr, key: &PublicKey) -> Result<(), NetError> {
    let io = |e| NetError::file(path, e);
    let mut entries = read(path)?;
    let addr = server.to_string();
    if entries.iter().any(|(a, _)| *a == addr) {
        return Ok(());
    }
    entries.push((addr, key.to_string()));
    let mut text = String::from("# repocast known servers: address and key, one per line\n");
    for (a, k) in entries {
        text.push_str(&format!("{a} {k}\n"));
    }
    crate::state_file::write_whole(path, text).map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;
    use repocast_core::auth::Identity;

    #[test]
    fn records_once_and_finds_by_address() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("sub/known_servers");
        let a: SocketAddr = "10.0.0.1:4700".parse().expect("addr");
        let b: SocketAddr = "[::1]:4700".parse().expect("addr");
        let (ka, kb) = (
            Identity::from_seed([1; 32]).public(),
            Identity::from_seed([2; 32]).public(),
        );
        assert_eq!(lookup(&path, a).expect("empty"), None);
        record(&path, a, &ka).expect("record");
        record(&path, b, &kb).expect("record");
        record(&path, a, &kb).expect("kept");
        assert_eq!(lookup(&path, a).expect("a"), Some(ka));
        assert_eq!(lookup(&path, b).expect("b"), Some(kb));
        std::fs::write(&path, "10.0.0.1:4700 ed25519:nothex\n").expect("write");
        assert!(
            lookup(&path, a).is_err(),
            "a broken entry is an error, not trust"
        );
    }
}
