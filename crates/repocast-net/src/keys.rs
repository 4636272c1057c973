//! Key files: the server's identity on disk (`repocast keygen`, `serve
//! --key`), public keys given to `--trust` as text or as a `.pub` file,
//! access tokens (`serve --tokens`, `get --token-file`), and fresh
//! randomness for identities, session keys and tokens (the operating
//! system's, drawn here so the core stays free of it).

use crate::NetError;
use repocast_core::auth::{Identity, PublicKey, SessionKey};
use repocast_core::hex;
use std::io::Write;
use std::path::{Path, PathBuf};

/// How a secret key file starts.
const SECRET_PREFIX: &str = "repocast-ed25519-secret:";

fn random32() -> Result<[u8; 32], NetError> {
    let mut b = [0u8; 32];
    getrandom::fill(&mut b).map_err(|e| NetError::Key(format!("no randomness: {e}")))?;
    Ok(b)
}

/// A new random identity.
pub fn generate_identity() -> Result<Identity, NetError> {
    random32().map(Identity::from_seed)
}

/// A new random session key.
pub fn session_key() -> Result<SessionKey, NetError> {
    random32().map(SessionKey::from_bytes)
}

/// Fewest characters an access token may have.
pub const MIN_TOKEN_LEN: usize = 16;

/// A new random access token (32 hex digits: 128 bits).
pub fn new_token() -> Result<String, NetError> {
    random32().map(|b| hex::encode(&b[..16]))
}

/// The access tokens a server accepts, as the core keeps them (hashes):
/// one per line of `path`, `LABEL TOKEN` or just `TOKEN` (the label is the
/// operator's note); blank lines and `#` comments are skipped. A token
/// shorter than [`MIN_TOKEN_LEN`], or a file with none, is an error.
pub fn read_token_hashes(path: &Path) -> Result<Vec<[u8; 32]>, NetError> {
    let hashes = read_token_list(path)?;
    if hashes.is_empty() {
        return Err(NetError::Key(format!("{}: no tokens", path.display())));
    }
    Ok(hashes)
}

/// As [`read_token_hashes`], but a file with no tokens is an empty list
/// (a running server re-reading it then admits nobody).
pub fn read_token_list(path: &Path) -> Result<Vec<[u8; 32]>, NetError> {
    let mut hashes = Vec::new();
    for (n, line) in token_lines(path)? {
        let token = line.split_whitespace().last().unwrap_or_default();
        if token.len() < MIN_TOKEN_LEN {
            return Err(NetError::Key(format!(
                "{} line {}: a token must have at least {MIN_TOKEN_LEN} characters",
                path.display(),
                n + 1
            )));
        }
        hashes.push(repocast_core::auth::token_hash(token));
    }
    Ok(hashes)
}

/// A client's access token from `path` (its first line that is not blank
/// or a comment).
pub fn read_token(path: &Path) -> Result<String, NetError> {
    (token_lines(path)?.into_iter().next())
        .map(|(_, line)| line)
        .ok_or_else(|| NetError::Key(format!("{}: no token", path.display())))
}

/// The lines of a token file that are neither blank nor `#` comments,
/// trimmed, with their index (from 0).
fn token_lines(path: &Path) -> Result<Vec<(usize, String)>, NetError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| NetError::Key(format!("{}: {e}", path.display())))?;
    Ok((text.lines().map(str::trim).enumerate())
        .filter(|(_, l)| !l.is_empty() && !l.starts_with('#'))
        .map(|(n, l)| (n, l.to_owned()))
        .collect())
}

/// Where the public half of the key at `path` is written.
pub fn public_path(path: &Path) -> PathBuf {
    let mut p = path.as_os_str().to_owned();
    p.push(".pub");
    PathBuf::from(p)
}

/// Writes `id` to `path` (created new, owner-only) and its public key to
/// `path.pub`.
pub fn write_identity(path: &Path, id: &Identity) -> Result<(), NetError> {
    let io = |e| NetError::file(path, e);
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
    let mut f = opts.open(path).map_err(io)?;
    writeln!(f, "{SECRET_PREFIX}{}", hex::encode(&id.seed())).map_err(io)?;
    f.sync_all().map_err(io)?;
    let pubp = public_path(path);
    std::fs::write(&pubp, format!("{}\n", id.public())).map_err(|e| NetError::file(&pubp, e))
}

/// Reads the identity at `path`.
pub fn read_identity(path: &Path) -> Result<Identity, NetError> {
    let text = std::fs::read_to_string(path).map_err(|e| NetError::file(path, e))?;
    let seed = text
        .trim()
        .strip_prefix(SECRET_PREFIX)
        .and_then(hex::decode32)
        .ok_or_else(|| NetError::Key(format!("{} is not a repocast key", path.display())))?;
    #[cfg(unix)]
    if let Ok(m) = std::fs::metadata(path) {
        use std::os::unix::fs::PermissionsExt;
        if m.permissions().mode() & 0o077 != 0 {
            tracing::warn!(
                "{}: the secret key can be read by others (chmod 600 it)",
                path.display()
            );
        }
    }
    Ok(Identity::from_seed(seed))
}

/// The identity at `path`, created (and its public key reported) if
/// there is none yet.
pub fn load_or_create(path: &Path) -> Result<Identity, NetError> {
    if path.exists() {
        return read_identity(path);
    }
    let id = generate_identity()?;
    write_identity(path, &id)?;
    tracing::warn!(
        "created the server key {} (public key {})",
        path.display(),
        id.public()
    );
    Ok(id)
}

/// A public key given as text (`ed25519:...`) or as a file holding one
/// (a `.pub` written by `repocast keygen`).
pub fn parse_trust(arg: &str) -> Result<PublicKey, NetError> {
    if let Ok(k) = arg.parse() {
        return Ok(k);
    }
    let text = std::fs::read_to_string(arg).map_err(|e| {
        NetError::Key(format!(
            "{arg} is neither a public key (ed25519:...) nor a readable key file: {e}"
        ))
    })?;
    text.trim()
        .parse()
        .map_err(|e| NetError::Key(format!("{arg}: {e}")))
}

/// The user's repocast folder: `$XDG_CONFIG_HOME/repocast` or
/// `~/.config/repocast`.
pub fn config_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some(base.join("repocast"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identities_round_trip_through_files_and_trust_takes_both_forms() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("k/server.key");
        let id = load_or_create(&path).expect("create");
        assert_eq!(read_identity(&path).expect("read").public(), id.public());
        assert_eq!(load_or_create(&path).expect("load").public(), id.public());
        assert!(
            write_identity(&path, &id).is_err(),
            "never overwrites a key"
        );
        let pubp = public_path(&path);
        assert_eq!(
            parse_trust(pubp.to_str().expect("utf8")).ok(),
            Some(id.public())
        );
        assert_eq!(
            parse_trust(&id.public().to_string()).ok(),
            Some(id.public())
        );
        assert!(parse_trust("ed25519:00").is_err());
        std::fs::write(&path, "junk").expect("write");
        assert!(matches!(read_identity(&path), Err(NetError::Key(_))));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let other = dir.path().join("other.key");
            write_identity(&other, &id).expect("write");
            let mode = std::fs::metadata(&other)
                .expect("meta")
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }
}
