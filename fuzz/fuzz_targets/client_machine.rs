//! Fuzz target: a client that requested items accepts any datagram the
//! network hands it (parsed as data or announcement) without panicking.
#![no_main]
use libfuzzer_sys::fuzz_target;
use repocast_core::client::{Client, ClientConfig};
use repocast_core::fec::CodeKind;
use repocast_core::wire::{AnnounceRepr, DataRepr, FecParams, ItemSel, ManifestEntry, ServerMsg};
use repocast_core::{Instant, ItemId, TransmissionId};

fuzz_target!(|data: &[u8]| {
    let mut c = Client::new(ClientConfig::default());
    c.request(Instant::ZERO, vec![ItemSel::Id(ItemId(0))]);
    let fec = FecParams { code: CodeKind::RaptorQ, symbol_size: 16, max_block_symbols: 4 };
    c.handle_server_msg(
        Instant::ZERO,
        ServerMsg::Manifest {
            entry: ManifestEntry { item: ItemId(0), name: "x".into(), size: 100, hash: [0; 32], fec, block_hashes: vec![[0; 32]; 2] },
            next_transmission: TransmissionId(0),
        },
    );
    for (i, pkt) in data.split(|b| *b == 0xFF).enumerate() {
        let now = Instant::from_millis(i as u64);
        if let Ok(a) = AnnounceRepr::parse(pkt) {
            c.handle_announce(now, &a);
        }
        if let Ok(d) = DataRepr::parse(pkt) {
            c.handle_data(now, &d);
        }
        c.handle_timeout(now);
        while c.poll_transmit().is_some() {}
        while c.poll_event().is_some() {}
    }
});
