//! Seeded packet-loss models: Bernoulli and two-state Gilbert-Elliott.
//!
//! Used by the in-process harness, by the simulator's links and by
//! the network layer's loss emulation, so all three lose packets the same way.

use crate::rng::Rng;

/// Parameters of a loss model (a value, cheap to copy into configs).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LossSpec {
    /// Each packet is lost independently with probability `p`.
    Bernoulli { p: f64 },
    /// Two states: Good loses with `loss_good`, Bad with `loss_bad`;
    /// `p_gb` is the chance per packet of going Good to Bad, `p_bg` back.
    GilbertElliott {
        p_gb: f64,
        p_bg: f64,
        loss_good: f64,
        loss_bad: f64,
    },
}

impl LossSpec {
    /// No loss.
    pub const NONE: LossSpec = LossSpec::Bernoulli { p: 0.0 };

    /// The long-run fraction of packets lost.
    pub fn mean_loss(&self) -> f64 {
        match *self {
            LossSpec::Bernoulli { p } => p,
            LossSpec::GilbertElliott {
                p_gb,
                p_bg,
                loss_good,
                loss_bad,
            } => {
                let denom = p_gb + p_bg;
                if denom <= 0.0 {
                    return loss_good;
                }
                let bad = p_gb / denom;
                bad * loss_bad + (1.0 - bad) * loss_good
            }
        }
    }

    /// A Gilbert-Elliott model with mean loss `mean` and mean burst length
    /// `burst` packets (Bad loses everything, Good nothing).
    pub fn bursty(mean: f64, burst: f64) -> LossSpec {
        let p_bg = 1.0 / burst.max(1.0);
        let mean = mean.clamp(0.0, 0.999);
        let p_gb = mean * p_bg / (1.0 - mean);
        LossSpec::GilbertElliott {
            p_gb,
            p_bg,
            loss_good: 0.0,
            loss_bad: 1.0,
        }
    }
}

/// A loss given as text that is neither a probability nor `ge:MEAN:BURST`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad loss {0:?}: give a probability (0.2) or ge:MEAN:BURST (ge:0.1:8)")]
pub struct BadLoss(pub String);

/// The one spelling of a loss model everywhere it is given as text (`get
/// --emulate-loss`, the simulator's examples, the lab's `--client-loss`):
/// a probability `P` in [0, 1] (Bernoulli), or `ge:MEAN:BURST` for
/// [`LossSpec::bursty`] with MEAN in [0, 1) and BURST at least 1 packet.
impl std::str::FromStr for LossSpec {
    type Err = BadLoss;

    fn from_str(s: &str) -> Result<Self, BadLoss> {
        let bad = || BadLoss(s.to_string());
        let s = s.trim();
        if let Some(rest) = s.strip_prefix("ge:") {
            let (m, b) = rest.split_once(':').ok_or_else(bad)?;
            let m: f64 = m.parse().map_err(|_| bad())?;
            let b: f64 = b.parse().map_err(|_| bad())?;
            if !(0.0..1.0).contains(&m) || b.is_nan() || b < 1.0 {
                return Err(bad());
            }
            return Ok(LossSpec::bursty(m, b));
        }
        let p: f64 = s.parse().map_err(|_| bad())?;
        if !(0.0..=1.0).contains(&p) {
            return Err(bad());
        }
        Ok(LossSpec::Bernoulli { p })
    }
}

/// Writes a loss in the spelling [`LossSpec`]'s `FromStr` reads, where it
/// has one (a Bernoulli loss, a [`LossSpec::bursty`] model); any other
/// Gilbert-Elliott model as its four parameters.
impl std::fmt::Display for LossSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            LossSpec::Bernoulli { p } => write!(f, "{p}"),
            LossSpec::GilbertElliott {
                p_bg,
                loss_good,
                loss_bad,
                ..
            } if loss_good == 0.0 && loss_bad == 1.0 && p_bg > 0.0 => {
                // Rounded to 9 places: the parameters' division and back
                // leaves noise in the last bits.
                let round = |x: f64| (x * 1e9).round() / 1e9;
                write!(f, "ge:{}:{}", round(self.mean_loss()), round(1.0 / p_bg))
            }
            LossSpec::GilbertElliott {
                p_gb,
                p_bg,
                loss_good,
                loss_bad,
            } => write!(
                f,
                "ge(p_gb {p_gb}, p_bg {p_bg}, good {loss_good}, bad {loss_bad})"
            ),
        }
    }
}

