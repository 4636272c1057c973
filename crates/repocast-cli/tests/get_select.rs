//! `repocast get` of patterns, a folder and `--from -` against a real
//! server on loopback, read through its `--json` summary: each named file
//! verified and equal to its source, a pattern that names nothing failed
//! as itself, exit 1; and `ls` of the same selectors.

mod common;

use common::{repocast, serve};
use std::io::Write;
use std::process::Stdio;

#[test]
fn get_of_patterns_and_a_folder_reports_each_item_in_json() {
    let dir = tempfile::tempdir().expect("tmp");
    let (repo, out) = (dir.path().join("repo"), dir.path().join("out"));
    let files = [
        ("a.iso", 30_000),
        ("b.txt", 2_000),
        ("docs/x.txt", 1_500),
        ("docs/deep/y.txt", 700),
        ("other/z.txt", 300),
    ];
    for (i, (name, size)) in files.iter().enumerate() {
        let path = repo.join(name);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(&path, vec![i as u8 + 1; *size]).expect("write");
    }
    let groups = ("239.255.47.185:4785", "239.255.47.186:4786");
    let (_server, addr, key) = serve(dir.path(), &repo, groups);

    let mut get = repocast()
        .args(["get", "--server", &addr, "--trust", &key, "--no-share"])
        .args(["--interface", "127.0.0.1", "--json", "--out"])
        .arg(&out)
        .args(["*.iso", "--from", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("get");
    let list = "# what else\ndocs/\n\n*.zip\n";
    (get.stdin.take().expect("stdin"))
        .write_all(list.as_bytes())
        .expect("list");
    let done = get.wait_with_output().expect("wait");
    assert_eq!(done.status.code(), Some(1), "{done:?}");
    let summary: serde_json::Value = serde_json::from_slice(&done.stdout).expect("JSON");
    let items = summary["items"].as_array().expect("items");
    let names: Vec<&str> = items.iter().filter_map(|i| i["name"].as_str()).collect();
    assert_eq!(names, ["a.iso", "docs/deep/y.txt", "docs/x.txt", "*.zip"]);
    assert_eq!(summary["verified"], 3);
    assert_eq!(items[3]["ok"], false);
    assert_eq!(
        items[3]["reason"],
        "names no item in the server's catalogue"
    );
    for name in &names[..3] {
        let src = std::fs::read(repo.join(name)).expect("source");
        assert_eq!(
            std::fs::read(out.join(name)).expect("fetched"),
            src,
            "{name}"
        );
    }
    assert!(!out.join("b.txt").exists() && !out.join("other").exists());

    let ls = repocast()
        .args(["ls", "--server", &addr, "--trust", &key, "docs/", "b.txt"])
        .output()
        .expect("ls");
    let text = String::from_utf8_lossy(&ls.stdout);
    assert!(ls.status.success(), "{ls:?}");
    let lines: Vec<&str> = text.lines().collect();
    let (last, rows) = lines.split_last().expect("lines");
    let listed: Vec<&str> = rows
        .iter()
        .filter_map(|l| l.split_whitespace().nth(1))
        .collect();
    assert_eq!(listed, ["b.txt", "docs/deep/y.txt", "docs/x.txt"]);
    assert_eq!(*last, "3 items, 4200 bytes");
}
