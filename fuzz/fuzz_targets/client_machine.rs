//! Fuzz target: a client that requested an item accepts any datagram the
//! network hands it (parsed as data or announcement) without panicking.
//! The item is 100 zero bytes and its manifest gives the real hashes of
//! its two zero blocks, so zero symbols decode, verify and assemble
//! (with any other hashes every decoded block fails its check and the
//! verified path is never reached); a whole-item check that passes or
//! fails is chosen by the input. The corpus's `verified` input (from
//! `examples/fuzz_seeds.rs`) gets there; the target asserts that a
//! block only comes out verified if it is zeros, as its hash says,
//! whether it was decoded in place or in a decode job.
#![no_main]
#[path = "common/zeros.rs"]
mod zeros;
use libfuzzer_sys::fuzz_target;
use repocast_core::client::decode::DecodeJob;
use repocast_core::client::{Client, ClientConfig, ClientEvent};
use repocast_core::fec::CodeKind;
use repocast_core::fec::layout::Layout;
use repocast_core::wire::{
    DataRepr, FecParams, ItemSel, ManifestEntry, ServerMsg, parse_announcements,
};
use repocast_core::{Instant, ItemId, TransmissionId};

fuzz_target!(|data: &[u8]| {
    // Blocks decoded in place, or (one input in two) in decode jobs that
    // come back a packet late, the later first.
    let mut c = Client::new(ClientConfig {
        decode_jobs: if data.len() % 2 == 1 { 2 } else { 0 },
        ..ClientConfig::default()
    });
    let mut jobs: Vec<DecodeJob> = Vec::new();
    c.request(Instant::ZERO, vec![ItemSel::Id(ItemId(0))]);
    let fec = FecParams {
        code: CodeKind::RaptorQ,
        symbol_size: 16,
        max_block_symbols: 4,
    };
    let size = 100;
    let Ok(layout) = Layout::new(size, &fec) else {
        return;
    };
    let block_hashes = zeros::zero_block_hashes(&layout);
    let hash = *blake3::hash(&vec![0; size as usize]).as_bytes();
    c.handle_server_msg(
        Instant::ZERO,
        ServerMsg::Manifest {
            entry: ManifestEntry {
                item: ItemId(0),
                name: "x".into(),
                size,
                hash,
                fec,
                block_hashes,
            },
            next_transmission: TransmissionId(0),
        },
    );
    let whole_ok = data.len() % 2 == 0;
    for (i, pkt) in data.split(|b| *b == 0xFF).enumerate() {
        let now = Instant::from_millis(i as u64);
        for a in parse_announcements(pkt).unwrap_or_default() {
            c.handle_announce(now, &a);
        }
        if let Ok(d) = DataRepr::parse(pkt) {
            c.handle_data(now, &d);
        }
        c.handle_timeout(now);
        for mut j in jobs.drain(..).rev() {
            j.run();
            c.decoded(j);
        }
        jobs.extend(std::iter::from_fn(|| c.poll_decode()));
        while c.poll_transmit().is_some() {}
        while let Some(e) = c.poll_event() {
            match e {
                ClientEvent::BlockVerified { data, .. } => assert!(data.iter().all(|&b| b == 0)),
                ClientEvent::ItemAssembled(item) => c.confirm_item(now, item, whole_ok),
                _ => {}
            }
        }
    }
});
