//! Issue 13's probes on real sockets (loopback): keys and pinning, the
//! allow-list, a hostile served folder (a file changed while served, a
//! FIFO swapped in, an unreadable file), a server that never answers, and
//! the client's own folder (an existing different file, two `get`s at
//! once), and `serve --encrypt` end to end. Each ends in a clear outcome,
//! never a hang.

mod common;

use common::*;
use repocast_core::auth::Identity;
use repocast_net::NetError;
use repocast_net::client;
use repocast_net::server;
use repocast_net::tls::Trust;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_presenting_another_key_is_refused_and_the_first_key_is_recorded() {
    let repo = seeded_repo(&[("f", 3_000)], 1);
    let srv = start(repo.path(), "FEC(0)+R(inf)", |_| {}).await;
    let out = tempfile::tempdir().expect("tmp");
    // Pinned to a key the server does not have.
    let mut g = get_opts(&srv, out.path(), &["f"], 0.0, 1);
    let stranger = Identity::from_seed([3; 32]).public();
    g.trust = Trust::Key(stranger);
    match client::get(g, None).await {
        Err(NetError::KeyChanged(m)) => {
            assert_eq!((m.expected, m.got), (stranger, srv.key));
        }
        other => panic!("expected a refused key, got {other:?}"),
    }
    assert!(!out.path().join("f").exists());
    // Trust on first use: recorded, then used.
    let known = out.path().join("known_servers");
    let mut g = get_opts(&srv, out.path(), &["f"], 0.0, 2);
    g.trust = Trust::KnownServers(known.clone());
    assert!(client::get(g, None).await.expect("first use").all_ok());
    let text = std::fs::read_to_string(&known).expect("recorded");
    assert!(text.contains(&srv.key.to_string()), "{text}");
    // The same address with another key on record: refused.
    std::fs::write(&known, format!("{} {stranger}\n", srv.request_addr)).expect("write");
    let err = client::list(srv.request_addr, &Trust::KnownServers(known), None)
        .await
        .expect_err("changed key");
    assert!(err.to_string().contains("refusing to connect"), "{err}");
    srv.stop().await.expect("stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn peers_outside_the_allow_list_are_closed_at_once() {
    let repo = seeded_repo(&[("f", 3_000)], 1);
    let srv = start(repo.path(), "FEC(0)+R(inf)", |o| {
        o.allow = vec!["10.0.0.0/8".parse().expect("cidr")];
    })
    .await;
    let t = std::time::Instant::now();
    let err = client::list(srv.request_addr, &Trust::Key(srv.key), None)
        .await
        .expect_err("refused");
    assert!(t.elapsed() < Duration::from_secs(5), "{err}");
    srv.stop().await.expect("stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_never_answers_fails_the_client_within_the_handshake_timeout() {
    // Accepts TCP, reads nothing, says nothing.
    let l = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = l.local_addr().expect("addr");
    let hold = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = l.accept().await {
            held.push(s);
        }
    });
    let t = std::time::Instant::now();
    let key = Identity::from_seed([1; 32]).public();
    let err = client::list(addr, &Trust::Key(key), None)
        .await
        .expect_err("no answer");
    assert!(matches!(err, NetError::Handshake(_)), "{err}");
    assert!(t.elapsed() < repocast_net::tls::HANDSHAKE_TIMEOUT + Duration::from_secs(3));
    hold.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_changed_while_it_is_served_fails_with_a_reason() {
    let repo = seeded_repo(&[("big", 8_000_000)], 2);
    let srv = start(repo.path(), "FEC(0)+R(inf)", |o| o.rate_bps = 20_000_000).await; // about 3 s
    let out = tempfile::tempdir().expect("tmp");
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let job = tokio::spawn(client::get(
        get_opts(&srv, out.path(), &["big"], 0.0, 1),
        Some(tx),
    ));
    wait_for_bytes(&mut rx).await;
    // Rewritten in place, same size.
    write_repo(repo.path(), &[("big", 8_000_000)], 3);
    let rep = tokio::time::timeout(Duration::from_secs(60), job)
        .await
        .expect("ends")
        .expect("join")
        .expect("get");
    let reason = rep.items[0].result.clone().expect_err("failed");
    assert!(reason.contains("changed"), "{reason}");
    assert!(!out.path().join("big").exists());
    srv.stop().await.expect("stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fifo_swapped_in_for_a_file_blocks_nothing() {
    let repo = seeded_repo(&[("fifo", 100_000), ("ok", 100_000)], 4);
    let srv = start(repo.path(), "FEC(0)+R(inf)", |_| {}).await;
    let p = repo.path().join("fifo");
    std::fs::remove_file(&p).expect("rm");
    let c = std::ffi::CString::new(p.to_str().expect("utf8")).expect("cstr");
    // SAFETY: mkfifo with a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    let out = tempfile::tempdir().expect("tmp");
    let rep = tokio::time::timeout(
        Duration::from_secs(30),
        client::get(get_opts(&srv, out.path(), &["fifo", "ok"], 0.0, 1), None),
    )
    .await
    .expect("no hang")
    .expect("get");
    let by = |n: &str| rep.items.iter().find(|o| o.name == n).expect("outcome");
    assert!(by("fifo").result.is_err(), "{:?}", rep.items);
    assert_eq!(by("ok").result, Ok(()));
    assert_delivered(repo.path(), out.path(), &["ok"]);
    srv.stop().await.expect("stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_file_is_skipped_and_the_rest_served() {
    // Root reads any file whatever its mode: the probe needs another user.
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        eprintln!("skipped: as root every file is readable");
        return;
    }
    let repo = seeded_repo(&[("locked", 1_000), ("ok", 1_000)], 5);
    use std::os::unix::fs::PermissionsExt;
    let locked = repo.path().join("locked");
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).expect("chmod");
    let srv = server::start(serve_opts(repo.path(), "FEC(0)+R(inf)"))
        .await
        .expect("serves despite the unreadable file");
    let cat = client::list(srv.request_addr, &Trust::Key(srv.key), None)
        .await
        .expect("ls");
    assert_eq!(
        cat.iter().map(|e| e.name.as_str()).collect::<Vec<_>>(),
        ["ok"]
    );
    srv.stop().await.expect("stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_existing_different_file_is_replaced_only_with_overwrite() {
    let repo = seeded_repo(&[("f", 50_000)], 6);
    let srv = start(repo.path(), "FEC(0)+R(inf)", |_| {}).await;
    let out = tempfile::tempdir().expect("tmp");
    std::fs::write(out.path().join("f"), b"precious").expect("write");
    let rep = client::get(get_opts(&srv, out.path(), &["f"], 0.0, 1), None)
        .await
        .expect("get");
    let reason = rep.items[0].result.clone().expect_err("refused");
    assert!(reason.contains("--overwrite"), "{reason}");
    assert_eq!(
        std::fs::read(out.path().join("f")).expect("read"),
        b"precious"
    );
    let mut g = get_opts(&srv, out.path(), &["f"], 0.0, 2);
    g.overwrite = true;
    assert!(client::get(g, None).await.expect("get").all_ok());
    assert_delivered(repo.path(), out.path(), &["f"]);
    srv.stop().await.expect("stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_gets_into_one_folder_at_once_both_verify() {
    let repo = seeded_repo(&[("f", 3_000_000)], 7);
    let srv = start(repo.path(), "FEC(0.05)+R(inf)", |_| {}).await;
    let out = tempfile::tempdir().expect("tmp");
    let a = tokio::spawn(client::get(
        get_opts(&srv, out.path(), &["f"], 0.05, 1),
        None,
    ));
    let b = tokio::spawn(client::get(
        get_opts(&srv, out.path(), &["f"], 0.1, 2),
        None,
    ));
    let (a, b) = (a.await.expect("a"), b.await.expect("b"));
    let (a, b) = (a.expect("get a"), b.expect("get b"));
    assert!(a.all_ok() && b.all_ok(), "{:?} {:?}", a.items, b.items);
    assert_delivered(repo.path(), out.path(), &["f"]);
    srv.stop().await.expect("stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_encrypting_server_delivers_verified_files_under_loss() {
    let repo = seeded_repo(&[("a", 2_000_000), ("d/b", 300_000)], 8);
    let srv = start(repo.path(), "FEC(0.05)+R(inf)", |o| {
        o.encrypt = true;
    })
    .await;
    let out = tempfile::tempdir().expect("tmp");
    let rep = client::get(get_opts(&srv, out.path(), &["a", "d/b"], 0.1, 3), None)
        .await
        .expect("get");
    assert!(rep.all_ok(), "{:?}", rep.items);
    assert_eq!(rep.forged, 0);
    assert_delivered(repo.path(), out.path(), &["a", "d/b"]);
    srv.stop().await.expect("stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_with_tokens_serves_only_clients_presenting_one() {
    let repo = seeded_repo(&[("f", 200_000)], 9);
    let work = tempfile::tempdir().expect("tmp");
    let token = repocast_net::keys::new_token().expect("token");
    let tokens = work.path().join("tokens");
    std::fs::write(&tokens, format!("# who may fetch\nalice {token}\n")).expect("write");
    let srv = start(repo.path(), "FEC(0)+R(inf)", |o| {
        o.tokens = Some(tokens);
    })
    .await;
    let trust = Trust::Key(srv.key);
    let err = client::list(srv.request_addr, &trust, None)
        .await
        .expect_err("no token");
    assert!(
        err.to_string().contains("requires an access token"),
        "{err}"
    );
    let err = client::list(srv.request_addr, &trust, Some("0123456789abcdef0".into()))
        .await
        .expect_err("unknown token");
    assert!(
        err.to_string().contains("does not know this token"),
        "{err}"
    );
    let out = tempfile::tempdir().expect("tmp");
    // `get` ends every item with the reason.
    let rep = client::get(get_opts(&srv, out.path(), &["f"], 0.0, 1), None)
        .await
        .expect("get without a token ends");
    let reason = rep.items[0].result.clone().expect_err("refused");
    assert!(reason.contains("requires an access token"), "{reason}");
    let cat = client::list(srv.request_addr, &trust, Some(token.clone()))
        .await
        .expect("ls with the token");
    assert_eq!(cat.len(), 1);
    let mut g = get_opts(&srv, out.path(), &["f"], 0.0, 2);
    g.token = Some(token);
    assert!(client::get(g, None).await.expect("get").all_ok());
    assert_delivered(repo.path(), out.path(), &["f"]);
    srv.stop().await.expect("stop");
}

/// Live revocation: removing a token from the file while its holder is
/// mid-transfer ends that transfer with the reason (within a tick of the
/// edit), refuses the token from then on, keeps the others, and rotates
/// the session key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_removed_from_the_file_ends_its_transfer_and_rotates_the_key() {
    let repo = seeded_repo(&[("big", 40_000_000)], 11);
    let work = tempfile::tempdir().expect("tmp");
    let (alice, bob) = (
        repocast_net::keys::new_token().expect("token"),
        repocast_net::keys::new_token().expect("token"),
    );
    let tokens = work.path().join("tokens");
    std::fs::write(&tokens, format!("alice {alice}\nbob {bob}\n")).expect("write");
    let srv = start(repo.path(), "FEC(0)+R(inf)", |o| {
        o.tokens = Some(tokens.clone());
        o.rate_bps = 20_000_000;
    })
    .await;
    let out = tempfile::tempdir().expect("tmp");
    let mut g = get_opts(&srv, out.path(), &["big"], 0.0, 1);
    g.token = Some(alice.clone());
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let get = tokio::spawn(client::get(g, Some(tx)));
    // Mid-transfer: the first verified bytes.
    wait_for_bytes(&mut rx).await;
    std::fs::write(&tokens, format!("bob {bob}\n")).expect("rewrite");
    let rep = tokio::time::timeout(Duration::from_secs(30), get)
        .await
        .expect("the revoked get ends well before its 16 s transfer would")
        .expect("task")
        .expect("get ends with a report");
    let reason = rep.items[0].result.clone().expect_err("revoked");
    assert!(reason.contains("revoked"), "{reason}");
    assert!(!out.path().join("big").exists());
    let trust = Trust::Key(srv.key);
    let err = client::list(srv.request_addr, &trust, Some(alice))
        .await
        .expect_err("alice's token is gone");
    assert!(
        err.to_string().contains("does not know this token"),
        "{err}"
    );
    let cat = client::list(srv.request_addr, &trust, Some(bob))
        .await
        .expect("bob's still works");
    assert_eq!(cat.len(), 1);
    // The key the revoked client held is replaced (within a tick).
    let t = std::time::Instant::now();
    while srv.snapshot().key_epoch == 0 && t.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let snap = srv.snapshot();
    assert_eq!((snap.key_epoch, snap.revoked), (1, 1));
    srv.stop().await.expect("stop");
}

#[test]
fn token_files_refuse_short_tokens_and_empty_files() {
    let dir = tempfile::tempdir().expect("tmp");
    let f = dir.path().join("t");
    std::fs::write(&f, "bob short\n").expect("write");
    let e = repocast_net::keys::read_token_hashes(&f).expect_err("short");
    assert!(e.to_string().contains("line 1"), "{e}");
    std::fs::write(&f, "# nobody yet\n\n").expect("write");
    assert!(repocast_net::keys::read_token_hashes(&f).is_err());
    // A running server re-reading it: nobody.
    assert_eq!(
        repocast_net::keys::read_token_list(&f)
            .expect("empty")
            .len(),
        0
    );
    std::fs::write(&f, "0123456789abcdef\n  carol fedcba9876543210  \n").expect("write");
    assert_eq!(
        repocast_net::keys::read_token_hashes(&f)
            .expect("two")
            .len(),
        2
    );
    assert_eq!(
        repocast_net::keys::read_token(&f).expect("first"),
        "0123456789abcdef"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transfer_across_a_key_rotation_loses_nothing() {
    let repo = seeded_repo(&[("f", 10_000_000)], 10);
    let srv = start(repo.path(), "FEC(0.05)+R(inf)", |o| {
        // 10 MB at 20 Mbit/s: about 4 s; the key is offered after about 1 s
        // and used from about 3 s (the 2 s grace).
        o.rate_bps = 20_000_000;
        o.rekey_secs = 1;
        o.encrypt = true;
    })
    .await;
    let out = tempfile::tempdir().expect("tmp");
    let rep = client::get(get_opts(&srv, out.path(), &["f"], 0.05, 4), None)
        .await
        .expect("get");
    assert!(rep.all_ok(), "{:?}", rep.items);
    assert!(
        srv.snapshot().key_epoch >= 1,
        "no rotation in {:?}",
        rep.elapsed
    );
    assert_eq!(rep.forged, 0, "packets refused across the rotation");
    assert_delivered(repo.path(), out.path(), &["f"]);
    srv.stop().await.expect("stop");
}

/// A tmpfs mounted for one test, unmounted when dropped.
struct SmallDisk(std::path::PathBuf);

impl SmallDisk {
    /// A `bytes`-sized tmpfs, or None where mounting is not allowed (not
    /// root, or a container without the right).
    fn mount(bytes: u64) -> Option<(tempfile::TempDir, SmallDisk)> {
        let dir = tempfile::tempdir().ok()?;
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes}"), "tmpfs"])
            .arg(dir.path())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        let path = dir.path().to_path_buf();
        ok.then_some((dir, SmallDisk(path)))
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
    }
}

/// Probe 11: the disk fills. The item that does not fit fails with the
/// OS's reason and its partial file is removed, so the small item of the
/// same request still fits and verifies; nothing unverified is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_fails_the_item_that_does_not_fit_and_frees_its_space() {
    let Some((_dir, disk)) = SmallDisk::mount(3 << 20) else {
        eprintln!("skipped: cannot mount a tmpfs here (needs root)");
        return;
    };
    let repo = seeded_repo(&[("big", 5_000_000), ("small", 100_000)], 11);
    let srv = start(repo.path(), "FEC(0)+R(inf)", |_| {}).await;
    let rep = client::get(get_opts(&srv, &disk.0, &["big", "small"], 0.0, 5), None)
        .await
        .expect("get");
    let by_name = |n: &str| rep.items.iter().find(|o| o.name == n).expect(n);
    let reason = by_name("big").result.clone().expect_err("big cannot fit");
    assert!(reason.contains("space"), "{reason}");
    assert_eq!(by_name("small").result, Ok(()), "{:?}", rep.items);
    assert_delivered(repo.path(), &disk.0, &["small"]);
    assert!(!disk.0.join("big").exists());
    // The big item's partial bytes are gone (partial names are hashed:
    // count what the state folder still holds).
    let held: u64 = walk(&disk.0.join(".repocast"));
    assert!(held < 200_000, "{held} bytes left under .repocast");
    srv.stop().await.expect("stop");
}

/// Bytes of the files under `dir`, recursively.
fn walk(dir: &std::path::Path) -> u64 {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    rd.filter_map(Result::ok)
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => walk(&e.path()),
            Ok(m) => m.len(),
            Err(_) => 0,
        })
        .sum()
}

/// `serve --sign-symbols`: the client takes each symbol only once a batch
/// signed with the pinned server key lists it; under loss every file
/// still verifies, and batches were checked with none refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_signing_its_symbols_delivers_verified_files_under_loss() {
    let repo = seeded_repo(&[("a", 2_000_000), ("d/b", 300_000)], 9);
    let srv = start(repo.path(), "FEC(0.05)+R(inf)", |o| {
        o.sign_symbols = true;
    })
    .await;
    let out = tempfile::tempdir().expect("tmp");
    let rep = client::get(get_opts(&srv, out.path(), &["a", "d/b"], 0.1, 4), None)
        .await
        .expect("get");
    assert!(rep.all_ok(), "{:?}", rep.items);
    assert!(rep.signing.batches > 10, "{:?}", rep.signing);
    assert_eq!(rep.signing.bad_batches, 0);
    assert_delivered(repo.path(), out.path(), &["a", "d/b"]);
    srv.stop().await.expect("stop");
}
