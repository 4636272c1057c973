//! How often a pusher repeats its catalogue, and what share of the rate
//! that takes: several copies a cycle of the file set, within bounds,
//! more of the rate for a catalogue about as large as its files' data.

use std::time::Duration;

/// Longest time between two copies of the catalogue, unless its share of
/// the rate ([`catalogue_share`]) forces a longer one.
pub const CATALOGUE_PERIOD: Duration = Duration::from_millis(250);
/// Shortest time between two copies of the catalogue.
pub const MIN_CATALOGUE_PERIOD: Duration = Duration::from_millis(20);
/// Copies of the catalogue per cycle of the file set (one pass of every
/// item at the rate), between [`MIN_CATALOGUE_PERIOD`] and
/// [`CATALOGUE_PERIOD`]: a listener takes nothing until it has the
/// catalogue, so for a set that takes less than a few periods to send,
/// the wait for a copy that gets through its loss would be most of its
/// time.
pub const CATALOGUE_COPIES_PER_CYCLE: f64 = 8.0;
/// Share of the rate a catalogue may always take; a larger catalogue is
/// repeated less often, unless it is a large part of what a listener
/// needs ([`catalogue_share`]).
pub const CATALOGUE_SHARE: f64 = 0.05;
/// Share of the rate a catalogue never exceeds, however large it is
/// beside its files' data.
pub const MAX_CATALOGUE_SHARE: f64 = 0.5;

/// Largest share of the rate a catalogue of `bytes` takes beside a file
/// set whose one pass takes `cycle` at `data_bps`: its share of the two
/// together (a listener needs a copy of the catalogue and a pass of the
/// data, so they take about as long as each other), within
/// [`CATALOGUE_SHARE`]..[`MAX_CATALOGUE_SHARE`]. A set of many tiny files
/// has a catalogue about as large as its data: at a fixed 5% of the rate,
/// a copy took several times as long as the data.
pub fn catalogue_share(bytes: u64, cycle: Duration, data_bps: f64) -> f64 {
    let catalogue = bytes as f64 * 8.0;
    let data = cycle.as_secs_f64() * data_bps.max(0.0);
    (catalogue / (catalogue + data).max(1.0)).clamp(CATALOGUE_SHARE, MAX_CATALOGUE_SHARE)
}

/// Time between two copies of a catalogue of `bytes` (IP and UDP headers
/// counted) for a file set whose one pass takes `cycle`, with data sent
/// at `data_bps`: [`CATALOGUE_COPIES_PER_CYCLE`] a cycle within
/// [`MIN_CATALOGUE_PERIOD`]..[`CATALOGUE_PERIOD`], and never more than
/// [`catalogue_share`] of the rate.
pub fn catalogue_period(bytes: u64, cycle: Duration, data_bps: f64) -> Duration {
    let wanted = (cycle.as_secs_f64() / CATALOGUE_COPIES_PER_CYCLE).clamp(
        MIN_CATALOGUE_PERIOD.as_secs_f64(),
        CATALOGUE_PERIOD.as_secs_f64(),
    );
    let share = catalogue_share(bytes, cycle, data_bps);
    let at_share = bytes as f64 * 8.0 / (data_bps.max(1.0) * share);
    Duration::from_secs_f64(wanted.max(at_share).min(3600.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(d: Duration) -> f64 {
        d.as_secs_f64() * 1e3
    }

    #[test]
    fn the_catalogue_comes_several_times_a_cycle_within_its_bounds() {
        let (piece, rate) = (1_000u64, 100e6);
        // One pass of the set: 1 MiB, 4 MiB and 32 MiB at 100 Mbit/s.
        let cycle = |mib: f64| Duration::from_secs_f64(mib * 8.0 * 1.048_576 / 100.0);
        assert_eq!(ms(catalogue_period(piece, cycle(1.0), rate)), 20.0);
        let four = ms(catalogue_period(piece, cycle(4.0), rate));
        assert!((four - 335.5 / 8.0).abs() < 1.0, "{four}");
        assert_eq!(ms(catalogue_period(piece, cycle(32.0), rate)), 250.0);
        // A large catalogue takes at most CATALOGUE_SHARE of the rate
        // beside a set of many times its bytes.
        for mib in [32.0, 1e6] {
            let p = catalogue_period(1_000_000, cycle(mib), rate);
            assert!((ms(p) - 1600.0).abs() < 1e-6, "{p:?}");
        }
        // Beside a set of about its own bytes, its share of the two: a
        // copy takes about as long as a pass. Never more than half.
        let (c, one) = (1_048_576u64, cycle(1.0));
        assert!((catalogue_share(c, one, rate) - 0.5).abs() < 1e-9);
        let p = catalogue_period(c, cycle(3.0), rate);
        let pass = cycle(3.0).as_secs_f64() * 1e3;
        assert!(
            (ms(p) - pass * 4.0 / 3.0).abs() < 1.0,
            "{p:?} for a pass of {pass} ms"
        );
        let huge = catalogue_period(10 * c, cycle(0.5), rate);
        assert!((ms(huge) - 10.0 * 8.0 * 1.048_576 / 100.0 * 1e3 / 0.5).abs() < 1e-6);
        // So does a small one on a slow link: 1,000 bytes at 1 Mbit/s
        // beside a pass of 1 s.
        let slow = catalogue_period(piece, Duration::from_secs(1), 1e6);
        assert!((ms(slow) - 160.0).abs() < 1e-6, "{slow:?}");
        // With no data at all, half the rate.
        let empty = catalogue_period(piece, Duration::ZERO, 1e6);
        assert!((ms(empty) - 20.0).abs() < 1e-6, "{empty:?}");
        let alone = catalogue_period(100 * piece, Duration::ZERO, 1e6);
        assert!((ms(alone) - 1600.0).abs() < 1e-6, "{alone:?}");
        // No rate at all is a long period, not a panic.
        assert!(catalogue_period(piece, cycle(1.0), 0.0) >= CATALOGUE_PERIOD);
    }
}
