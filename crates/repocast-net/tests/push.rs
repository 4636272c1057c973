//! `repocast push` and `repocast listen` on loopback multicast with
//! emulated loss: the shipped settings on real sockets, no back channel.

mod common;

use common::{assert_delivered, groups, lo, seeded_repo, write_repo};
use repocast_core::loss::LossSpec;
use repocast_net::listen::{ListenOptions, ListenReport, listen};
use repocast_net::push::{self, PushHandle, PushOptions};
use std::collections::BTreeSet;
use std::net::Ipv4Addr;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

/// A pusher of `dir` on fresh loopback groups at `rate_bps`, its metrics
/// on a free port.
fn push_opts(dir: &Path, rate_bps: u64) -> PushOptions {
    let (data, ann) = groups();
    let mut o = PushOptions::new(dir.to_path_buf());
    o.data_group = data;
    o.announce_group = ann;
    o.interface = lo();
    o.rate_bps = rate_bps;
    o.metrics = Some((Ipv4Addr::LOCALHOST, 0).into());
    o
}

async fn start_push(dir: &Path, redundancy: Option<f64>) -> (PushHandle, PushOptions) {
    // A pusher that stops after its redundancy goes slowly enough (2
    // Mbit/s: three passes of a small set take a second or more) that a
    // listener started after it, on a busy machine, still hears most of
    // them; at 200 Mbit/s they were over in about 16 ms.
    let rate = if redundancy.is_some() {
        2_000_000
    } else {
        200_000_000
    };
    let mut o = push_opts(dir, rate);
    o.redundancy = redundancy;
    let h = push::start(o.clone()).await.expect("push");
    (h, o)
}

fn listen_opts(p: &PushOptions, out: &Path, loss: f64, seed: u64) -> ListenOptions {
    let mut l = ListenOptions::new(out.to_path_buf());
    l.data_group = p.data_group;
    l.announce_group = p.announce_group;
    l.interface = lo();
    l.loss = LossSpec::Bernoulli { p: loss };
    l.seed = seed;
    l.timeout = Duration::from_secs(20);
    l
}

/// A file's mtime in whole seconds (what the catalogue carries).
fn secs(m: &std::fs::Metadata) -> Option<u64> {
    m.modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_secs())
}

