//! End to end on loopback multicast: a real server and real clients, with
//! emulated loss, overlapping requests, an empty file and one-symbol
//! plus/minus one byte files; every file must arrive byte-identical.

mod common;

use common::*;
use repocast_net::client;
use repocast_net::server;
use repocast_net::tls::Trust;
use std::net::Ipv4Addr;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lossy_clients_with_overlapping_requests_get_identical_files() {
    let repo = tempfile::tempdir().expect("tmp");
    let files = [
        ("empty", 0),
        ("one-minus", 1279),
        ("one", 1280),
        ("one-plus", 1281),
        ("dir/big.bin", 3_000_000),
        ("dir/sub/mid.bin", 400_000),
        ("small.txt", 5_000),
    ];
    write_repo(repo.path(), &files, 1);
    let srv = start(repo.path(), "FEC(maxloss+0.02)+R(inf)", |_| {}).await;
    let wants: [(&[&str], f64); 3] = [
        (&["empty", "one-minus", "dir/big.bin", "small.txt"], 0.0),
        (&["one", "one-plus", "dir/big.bin", "dir/sub/mid.bin"], 0.2),
        (
            &[
                "empty",
                "one",
                "dir/sub/mid.bin",
                "small.txt",
                "dir/big.bin",
            ],
            0.5,
        ),
    ];
    let outs: Vec<_> = (0..3).map(|_| tempfile::tempdir().expect("tmp")).collect();
    let mut tasks = Vec::new();
    for (i, (items, loss)) in wants.iter().enumerate() {
        let o = get_opts(&srv, outs[i].path(), items, *loss, i as u64 + 1);
        tasks.push(tokio::spawn(client::get(o, None)));
    }
    for (i, t) in tasks.into_iter().enumerate() {
        let rep = t.await.expect("join").expect("get");
        assert!(rep.all_ok(), "client {i}: {:?}", rep.items);
        for name in wants[i].0 {
            assert!(
                same(&repo.path().join(name), &outs[i].path().join(name)),
                "client {i} {name}"
            );
        }
        if wants[i].1 > 0.0 {
            assert!(rep.emulated_losses > 0);
        }
        // Nothing unverified is left behind.
        let partial = outs[i].path().join(".repocast/partial");
        assert_eq!(std::fs::read_dir(partial).expect("dir").count(), 0);
    }
    // Every client reported every item done, its last one included (it
    // sends its final reports before leaving: it used to drop the last).
    let requested: usize = wants.iter().map(|w| w.0.len()).sum();
    eventually(async || srv.snapshot().stats.items_done >= requested as u64).await;
    let snap = srv.snapshot();
    let stats = srv.stop().await.expect("stop");
    assert!(stats.data_packets > 0 && stats.naks > 0, "{stats:?}");
    assert_eq!(snap.items, files.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_items_fail_with_a_reason_and_ls_lists_the_catalogue() {
    let repo = seeded_repo(&[("a", 10), ("b/c", 20)], 2);
    let srv = start(repo.path(), "FEC(0)+R(0)", |_| {}).await;
    let cat = client::list(srv.request_addr, &Trust::Key(srv.key), None)
        .await
        .expect("ls");
    let names: Vec<_> = cat.iter().map(|e| (e.name.as_str(), e.size)).collect();
    assert_eq!(names, vec![("a", 10), ("b/c", 20)]);
    let out = tempfile::tempdir().expect("tmp");
    let rep = client::get(get_opts(&srv, out.path(), &["a", "nope"], 0.0, 1), None)
        .await
        .expect("get");
    assert!(!rep.all_ok());
    assert!(rep.items.iter().any(|o| o.name == "a" && o.result.is_ok()));
    assert!(
        rep.items
            .iter()
            .any(|o| o.name == "nope"
                && o.result.as_ref().is_err_and(|e| e.contains("no such item")))
    );
    assert!(!out.path().join("nope").exists());
    srv.stop().await.expect("stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_joiner_completes_with_and_without_notify() {
    for scheme in ["FEC(0.02R)+R(0)+notify", "FEC(0.02R)+R(0)"] {
        let repo = seeded_repo(&[("big", 4_000_000)], 3);
        let srv = start(repo.path(), scheme, |o| o.rate_bps = 50_000_000).await; // 4 MB take about 0.7 s
        let (a_out, b_out) = (
            tempfile::tempdir().expect("tmp"),
            tempfile::tempdir().expect("tmp"),
        );
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let a = tokio::spawn(client::get(
            get_opts(&srv, a_out.path(), &["big"], 0.0, 1),
            Some(tx),
        ));
        // B asks once A holds part of the file: mid-transmission.
        wait_for_bytes(&mut rx).await;
        let b = tokio::spawn(client::get(
            get_opts(&srv, b_out.path(), &["big"], 0.0, 2),
            None,
        ));
        for (t, out) in [(a, &a_out), (b, &b_out)] {
            let rep = t.await.expect("join").expect("get");
            assert!(rep.all_ok(), "{scheme}: {:?}", rep.items);
            assert!(
                same(&repo.path().join("big"), &out.path().join("big")),
                "{scheme}"
            );
        }
        srv.stop().await.expect("stop");
    }
}

/// The blocks of a `size`-byte item as `serve` lays them out by default.
fn served_layout(size: u64) -> repocast_core::fec::layout::Layout {
    let code = repocast_core::fec::CodeKind::RaptorQ;
    let fec = repocast_core::wire::FecParams {
        code,
        symbol_size: served_symbol_size() as u16,
        max_block_symbols: code.default_block_symbols(),
    };
    repocast_core::fec::layout::Layout::new(size, &fec).expect("layout")
}

/// A `get` of `names` into `out`, killed (aborted: nothing is cleaned up,
/// as with kill -9) once it has written a few verified blocks. Returns
/// once the server has dropped it and has nothing queued, so what the
/// server sends from then on is for whoever comes next (on a loaded
/// machine the server may see the connection close a while after).
async fn get_killed_midway(srv: &server::ServerHandle, out: &std::path::Path, names: &[&str]) {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let first = tokio::spawn(client::get(get_opts(srv, out, names, 0.0, 1), Some(tx)));
    for _ in 0..3 {
        wait_for_bytes(&mut rx).await;
    }
    first.abort();
    let _ = first.await;
    eventually(async || {
        let s = srv.snapshot();
        s.clients.is_empty() && s.queue == 0
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_client_resumes_without_receiving_verified_blocks_again() {
    let repo = seeded_repo(&[("big", 12_000_000), ("small", 1000)], 4);
    let srv = start(repo.path(), "FEC(0.01R)+R(0)", |o| o.rate_bps = 40_000_000).await; // 12 MB take about 2.5 s
    let out = tempfile::tempdir().expect("tmp");
    // Killed once it has written a few verified blocks of the 10 in "big".
    get_killed_midway(&srv, out.path(), &["big", "small"]).await;
    assert!(
        !out.path().join("big").exists(),
        "no unverified byte at the final path"
    );
    let sent_before = srv.snapshot().stats.data_packets;
    let rep = client::get(get_opts(&srv, out.path(), &["big", "small"], 0.0, 2), None)
        .await
        .expect("get");
    assert!(rep.all_ok(), "{:?}", rep.items);
    assert!(rep.resumed_blocks > 0, "the journal was used");
    // The rerun told the server what it held: only the rest was sent.
    let snap = srv.snapshot();
    assert!(snap.stats.resumed_requests >= 1, "{:?}", snap.stats);
    let layout = served_layout(12_000_000);
    let smallest = layout.block_symbols(layout.blocks() - 1) as u64;
    let sent = snap.stats.data_packets - sent_before;
    // (One resumed block may be "small", held whole.)
    let most = (layout.symbols() - rep.resumed_blocks.saturating_sub(1) * smallest) * 102 / 100 + 2;
    assert!(
        sent <= most,
        "sent {sent} packets with {} of {} blocks held (at most {most})",
        rep.resumed_blocks,
        layout.blocks()
    );
    assert_delivered(repo.path(), out.path(), &["big"]);
    // A third run finds everything verified in place and receives nothing.
    let again = client::get(get_opts(&srv, out.path(), &["big", "small"], 0.0, 3), None)
        .await
        .expect("get");
    assert!(again.all_ok());
    assert_eq!(again.stats.useful, 0);
    srv.stop().await.expect("stop");
}

/// A block the journal names but whose bytes never reached the disk (the
/// store does not wait for the disk; a power loss can leave this): the
/// rerun tells the server it holds the listed blocks, finds that one wrong
/// when it opens the item, and still ends with the file verified.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_journalled_block_lost_to_a_crash_is_received_again() {
    use std::os::unix::fs::FileExt;
    let repo = seeded_repo(&[("big", 12_000_000)], 6);
    let srv = start(repo.path(), "FEC(0.01R)+R(0)", |o| {
        o.rate_bps = 40_000_000;
    })
    .await;
    let out = tempfile::tempdir().expect("tmp");
    get_killed_midway(&srv, out.path(), &["big"]).await;
    // Zero the first block the journal lists, in the partial file.
    let partial = out.path().join(".repocast/partial");
    let find = |ext: &str| {
        std::fs::read_dir(&partial)
            .expect("partial dir")
            .flatten()
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|x| x == ext))
            .expect(ext)
    };
    let journal = std::fs::read(find("journal")).expect("journal");
    let listed = u32::from_le_bytes(journal[40..44].try_into().expect("an entry"));
    let layout = served_layout(12_000_000);
    let zeros = vec![0u8; layout.block_len(listed) as usize];
    std::fs::OpenOptions::new()
        .write(true)
        .open(find("part"))
        .expect("part")
        .write_all_at(&zeros, layout.block_offset(listed))
        .expect("zeroed");
    let rep = tokio::time::timeout(
        std::time::Duration::from_secs(30),
        client::get(get_opts(&srv, out.path(), &["big"], 0.0, 2), None),
    )
    .await
    .expect("ends")
    .expect("get");
    assert!(rep.all_ok(), "{:?}", rep.items);
    // It said it held every listed block, kept all but the zeroed one, and
    // asked for that one when the transmission passed it by.
    let listed: std::collections::BTreeSet<_> = journal[40..].chunks_exact(4).collect();
    assert_eq!(rep.resumed_blocks, listed.len() as u64 - 1);
    let stats = srv.snapshot().stats;
    assert!(stats.resumed_requests >= 1 && stats.naks >= 1, "{stats:?}");
    assert_delivered(repo.path(), out.path(), &["big"]);
    srv.stop().await.expect("stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn junk_and_foreign_packets_are_counted_and_ignored() {
    use repocast_core::wire::{ClientMsg, DataRepr};
    use repocast_core::{BlockId, ItemId, SessionId, TransmissionId};
    let repo = seeded_repo(&[("f", 2_000_000)], 5);
    let o = serve_opts(repo.path(), "FEC(0.05)+R(inf)");
    let (data, ann) = (o.data_group, o.announce_group);
    let srv = server::start(o).await.expect("serve");
    // A junk sender on both groups, and a forged data packet of another
    // session naming the same item.
    let junk = tokio::spawn(async move {
        let s = tokio::net::UdpSocket::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let mut forged = Vec::new();
        DataRepr {
            session: SessionId(12345),
            transmission: TransmissionId(1),
            item: ItemId(0),
            block: BlockId(0),
            symbol: 0,
            seq: 0,
            probe: None,
            payload: vec![0xEE; 1280],
            tag: vec![],
            encrypted: false,
        }
        .emit(&mut forged);
        for i in 0..400u32 {
            let _ = s.send_to(&i.to_be_bytes(), data).await;
            let _ = s.send_to(b"RC\x01\x02garbage", ann).await;
            let _ = s.send_to(&forged, data).await;
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        }
    });
    // A peer that sends a malformed frame over its (valid) TLS connection.
    let tcp = tokio::net::TcpStream::connect(srv.request_addr)
        .await
        .expect("connect");
    let (mut raw, _) = repocast_net::tls::connect(tcp, srv.request_addr, &Trust::Key(srv.key))
        .await
        .expect("tls");
    tokio::io::AsyncWriteExt::write_all(&mut raw, &[0, 0, 0, 3, b'x', b'y', b'z'])
        .await
        .expect("write");
    tokio::io::AsyncWriteExt::flush(&mut raw)
        .await
        .expect("flush");
    let mut hello = Vec::new();
    ClientMsg::Hello {
        name: "x".into(),
        token: None,
    }
    .emit(&mut hello);
    let out = tempfile::tempdir().expect("tmp");
    let rep = client::get(get_opts(&srv, out.path(), &["f"], 0.1, 1), None)
        .await
        .expect("get");
    junk.abort();
    assert!(rep.all_ok(), "{:?}", rep.items);
    assert_delivered(repo.path(), out.path(), &["f"]);
    assert!(rep.malformed > 0, "junk datagrams counted");
    assert!(
        rep.forged > 0,
        "the untagged forged packets counted as forged"
    );
    assert_eq!(
        rep.stats.corrupt_blocks, 0,
        "the forged session never reached a decoder"
    );
    eventually(async || srv.snapshot().malformed >= 1).await;
    srv.stop().await.expect("stop");
}

/// Under ARM a packet may carry a probe: `serve` sizes its symbols 12
/// bytes smaller, so those packets fit the frame too, and delivers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arm_leaves_room_for_its_probes() {
    let repo = seeded_repo(&[("f", 600_000)], 8);
    let srv = start(repo.path(), "ARM", |_| {}).await;
    let sized = format!("{}-byte symbols (fits the", served_symbol_size() - 12);
    assert!(srv.banner.contains(&sized), "{}", srv.banner);
    let out = tempfile::tempdir().expect("tmp");
    let rep = client::get(get_opts(&srv, out.path(), &["f"], 0.1, 3), None)
        .await
        .expect("get");
    assert!(rep.all_ok(), "{:?}", rep.items);
    assert!(same(&repo.path().join("f"), &out.path().join("f")));
    srv.stop().await.expect("stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_and_status_are_served_while_running() {
    let repo = seeded_repo(&[("f", 300_000)], 6);
    let srv = start(repo.path(), "FEC(0)+R(inf)", |_| {}).await;
    // Symbols sized to the link (loopback's MTU, capped at a frame's).
    let sized = format!("{}-byte symbols (fits the", served_symbol_size());
    assert!(srv.banner.contains(&sized), "{}", srv.banner);
    let out = tempfile::tempdir().expect("tmp");
    let rep = client::get(get_opts(&srv, out.path(), &["f"], 0.0, 1), None)
        .await
        .expect("get");
    assert!(rep.all_ok());
    let addr = srv.metrics_addr.expect("metrics on");
    let fetch = |path: &'static str| http_get(addr, path);
    let counter = |m: &str| -> u64 {
        m.lines()
            .find_map(|l| l.strip_prefix("repocast_symbols_sent_total "))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    // Published on a 250 ms tick: 300 kB is 212 symbols of 1,420 bytes.
    let symbols = 300_000u64.div_ceil(served_symbol_size());
    eventually(async || counter(&fetch("/metrics").await) >= symbols).await;
    let m = fetch("/metrics").await;
    assert!(m.starts_with("HTTP/1.0 200"), "{m}");
    assert!(m.contains("# TYPE repocast_naks_total counter"), "{m}");
    assert!(m.contains("repocast_batch_holds_total 0"), "{m}");
    let s = fetch("/status").await;
    assert!(
        s.contains("\"items\":1") && s.contains("\"scheme\":\"FEC(0)+R(inf)\""),
        "{s}"
    );
    srv.stop().await.expect("stop");
}

/// `serve` prepares each block's encoder on tokio's blocking pool, not in
/// the pump: a 4 MB item (3 blocks) sent with repair symbols in every
/// block hands out a job per block, every job comes back, and the file
/// arrives whole. (Whether a job is back before its block's first repair
/// symbol depends on the machine; the simulator checks the packets are
/// the same either way.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_send_prepares_its_encoders_off_the_pump() {
    let repo = seeded_repo(&[("f", 4_000_000)], 9);
    let srv = start(repo.path(), "FEC(0.1)+R(inf)", |_| {}).await;
    let out = tempfile::tempdir().expect("tmp");
    let rep = client::get(get_opts(&srv, out.path(), &["f"], 0.05, 4), None)
        .await
        .expect("get");
    assert!(rep.all_ok(), "{:?}", rep.items);
    assert_delivered(repo.path(), out.path(), &["f"]);
    // And `get` decodes its blocks off its receiving path (the first
    // block ready always finds a job free; at most all 3 go).
    assert!(
        (1..=3).contains(&rep.stats.decode_jobs),
        "{}",
        rep.stats.decode_jobs
    );
    let addr = srv.metrics_addr.expect("metrics on");
    let jobs = async || -> (u64, u64, u64) {
        let m = http_get(addr, "/metrics").await;
        let get = |name: &str| {
            (m.lines())
                .find_map(|l| l.strip_prefix(&format!("repocast_{name} ")))
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        };
        (
            get("encoder_jobs_total"),
            get("encoder_jobs_used_total"),
            get("encoder_jobs_late_total"),
        )
    };
    eventually(async || {
        let (offered, used, late) = jobs().await;
        offered >= 3 && used + late == offered
    })
    .await;
    srv.stop().await.expect("stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn items_with_identical_content_each_arrive() {
    let repo = tempfile::tempdir().expect("tmp");
    for n in ["a/same", "b/same", "c"] {
        std::fs::create_dir_all(repo.path().join(n).parent().expect("parent")).expect("mkdir");
        std::fs::write(repo.path().join(n), vec![7u8; 300_000]).expect("write");
    }
    let srv = start(repo.path(), "FEC(0.02)+R(inf)", |_| {}).await;
    let out = tempfile::tempdir().expect("tmp");
    let rep = client::get(
        get_opts(&srv, out.path(), &["a/same", "b/same", "c"], 0.1, 1),
        None,
    )
    .await
    .expect("get");
    assert!(rep.all_ok(), "{:?}", rep.items);
    assert_delivered(repo.path(), out.path(), &["a/same", "b/same", "c"]);
    srv.stop().await.expect("stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_memory_budget_spills_partial_blocks_and_still_verifies() {
    let repo = seeded_repo(&[("big", 8_000_000)], 8);
    // No FEC up front and 20% loss: every block is partial after the first
    // pass, far more than the 1 MiB budget holds.
    let srv = start(repo.path(), "FEC(0)+R(inf)", |_| {}).await;
    let out = tempfile::tempdir().expect("tmp");
    let mut o = get_opts(&srv, out.path(), &["big"], 0.2, 3);
    o.memory_budget = 1 << 20;
    let rep = client::get(o, None).await.expect("get");
    assert!(rep.all_ok(), "{:?}", rep.items);
    assert_delivered(repo.path(), out.path(), &["big"]);
    assert!(rep.spilled_blocks > 0, "blocks were spilled");
    assert_eq!(
        std::fs::read_dir(out.path().join(".repocast/partial"))
            .expect("dir")
            .count(),
        0,
        "spill removed"
    );
    srv.stop().await.expect("stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn source_specific_joins_receive_from_the_named_source() {
    let repo = seeded_repo(&[("f", 500_000)], 9);
    let srv = start(repo.path(), "FEC(0.02)+R(inf)", |o| {
        o.source = Some(Ipv4Addr::LOCALHOST.into());
    })
    .await;
    let out = tempfile::tempdir().expect("tmp");
    let g = get_opts(&srv, out.path(), &["f"], 0.0, 1);
    assert!(g.ssm, "SSM is the default when the server names its source");
    let rep = client::get(g, None).await.expect("get");
    assert!(rep.all_ok(), "{:?}", rep.items);
    assert_delivered(repo.path(), out.path(), &["f"]);
    srv.stop().await.expect("stop");
}

#[tokio::test]
async fn bad_settings_through_the_library_are_errors_not_panics() {
    let dir = tempfile::tempdir().expect("tmp");
    write_repo(dir.path(), &[("a", 10)], 1);
    let mut o = serve_opts(dir.path(), "FEC(0)+R(inf)");
    o.rate_bps = 0;
    let e = server::start(o.clone())
        .await
        .err()
        .expect("rate 0 refused");
    assert!(e.to_string().contains("rate 0"), "{e}");
    let mut bad = o.clone();
    bad.rate_bps = 1_000_000;
    bad.data_group = (Ipv4Addr::LOCALHOST, 4000).into();
    let e = server::start(bad)
        .await
        .err()
        .expect("unicast group refused");
    assert!(e.to_string().contains("not a multicast group"), "{e}");
    let mut bad = o.clone();
    bad.rate_bps = 1_000_000;
    bad.ttl = 0;
    assert!(server::start(bad).await.is_err());
    let mut bad = o;
    bad.rate_bps = 1_000_000;
    bad.symbol_size = Some(7);
    let e = server::start(bad)
        .await
        .err()
        .expect("odd symbol size refused");
    assert!(e.to_string().contains("symbol size 7"), "{e}");
}

/// Receivers pay for what they asked for: a client waiting for a small
/// item while a large one it does not want is on air gets (almost) none of
/// the large item's packets: the kernel filter on its data socket drops
/// them before they reach the process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_reads_only_the_items_it_asked_for() {
    let repo = seeded_repo(&[("large.bin", 8_000_000), ("small.bin", 20_000)], 3);
    let srv = start(repo.path(), "FEC(0)+R(inf)", |o| o.rate_bps = 50_000_000).await; // about 1.3 s for the large item
    let (out_a, out_b) = (
        tempfile::tempdir().expect("tmp"),
        tempfile::tempdir().expect("tmp"),
    );
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let a = get_opts(&srv, out_a.path(), &["large.bin"], 0.0, 1);
    let a = tokio::spawn(client::get(a, Some(tx)));
    // The large item is on air (non-preemptive): the small one waits.
    wait_for_bytes(&mut rx).await;
    let b = get_opts(&srv, out_b.path(), &["small.bin"], 0.0, 2);
    let b = client::get(b, None).await.expect("get small");
    let a = a.await.expect("join").expect("get large");
    assert!(a.all_ok() && b.all_ok(), "{:?} {:?}", a.items, b.items);
    let large_packets = 8_000_000 / served_symbol_size();
    // Without the filter b heard most of the large item (thousands of
    // datagrams); with it, announcements and its own 16 packets, plus
    // whatever arrived before its manifest named its item.
    assert!(
        b.datagrams < large_packets / 4,
        "b read {} datagrams while {large_packets} of another item went by",
        b.datagrams
    );
    assert!(a.datagrams >= large_packets);
    srv.stop().await.expect("stop");
}

/// `serve --batch-hold 2000 --batch-hold-after 0 --batch-hold-idle`: one
/// request for two items holds both for a share of the other's link time
/// before the first goes out (the server sleeps through the hold, then
/// sends), and both arrive identical.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_with_a_batching_hold_holds_then_delivers() {
    let repo = seeded_repo(&[("a", 2_000_000), ("b", 1_000_000)], 9);
    let srv = start(repo.path(), "FEC(maxloss+0.02)+R(inf)", |o| {
        o.batch_hold_ms = 2000;
        o.batch_hold_after_ms = 0;
        o.batch_hold_idle = true;
    })
    .await;
    let out = tempfile::tempdir().expect("tmp");
    let rep = client::get(get_opts(&srv, out.path(), &["a", "b"], 0.1, 3), None)
        .await
        .expect("get");
    assert!(rep.all_ok(), "{:?}", rep.items);
    assert_delivered(repo.path(), out.path(), &["a", "b"]);
    let stats = srv.stop().await.expect("stop");
    assert!(stats.holds >= 1, "{stats:?}");
    // Held for 0.75 of the other item's link time (tens of ms at 200
    // Mbit/s), never past the cap.
    assert!(
        stats.hold_idle_us > 0 && stats.hold_idle_us <= 2_000_000 * stats.holds,
        "{stats:?}"
    );
}

/// A request for every file of a repository of thousands of small files
/// (a source tree) completes. The server answers it with a manifest per
/// file at once: more frames than its writer queue took (4,096), so it
/// closed the connection as a peer that does not read, and every item
/// failed; the client's and the store's bookkeeping then cost time
/// quadratic in the files (a scan of every item per item).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_for_thousands_of_small_files_completes() {
    let names: Vec<String> = (0..5000).map(|i| format!("d{}/f{i}", i % 10)).collect();
    let files: Vec<(&str, usize)> = (names.iter())
        .enumerate()
        .map(|(i, n)| (n.as_str(), (i * 7919) % 3000))
        .collect();
    let repo = seeded_repo(&files, 3);
    let srv = start(repo.path(), "FEC(maxloss+0.02)+R(inf)", |_| {}).await;
    let out = tempfile::tempdir().expect("tmp");
    let mut o = get_opts(&srv, out.path(), &[], 0.05, 1);
    o.all = true;
    let rep = client::get(o, None).await.expect("get");
    let failed: Vec<_> = rep.items.iter().filter(|i| i.result.is_err()).collect();
    assert!(
        failed.is_empty(),
        "{} failed, first {:?}",
        failed.len(),
        failed.first()
    );
    assert_eq!(rep.items.len(), files.len());
    let all: Vec<&str> = names.iter().map(String::as_str).collect();
    assert_delivered(repo.path(), out.path(), &all);
    srv.stop().await.expect("stop");
}
