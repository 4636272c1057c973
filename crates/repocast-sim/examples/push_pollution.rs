//! What anyone on a push group can do to listeners without signed
//! symbols: data packets carry no tag, so forged symbols pass every check
//! until a decoded block fails its signed hash (docs/security.md, push).
//!
//! The shipped push settings (`Profile::Push`) on the virtual LAN: a
//! pusher at 100 Mbit/s, one file, two listeners that drop out (TIDDO) at
//! 5% and 50% loss, and a polluter ([`repocast_sim::insider::Polluter::untagged`])
//! answering a share of the pusher's data packets with forged ones of the
//! same item and block. With `rs`, Reed-Solomon blocks (`push --code rs`)
//! and a polluter forging the ids the pusher sends next
//! ([`repocast_sim::insider::Polluter::ahead`]: the code has no others).
//! Prints, per file size and pollution share, each
//! listener's outcome and time: verified, or failed once more than
//! `corrupt_limit` of the file's decoded blocks failed their hash.
//!
//!     cargo run --release -p repocast-sim --example push_pollution -- [SEED] [rs]

use repocast_core::Instant;
use repocast_core::auth::Identity;
use repocast_core::fec::CodeKind;
use repocast_core::rng::Rng;
use repocast_sim::insider::Polluter;
use repocast_sim::push_lan::{PushLan, PushListener, shipped_pusher_with};

fn main() {
    let seed = (std::env::args().nth(1))
        .and_then(|a| a.parse().ok())
        .unwrap_or(1u64);
    let rs = std::env::args().nth(2).is_some_and(|a| a == "rs");
    let code = if rs {
        CodeKind::ReedSolomon
    } else {
        CodeKind::RaptorQ
    };
    let id = Identity::from_seed([7; 32]);
    println!(
        "seed {seed}, one file, 100 Mbit/s, TIDDO listeners at 5% and 50% loss, Profile::Push, {code:?}"
    );
    println!("| file | forged packets per pusher packet | 5% listener | 50% listener |");
    println!("|---|---|---|---|");
    for mib in [1usize, 8, 32] {
        let mut rng = Rng::new(seed ^ mib as u64);
        let bytes: Vec<u8> = (0..mib << 20).map(|_| rng.next_u64() as u8).collect();
        let files = vec![("f.bin".to_string(), bytes)];
        for share in [0.0, 0.0001, 0.001, 0.003, 0.01] {
            let Ok(mut lan) = PushLan::new(shipped_pusher_with(code), id.clone(), 1, &files) else {
                eprintln!("could not plan {mib} MiB");
                return;
            };
            for (i, loss) in [0.05, 0.5].into_iter().enumerate() {
                let l = PushListener::shipped(id.public(), loss, Instant::ZERO);
                lan.listener(l, seed + i as u64);
            }
            lan.pollute(if rs {
                Polluter::untagged(share, seed).ahead()
            } else {
                Polluter::untagged(share, seed)
            });
            lan.run(Instant::from_nanos(600_000_000_000));
            let cells: Vec<String> = (lan.reports().iter())
                .map(|r| {
                    let t = r.delay.map_or("not ended in 600 s".into(), |d| {
                        format!("{:.2} s", d.as_secs_f64())
                    });
                    match r.outcomes.first().map(|o| &o.result) {
                        Some(Ok(())) => format!("verified, {t}"),
                        Some(Err(e)) => format!("failed, {t} ({e})"),
                        None => format!("no outcome, {t}"),
                    }
                })
                .collect();
            println!("| {mib} MiB | {share} | {} |", cells.join(" | "));
        }
    }
}
