//! `repocast get` stopped by a signal, on its own and through the host's
//! shared receiver: it ends cleanly (its summary, the items it had
//! verified in place, exit 1 with a reason for the rest), and run again on
//! the same folder finishes.

mod common;

use common::{repocast, serve, stopped_when_it_says};

/// Runs `get` of a small and a large item, stops it by SIGTERM once the
/// small one is verified, and runs it again.
fn stopped_and_run_again(groups: (&str, &str), share: bool) {
    let dir = tempfile::tempdir().expect("tmp");
    let (repo, out) = (dir.path().join("repo"), dir.path().join("out"));
    std::fs::create_dir(&repo).expect("mkdir");
    let big: Vec<u8> = (0..4u32 << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8)
        .collect();
    std::fs::write(repo.join("big"), &big).expect("write");
    std::fs::write(repo.join("small"), vec![7u8; 10_000]).expect("write");
    let (_server, addr, key) = serve(dir.path(), &repo, groups);
    let get = || {
        let mut c = repocast();
        c.args(["get", "--server", &addr, "--trust", &key])
            .args(["--interface", "127.0.0.1", "--out"])
            .arg(&out)
            .args(["small", "big"]);
        if !share {
            c.arg("--no-share");
        }
        c
    };
    // 4 MiB at 10 Mbit/s take 3.5 s: the small item verifies first, and
    // then the large one is being received.
    let ended = stopped_when_it_says(&mut get(), "small: verified");
    let rest = String::from_utf8_lossy(&ended.stderr);
    let summary = String::from_utf8_lossy(&ended.stdout);
    assert_eq!(ended.status.code(), Some(1), "{ended:?} {rest}");
    assert!(summary.starts_with("1 of 2 items verified"), "{summary}");
    assert!(rest.contains("FAILED big: stopped"), "{rest}");
    assert_eq!(
        std::fs::read(out.join("small")).expect("small"),
        vec![7u8; 10_000]
    );
    assert!(!out.join("big").exists());

    let second = get().output().expect("get");
    let summary = String::from_utf8_lossy(&second.stdout);
    assert!(second.status.success(), "{second:?}");
    assert!(summary.starts_with("2 of 2 items verified"), "{summary}");
    // (What of the large item it goes on with depends on how far the
    // first run got: `repocast-net`'s `get_stop` tests check that.)
    assert_eq!(std::fs::read(out.join("big")).expect("big"), big);
}

#[test]
fn a_get_stopped_by_a_signal_ends_cleanly_and_a_rerun_finishes() {
    stopped_and_run_again(("239.255.47.181:4781", "239.255.47.182:4782"), false);
}

#[test]
fn a_get_through_the_host_receiver_stopped_by_a_signal_ends_cleanly() {
    stopped_and_run_again(("239.255.47.183:4783", "239.255.47.184:4784"), true);
}