/// A running loss model with its own RNG stream.
#[derive(Debug, Clone)]
pub struct LossModel {
    spec: LossSpec,
    bad: bool,
    rng: Rng,
    /// Bernoulli: a packet is lost when the top 53 bits of a draw are
    /// below this (`p` scaled by 2^53, rounded up: exactly the same
    /// decisions as comparing the draw as a float in [0, 1) with `p`, and
    /// no draw at all when `p` is 0).
    threshold: u64,
}

impl LossModel {
    /// A model following `spec`, drawing from a generator seeded by `seed`.
    pub fn new(spec: LossSpec, seed: u64) -> Self {
        let threshold = match spec {
            LossSpec::Bernoulli { p } if p > 0.0 => {
                (p.min(1.0) * (1u64 << 53) as f64).ceil() as u64
            }
            _ => 0,
        };
        LossModel {
            spec,
            bad: false,
            rng: Rng::new(seed),
            threshold,
        }
    }

    /// The model's parameters.
    pub fn spec(&self) -> LossSpec {
        self.spec
    }

    /// Decides the fate of the next packet: true if it is lost. (Called
    /// for every packet and receiver of a simulated day: the Bernoulli case
    /// is kept small enough to inline.)
    #[inline]
    pub fn lose(&mut self) -> bool {
        match self.spec {
            LossSpec::Bernoulli { .. } => {
                self.threshold > 0 && (self.rng.next_u64() >> 11) < self.threshold
            }
            LossSpec::GilbertElliott { .. } => self.lose_gilbert_elliott(),
        }
    }

    #[inline(never)]
    fn lose_gilbert_elliott(&mut self) -> bool {
        match self.spec {
            LossSpec::Bernoulli { .. } => false,
            LossSpec::GilbertElliott {
                p_gb,
                p_bg,
                loss_good,
                loss_bad,
            } => {
                let flip = if self.bad { p_bg } else { p_gb };
                if self.rng.chance(flip) {
                    self.bad = !self.bad;
                }
                let p = if self.bad { loss_bad } else { loss_good };
                self.rng.chance(p)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn measured(spec: LossSpec) -> f64 {
        let mut m = LossModel::new(spec, 3);
        let n = 200_000;
        (0..n).filter(|_| m.lose()).count() as f64 / n as f64
    }

    #[test]
    fn bernoulli_decides_exactly_as_a_float_comparison() {
        for p in [0.0, 1e-9, 0.01, 0.05, 0.3, 0.5, 0.999_999, 1.0, 1.5] {
            let mut m = LossModel::new(LossSpec::Bernoulli { p }, 11);
            let mut r = Rng::new(11);
            for _ in 0..20_000 {
                let want = p > 0.0 && r.chance(p);
                assert_eq!(m.lose(), want, "p = {p}");
            }
        }
    }

    #[test]
    fn bernoulli_and_gilbert_elliott_hit_their_mean() {
        assert!((measured(LossSpec::Bernoulli { p: 0.2 }) - 0.2).abs() < 0.01);
        assert_eq!(measured(LossSpec::NONE), 0.0);
        let ge = LossSpec::bursty(0.1, 8.0);
        assert!((ge.mean_loss() - 0.1).abs() < 1e-9);
        assert!((measured(ge) - 0.1).abs() < 0.015);
    }

    #[test]
    fn gilbert_elliott_loses_in_bursts() {
        let mut m = LossModel::new(LossSpec::bursty(0.1, 8.0), 9);
        let (mut runs, mut lost, mut prev) = (0, 0, false);
        for _ in 0..100_000 {
            let l = m.lose();
            if l {
                lost += 1;
                if !prev {
                    runs += 1;
                }
            }
            prev = l;
        }
        let mean_burst = lost as f64 / runs as f64;
        assert!(mean_burst > 6.0 && mean_burst < 10.0, "{mean_burst}");
    }

    #[test]
    fn a_loss_is_a_probability_or_a_burst_model_and_nothing_else() {
        assert_eq!("0.2".parse(), Ok(LossSpec::Bernoulli { p: 0.2 }));
        assert_eq!("ge:0.1:8".parse(), Ok(LossSpec::bursty(0.1, 8.0)));
        for bad in [
            "",
            "1.5",
            "-0.1",
            "nan",
            "ge:0.1",
            "ge:1:8",
            "ge:0.1:0.5",
            "ge:x:8",
            "0.05/8",
        ] {
            assert!(bad.parse::<LossSpec>().is_err(), "{bad:?}");
        }
        for text in ["0.05", "0", "ge:0.05:8"] {
            let spec: LossSpec = text.parse().expect("a loss");
            assert_eq!(spec.to_string(), text);
        }
    }
}
