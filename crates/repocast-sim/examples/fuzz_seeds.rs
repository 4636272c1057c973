//! Writes starting inputs for four fuzz targets into `fuzz/corpus/`:
//! - for `server_endpoint` and `client_endpoint`, `exchange`: one real
//!   exchange between a server endpoint and a client endpoint (two items,
//!   the targets' names and sizes), recorded in each target's input format;
//! - for `server_endpoint`, `preempt`: two connections, a long send of its
//!   third item, and a NAK whose repair interrupts that send, which then
//!   resumes (random inputs hardly ever get that far);
//! - for `client_machine`, `verified`: one send of its 100-byte zero item
//!   with a source symbol lost and a repair symbol in its place, so both
//!   blocks decode, verify and assemble;
//! - for `listen_endpoint`, `pushed`: a real pusher signing with the
//!   target's pinned key, its catalogue and the data of one item the
//!   target selects, every tenth data packet lost, until the listener has
//!   verified and written it (random inputs never get past the catalogue).
//!
//!     cargo run -p repocast-sim --example fuzz_seeds

use repocast_core::Instant;
use repocast_core::endpoint::client::{ClientEndpoint, ClientEndpointConfig, Event, Want};
use repocast_core::endpoint::server::ServerEndpoint;
use repocast_core::endpoint::store::MemoryStore;
use repocast_core::endpoint::{Channel, Dest};
use repocast_core::fec::layout::Layout;
use repocast_core::profile::Profile;
use repocast_core::wire::{
    AnnounceKind, AnnounceRepr, BlockNeed, ClientMsg, DataRepr, FecParams, ItemSel, NakRepr,
};
use repocast_core::{BlockId, ItemId, SessionId, TransmissionId};
use repocast_sim::source::MemorySource;
use std::time::Duration;

/// One client-target step: kind 0 stream, 1 data, 2 announce, 3 time.
fn client_op(out: &mut Vec<u8>, kind: u8, bytes: &[u8]) {
    let n = bytes.len().min(255 * 64 + 63);
    out.push((((n % 64) as u8) << 2) | kind);
    out.push((n / 64) as u8);
    out.extend_from_slice(&bytes[..n]);
}

/// Server-target steps sending `msg`, framed, on connection `conn`.
fn server_msg(out: &mut Vec<u8>, conn: u8, msg: ClientMsg) {
    let (mut body, mut framed) = (Vec::new(), Vec::new());
    msg.emit(&mut body);
    repocast_core::wire::frame::encode_frame(&body, &mut framed);
    for chunk in framed.chunks(255) {
        out.extend([1 + 4 * conn, chunk.len() as u8]);
        out.extend_from_slice(chunk);
    }
}

/// The server target's `preempt` input: connection 0 asks for the
/// one-symbol item, connection 1 for the 313-symbol one; once the first
/// has gone out, connection 0 NAKs it while the long send is on air, and
/// time passes (39 ms a step) until both are done.
fn preempt_seed() -> Vec<u8> {
    let mut s = vec![0, 4]; // two connections
    for (conn, item) in [(0, 1), (1, 2)] {
        let hello = ClientMsg::Hello {
            name: format!("c{conn}"),
            token: None,
        };
        server_msg(&mut s, conn, hello);
        let items = vec![ItemSel::Id(ItemId(item))];
        server_msg(&mut s, conn, ClientMsg::Request { items });
    }
    s.push(39);
    let nak = NakRepr {
        transmission: TransmissionId(1),
        item: ItemId(1),
        received: 20,
        expected: 20,
        needs: vec![BlockNeed {
            block: BlockId(0),
            count: 1,
            missing: vec![],
        }],
    };
    server_msg(&mut s, 0, ClientMsg::Nak(nak));
    s.extend([39; 6]);
    // Even length: no access token (the target's odd inputs need one).
    if s.len() % 2 == 1 {
        s.push(3);
    }
    s
}

