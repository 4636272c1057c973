//! Helpers shared by the simulator's test binaries.

/// The seed a test runs with: `REPOCAST_SEED` if set (to replay a
/// failure), else `default`.
pub fn seed_or(default: u64) -> u64 {
    std::env::var("REPOCAST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}