fn check(r: &ListenReport, repo: &Path, out: &Path, names: &[&str]) {
    assert!(r.all_ok(), "{:?} {:?}", r.items, r.ended);
    assert_eq!(r.items.len(), names.len());
    assert_delivered(repo, out, names);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_listeners_at_0_20_and_50_percent_loss_verify() {
    let repo = seeded_repo(&[("a.bin", 3 << 20), ("d/b.txt", 20_000)], 1);
    std::fs::set_permissions(
        repo.path().join("d/b.txt"),
        std::fs::Permissions::from_mode(0o640),
    )
    .expect("chmod");
    let (h, o) = start_push(repo.path(), None).await;
    // No --symbol-size: symbols fill loopback's MTU up to a 1,500-byte
    // frame (1,440 + 31 + 28 = 1,499 bytes).
    assert!(
        h.banner
            .contains("1440-byte symbols (fits the 65535-byte MTU)"),
        "{}",
        h.banner
    );
    let outs: Vec<_> = (0..3).map(|_| tempfile::tempdir().expect("tmp")).collect();
    let mut tasks = Vec::new();
    for (i, loss) in [0.0, 0.2, 0.5].into_iter().enumerate() {
        let mut l = listen_opts(&o, outs[i].path(), loss, 10 + i as u64);
        l.trust = Some(h.key);
        tasks.push(tokio::spawn(listen(l, None, None)));
    }
    for (t, out) in tasks.into_iter().zip(&outs) {
        let r = t.await.expect("task").expect("listen");
        check(&r, repo.path(), out.path(), &["a.bin", "d/b.txt"]);
        assert_eq!(r.signer, Some(h.key));
        // Blocks are decoded off the receiving thread (the first block
        // ready always finds a job free; at most all 3 of them go).
        assert!((1..=3).contains(&r.decode_jobs), "{}", r.decode_jobs);
        let m = std::fs::metadata(out.path().join("d/b.txt")).expect("meta");
        assert_eq!(m.permissions().mode() & 0o777, 0o640);
        let src = std::fs::metadata(repo.path().join("d/b.txt")).expect("meta");
        assert_eq!(secs(&m), secs(&src), "mtime from the catalogue");
    }
    let s = h.snapshot();
    assert!(s.push.is_some_and(|p| p.1.catalogue_pieces > 0));
    h.stop().await.expect("stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listener_pinned_to_another_key_takes_nothing() {
    let repo = seeded_repo(&[("x", 10_000)], 2);
    let (h, o) = start_push(repo.path(), None).await;
    let out = tempfile::tempdir().expect("tmp");
    let mut l = listen_opts(&o, out.path(), 0.0, 1);
    l.trust = Some(repocast_core::auth::Identity::from_seed([3; 32]).public());
    l.timeout = Duration::from_secs(2);
    let r = listen(l, None, None).await.expect("listen");
    assert!(!r.all_ok());
    let why = r.ended.expect("ended");
    assert!(why.contains("no complete catalogue"), "{why}");
    assert!(r.stats.foreign > 0);
    assert!(!out.path().join("x").exists());
    h.stop().await.expect("stop");
}

/// Source-specific multicast (SPEC 6): a pusher sending from a named
/// address to groups in 232.0.0.0/8 reaches a listener that names it with
/// `--source`; a listener naming another address joins as well but hears
/// nothing, and one naming no source is refused before it joins.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn source_specific_listeners_hear_the_source_they_name_only() {
    let repo = seeded_repo(&[("s.bin", 200_000)], 4);
    let ssm = |g: std::net::SocketAddr| match g.ip() {
        std::net::IpAddr::V4(v4) => {
            let [_, b, c, d] = v4.octets();
            std::net::SocketAddr::from((Ipv4Addr::new(232, b, c, d), g.port()))
        }
        std::net::IpAddr::V6(_) => g,
    };
    let (data, ann) = groups();
    let mut o = PushOptions::new(repo.path().to_path_buf());
    (o.data_group, o.announce_group) = (ssm(data), ssm(ann));
    o.interface = lo();
    o.source = Some(Ipv4Addr::LOCALHOST.into());
    o.rate_bps = 50_000_000;
    o.metrics = None;
    let h = push::start(o.clone()).await.expect("push");
    let hint = "from 127.0.0.1 (listeners: listen --source 127.0.0.1)";
    assert!(h.banner.contains(hint), "{}", h.banner);

    let (right, wrong) = (
        tempfile::tempdir().expect("tmp"),
        tempfile::tempdir().expect("tmp"),
    );
    let mut l = listen_opts(&o, right.path(), 0.1, 3);
    l.source = o.source;
    l.trust = Some(h.key);
    let r = listen(l, None, None).await.expect("listen");
    check(&r, repo.path(), right.path(), &["s.bin"]);

    let mut l = listen_opts(&o, wrong.path(), 0.0, 3);
    l.source = Some(Ipv4Addr::new(127, 0, 0, 2).into());
    l.timeout = Duration::from_secs(2);
    let r = listen(l, None, None).await.expect("listen");
    assert!(!r.all_ok());
    assert_eq!(r.datagrams, 0, "another source's packets were heard");
    let why = r.ended.expect("ended");
    assert!(why.contains("no complete catalogue"), "{why}");
    assert!(!wrong.path().join("s.bin").exists());

    // In the source-specific range a listener must name its source; a
    // source of another family is refused, on either side.
    let l = listen_opts(&o, wrong.path(), 0.0, 3);
    let err = listen(l, None, None).await.expect_err("no source");
    assert!(err.to_string().contains("--source"), "{err}");
    let mut l = listen_opts(&o, wrong.path(), 0.0, 3);
    l.source = Some(std::net::Ipv6Addr::LOCALHOST.into());
    assert!(listen(l, None, None).await.is_err());
    let mut bad = o.clone();
    bad.source = Some(Ipv4Addr::new(239, 1, 1, 1).into());
    match push::start(bad).await {
        Err(e) => assert!(e.to_string().contains("--source"), "{e}"),
        Ok(_) => panic!("a group taken as the source"),
    }
    h.stop().await.expect("stop");
    // A pusher on these groups that names no source tells its operator
    // which address its listeners must name.
    let mut unnamed = o.clone();
    unnamed.source = None;
    let h = push::start(unnamed).await.expect("push");
    assert!(h.banner.contains(hint), "{}", h.banner);
    h.stop().await.expect("stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pusher_stops_after_its_redundancy_and_a_glob_selects() {
    let repo = seeded_repo(&[("keep/a.txt", 50_000), ("skip.bin", 80_000)], 3);
    let out = tempfile::tempdir().expect("tmp");
    let (mut h, o) = start_push(repo.path(), Some(3.0)).await;
    let mut l = listen_opts(&o, out.path(), 0.1, 4);
    l.select = vec!["keep/*".into()];
    let r = listen(l, None, None).await.expect("listen");
    check(&r, repo.path(), out.path(), &["keep/a.txt"]);
    assert!(!out.path().join("skip.bin").exists());
    let stats = tokio::time::timeout(Duration::from_secs(20), h.finished())
        .await
        .expect("stops on its own")
        .expect("push");
    assert!(stats.data_packets > 0);
}

/// A pusher of a folder and a satellite listener of it.
struct Satellite {
    h: PushHandle,
    out: tempfile::TempDir,
    stop_tx: tokio::sync::watch::Sender<bool>,
    rx: tokio::sync::mpsc::UnboundedReceiver<repocast_core::endpoint::listen::ListenEvent>,
    task:
        tokio::task::JoinHandle<Result<repocast_net::listen::ListenReport, repocast_net::NetError>>,
}

/// Pushes `repo` to a satellite listener at `loss` (emulated, `seed`).
async fn satellite(repo: &Path, loss: f64, seed: u64) -> Satellite {
    let (h, o) = start_push(repo, None).await;
    let out = tempfile::tempdir().expect("tmp");
    let mut l = listen_opts(&o, out.path(), loss, seed);
    l.satellite = true;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let task = tokio::spawn(listen(l, Some(tx), Some(stop_rx)));
    Satellite {
        h,
        out,
        stop_tx,
        rx,
        task,
    }
}

/// Waits (at most 20 s) until `n` more items are complete.
async fn items_complete(
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<repocast_core::endpoint::listen::ListenEvent>,
    n: usize,
) {
    let mut seen = 0;
    tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(ev) = rx.recv().await {
            if let repocast_core::endpoint::listen::ListenEvent::Item(
                repocast_core::endpoint::client::Event::Complete { .. },
            ) = ev
            {
                seen += 1;
                if seen == n {
                    return;
                }
            }
        }
    })
    .await
    .expect("items complete");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_satellite_listener_picks_up_an_added_file() {
    let repo = seeded_repo(&[("one", 30_000)], 5);
    let Satellite {
        h,
        out,
        stop_tx,
        mut rx,
        task,
    } = satellite(repo.path(), 0.1, 6).await;
    items_complete(&mut rx, 1).await;
    write_repo(&repo.path().join("sub"), &[("two", 40_000)], 7);
    items_complete(&mut rx, 1).await;
    let _ = stop_tx.send(true);
    let r = task.await.expect("task").expect("listen");
    assert_delivered(repo.path(), out.path(), &["sub/two", "one"]);
    assert!(r.version.is_some());
    h.stop().await.expect("stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_version_mid_download_keeps_verified_files_and_finishes_the_rest() {
    let repo = seeded_repo(&[("a-small.txt", 3_000), ("big.bin", 8 << 20)], 8);
    // 8 MiB takes about 3.5 s: the new version comes while it is on air.
    let mut o = push_opts(repo.path(), 20_000_000);
    o.metrics = None;
    o.scheduler = push::PushScheduler::Flat;
    let h = push::start(o.clone()).await.expect("push");
    let out = tempfile::tempdir().expect("tmp");
    let mut l = listen_opts(&o, out.path(), 0.1, 9);
    l.satellite = true;
    l.trust = Some(h.key);
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let task = tokio::spawn(listen(l, Some(tx), Some(stop_rx)));
    use repocast_core::endpoint::client::Event;
    use repocast_core::endpoint::listen::ListenEvent;
    let mut receiving = Vec::new();
    let mut added = false;
    // Items of the new version begun, and those complete (a pack's files
    // are cut out after its item completes, off the receiving path: they
    // are in place once the listener has stopped).
    let (mut begun, mut done) = (BTreeSet::new(), BTreeSet::new());
    tokio::time::timeout(Duration::from_secs(40), async {
        while let Some(ev) = rx.recv().await {
            match ev {
                ListenEvent::Version { receiving: n, .. } => {
                    receiving.push(n);
                    begun.clear();
                    done.clear();
                    if !added {
                        // Change the set while big.bin is on air.
                        write_repo(repo.path(), &[("late.txt", 5_000)], 10);
                        added = true;
                    }
                }
                ListenEvent::Item(Event::Item { item, .. }) => {
                    begun.insert(item);
                }
                ListenEvent::Item(Event::Complete { item }) => {
                    done.insert(item);
                    if receiving.len() >= 2 && done.is_superset(&begun) {
                        return;
                    }
                }
                _ => {}
            }
        }
    })
    .await
    .expect("every file under the new version");
    // Version 1: both files; version 2: big.bin (still in progress) and
    // late.txt, and a-small.txt unless it was verified already.
    assert_eq!(receiving[0], 2);
    assert!(receiving[1] >= 2, "{receiving:?}");
    let _ = stop_tx.send(true);
    let r = task.await.expect("task").expect("listen");
    assert!(r.ended.is_none(), "{:?}", r.ended);
    assert_delivered(
        repo.path(),
        out.path(),
        &["a-small.txt", "big.bin", "late.txt"],
    );
    // big.bin was on air when the version changed: its partly received
    // blocks went over to the new version.
    assert!(r.stats.carried_blocks > 0, "{:?}", r.stats);
    h.stop().await.expect("stop");
}

/// `push --sign-symbols` to a pinned listener at 20% loss: every file
/// verifies from symbols signed batches vouched for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listener_takes_signed_symbols_under_loss() {
    let repo = seeded_repo(&[("s.bin", 2 << 20)], 11);
    let (data, ann) = groups();
    let mut o = PushOptions::new(repo.path().to_path_buf());
    o.data_group = data;
    o.announce_group = ann;
    o.interface = lo();
    o.rate_bps = 200_000_000;
    o.metrics = None;
    o.sign_symbols = true;
    let h = push::start(o.clone()).await.expect("push");
    let out = tempfile::tempdir().expect("tmp");
    let mut l = listen_opts(&o, out.path(), 0.2, 12);
    l.trust = Some(h.key);
    let r = listen(l, None, None).await.expect("listen");
    check(&r, repo.path(), out.path(), &["s.bin"]);
    assert!(r.signing.batches > 10, "{:?}", r.signing);
    assert_eq!(r.signing.bad_batches, 0);
    h.stop().await.expect("stop");
}

/// Small files travel in packs: the listener cuts each one out with its
/// mode and mtime; run again into the same folder, it finds every file in
/// place and receives no pack.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn small_files_come_out_of_their_packs_with_their_attributes() {
    let files: Vec<(String, usize)> = (0..40)
        .map(|i| (format!("site/p{i:02}.html"), 500 + i * 1_500))
        .collect();
    let names: Vec<&str> = files.iter().map(|f| f.0.as_str()).collect();
    let spec: Vec<(&str, usize)> = files.iter().map(|f| (f.0.as_str(), f.1)).collect();
    let repo = seeded_repo(&spec, 8);
    let odd = repo.path().join("site/p07.html");
    std::fs::set_permissions(&odd, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let (h, o) = start_push(repo.path(), None).await;
    assert!(
        h.banner.contains("40 files (small ones in 2 packs)"),
        "{}",
        h.banner
    );
    let out = tempfile::tempdir().expect("tmp");
    for run in 0..2 {
        let mut l = listen_opts(&o, out.path(), 0.2, 20 + run);
        l.trust = Some(h.key);
        let r = listen(l, None, None).await.expect("listen");
        check(&r, repo.path(), out.path(), &names);
        // Each pack is one block: decoded in the first run, none again in
        // the second (every file in place, no pack received).
        match run {
            0 => assert!(r.decode_jobs >= 1),
            _ => assert_eq!(r.decode_jobs, 0),
        }
    }
    let m = std::fs::metadata(out.path().join("site/p07.html")).expect("meta");
    assert_eq!(m.permissions().mode() & 0o777, 0o600);
    let src = std::fs::metadata(&odd).expect("meta");
    assert_eq!(secs(&m), secs(&src), "mtime from the catalogue");
    // Nothing of the pack is left in the listener's state folder.
    let partial = out.path().join(".repocast/partial");
    let left: Vec<_> = std::fs::read_dir(&partial)
        .expect("partial")
        .flatten()
        .collect();
    assert!(left.is_empty(), "{left:?}");
    h.stop().await.expect("stop");
}

/// A file rewritten with its size and time kept: the pusher's hash cache
/// does not take it for the file it hashed (its change time moved), and
/// the pusher also stops sending the old version (its blocks no longer
/// match) and names it to hash afresh; the new version goes out, and a
/// satellite listener takes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_rewritten_behind_the_hash_cache_goes_out_as_it_now_reads() {
    let repo = seeded_repo(&[("big.bin", 400_000)], 11);
    let Satellite {
        h,
        out,
        stop_tx,
        mut rx,
        task,
    } = satellite(repo.path(), 0.0, 12).await;
    items_complete(&mut rx, 1).await;
    let path = repo.path().join("big.bin");
    let mtime = std::fs::metadata(&path)
        .and_then(|m| m.modified())
        .expect("mtime");
    let mut bytes = std::fs::read(&path).expect("read");
    bytes[1_000] ^= 0xff;
    std::fs::write(&path, &bytes).expect("rewrite");
    (std::fs::File::options().write(true).open(&path))
        .and_then(|f| f.set_modified(mtime))
        .expect("the old time back");
    items_complete(&mut rx, 1).await;
    let _ = stop_tx.send(true);
    task.await.expect("task").expect("listen");
    assert_delivered(repo.path(), out.path(), &["big.bin"]);
    h.stop().await.expect("stop");
}

