//! Reliability policies and the one notation that names them (SPEC 3.2-3.5).
//!
//! A [`Scheme`] is an FEC expansion policy ([`fec::FecPolicy`]) plus a
//! retransmission policy ([`retransmit::Retransmit`]) plus `+notify`, written
//! the same way in configs, logs and results: `FEC(0.01R)+R(0)+notify`,
//! `FEC(0)+R(inf)`, `FEC(maxloss+0.05)+R(10)`, `ARM`. The server applies it;
//! the client needs none of it.

pub mod arm;
pub mod fec;
pub mod odds;
pub mod retransmit;
pub mod scheme;
pub mod tiers;

pub use fec::FecPolicy;
pub use retransmit::Retransmit;
pub use scheme::{Scheme, SchemeError};
