//! Scheduler decision time with 10,000 items and 10,000 waiting clients
//! (each wanting 9 random items), and the cost of the demand updates one
//! transmission causes. `cargo bench -p repocast-core --bench scheduler`

use criterion::{Criterion, criterion_group, criterion_main};
use repocast_core::rng::Rng;
use repocast_core::sched::{DemandTable, SchedulerKind};
use repocast_core::{ClientId, Instant, ItemId};
use std::hint::black_box;

fn table(kind: &SchedulerKind) -> DemandTable {
    let mut t = DemandTable::new(10_000, kind.build().q_key());
    let mut rng = Rng::new(11);
    for c in 0..10_000u32 {
        for _ in 0..9 {
            let i = rng.range_u64(0, 10_000) as u32;
            t.add_wait(
                ClientId(c),
                ItemId(i),
                Instant::from_micros(rng.range_u64(0, 1_000_000)),
            );
        }
        t.set_fill(ClientId(c), 0.5 + rng.next_f64() / 2.0);
    }
    t
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("scheduler_10k_items_10k_clients");
    for kind in ["rq", "rq-fill", "fifo", "popular", "rxw", "mad", "flat"] {
        let k = SchedulerKind::from_name(kind).expect("known");
        let t = table(&k);
        let mut s = k.build();
        g.bench_function(format!("select_{kind}"), |b| {
            b.iter(|| black_box(s.select(&t, Instant::from_millis(2_000))))
        });
    }
    let k = SchedulerKind::Rq;
    let mut t = table(&k);
    let mut s = k.build();
    g.bench_function("rq_select_and_serve", |b| {
        b.iter(|| {
            if let Some(i) = s.select(&t, Instant::ZERO) {
                for c in t.waiters(i) {
                    t.remove_wait(c, i);
                    // Put it back so the table keeps its size.
                    t.add_wait(c, i, Instant::ZERO);
                }
                black_box(i);
            }
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
