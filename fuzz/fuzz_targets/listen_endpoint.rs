//! Fuzz target: a push listener pinned to a key accepts any datagrams on
//! either group, including catalogue pieces and repair pieces of any
//! content that the pinned key signed (so the piece parser, the coded
//! catalogue's decoder and the assembly are reached,
//! not only the signature check) and symbol batches it signed, in any
//! order with time passing (and its decode jobs back in any order, run
//! or not, and its packs' cuts back late, run or not), without
//! panicking, never reports an item outside its selection, and reports
//! an item verified only with its file in the store at its size.
#![no_main]
use libfuzzer_sys::fuzz_target;
use repocast_core::Instant;
use repocast_core::auth::{self, Identity};
use repocast_core::endpoint::Channel;
use repocast_core::endpoint::listen::{ListenConfig, ListenEndpoint};
use repocast_core::endpoint::select::glob_match;
use repocast_core::endpoint::store::MemoryStore;
use repocast_core::profile::Profile;
use repocast_core::wire::{MAGIC, VERSION, kind};

#[path = "common/mod.rs"]
mod common;

/// A common header of `kind` as this build writes it.
fn header(kind: u8) -> Vec<u8> {
    vec![MAGIC[0], MAGIC[1], VERSION, kind]
}

fuzz_target!(|data: &[u8]| {
    let id = Identity::from_seed([7; 32]);
    let mut cfg = ListenConfig::new(Profile::Push.client());
    cfg.trust = Some(id.public());
    cfg.select = vec!["a*".into()];
    cfg.memory_budget = 1 << 16;
    let mut store = MemoryStore::default();
    store.unpack_as_jobs = true;
    let mut ep = ListenEndpoint::new(Instant::ZERO, cfg, store);
    let mut now = Instant::ZERO;
    let mut rest = data;
    let (mut jobs, mut cuts) = (Vec::new(), Vec::new());
    while let Some((op, hi, bytes)) = common::next_record(&mut rest) {
        match op % 5 {
            0 => ep.handle_datagram(now, Channel::Announce, bytes),
            1 => {
                // A piece (or, by the op's high bits, a coded catalogue's
                // repair piece) whose signer field is the pinned key, signed.
                let k = if hi & 1 == 0 {
                    kind::CATALOGUE_PIECE
                } else {
                    kind::CATALOGUE_REPAIR
                };
                let mut b = header(k);
                b.extend_from_slice(&id.public().to_bytes());
                b.extend_from_slice(bytes);
                auth::sign_catalogue(&id, &mut b);
                ep.handle_datagram(now, Channel::Announce, &b);
            }
            2 => ep.handle_datagram(now, Channel::Data, bytes),
            3 => {
                // A symbol batch signed by the pinned key.
                let mut b = header(kind::SYMBOL_BATCH);
                b.extend_from_slice(bytes);
                auth::sign_batch(&id, &mut b);
                ep.handle_datagram(now, Channel::Data, &b);
            }
            _ => {
                now = now + std::time::Duration::from_millis(hi as u64 * 10);
                ep.handle_timeout(now);
            }
        }
        // Decode jobs come back in any order, run, lost or not run, at
        // a step the input picks (or never).
        jobs.extend(std::iter::from_fn(|| ep.poll_decode()));
        common::return_jobs(&mut jobs, op, |j| ep.decoded(now, j));
        cuts.extend(ep.poll_unpack());
        common::return_jobs(&mut cuts, op ^ 0x10, |j| ep.unpacked(now, j));
        while ep.poll_event().is_some() {}
    }
    let outcomes = ep.outcomes();
    let mut store = ep.into_store();
    if let Some(s) = store.as_mut() {
        s.land();
    }
    for o in outcomes {
        assert!(glob_match("a*", &o.name));
        if o.result.is_ok() {
            let file = store.as_ref().and_then(|s| s.file(&o.name));
            assert_eq!(file.map(|f| f.len() as u64), Some(o.size), "{}", o.name);
        }
    }
});
