//! Helpers shared by the simulator's test binaries.

pub mod push;

/// The seed a test runs with: `REPOCAST_SEED` if set (to replay a
/// failure), else `default`.
pub fn seed_or(default: u64) -> u64 {
    std::env::var("REPOCAST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

/// Every outcome of one receiver's `report` verified, and its file equal
/// to the source of that name in `data`; `what` names the run and the
/// receiver in a failure.
#[allow(dead_code)] // not every test binary checks payloads
pub fn assert_all_verified(
    what: &str,
    report: &repocast_sim::lan::LanReport,
    data: &[(String, Vec<u8>)],
) {
    for o in &report.outcomes {
        assert_eq!(o.result, Ok(()), "{what}: {}", o.name);
        let src = data.iter().find(|d| d.0 == o.name).expect("known name");
        assert_eq!(
            report.files.get(&o.name),
            Some(&src.1),
            "{what}: {}",
            o.name
        );
    }
}
