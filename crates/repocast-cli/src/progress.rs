//! Progress display for `get`: a bar per item and one overall, with ETA, on
//! a terminal; plain lines (one per finished item) otherwise.

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use repocast_core::ItemId;
use repocast_net::client::Progress;
use std::collections::HashMap;
use std::io::IsTerminal;

/// Consumes [`Progress`] events of one client.
pub struct Display {
    multi: Option<MultiProgress>,
    overall: Option<ProgressBar>,
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
        let multi = tty.then(|| MultiProgress::with_draw_target(ProgressDrawTarget::stderr()));
        let overall = multi.as_ref().map(|m| {
            let b = m.add(ProgressBar::new(0));
            b.set_style(style(
                "{prefix:>8} [{bar:40}] {bytes}/{total_bytes} {bytes_per_sec} ETA {eta}",
            ));
            b.set_prefix(format!("{prefix}all"));
            b
        });
        Display {
            multi,
            overall,
            bars: HashMap::new(),
            names: HashMap::new(),
            prefix: prefix.to_owned(),
            lines,
        }
    }

    /// Shows one event.
    pub fn show(&mut self, p: &Progress) {
        match p {
            Progress::Item {
                item,
                name,
                size,
                resumed,
            } => {
                self.names.insert(*item, name.clone());
                if let (Some(m), Some(o)) = (&self.multi, &self.overall) {
                    o.inc_length(*size);
                    o.inc(*resumed);
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
            Progress::Complete { item } => match self.bars.remove(item) {
                Some(b) => b.finish_and_clear(),
                None if self.lines => {
                    eprintln!(
                        "{}{}: verified",
                        self.prefix,
                        self.names.get(item).map_or("?", String::as_str)
                    )
                }
                None => {}
            },
            Progress::Join(_) => {}
            Progress::Failed { name, reason } => {
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
