//! Schedulers: which item the data channel carries next (SPEC 3.1).
//!
//! The server keeps a [`DemandTable`] (who still waits for what, since when,
//! and each client's fill rate); a [`Scheduler`] reads it and names the next
//! item. Request-mode schedulers ([`scores`]) score items with demand: R/Q
//! (the default), R/(Q/fill), FIFO, most-requested and RxW. Push-mode
//! schedulers ([`push`]) cycle the whole catalogue: MAD and the flat
//! carousel. Every scheduler breaks ties by the lowest item id. The
//! batching [`hold`] keeps items just asked for back from the request-mode
//! schedulers on a busy server. The table groups the waiting items by
//! their waiters (`groups`), so that R/Q and most-requested score one item
//! per group, however many items one client waits for.

pub mod demand;
mod groups;
pub mod hold;
pub mod push;
pub mod scores;

pub use demand::{DemandTable, QKey};

use crate::{Instant, ItemId};

/// Picks the next item to transmit.
pub trait Scheduler: Send {
    /// Which per-client key the demand table must order waiters by.
    fn q_key(&self) -> QKey {
        QKey::Count
    }
    /// The next item, or `None` if nothing should be sent.
    fn select(&mut self, table: &DemandTable, now: Instant) -> Option<ItemId>;
}

/// The schedulers, by name (`rq`, `rq-fill`, `fifo`, `popular`, `rxw`,
/// `mad`, `flat`; in settings files, the name).
#[derive(Debug, Clone, PartialEq, serde::Deserialize)]
#[serde(try_from = "String")]
pub enum SchedulerKind {
    /// Largest R_i / Q_i.
    Rq,
    /// Largest R_i / (Q_i / fill).
    RqFill,
    /// The item of the oldest outstanding request.
    Fifo,
    /// Largest R_i.
    MostRequested,
    /// Largest R_i x W_i.
    Rxw,
    /// Largest (s_i + 1)^2 p_i; `weights` are the access probabilities p_i
    /// by item id (missing ones count as equal).
    Mad { weights: Vec<f64> },
    /// Every item once per cycle.
    Flat,
}

impl TryFrom<String> for SchedulerKind {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        SchedulerKind::from_name(&s).ok_or_else(|| {
            format!("unknown scheduler {s:?} (rq, rq-fill, fifo, popular, rxw, mad, flat)")
        })
    }
}

impl SchedulerKind {
    /// Parses a scheduler name.
    pub fn from_name(s: &str) -> Option<Self> {
        Some(match s {
            "rq" | "R/Q" => SchedulerKind::Rq,
            "rq-fill" | "R/(Q/fill)" => SchedulerKind::RqFill,
            "fifo" | "FIFO" => SchedulerKind::Fifo,
            "popular" | "most-requested" => SchedulerKind::MostRequested,
            "rxw" | "RxW" => SchedulerKind::Rxw,
            "mad" | "MAD" => SchedulerKind::Mad {
                weights: Vec::new(),
            },
            "flat" => SchedulerKind::Flat,
            _ => return None,
        })
    }

    /// The name used in logs and results.
    pub fn name(&self) -> &'static str {
        match self {
            SchedulerKind::Rq => "R/Q",
            SchedulerKind::RqFill => "R/(Q/fill)",
            SchedulerKind::Fifo => "FIFO",
            SchedulerKind::MostRequested => "most-requested",
            SchedulerKind::Rxw => "RxW",
            SchedulerKind::Mad { .. } => "MAD",
            SchedulerKind::Flat => "flat",
        }
    }

    /// Whether this is a push-mode scheduler (ignores demand).
    pub fn is_push(&self) -> bool {
        matches!(self, SchedulerKind::Mad { .. } | SchedulerKind::Flat)
    }

    /// A scheduler of this kind.
    pub fn build(&self) -> Box<dyn Scheduler> {
        match self {
            SchedulerKind::Rq => Box::new(scores::RQ),
            SchedulerKind::RqFill => Box::new(scores::RQFill),
            SchedulerKind::Fifo => Box::new(scores::Fifo),
            SchedulerKind::MostRequested => Box::new(scores::MostRequested),
            SchedulerKind::Rxw => Box::new(scores::Rxw),
            SchedulerKind::Mad { weights } => Box::new(push::Mad::new(weights.clone())),
            SchedulerKind::Flat => Box::new(push::Flat::default()),
        }
    }
}
