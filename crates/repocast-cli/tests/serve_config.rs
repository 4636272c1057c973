//! `repocast serve --config`: the file's settings apply, flags on the
//! command line win, and a bad file is a clear usage error.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

#[test]
fn config_file_settings_apply_and_flags_win() {
    let dir = tempfile::tempdir().expect("tmp");
    let repo = dir.path().join("repo");
    std::fs::create_dir(&repo).expect("mkdir");
    std::fs::write(repo.join("x"), b"hello").expect("write");
    let cfg = dir.path().join("serve.toml");
    std::fs::write(
        &cfg,
        format!(
            "dir = {:?}\nrate = \"250M\"\nlisten = \"127.0.0.1:0\"\nmetrics = \"off\"\nscheme = \"FEC(0.1)+R(5)\"\ninterface = \"127.0.0.1\"\ndata_group = \"239.255.47.151:4751\"\nannounce_group = \"239.255.47.152:4752\"\nbatch_hold_ms = 2500\nbatch_hold_after_ms = 0\nbatch_hold_idle = true\n",
            repo.display().to_string()
        ),
    )
    .expect("write");
    let mut child = Command::new(env!("CARGO_BIN_EXE_repocast"))
        .args(["serve", "--config"])
        .arg(&cfg)
        .args(["--scheduler", "fifo"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("banner");
    let _ = child.kill();
    let _ = child.wait();
    assert!(line.contains("rate 250.0 Mbit/s"), "{line}");
    assert!(line.contains("scheme FEC(0.1)+R(5)"), "{line}");
    assert!(
        line.contains(
            "scheduler FIFO with a batching hold of up to 2500 ms after 0 ms of load, idling the link"
        ),
        "{line}"
    );
    assert!(line.contains("1 items"), "{line}");
}

#[test]
fn an_unknown_key_is_a_usage_error() {
    let dir = tempfile::tempdir().expect("tmp");
    let cfg = dir.path().join("bad.toml");
    std::fs::write(&cfg, "rat = \"1G\"\n").expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_repocast"))
        .args(["serve", "--config"])
        .arg(&cfg)
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("unknown field"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_batching_hold_over_a_minute_is_a_usage_error() {
    let dir = tempfile::tempdir().expect("tmp");
    for (flag, msg) in [
        ("--batch-hold", "batch-hold must be at most 60000 ms"),
        (
            "--batch-hold-after",
            "batch-hold-after must be at most 60000 ms",
        ),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_repocast"))
            .arg("serve")
            .arg(dir.path())
            .args([flag, "60001"])
            .output()
            .expect("run");
        assert_eq!(out.status.code(), Some(2));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(msg),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
