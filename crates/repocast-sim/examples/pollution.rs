//! What an authorised client can do to the others: symbol pollution under
//! the shared session key (docs/security.md, "What is still open").
//!
//! The shipped settings (`Profile::Lan`, the default block size) on the
//! virtual LAN: a server at 100 Mbit/s, three receivers at 1%, 5% and 20%
//! loss each fetching the same items, and an insider (`repocast_sim::
//! insider`) answering a share of the server's data packets with polluted
//! ones that pass every receiver's tag check. The per-block BLAKE3 hash
//! catches every polluted block (it is never written), but the block must
//! be received again. Prints, per pollution share, the slowest receiver's
//! delay, the blocks that failed their hash and how the run ended; then
//! the same with signed symbol batches (`serve --sign-symbols`), which
//! keep every polluted symbol from the decoders.
//!
//!     cargo run --release -p repocast-sim --example pollution -- [SEED] [MIB]

use repocast_core::auth::SessionKey;
use repocast_core::endpoint::client::Want;
use repocast_core::loss::LossSpec;
use repocast_core::profile::Profile;
use repocast_core::rng::Rng;
use repocast_core::{Instant, SessionId};
use repocast_sim::insider::Polluter;
use repocast_sim::lan::{LanClient, VirtualLan};

const KEY: [u8; 32] = [0x42; 32];
const RATE: u64 = 100_000_000;

fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let seed = args.first().copied().unwrap_or(1);
    let mib = args.get(1).copied().unwrap_or(16);
    let mut rng = Rng::new(seed);
    let items: Vec<(String, Vec<u8>)> = (0..2)
        .map(|i| {
            let n = (mib << 20) as usize / 2;
            (
                format!("f{i}"),
                (0..n).map(|_| rng.next_u64() as u8).collect(),
            )
        })
        .collect();
    println!(
        "seed {seed}, {mib} MiB in 2 items, 100 Mbit/s, receivers at 1%, 5%, 20% loss, Profile::Lan"
    );
    println!(
        "| symbols signed | insider's packets per server packet | slowest receiver | items verified | blocks failing their hash | insider packets | data packets dropped unlisted |"
    );
    println!("|---|---|---|---|---|---|---|");
    let shares = [0.0f64, 0.0001, 0.001, 0.01, 0.1];
    for (signed, share) in [false, true]
        .into_iter()
        .flat_map(|s| shares.map(|p| (s, p)))
    {
        let Ok(mut h) = VirtualLan::new(
            Profile::Lan,
            |c| {
                c.seed = seed;
                c.session = SessionId(0x5e55);
                c.session_key = Some(SessionKey::from_bytes(KEY));
                c.sign_symbols = signed;
                let _ = c.set_rate(RATE, false);
            },
            items.clone(),
            LossSpec::NONE,
        ) else {
            eprintln!("cannot build the server");
            return;
        };
        for (k, loss) in [0.01, 0.05, 0.2].into_iter().enumerate() {
            h.add_client(LanClient {
                want: Want::Items(items.iter().map(|i| i.0.clone()).collect()),
                loss: LossSpec::Bernoulli { p: loss },
                join_at: Instant::from_micros(k as u64 * 2_000),
                crash_at: None,
                stop_at: None,
                host: None,
            });
        }
        h.idle_timeout = std::time::Duration::from_secs(20);
        h.pollute(Polluter::new(
            share,
            SessionKey::from_bytes(KEY),
            seed ^ 0x1a,
        ));
        let all = h.run(Instant::from_micros(900_000_000));
        let reps = h.reports();
        let slowest = reps.iter().filter_map(|r| r.delay).max();
        let outcomes = || reps.iter().flat_map(|r| &r.outcomes);
        let ok = outcomes().filter(|o| o.result.is_ok()).count();
        let reason = (outcomes().find_map(|o| o.result.clone().err()))
            .map(|e| format!(" (failed: {e})"))
            .unwrap_or_default();
        let corrupt: u64 = reps.iter().map(|r| r.client.corrupt_blocks).sum();
        let unlisted: u64 = (reps.iter())
            .map(|r| r.stats.signing.unsigned_dropped)
            .sum();
        println!(
            "| {} | {share} | {} | {ok}/{}{reason} | {corrupt} | {} | {unlisted} |",
            if signed { "yes" } else { "no" },
            match (slowest, all) {
                (Some(d), true) => format!("{:.2} s", d.as_secs_f64()),
                _ => "did not finish".into(),
            },
            outcomes().count(),
            h.polluter().map_or(0, |p| p.sent),
        );
    }
}
