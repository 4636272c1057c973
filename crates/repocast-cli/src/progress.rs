//! Progress display for `get`: one bar overall, with ETA, and a bar for
//! each of the first [`MAX_BARS`] items being received, on a terminal;
//! plain lines (one per finished item) otherwise. A request for the whole
//! catalogue knows its total at the start (`Progress::Requested`); one
//! by name learns it item by item, as the manifests come.

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use repocast_core::ItemId;
use repocast_net::client::Progress;
use std::collections::HashMap;
use std::io::IsTerminal;

/// `text` as it may be shown on a terminal or in a log line: item names
/// and reasons come from a server or a pusher, and a control character in
/// one (an escape sequence, a line break) is shown escaped, not obeyed.
pub fn shown(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return std::borrow::Cow::Borrowed(text);
    }
    let escape = |c: char| match c.is_control() {
        true => c.escape_debug().collect::<String>(),
        false => c.to_string(),
    };
    std::borrow::Cow::Owned(text.chars().map(escape).collect())
}

/// Most items with a bar of their own at once: a request for thousands
/// of small files has a few hundred open at a time, and a bar each would
/// fill the terminal and cost the redraws; the overall bar counts them.
pub const MAX_BARS: usize = 8;

/// Consumes [`Progress`] events of one client.
pub struct Display {
    multi: Option<MultiProgress>,
    overall: Option<ProgressBar>,
    /// The overall bar's length is the request's, known at the start.
    total_known: bool,
    /// Items verified, and asked for (when known).
    verified: u64,
    items: Option<u64>,
    bars: HashMap<ItemId, ProgressBar>,
    names: HashMap<ItemId, String>,
    prefix: String,
    lines: bool,
}

fn style(t: &str) -> ProgressStyle {
    ProgressStyle::with_template(t).unwrap_or_else(|_| ProgressStyle::default_bar())
}

impl Display {
    /// A display; bars only when stderr is a terminal and `bars` is set;
    /// otherwise a plain line per finished item if `lines` is set (failures
    /// are always shown).
    pub fn new(prefix: &str, bars: bool, lines: bool) -> Display {
        let tty = bars && std::io::stderr().is_terminal();
        Display::drawn_to(prefix, tty.then(ProgressDrawTarget::stderr), lines)
    }

    /// A display whose bars (if any) are drawn to `target`.
    fn drawn_to(prefix: &str, target: Option<ProgressDrawTarget>, lines: bool) -> Display {
        let multi = target.map(MultiProgress::with_draw_target);
        let overall = multi.as_ref().map(|m| {
            let b = m.add(ProgressBar::new(0));
            b.set_style(style(
                "{prefix:>8} [{bar:40}] {bytes}/{total_bytes} {bytes_per_sec} ETA {eta} {msg}",
            ));
            b.set_prefix(format!("{prefix}all"));
            b
        });
        Display {
            multi,
            overall,
            total_known: false,
            verified: 0,
            items: None,
            bars: HashMap::new(),
            names: HashMap::new(),
            prefix: prefix.to_owned(),
            lines,
        }
    }

