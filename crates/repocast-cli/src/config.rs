//! `repocast serve --config FILE`: the same settings as the flags, in TOML.
//! A flag given on the command line wins over the file.
//!
//! ```toml
//! dir = "/srv/repo"
//! rate = "1G"
//! interface = "eth0"
//! scheme = "FEC(maxloss+0.02)+R(inf)+notify"
//! scheduler = "rq"
//! code = "raptorq"
//! data_group = "239.255.47.1:4701"
//! announce_group = "239.255.47.2:4702"
//! listen = "0.0.0.0:4700"
//! metrics = "0.0.0.0:4703"
//! ttl = 1
//! symbol_size = 1280
//! ```

use crate::serve::ServeArgs;
use clap::ArgMatches;
use clap::parser::ValueSource;
use serde::Deserialize;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

/// Every key is optional; unknown keys are an error.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServeFile {
    dir: Option<PathBuf>,
    rate: Option<String>,
    interface: Option<String>,
    listen: Option<SocketAddr>,
    data_group: Option<SocketAddr>,
    announce_group: Option<SocketAddr>,
    ttl: Option<u32>,
    scheme: Option<String>,
    scheduler: Option<String>,
    code: Option<String>,
    symbol_size: Option<u16>,
    block_symbols: Option<u32>,
    metrics: Option<SocketAddr>,
    no_metrics: Option<bool>,
    source: Option<IpAddr>,
    seed: Option<u64>,
}

/// Fills `args` from the file at `path` where the flag was not given.
pub fn apply(path: &std::path::Path, args: &mut ServeArgs, m: &ArgMatches) -> Result<(), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let f: ServeFile = toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let unset = |id: &str| m.value_source(id) != Some(ValueSource::CommandLine);
    macro_rules! take {
        ($field:ident) => {
            if let Some(v) = f.$field {
                if unset(stringify!($field)) {
                    args.$field = v.into();
                }
            }
        };
    }
    take!(rate);
    take!(listen);
    take!(data_group);
    take!(announce_group);
    take!(ttl);
    take!(scheduler);
    take!(code);
    take!(symbol_size);
    take!(metrics);
    take!(no_metrics);
    take!(seed);
    if args.dir.is_none() {
        args.dir = f.dir;
    }
    if f.interface.is_some() && unset("interface") {
        args.interface = f.interface;
    }
    if f.scheme.is_some() && unset("scheme") && args_has_no_scheme_parts(m) {
        args.scheme = f.scheme;
    }
    if f.block_symbols.is_some() && unset("block_symbols") {
        args.block_symbols = f.block_symbols;
    }
    if f.source.is_some() && unset("source") {
        args.source = f.source;
    }
    Ok(())
}

/// A scheme in the file yields to --fec/--retransmit/--notify on the line.
fn args_has_no_scheme_parts(m: &ArgMatches) -> bool {
    ["fec", "retransmit", "notify"]
        .iter()
        .all(|id| m.value_source(id) != Some(ValueSource::CommandLine))
}
