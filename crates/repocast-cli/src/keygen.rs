//! `repocast keygen`: a new server identity key on disk, its public key
//! printed (what clients give to `--trust`); with `--token`, a new random
//! access token printed instead (for `serve --tokens`).

use repocast_net::keys;
use std::path::PathBuf;
use std::process::ExitCode;

/// Options of `repocast keygen`.
#[derive(clap::Args, Debug)]
pub struct KeygenArgs {
    /// Where to write the secret key (FILE.pub gets the public key);
    /// never overwritten [~/.config/repocast/server.key].
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Print a new random access token instead (a line for `serve
    /// --tokens`' file, and what a client's `--token-file` holds).
    #[arg(long, conflicts_with = "out")]
    pub token: bool,
}

pub fn run(a: KeygenArgs) -> ExitCode {
    if a.token {
        return match keys::new_token() {
            Ok(t) => {
                println!("{t}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("repocast keygen: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let Some(path) = a
        .out
        .or_else(|| keys::config_dir().map(|d| d.join("server.key")))
    else {
        eprintln!("repocast keygen: no home folder: give --out FILE");
        return ExitCode::from(2);
    };
    let written = keys::generate_identity().and_then(|id| {
        keys::write_identity(&path, &id)?;
        Ok(id)
    });
    match written {
        Ok(id) => {
            println!("{}", id.public());
            eprintln!(
                "repocast keygen: secret key in {}, public key in {}",
                path.display(),
                keys::public_path(&path).display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("repocast keygen: {e}");
            ExitCode::FAILURE
        }
    }
}
