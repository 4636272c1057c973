//! `repocast listen` stopped by a signal: it ends cleanly (its summary,
//! the exit code of items not received, no panic), keeps what it had
//! received, and run again on the same folder finishes the file.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

fn repocast() -> Command {
    Command::new(env!("CARGO_BIN_EXE_repocast"))
}

/// A child process killed when the test ends, however it ends (a pusher
/// left behind by a failed assertion would go on sending to the group).
struct Reaped(std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

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
    let mut first = listen()
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("listen");
    // Stopped once it has the catalogue (and so is receiving).
    let mut err = BufReader::new(first.stderr.take().expect("stderr"));
    let mut line = String::new();
    while !line.contains("catalogue version") {
        line.clear();
        if err.read_line(&mut line).expect("stderr") == 0 {
            break;
        }
    }
    assert!(line.contains("catalogue version"), "{line}");
    let pid = first.id().to_string();
    let killed = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    assert!(killed.success());
    let ended = first.wait_with_output().expect("wait");
    let summary = String::from_utf8_lossy(&ended.stdout);
    assert_eq!(ended.status.code(), Some(1), "{ended:?}");
    assert!(summary.contains("\"verified\":0"), "{summary}");

    let second = listen().output().expect("listen");
    let summary = String::from_utf8_lossy(&second.stdout);
    assert!(second.status.success(), "{second:?}");
    assert!(summary.contains("\"verified\":1"), "{summary}");
    assert_eq!(std::fs::read(out.join("big.bin")).expect("file"), bytes);
}
