//! The record format the endpoint targets read their input in: an op
//! byte, a length byte, then that many bytes (the op's low two bits pick
//! the action, its upper six are the length's low bits).

/// The next record of `rest` as (op, length byte, bytes), moving past it;
/// None at the end. Targets also read the length byte as an amount of time.
pub fn next_record<'a>(rest: &mut &'a [u8]) -> Option<(u8, u8, &'a [u8])> {
    let (&op, tail) = rest.split_first()?;
    let (&hi, tail) = tail.split_first()?;
    let n = (((hi as usize) << 6) | (op as usize >> 2)).min(tail.len());
    let (bytes, tail) = tail.split_at(n);
    *rest = tail;
    Some((op, hi, bytes))
}

/// Work an endpoint hands out to run on another thread.
pub trait Job {
    fn run(&mut self);
    fn lose(&mut self);
}

impl Job for repocast_core::client::decode::DecodeJob {
    fn run(&mut self) {
        Self::run(self)
    }
    fn lose(&mut self) {
        Self::lose(self)
    }
}

impl Job for repocast_core::endpoint::unpack::UnpackJob {
    fn run(&mut self) {
        Self::run(self)
    }
    fn lose(&mut self) {
        Self::lose(self)
    }
}

/// Jobs an endpoint handed out: when `op` says so, each goes back
/// (through `back`), the later first, run, lost or not run as `op` picks;
/// otherwise they wait (maybe for ever).
pub fn return_jobs<J: Job>(jobs: &mut Vec<J>, op: u8, mut back: impl FnMut(J)) {
    if op & 0x10 == 0 {
        return;
    }
    for mut j in jobs.drain(..).rev() {
        if op & 0x08 != 0 {
            j.run();
        } else if op & 0x20 != 0 {
            j.lose();
        }
        back(j);
    }
}
