//! The README's first command works: `repocast demo` (real loopback
//! multicast) verifies every file at every client and says so; so does the
//! in-process `--virtual` variant; a bad scheme is a clear usage error.

use std::process::Command;

#[test]
fn the_virtual_demo_verifies_every_file() {
    let out = Command::new(env!("CARGO_BIN_EXE_repocast"))
        .args([
            "demo",
            "--seed",
            "3",
            "--scheme",
            "FEC(0.05R)+R(2)",
            "--virtual",
        ])
        .output()
        .expect("run repocast demo");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("every requested file verified"), "{text}");
    assert_eq!(text.matches("| yes |").count(), 4, "{text}");
}

#[test]
fn the_multicast_demo_verifies_every_file() {
    let out = Command::new(env!("CARGO_BIN_EXE_repocast"))
        .arg("demo")
        .output()
        .expect("run repocast demo");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("byte-identical at every client"), "{text}");
    assert_eq!(text.matches("| yes |").count(), 4, "{text}");
}

#[test]
fn a_bad_scheme_is_a_usage_error() {
    let out = Command::new(env!("CARGO_BIN_EXE_repocast"))
        .args(["demo", "--scheme", "FEC(x)"])
        .output()
        .expect("run repocast demo");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("invalid scheme"));
}
