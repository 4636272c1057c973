//! Which items a user's selectors name: exact names, shell-style globs and
//! folders. One set of rules for both modes: `get` resolves its selectors
//! against the server's catalogue ([`super::client::Want::Select`]),
//! `listen` against the pusher's (`ListenConfig::select`).
//!
//! - `*` is any run of characters but `/`, `**` any run at all, `?` one
//!   character but `/`;
//! - a selector ending in `/` is a folder: every item under it;
//! - anything else is one item's exact name.

use std::collections::HashSet;

/// Whether `sel` names items by a pattern or a folder (resolved against a
/// catalogue), not one item by its exact name.
pub fn is_pattern(sel: &str) -> bool {
    sel.contains(['*', '?']) || sel.ends_with('/')
}

/// Whether the selector `sel` names the item `name`.
pub fn selects(sel: &str, name: &str) -> bool {
    if sel.ends_with('/') {
        name.len() > sel.len() && glob_match(&format!("{sel}**"), name)
    } else {
        glob_match(sel, name)
    }
}

/// The names `sels` pick out of `names` (a catalogue, in its order): each
/// selector's names in turn, each name once. An exact name is taken as it
/// is, in the catalogue or not (the server says so if not). Also returns
/// the patterns and folders that name nothing.
///
/// Costs one hash lookup per exact name and one match of each pattern
/// against each name: a user names thousands of files one by one, and
/// gives a handful of patterns.
pub fn resolve<'a>(
    sels: &[String],
    names: impl Iterator<Item = &'a str> + Clone,
) -> (Vec<String>, Vec<String>) {
    let mut seen: HashSet<&str> = HashSet::new();
    let mut picked = Vec::new();
    let mut unmatched = Vec::new();
    for sel in sels {
        if !is_pattern(sel) {
            if seen.insert(sel) {
                picked.push(sel.clone());
            }
            continue;
        }
        let mut any = false;
        for n in names.clone().filter(|n| selects(sel, n)) {
            any = true;
            if seen.insert(n) {
                picked.push(n.to_owned());
            }
        }
        if !any {
            unmatched.push(sel.clone());
        }
    }
    (picked, unmatched)
}

/// Whether `name` matches the shell-style `pattern` (see the module's
/// rules; no folder rule here).
pub fn glob_match(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    // Dynamic programming over (pattern position, name position): linear
    // in the name per pattern character, so no hostile pattern or name
    // (a server's names are its own) costs more than their product.
    let mut cur = vec![false; n.len() + 1];
    cur[0] = true;
    let mut i = 0;
    while i < p.len() {
        let mut next = vec![false; n.len() + 1];
        if p[i] == '*' {
            let deep = p.get(i + 1) == Some(&'*');
            // A star reaches from any matched place forward, across `/`
            // only when doubled.
            let mut run = false;
            for j in 0..=n.len() {
                if j > 0 && !deep && n[j - 1] == '/' {
                    run = false;
                }
                run |= cur[j];
                next[j] = run;
            }
            i += if deep { 2 } else { 1 };
        } else {
            for j in 0..n.len() {
                if cur[j] && (p[i] == n[j] || (p[i] == '?' && n[j] != '/')) {
                    next[j + 1] = true;
                }
            }
            i += 1;
        }
        cur = next;
    }
    cur[n.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_as_a_shell_does() {
        assert!(glob_match("a.txt", "a.txt"));
        assert!(!glob_match("a.txt", "b.txt"));
        assert!(glob_match("*.txt", "a.txt"));
        assert!(!glob_match("*.txt", "d/a.txt"));
        assert!(glob_match("**.txt", "d/a.txt"));
        assert!(glob_match("d/*", "d/a"));
        assert!(!glob_match("d/*", "d/e/a"));
        assert!(glob_match("d/**", "d/e/a"));
        assert!(glob_match("?.bin", "x.bin"));
        assert!(!glob_match("?.bin", "xy.bin"));
        assert!(glob_match("*", ""));
        assert!(!glob_match("", "a"));
        assert!(glob_match("d/*/x", "d/e/x"));
        assert!(!glob_match("d/*/x", "d/e/f/x"));
        assert!(glob_match("*a*b", "xxaxxb"));
        assert!(!glob_match("*a*b", "xxbxxa"));
    }

    #[test]
    fn a_hostile_pattern_against_a_long_name_is_quick() {
        let name = "a".repeat(4096);
        let pattern = "*a".repeat(200) + "b";
        assert!(!glob_match(&pattern, &name));
        assert!(glob_match(&("*a".repeat(200) + "*"), &name));
    }

    #[test]
    fn a_folder_selects_what_is_under_it() {
        assert!(selects("d/", "d/a"));
        assert!(selects("d/", "d/e/a"));
        assert!(!selects("d/", "d"));
        assert!(!selects("d/", "dx/a"));
        assert!(selects("*/", "d/a"));
        assert!(is_pattern("d/") && is_pattern("*.txt") && is_pattern("a?"));
        assert!(!is_pattern("d/a.txt"));
    }

    #[test]
    fn resolve_keeps_the_order_asked_and_each_name_once() {
        let cat = ["a/1", "a/2", "b/1", "c.txt", "a/sub/3"];
        let sels: Vec<String> = ["c.txt", "a/*", "a/", "missing", "z/*", "*.bin"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let (picked, unmatched) = resolve(&sels, cat.iter().copied());
        assert_eq!(picked, ["c.txt", "a/1", "a/2", "a/sub/3", "missing"]);
        assert_eq!(unmatched, ["z/*", "*.bin"]);
    }
}
