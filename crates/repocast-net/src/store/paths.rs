//! Where an item may be written, checked before anything is: a name the
//! server sends is kept inside the output folder ([`safe_path`]), no
//! folder on its way may be a symlink or a file, and a file already at the
//! final path is kept if it holds the item's bytes and refused otherwise
//! unless the user said `--overwrite`. Part of [`super::Store`].

use super::hash_file;
use crate::repo::STATE_DIR;
use repocast_core::endpoint::store::StoreError;
use std::fs;
use std::path::{Component, Path, PathBuf};

/// Most path components an item name may have.
pub const MAX_DEPTH: usize = 64;

/// The final path of item `name` under `root`, or an error if the name
/// could leave `root` (absolute, `..`, empty parts) or touch repocast's state.
pub fn safe_path(root: &Path, name: &str) -> Result<PathBuf, StoreError> {
    let bad = |why: &'static str| StoreError::UnsafeName {
        name: name.to_string(),
        why,
    };
    if name.is_empty() || name.contains('\0') || name.contains('\\') {
        return Err(bad("empty or has NUL or backslash"));
    }
    let parts: Vec<&str> = name.split('/').collect();
    if parts.len() > MAX_DEPTH {
        return Err(bad("too deep"));
    }
    let mut p = root.to_path_buf();
    for (i, part) in parts.iter().enumerate() {
        if part.is_empty() || *part == "." || *part == ".." || part.len() > 255 {
            return Err(bad("empty, '.' or '..' component"));
        }
        if i == 0 && *part == STATE_DIR {
            return Err(bad("reserved folder"));
        }
        let comp = Path::new(part);
        if comp.components().count() != 1
            || !matches!(comp.components().next(), Some(Component::Normal(_)))
        {
            return Err(bad("not a plain component"));
        }
        p.push(part);
    }
    Ok(p)
}

/// Whether `path` is a regular file of these bytes (size, then hash).
pub(super) fn file_is(path: &Path, size: u64, hash: &[u8; 32]) -> Result<bool, StoreError> {
    match fs::symlink_metadata(path) {
        Ok(there) => holds(path, &there, size, hash),
        Err(_) => Ok(false),
    }
}

/// Whether `path`, whose metadata is `there`, is a regular file of these
/// bytes (size, then hash).
fn holds(
    path: &Path,
    there: &fs::Metadata,
    size: u64,
    hash: &[u8; 32],
) -> Result<bool, StoreError> {
    Ok(there.is_file() && there.len() == size && hash_file(path, size)? == *hash)
}

/// Whether the file at `path` is already these bytes; anything else there
/// is refused unless the user said `--overwrite`.
pub(super) fn already_in_place(
    path: &Path,
    size: u64,
    hash: &[u8; 32],
    overwrite: bool,
) -> Result<bool, StoreError> {
    let Ok(there) = fs::symlink_metadata(path) else {
        return Ok(false); // nothing there (one look: most items are new)
    };
    if holds(path, &there, size, hash)? {
        return Ok(true);
    }
    if !overwrite {
        return Err(StoreError::Exists {
            path: path.display().to_string(),
        });
    }
    Ok(false)
}

/// Refuses a path whose folders under `root` include a symlink (a server
/// naming `link/x` must not write through `link` out of the folder).
/// Whether they all exist.
pub(super) fn check_parents(root: &Path, path: &Path) -> Result<bool, StoreError> {
    let Ok(rel) = path.strip_prefix(root) else {
        return Ok(true);
    };
    let mut p = root.to_path_buf();
    let parts: Vec<_> = rel.components().collect();
    let mut all = true;
    for c in parts.iter().take(parts.len().saturating_sub(1)) {
        p.push(c);
        match fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() || !m.is_dir() => {
                return Err(StoreError::UnsafeName {
                    name: rel.display().to_string(),
                    why: "a folder on its path is a symlink or a file",
                });
            }
            Ok(_) => {}
            Err(_) => all = false,
        }
    }
    Ok(all)
}