/// The `client_machine` target's `verified` input: its item (100 zero
/// bytes, 16-byte symbols, blocks of at most 4) announced and sent once,
/// datagrams separated by 0xFF, with block 0's second source symbol lost
/// and its first repair symbol sent instead (a repair symbol of zero data
/// is zeros), then the end announced and time passing.
fn client_machine_seed() -> std::io::Result<Vec<u8>> {
    let fec = FecParams {
        code: repocast_core::fec::CodeKind::RaptorQ,
        symbol_size: 16,
        max_block_symbols: 4,
    };
    let layout = Layout::new(100, &fec).map_err(std::io::Error::other)?;
    let announce = |kind| AnnounceRepr {
        session: SessionId(1),
        transmission: TransmissionId(0),
        item: ItemId(0),
        kind,
        first_block: 0,
        block_count: layout.blocks(),
        total_packets: layout.symbols() as u32,
        duration_us: 1000,
        nak_window_min_us: 5000,
        nak_window_max_us: 50_000,
    };
    let mut packets = Vec::new();
    let mut buf = Vec::new();
    announce(AnnounceKind::First).emit(&mut buf);
    packets.push(std::mem::take(&mut buf));
    let mut seq = 0;
    for block in 0..layout.blocks() {
        let k = layout.block_symbols(block);
        for symbol in (0..k)
            .filter(|&s| (block, s) != (0, 1))
            .chain((block == 0).then_some(k))
        {
            DataRepr {
                session: SessionId(1),
                transmission: TransmissionId(0),
                item: ItemId(0),
                block: BlockId(block),
                symbol,
                seq,
                probe: None,
                payload: vec![0; 16],
                tag: Vec::new(),
                encrypted: false,
            }
            .emit(&mut buf);
            packets.push(std::mem::take(&mut buf));
            seq += 1;
        }
    }
    announce(AnnounceKind::End).emit(&mut buf);
    packets.push(std::mem::take(&mut buf));
    if packets.iter().flatten().any(|&b| b == 0xFF) {
        return Err(std::io::Error::other("a datagram holds the separator"));
    }
    let mut out = packets.join(&0xFF);
    // Time passing (an empty datagram a millisecond); even length: the
    // target's whole-item check passes.
    out.extend([0xFF; 64]);
    if out.len() % 2 == 1 {
        out.push(0xFF);
    }
    Ok(out)
}

/// One `listen_endpoint` record: `action` (the target's op modulo 5)
/// with `bytes`; `None` if no op byte both names that action and carries
/// that length (the op's upper six bits are the length's low bits).
fn listen_op(out: &mut Vec<u8>, action: u8, bytes: &[u8]) -> Option<()> {
    let (lo, hi) = (bytes.len() % 64, u8::try_from(bytes.len() / 64).ok()?);
    let op = (0..4u8)
        .map(|r| ((lo as u8) << 2) | r)
        .find(|op| op % 5 == action)?;
    out.extend([op, hi]);
    out.extend_from_slice(bytes);
    Some(())
}