/// A pusher run again on its folder goes on from the symbol ids its last
/// run reached (kept in the folder's state directory when it stopped), so
/// listeners still tuned in are not sent the ids they hold again; a
/// listener of the second run alone (repair symbols only) still gets the
/// file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pusher_run_again_goes_on_from_its_last_runs_ids() {
    use repocast_core::server::ResumePoint;
    use repocast_net::push::resume;
    let repo = seeded_repo(&[("big.bin", 300_000)], 5);
    let record = |o: &PushOptions| {
        let bytes = std::fs::read(resume::record_path(&o.dir, &o.data_group)).expect("record");
        ResumePoint::decode_all(&bytes).expect("a sound record")
    };
    // Three times the file, then two and a half: the second run's ids end
    // past the first's only if it went on from them.
    let (mut h, o) = start_push(repo.path(), Some(3.0)).await;
    assert!(!h.banner.contains("going on"), "{}", h.banner);
    tokio::time::timeout(Duration::from_secs(20), h.finished())
        .await
        .expect("stops on its own")
        .expect("push");
    let first = record(&o);
    assert_eq!(first.len(), 1);
    assert!(first[0].next_ids.iter().all(|&id| id > 0), "{first:?}");

    let mut again = o.clone();
    again.redundancy = Some(2.5);
    let mut h = push::start(again.clone()).await.expect("push");
    assert!(h.banner.contains("1 going on"), "{}", h.banner);
    let out = tempfile::tempdir().expect("tmp");
    let r = listen(listen_opts(&again, out.path(), 0.0, 6), None, None)
        .await
        .expect("listen");
    check(&r, repo.path(), out.path(), &["big.bin"]);
    tokio::time::timeout(Duration::from_secs(20), h.finished())
        .await
        .expect("stops on its own")
        .expect("push");
    let second = record(&again);
    assert_eq!(second[0].next_ids.len(), first[0].next_ids.len());
    for (a, b) in first[0].next_ids.iter().zip(&second[0].next_ids) {
        assert!(
            b > a,
            "the second run started again: {first:?} then {second:?}"
        );
    }
}

