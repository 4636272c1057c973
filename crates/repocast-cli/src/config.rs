//! `repocast serve --config FILE`: the same settings as the flags, in TOML,
//! read straight into [`ServeOptions`](repocast_net::server::ServeOptions) (unknown keys are an error). A flag
//! given on the command line wins over the file.
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
//! metrics = "127.0.0.1:4703"   # or "off"
//! ttl = 1
//! symbol_size = 1420          # default: fill the data link's MTU
//! block_symbols = 1000
//! encrypt = false
//! sign_symbols = false
//! sign_copies = 3
//! batch_hold_ms = 4000         # the batching hold's cap; 0: off
//! batch_hold_after_ms = 4000   # ...once busy this long; 0: always
//! batch_hold_idle = false      # true: the link may idle for it
//! ```

//! `repocast push --config FILE` reads the same way into `PushOptions`
//! (keys: dir, rate, interface, data_group, announce_group, ttl,
//! scheduler = "mad" | "flat", popularity, redundancy, pass_loss, code, symbol_size,
//! block_symbols, key, metrics, seed, watch, sign_symbols, sign_copies,
//! spool_mib).

/// Reads the settings file at `path`.
pub fn load<T: serde::de::DeserializeOwned>(path: &std::path::Path) -> Result<T, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    toml::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}
