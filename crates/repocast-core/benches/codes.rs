//! Encode and decode throughput of every code: K = 1,000 symbols of 1,280
//! bytes (blocks of the code's own size where it is smaller), 10% loss.
//! `cargo bench -p repocast-core --bench codes`

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use repocast_core::fec::CodeKind;
use repocast_core::rng::Rng;
use std::hint::black_box;

const T: u16 = 1280;
const TOTAL_K: u32 = 1000;

fn bench_codes(c: &mut Criterion) {
    let mut group = c.benchmark_group("codes");
    group.sample_size(10);
    for code in CodeKind::ALL {
        let k = TOTAL_K.min(
            code.default_block_symbols()
                .max(code.max_block_symbols().min(TOTAL_K)),
        );
        let blocks = TOTAL_K / k;
        let mut rng = Rng::new(5);
        let data: Vec<u8> = (0..k as usize * T as usize)
            .map(|_| rng.next_u64() as u8)
            .collect();
        // Symbols a receiver sees at 10% loss: enough to decode.
        let mut enc = code.encoder(k, T, data.clone()).expect("valid");
        let mut received = Vec::new();
        let mut buf = Vec::new();
        let mut probe = code.decoder(k, T, true, &mut Rng::new(6));
        let mut esi = 0u32;
        loop {
            let id = esi % code.symbol_space(k);
            esi += 1;
            if rng.chance(0.1) {
                continue;
            }
            enc.symbol(id, &mut buf);
            probe.add(id, Some(&buf));
            received.push((id, buf.clone()));
            if probe.try_decode().is_some() || esi > 50 * k {
                break;
            }
        }
        let sent = esi;
        group.throughput(Throughput::Bytes(TOTAL_K as u64 * T as u64));
        group.bench_function(format!("{}_encode", code.name()), |b| {
            b.iter(|| {
                for _ in 0..blocks {
                    let mut enc = code.encoder(k, T, data.clone()).expect("valid");
                    for id in 0..sent {
                        enc.symbol(id % code.symbol_space(k), &mut buf);
                    }
                    black_box(&buf);
                }
            })
        });
        group.bench_function(format!("{}_decode", code.name()), |b| {
            b.iter(|| {
                for _ in 0..blocks {
                    let mut dec = code.decoder(k, T, true, &mut Rng::new(6));
                    for (id, p) in &received {
                        dec.add(*id, Some(p));
                    }
                    black_box(dec.try_decode());
                }
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench_codes);
criterion_main!(benches);