    /// Shows one event.
    pub fn show(&mut self, p: &Progress) {
        match p {
            Progress::Requested { items, bytes } => {
                self.items = Some(*items);
                if let Some(o) = &self.overall {
                    o.set_length(*bytes);
                    self.total_known = true;
                    o.set_message(format!("0/{items} files"));
                }
            }
            Progress::Item {
                item,
                name,
                size,
                resumed,
            } => {
                let name = shown(name).into_owned();
                self.names.insert(*item, name.clone());
                if let (Some(m), Some(o)) = (&self.multi, &self.overall) {
                    if !self.total_known {
                        o.inc_length(*size);
                    }
                    o.inc(*resumed);
                    if self.bars.len() >= MAX_BARS {
                        return;
                    }
                    let b = m.add(ProgressBar::new(*size));
                    b.set_style(style("{prefix:>8} [{bar:40}] {bytes}/{total_bytes} {msg}"));
                    b.set_prefix(self.prefix.clone());
                    b.set_message(name.clone());
                    b.inc(*resumed);
                    self.bars.insert(*item, b);
                } else if *resumed > 0 && self.lines {
                    eprintln!(
                        "{}{name}: {resumed} of {size} bytes already verified here",
                        self.prefix
                    );
                }
            }
            Progress::Bytes { item, bytes } => {
                if let Some(b) = self.bars.get(item) {
                    b.inc(*bytes);
                }
                if let Some(o) = &self.overall {
                    o.inc(*bytes);
                }
            }
            Progress::Complete { item } => {
                if let Some(b) = self.bars.remove(item) {
                    b.finish_and_clear();
                }
                self.verified += 1;
                if let (Some(o), Some(n)) = (&self.overall, self.items) {
                    o.set_message(format!("{}/{n} files", self.verified));
                }
                if self.multi.is_none() && self.lines {
                    // One write a line (stderr is unbuffered: `eprintln!`
                    // makes one per piece, for each of thousands of files).
                    let name = self.names.get(item).map_or("?", String::as_str);
                    let line = format!("{}{name}: verified\n", self.prefix);
                    let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
                }
            }
            Progress::Join(_) => {}
            Progress::Failed { name, reason } => {
                let (name, reason) = (shown(name), shown(reason));
                let line = format!("{}{name}: FAILED: {reason}", self.prefix);
                match &self.multi {
                    Some(m) => {
                        let _ = m.println(line);
                    }
                    None => eprintln!("{line}"),
                }
            }
        }
    }

    /// Removes the bars.
    pub fn finish(&mut self) {
        for (_, b) in self.bars.drain() {
            b.finish_and_clear();
        }
        if let Some(o) = &self.overall {
            o.finish_and_clear();
        }
    }
}

/// The summary's words on partly received blocks a previous run kept
/// (empty when there were none).
pub fn kept_note(blocks: u64, symbols: u64) -> String {
    if blocks == 0 {
        return String::new();
    }
    format!(", {blocks} partly received blocks went on with {symbols} symbols kept by the last run")
}

/// The summary's words on signed symbols (empty when the sender signed
/// none): batches checked, and what was refused or dropped.
pub fn signing_note(s: &repocast_core::endpoint::signing::VerifierStats) -> String {
    if s.batches == 0 && s.bad_batches == 0 {
        return String::new();
    }
    format!(
        ", symbols signed: {} batches checked, {} refused, {} unlisted packets dropped",
        s.batches, s.bad_batches, s.unsigned_dropped
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_with_control_characters_is_shown_escaped() {
        assert!(matches!(
            shown("docs/a b.txt"),
            std::borrow::Cow::Borrowed(_)
        ));
        assert_eq!(shown("docs/é.txt"), "docs/é.txt");
        assert_eq!(shown("a\u{1b}[2Jb\nc"), "a\\u{1b}[2Jb\\nc");
    }

    fn item(i: u32, size: u64) -> Progress {
        Progress::Item {
            item: ItemId(i),
            name: format!("f{i}"),
            size,
            resumed: 0,
        }
    }

    fn bars() -> Display {
        Display::drawn_to("", Some(ProgressDrawTarget::hidden()), false)
    }

    #[test]
    fn a_request_known_at_the_start_has_its_total_from_the_start() {
        let mut d = bars();
        d.show(&Progress::Requested {
            items: 20,
            bytes: 20_000,
        });
        for i in 0..20 {
            d.show(&item(i, 1_000));
        }
        let o = d.overall.clone().expect("overall bar");
        assert_eq!(o.length(), Some(20_000), "not grown by the manifests");
        assert_eq!(d.bars.len(), MAX_BARS, "a bar each for the first few only");
        d.show(&Progress::Bytes {
            item: ItemId(15),
            bytes: 1_000,
        });
        d.show(&Progress::Complete { item: ItemId(15) });
        d.show(&Progress::Complete { item: ItemId(0) });
        assert_eq!(o.position(), 1_000);
        assert_eq!(o.message(), "2/20 files");
        assert_eq!(d.bars.len(), MAX_BARS - 1);
    }

    #[test]
    fn a_request_by_name_grows_its_total_with_each_manifest() {
        let mut d = bars();
        d.show(&item(0, 300));
        d.show(&item(1, 700));
        let o = d.overall.clone().expect("overall bar");
        assert_eq!(o.length(), Some(1_000));
        assert_eq!(d.bars.len(), 2);
    }
}