/// A listener whose pusher stops half-way through a file's first pass
/// gives up after its timeout, keeping the symbols of its partly received
/// blocks (with Fcast's interleaving none is verified yet); run again on
/// the same folder while the pusher goes on, it takes them back and needs
/// only the rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listener_run_again_goes_on_with_the_symbols_it_kept() {
    let repo = seeded_repo(&[("big.bin", 3 << 20)], 9);
    let out = tempfile::tempdir().expect("tmp");
    let mut o = push_opts(repo.path(), 20_000_000);
    // Half the file's size, then it stops.
    o.redundancy = Some(0.5);
    let mut l = listen_opts(&o, out.path(), 0.1, 11);
    l.timeout = Duration::from_secs(3);
    // Tuned in before the pusher starts, so it hears the whole half.
    let first = tokio::spawn(listen(l.clone(), None, None));
    let mut h = push::start(o.clone()).await.expect("push");
    tokio::time::timeout(Duration::from_secs(20), h.finished())
        .await
        .expect("stops on its own")
        .expect("push");
    let first = first.await.expect("task").expect("listen");
    let why = first.items.first().and_then(|o| o.result.clone().err());
    assert!(
        why.as_deref().is_some_and(|w| w.contains("nothing heard")),
        "half a pass cannot be enough: {:?}",
        first.items
    );
    assert!(!out.path().join("big.bin").exists());

    // The pusher goes on (from its ids); the listener again.
    let mut again = o.clone();
    again.redundancy = None;
    let h = push::start(again).await.expect("push");
    let second = listen(l, None, None).await.expect("listen");
    h.stop().await.expect("push");
    eprintln!(
        "first run {} datagrams; second {} datagrams, {} blocks with {} symbols kept",
        first.datagrams, second.datagrams, second.kept_blocks, second.kept_symbols
    );
    check(&second, repo.path(), out.path(), &["big.bin"]);
    assert!(second.kept_blocks > 0, "no kept block found");
    assert!(second.kept_symbols > 0);
    // It received about what it lacked: far less than the whole file,
    // which the first run's half is about half of.
    assert!(
        second.datagrams < first.datagrams + first.datagrams / 2,
        "second run {} datagrams, first {}",
        second.datagrams,
        first.datagrams
    );
}

