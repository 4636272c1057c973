//! What `get` and `listen` print at the end: the failed items, and the
//! `--json` summaries, made with `serde_json`:
//! item names come from a server or a pusher, and any of them (quotes,
//! control characters) must come out as valid JSON for the scripts that
//! read it.

use crate::progress::shown;
use repocast_core::endpoint::client::Outcome;
use serde_json::{Value, json};

/// Each item's outcome: name, size, whether verified, and why not.
pub fn items(outcomes: &[Outcome]) -> Value {
    (outcomes.iter())
        .map(|o| {
            json!({
                "name": o.name,
                "size": o.size,
                "ok": o.result.is_ok(),
                "reason": o.result.as_ref().err().cloned().unwrap_or_default(),
            })
        })
        .collect()
}

/// Each item that failed, with its reason, on standard error (names and
/// reasons shown escaped: [`crate::progress::shown`]).
pub fn print_failed(outcomes: &[Outcome]) {
    for o in outcomes {
        if let Err(reason) = &o.result {
            eprintln!("FAILED {}: {}", shown(&o.name), shown(reason));
        }
    }
}

/// Items verified, and their bytes.
pub fn verified(outcomes: &[Outcome]) -> (usize, u64) {
    let ok = outcomes.iter().filter(|o| o.result.is_ok());
    (ok.clone().count(), ok.map(|o| o.size).sum())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_name_makes_valid_json() {
        let outcomes = vec![
            Outcome {
                name: "a \"quoted\"\u{1b}[31m\u{200b}.txt".into(),
                size: 5,
                result: Ok(()),
            },
            Outcome {
                name: "b".into(),
                size: 7,
                result: Err("no such item".into()),
            },
        ];
        let text = json!({ "items": items(&outcomes) }).to_string();
        let back: Value = serde_json::from_str(&text).expect("valid JSON");
        assert_eq!(back["items"][0]["name"], outcomes[0].name.as_str());
        assert_eq!(back["items"][1]["reason"], "no such item");
        assert_eq!(back["items"][1]["ok"], false);
        assert_eq!(verified(&outcomes), (1, 5));
    }
}
