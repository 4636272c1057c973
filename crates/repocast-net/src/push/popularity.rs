//! `--popularity FILE`: access weights per item for MAD, read from a small
//! TOML table (`"path" = weight`), CSV lines (`path,weight`) or a Common
//! Log Format web log (each `GET`/`HEAD` request counts one for its path).
//! Every line is untrusted: a line that does not parse is skipped and
//! counted; weights must be finite and non-negative.

use crate::NetError;
use std::collections::HashMap;
use std::path::Path;

/// Largest popularity file read.
pub const MAX_POPULARITY_BYTES: u64 = 256 << 20;

/// Weights by item name, and how many lines were skipped.
pub fn read(path: &Path) -> Result<(HashMap<String, f64>, usize), NetError> {
    let meta = std::fs::metadata(path).map_err(|e| NetError::file(path, e))?;
    if meta.len() > MAX_POPULARITY_BYTES {
        return Err(NetError::Setting("the popularity file is over 256 MiB"));
    }
    let text = std::fs::read_to_string(path).map_err(|e| NetError::file(path, e))?;
    if path.extension().is_some_and(|e| e == "toml") {
        let table: HashMap<String, f64> =
            toml::from_str(&text).map_err(|e| NetError::Popularity {
                path: path.display().to_string(),
                msg: e.to_string(),
            })?;
        let ok: HashMap<String, f64> = table
            .into_iter()
            .filter(|(_, w)| w.is_finite() && *w >= 0.0)
            .collect();
        return Ok((ok, 0));
    }
    Ok(parse_lines(&text))
}

/// CSV or Common Log Format lines.
pub fn parse_lines(text: &str) -> (HashMap<String, f64>, usize) {
    let mut w: HashMap<String, f64> = HashMap::new();
    let mut skipped = 0;
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        match parse_line(line) {
            Some((name, weight)) => *w.entry(name).or_default() += weight,
            None => skipped += 1,
        }
    }
    (w, skipped)
}

fn parse_line(line: &str) -> Option<(String, f64)> {
    // Common Log Format: host ident user [date] "GET /path HTTP/1.0" ...
    if let Some(req) = line.split('"').nth(1) {
        let mut parts = req.split_whitespace();
        let method = parts.next()?;
        if method != "GET" && method != "HEAD" {
            return None;
        }
        let target = parts.next()?;
        let path = target.split(['?', '#']).next()?.trim_start_matches('/');
        return (!path.is_empty()).then(|| (path.to_owned(), 1.0));
    }
    let (name, weight) = line.rsplit_once(',')?;
    let weight: f64 = weight.trim().parse().ok()?;
    (weight.is_finite() && weight >= 0.0).then(|| (name.trim().to_owned(), weight))
}

/// Weights in item order for `names`: an item missing from `by_name`
/// gets the mean of those present (all equal when none is).
pub fn weights_for(names: &[&str], by_name: &HashMap<String, f64>) -> Vec<f64> {
    let known: Vec<f64> = names
        .iter()
        .filter_map(|n| by_name.get(*n).copied())
        .collect();
    let mean = if known.is_empty() {
        1.0
    } else {
        known.iter().sum::<f64>() / known.len() as f64
    };
    names
        .iter()
        .map(|n| by_name.get(*n).copied().unwrap_or(mean))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_and_web_log_lines_count_per_path() {
        let text = "a.html,3\n\
            # comment\n\
            b.css, 0.5\n\
            10.0.0.1 - - [10/Oct/2000:13:55:36 -0700] \"GET /a.html HTTP/1.0\" 200 2326\n\
            10.0.0.2 - - [10/Oct/2000:13:55:37 -0700] \"GET /c.js?v=2 HTTP/1.0\" 200 10\n\
            10.0.0.2 - - [10/Oct/2000:13:55:37 -0700] \"POST /c.js HTTP/1.0\" 200 10\n\
            garbage\n\
            x,-1\n\
            y,NaN\n";
        let (w, skipped) = parse_lines(text);
        assert_eq!(w.get("a.html"), Some(&4.0));
        assert_eq!(w.get("b.css"), Some(&0.5));
        assert_eq!(w.get("c.js"), Some(&1.0));
        assert_eq!(skipped, 4);
        assert_eq!(
            weights_for(&["a.html", "zzz", "c.js"], &w),
            vec![4.0, 2.5, 1.0]
        );
    }
}