/// The `listen_endpoint` target's `pushed` input: a pusher keyed as the
/// target's pinned signer sends item "ab1" (selected by its "a*"; 300
/// bytes in blocks of four 18-byte symbols) and a pack of three tiny
/// files, "ab2" and "ab3" (selected) and "c4" (not), with twice their size
/// in symbols; every tenth data packet is left out and 10 ms pass between
/// steps. The name's and the symbols' lengths are such that every
/// datagram's length has an op byte ([`listen_op`]). Checked here by a
/// listener set up as the target's: it must end with the item verified.
fn listen_seed() -> std::io::Result<Vec<u8>> {
    use repocast_core::auth::Identity;
    use repocast_core::endpoint::listen::{ListenConfig, ListenEndpoint};
    use repocast_core::endpoint::push::{PushConfig, PushEndpoint, PushItem};
    let fec = FecParams {
        code: repocast_core::fec::CodeKind::RaptorQ,
        symbol_size: 18,
        max_block_symbols: 4,
    };
    let files: Vec<(&str, Vec<u8>)> = [("ab1", 300u32), ("ab2", 5), ("ab3", 7), ("c4", 8)]
        .into_iter()
        .map(|(n, len)| (n, (0..len).map(|i| (i * 7 + len) as u8).collect()))
        .collect();
    let items = (files.iter())
        .map(|(n, b)| {
            MemorySource::item_info(n, b, &fec).map(|info| PushItem {
                info,
                mode: 0o644,
                mtime: 1_700_000_000,
            })
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(std::io::Error::other)?;
    let mut source = MemorySource::new(files.iter().map(|f| f.1.clone()).collect());
    let identity = Identity::from_seed([7; 32]);
    let cfg = PushConfig::shipped(
        &fec,
        None,
        repocast_core::sched::SchedulerKind::Flat,
        1,
        200_000,
        false,
        Some(2.0),
    )
    .map_err(std::io::Error::other)?;
    let set = cfg
        .plan(items, &mut source)
        .map_err(std::io::Error::other)?;
    if set.packs.len() != 1 {
        return Err(std::io::Error::other(
            "the three tiny files are not one pack",
        ));
    }
    let mut push = PushEndpoint::new(Instant::ZERO, cfg, identity.clone(), 1, set)
        .map_err(std::io::Error::other)?;
    let mut lcfg = ListenConfig::new(Profile::Push.client());
    lcfg.trust = Some(identity.public());
    lcfg.select = vec!["a*".into()];
    lcfg.memory_budget = 1 << 16;
    let mut listener = ListenEndpoint::new(Instant::ZERO, lcfg, MemoryStore::default());
    let (mut out, mut buf, mut now, mut data) = (Vec::new(), Vec::new(), Instant::ZERO, 0);
    let unfit = |n: usize| std::io::Error::other(format!("no op byte fits a {n}-byte datagram"));
    for _ in 0..2000 {
        while let Some(d) = push.poll_transmit(now, &mut source, &mut buf) {
            let (action, ch) = match d {
                Dest::Announce => (0, Channel::Announce),
                _ => (2, Channel::Data),
            };
            if ch == Channel::Data {
                data += 1;
                if data % 10 == 0 {
                    continue;
                }
            }
            listen_op(&mut out, action, &buf).ok_or_else(|| unfit(buf.len()))?;
            listener.handle_datagram(now, ch, &buf);
            listener.decode_here(now);
        }
        while listener.poll_event().is_some() {}
        if listener.is_finished() {
            break;
        }
        // Time: 10 ms (the length byte), 65 bytes the target skips.
        now = now + Duration::from_millis(10);
        listen_op(&mut out, 4, &[0; 65]).ok_or_else(|| unfit(65))?;
        listener.handle_timeout(now);
    }
    let got: Vec<_> = (listener.outcomes().into_iter())
        .filter(|o| o.result.is_ok())
        .map(|o| o.name)
        .collect();
    if got != ["ab1", "ab2", "ab3"] {
        return Err(std::io::Error::other(format!(
            "the listener verified {got:?}, not ab1, ab2 and ab3"
        )));
    }
    Ok(out)
}

fn main() -> std::io::Result<()> {
    let mut cfg = Profile::Lan.server();
    cfg.symbol_size = 64;
    cfg.max_block_symbols = 8;
    let fec = FecParams {
        code: cfg.code,
        symbol_size: 64,
        max_block_symbols: 8,
    };
    let items = vec![
        ("a".to_string(), vec![7u8; 1000]),
        ("b/c".to_string(), vec![9u8; 10]),
    ];
    let infos = (items.iter())
        .map(|(n, b)| MemorySource::item_info(n, b, &fec))
        .collect::<Result<Vec<_>, _>>()
        .map_err(std::io::Error::other)?;
    let mut source = MemorySource::new(items.into_iter().map(|(_, b)| b).collect());
    let mut server =
        ServerEndpoint::new(cfg, Profile::Lan.limits(), infos).map_err(std::io::Error::other)?;
    let want = Want::Items(vec!["a".into(), "b/c".into()]);
    let ccfg = ClientEndpointConfig::new(Profile::Lan.client(), want);
    let mut client = ClientEndpoint::new(Instant::ZERO, ccfg, MemoryStore::default());
    let conn = server
        .accept(Instant::ZERO)
        .map_err(std::io::Error::other)?;
    let (mut to_server, mut to_client) = (vec![0u8], Vec::new());
    let mut buf = Vec::new();
    let mut now = Instant::ZERO;
    for _ in 0..200 {
        while client.poll_transmit(&mut buf) {
            server.handle_stream(now, conn, &buf);
            to_server.extend([1, buf.len().min(255) as u8]);
            to_server.extend_from_slice(&buf[..buf.len().min(255)]);
        }
        while let Some(d) = server.poll_transmit(now, &mut source, &mut buf) {
            let (kind, ch) = match d {
                Dest::Conn(_) => (0, None),
                Dest::Data => (1, Some(Channel::Data)),
                Dest::Announce => (2, Some(Channel::Announce)),
            };
            client_op(&mut to_client, kind, &buf);
            match ch {
                None => client.handle_stream(now, &buf),
                Some(ch) => {
                    client.handle_datagram(now, ch, &buf);
                    client.decode_here(now);
                }
            }
        }
        while let Some(e) = client.poll_event() {
            if let Event::Join(_) = e {
                client.joined(now);
            }
        }
        if client.is_finished() {
            break;
        }
        now = now + Duration::from_millis(1);
        to_server.push(3 | (1 << 2));
        client_op(&mut to_client, 3, &[]);
        server.handle_timeout(now);
        client.handle_timeout(now);
    }
    for (target, bytes) in [
        ("server_endpoint", to_server),
        ("client_endpoint", to_client),
    ] {
        let dir = std::path::Path::new("fuzz/corpus").join(target);
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join("exchange"), bytes)?;
    }
    let dir = std::path::Path::new("fuzz/corpus/server_endpoint");
    std::fs::write(dir.join("preempt"), preempt_seed())?;
    let dir = std::path::Path::new("fuzz/corpus/client_machine");
    std::fs::write(dir.join("verified"), client_machine_seed()?)?;
    let dir = std::path::Path::new("fuzz/corpus/listen_endpoint");
    std::fs::write(dir.join("pushed"), listen_seed()?)?;
    println!("client finished: {}", client.is_finished());
    Ok(())
}
