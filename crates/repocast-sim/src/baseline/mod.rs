//! Baselines the simulator compares repocast against, not modes of the real
//! server: SRM (SPEC 3.7) as a sans-IO member state machine ([`srm`]) and
//! its network driver ([`srm_net`]). MFTP, MFTP/EC, the carousel and
//! unicast run on the core's own server with their codes and schedulers
//! (see `run`).

pub mod srm;
pub mod srm_net;