/// A satellite listener whose files change or go while it receives them
/// leaves no partial file of what it will never receive again: the
/// older content's of a changed file (removed when the newer opens) and a
/// removed file's (dropped at the new version). Before, each stayed in
/// `OUT/.repocast/partial` for good, as large as its file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listener_leaves_no_partial_files_of_changed_or_removed_files() {
    let repo = seeded_repo(&[("big.bin", 4 << 20), ("drop.bin", 4 << 20)], 12);
    // 8 MiB take about 3.5 s: the files change while they are on air.
    let mut o = push_opts(repo.path(), 20_000_000);
    o.metrics = None;
    let h = push::start(o.clone()).await.expect("push");
    let out = tempfile::tempdir().expect("tmp");
    let mut l = listen_opts(&o, out.path(), 0.1, 13);
    l.satellite = true;
    l.trust = Some(h.key);
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let task = tokio::spawn(listen(l, Some(tx), Some(stop_rx)));
    use repocast_core::endpoint::client::Event;
    use repocast_core::endpoint::listen::ListenEvent;
    let mut versions = 0;
    let newer = tempfile::tempdir().expect("tmp");
    tokio::time::timeout(Duration::from_secs(40), async {
        while let Some(ev) = rx.recv().await {
            match ev {
                ListenEvent::Version { .. } => {
                    versions += 1;
                    if versions == 1 {
                        // Both files open: one changes, one goes.
                        write_repo(newer.path(), &[("big.bin", 4 << 20)], 14);
                        std::fs::rename(newer.path().join("big.bin"), repo.path().join("big.bin"))
                            .expect("changed");
                        std::fs::remove_file(repo.path().join("drop.bin")).expect("removed");
                    }
                }
                ListenEvent::Item(Event::Complete { .. }) if versions >= 2 => return,
                _ => {}
            }
        }
    })
    .await
    .expect("the changed file under the new version");
    let _ = stop_tx.send(true);
    let r = task.await.expect("task").expect("listen");
    assert!(r.ended.is_none(), "{:?}", r.ended);
    assert_delivered(repo.path(), out.path(), &["big.bin"]);
    assert!(!out.path().join("drop.bin").exists());
    let left: Vec<_> = std::fs::read_dir(out.path().join(".repocast/partial"))
        .expect("partial dir")
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
    h.stop().await.expect("stop");
}
