//! What the CLI's tests share: the binary, a child reaped however a test
//! ends, a server on loopback, and a run stopped by SIGTERM once it says a
//! phrase.

#![allow(dead_code)] // each test binary uses its own part

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

pub fn repocast() -> Command {
    Command::new(env!("CARGO_BIN_EXE_repocast"))
}

/// A child process killed when the test ends, however it ends (a sender
/// left behind by a failed assertion would go on sending to the group).
pub struct Reaped(pub Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs `cmd`, sends it SIGTERM once a line of its stderr contains
/// `phrase`, and waits for it: its output, with the stderr after that line.
pub fn stopped_when_it_says(cmd: &mut Command, phrase: &str) -> Output {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut err = BufReader::new(child.stderr.take().expect("stderr"));
    let mut line = String::new();
    while !line.contains(phrase) {
        line.clear();
        if err.read_line(&mut line).expect("stderr") == 0 {
            break;
        }
    }
    assert!(line.contains(phrase), "no {phrase:?}: {line}");
    let pid = child.id().to_string();
    let killed = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    assert!(killed.success());
    let mut out = child.wait_with_output().expect("wait");
    let _ = err.read_to_end(&mut out.stderr);
    out
}

/// `repocast serve` of `repo` at 10 Mbit/s on loopback and the given
/// groups: the server, its request address and its key.
pub fn serve(dir: &Path, repo: &Path, groups: (&str, &str)) -> (Reaped, String, String) {
    let mut child = repocast()
        .arg("serve")
        .arg(repo)
        .args(["--rate", "10M", "--interface", "127.0.0.1"])
        .args(["--listen", "127.0.0.1:0", "--no-metrics"])
        .args(["--data-group", groups.0, "--announce-group", groups.1])
        .arg("--key")
        .arg(dir.join("server.key"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("serve");
    let mut banner = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut banner)
        .expect("banner");
    let after = |tag: &str| {
        let at = banner
            .find(tag)
            .unwrap_or_else(|| panic!("{tag} in {banner}"))
            + tag.len();
        banner[at..]
            .split([',', ' ', ';'])
            .next()
            .unwrap_or_default()
            .to_owned()
    };
    let (addr, key) = (after("requests on tcp "), after("key "));
    (Reaped(child), addr, key)
}
