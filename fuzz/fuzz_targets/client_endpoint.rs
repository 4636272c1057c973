//! Fuzz target: a client endpoint that asked for two items (or, as the
//! first byte picks, for a name, a pattern and a folder, which the
//! server's catalogue resolves) accepts any bytes from the request
//! connection and any datagrams on either group, in any order with time
//! passing (and its decode jobs back in any order, run or not), without
//! panicking, and never reports an item it did not ask for.
#![no_main]
use libfuzzer_sys::fuzz_target;
use repocast_core::Instant;
use repocast_core::endpoint::Channel;
use repocast_core::endpoint::client::{ClientEndpoint, ClientEndpointConfig, Event, Want};
use repocast_core::endpoint::select::selects;
use repocast_core::endpoint::store::MemoryStore;
use repocast_core::profile::Profile;

#[path = "common/mod.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let select = data.first().is_some_and(|b| b & 1 == 1);
    let want: Vec<String> = match select {
        false => vec!["a".into(), "b/c".into()],
        true => vec!["a".into(), "b/*".into(), "d/".into()],
    };
    let asked = match select {
        false => Want::Items(want.clone()),
        true => Want::Select(want.clone()),
    };
    let mut cfg = ClientEndpointConfig::new(Profile::Lan.client(), asked);
    cfg.memory_budget = 4096;
    let mut ep = ClientEndpoint::new(Instant::ZERO, cfg, MemoryStore::default());
    let mut now = Instant::ZERO;
    let mut buf = Vec::new();
    let mut rest = data;
    let mut jobs = Vec::new();
    while let Some((op, hi, bytes)) = common::next_record(&mut rest) {
        match op % 4 {
            0 => ep.handle_stream(now, bytes),
            1 => ep.handle_datagram(now, Channel::Data, bytes),
            2 => ep.handle_datagram(now, Channel::Announce, bytes),
            _ => {
                now = now + std::time::Duration::from_millis(hi as u64 * 10);
                ep.handle_timeout(now);
            }
        }
        // Decode jobs come back in any order, run, lost or not run, at
        // a step the input picks (or never).
        jobs.extend(std::iter::from_fn(|| ep.poll_decode()));
        common::return_jobs(&mut jobs, op, |j| ep.decoded(now, j));
        while ep.poll_transmit(&mut buf) {}
        while let Some(e) = ep.poll_event() {
            if let Event::Join(_) = e {
                ep.joined(now);
            }
        }
    }
    for o in ep.outcomes() {
        assert!(want.contains(&o.name) || want.iter().any(|w| selects(w, &o.name)));
    }
});
