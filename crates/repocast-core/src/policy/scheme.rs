//! The scheme notation: one string names a whole reliability scheme.
//!
//! Grammar: `ARM` | `FEC(<fec>)+R(<r>)[+notify]`, where `<fec>` is `f`,
//! `fR` (or `f*R`), `f/R` or `maxloss+x`, and `<r>` is `inf`, `0` or a
//! symbol count p. `ARM` may carry `+R(..)` and `+notify` too (the policy
//! for what is still missing when an ARM transmission ends; default R(inf)).
//! Parsing then printing gives back the canonical form.

use super::{FecPolicy, Retransmit};
use std::fmt;
use std::str::FromStr;

/// A whole reliability scheme (in settings files: its notation, a string).
#[derive(Debug, Clone, Copy, PartialEq, serde::Deserialize)]
#[serde(try_from = "String")]
pub struct Scheme {
    /// Redundancy up front.
    pub fec: FecPolicy,
    /// What NAKs trigger.
    pub retransmit: Retransmit,
    /// Late joiners are told of the transmission in progress.
    pub notify: bool,
}

impl Default for Scheme {
    /// `FEC(0.01R)+R(0)`, the study's best scheme at moderate loss.
    fn default() -> Self {
        Scheme {
            fec: FecPolicy::PerReceiver(0.01),
            retransmit: Retransmit::Reschedule,
            notify: false,
        }
    }
}

impl Scheme {
    /// Whether this is ARM: its request-mode transmissions adapt by probes
    /// piggy-backed on their data packets (each
    /// [`crate::wire::data::DATA_PROBE_OVERHEAD`] bytes longer), so a
    /// sender sizing symbols to its link leaves room for them.
    pub fn is_arm(&self) -> bool {
        matches!(self.fec, FecPolicy::Arm)
    }
}

/// A scheme string that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid scheme {text:?}: {why} (expected e.g. FEC(0.01R)+R(0)+notify, FEC(0)+R(inf), ARM)"
)]
pub struct SchemeError {
    /// The text given.
    pub text: String,
    /// What is wrong with it.
    pub why: &'static str,
}

fn num(s: &str) -> Option<f64> {
    let v: f64 = s.trim().parse().ok()?;
    (v.is_finite() && v >= 0.0).then_some(v)
}

fn fmt_num(v: f64) -> String {
    format!("{v}")
}

impl FecPolicy {
    /// Parses the inside of `FEC(...)`.
    pub fn parse_arg(s: &str) -> Option<FecPolicy> {
        let s = s.trim();
        if let Some(x) = s.strip_prefix("maxloss") {
            let x = x.trim();
            if x.is_empty() {
                return Some(FecPolicy::MaxLoss(0.0));
            }
            return num(x.strip_prefix('+')?).map(FecPolicy::MaxLoss);
        }
        if let Some(f) = s.strip_suffix("/R") {
            return num(f).map(FecPolicy::InversePerReceiver);
        }
        if let Some(f) = s.strip_suffix('R') {
            return num(f.strip_suffix('*').unwrap_or(f)).map(FecPolicy::PerReceiver);
        }
        num(s).map(FecPolicy::Fixed)
    }
}

impl TryFrom<String> for Scheme {
    type Error = SchemeError;
    fn try_from(s: String) -> Result<Self, SchemeError> {
        s.parse()
    }
}

impl FromStr for Scheme {
    type Err = SchemeError;

    fn from_str(text: &str) -> Result<Self, SchemeError> {
        let err = |why| SchemeError {
            text: text.to_owned(),
            why,
        };
        let mut fec = None;
        let mut retransmit = None;
        let mut notify = false;
        // Split on '+' outside parentheses (maxloss+x has one inside).
        let mut parts = Vec::new();
        let (mut depth, mut start) = (0i32, 0usize);
        for (i, ch) in text.char_indices() {
            match ch {
                '(' => depth += 1,
                ')' => depth -= 1,
                '+' if depth == 0 => {
                    parts.push(&text[start..i]);
                    start = i + 1;
                }
                _ => {}
            }
        }
        parts.push(&text[start..]);
        for p in parts.into_iter().map(str::trim) {
            if p.eq_ignore_ascii_case("arm") {
                fec = Some(FecPolicy::Arm);
            } else if p.eq_ignore_ascii_case("notify") {
                notify = true;
            } else if let Some(a) = p.strip_prefix("FEC(").and_then(|r| r.strip_suffix(')')) {
                fec = Some(FecPolicy::parse_arg(a).ok_or_else(|| err("bad FEC argument"))?);
            } else if let Some(a) = p.strip_prefix("R(").and_then(|r| r.strip_suffix(')')) {
                let a = a.trim();
                retransmit = Some(if a == "inf" {
                    Retransmit::Always
                } else {
                    match a.parse::<u32>().map_err(|_| err("bad R argument"))? {
                        0 => Retransmit::Reschedule,
                        p => Retransmit::Selective(p),
                    }
                });
            } else {
                return Err(err("unknown part"));
            }
        }
        let fec = fec.ok_or_else(|| err("missing FEC(...) or ARM"))?;
        let retransmit = match (fec, retransmit) {
            (_, Some(r)) => r,
            (FecPolicy::Arm, None) => Retransmit::Always,
            _ => return Err(err("missing R(...)")),
        };
        Ok(Scheme {
            fec,
            retransmit,
            notify,
        })
    }
}

impl fmt::Display for Scheme {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.fec {
            FecPolicy::Fixed(x) => write!(f, "FEC({})", fmt_num(x))?,
            FecPolicy::PerReceiver(x) => write!(f, "FEC({}R)", fmt_num(x))?,
            FecPolicy::InversePerReceiver(x) => write!(f, "FEC({}/R)", fmt_num(x))?,
            FecPolicy::MaxLoss(x) => write!(f, "FEC(maxloss+{})", fmt_num(x))?,
            FecPolicy::Arm => write!(f, "ARM")?,
        }
        match (self.fec, self.retransmit) {
            (FecPolicy::Arm, Retransmit::Always) => {}
            (_, Retransmit::Always) => write!(f, "+R(inf)")?,
            (_, Retransmit::Reschedule) => write!(f, "+R(0)")?,
            (_, Retransmit::Selective(p)) => write!(f, "+R({p})")?,
        }
        if self.notify {
            write!(f, "+notify")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_forms_round_trip() {
        for s in [
            "FEC(0.01R)+R(0)+notify",
            "FEC(0)+R(inf)",
            "FEC(0.1)+R(10)",
            "FEC(0.2/R)+R(inf)",
            "FEC(maxloss+0.05)+R(0)",
            "ARM",
            "ARM+R(0)+notify",
        ] {
            let sch: Scheme = s.parse().expect(s);
            assert_eq!(sch.to_string(), s);
        }
        let s: Scheme = "FEC(0.03*R)+R(2)".parse().expect("valid");
        assert_eq!(s.fec, FecPolicy::PerReceiver(0.03));
        assert_eq!(s.retransmit, Retransmit::Selective(2));
        assert_eq!(Scheme::default().to_string(), "FEC(0.01R)+R(0)");
    }

    #[test]
    fn bad_schemes_are_errors() {
        for s in [
            "",
            "FEC(x)+R(0)",
            "FEC(0.1)",
            "R(0)",
            "FEC(-1)+R(0)",
            "FEC(0)+R(-2)",
            "FEC(0)+R(0)+loud",
        ] {
            assert!(s.parse::<Scheme>().is_err(), "{s}");
        }
    }
}
