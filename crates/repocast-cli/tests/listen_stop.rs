//! `repocast listen` stopped by a signal: it ends cleanly (its summary,
//! the exit code of items not received, no panic), keeps what it had
//! received, and run again on the same folder finishes the file.

mod common;

use common::{Reaped, repocast, stopped_when_it_says};
use std::process::Stdio;

#[test]
fn a_listener_stopped_by_a_signal_ends_cleanly_and_a_rerun_finishes() {
    let dir = tempfile::tempdir().expect("tmp");
    let (src, out, key) = (
        dir.path().join("src"),
        dir.path().join("out"),
        dir.path().join("key"),
    );
    std::fs::create_dir(&src).expect("mkdir");
    let bytes: Vec<u8> = (0..4u32 << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(src.join("big.bin"), &bytes).expect("write");
    let made = repocast()
        .args(["keygen", "--out"])
        .arg(&key)
        .output()
        .expect("keygen");
    assert!(made.status.success(), "{made:?}");
    let group = "239.255.47.171:4771";
    // 4 MiB at 10 Mbit/s: a pass takes about 3.5 s.
    let _push = Reaped(
        repocast()
            .arg("push")
            .arg(&src)
            .args([
                "--rate",
                "10M",
                "--interface",
                "lo",
                "--no-metrics",
                "--group",
                group,
                "--key",
            ])
            .arg(&key)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("push"),
    );
    // Pinned: other tests' pushers may be on the host.
    let trust = dir.path().join("key.pub");
    let listen = || {
        let mut c = repocast();
        c.arg("listen").arg("--trust").arg(&trust);
        c.args([
            "--interface",
            "lo",
            "--group",
            group,
            "--timeout",
            "30",
            "--json",
            "--out",
        ])
        .arg(&out)
        .arg("big.bin");
        c
    };
    // Stopped once it has the catalogue (and so is receiving).
    let ended = stopped_when_it_says(&mut listen(), "catalogue version");
    let summary = String::from_utf8_lossy(&ended.stdout);
    assert_eq!(ended.status.code(), Some(1), "{ended:?}");
    assert!(summary.contains("\"verified\":0"), "{summary}");

    let second = listen().output().expect("listen");
    let summary = String::from_utf8_lossy(&second.stdout);
    assert!(second.status.success(), "{second:?}");
    assert!(summary.contains("\"verified\":1"), "{summary}");
    assert_eq!(std::fs::read(out.join("big.bin")).expect("file"), bytes);
}
