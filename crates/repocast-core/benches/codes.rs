//! Encode and decode throughput of every code: K = 1,000 symbols of 1,280
//! bytes (blocks of the code's own size where it is smaller), 10% loss.
//! Then one block's decode at the block sizes push and serve choose from.
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

/// Decoding one block at the sizes `push` and `serve` pick from (5% loss,
/// 1,420-byte symbols: the lab's): Reed-Solomon's decoder transforms a
/// power of two of symbols at least k rounded up to a power of two plus
/// its 2k repair ids, so its cost per byte steps up past k = 1,024
/// (`profile::RS_BLOCK_SYMBOLS`); RaptorQ's for comparison.
fn bench_block_sizes(c: &mut Criterion) {
    const T: u16 = 1420;
    let mut group = c.benchmark_group("block_sizes");
    group.sample_size(10);
    // Symbols held past K. RaptorQ (`raptorq` 2.0) solves over GF(2)
    // alone, without its HDPC rows' GF(256) work, once it holds H more
    // than K (11 at K = 1,250): `_x14` shows what that saves.
    for (code, k, extra) in [
        (CodeKind::ReedSolomon, 985, 2),
        (CodeKind::ReedSolomon, 1024, 2),
        (CodeKind::ReedSolomon, 1244, 2),
        (CodeKind::ReedSolomon, 2048, 2),
        (CodeKind::RaptorQ, 1250, 2),
        (CodeKind::RaptorQ, 1250, 14),
    ] {
        let mut rng = Rng::new(7);
        let data: Vec<u8> = (0..k as usize * T as usize)
            .map(|_| rng.next_u64() as u8)
            .collect();
        let mut enc = code.encoder(k, T, data).expect("valid");
        let (mut received, mut buf, mut id) = (Vec::new(), Vec::new(), 0u32);
        while received.len() < k as usize + extra {
            if !rng.chance(0.05) {
                enc.symbol(id, &mut buf);
                received.push((id, buf.clone()));
            }
            id += 1;
        }
        group.throughput(Throughput::Bytes(k as u64 * T as u64));
        let name = match extra {
            2 => format!("{}_decode_k{k}", code.name()),
            _ => format!("{}_decode_k{k}_x{extra}", code.name()),
        };
        group.bench_function(name, |b| {
            b.iter(|| {
                let mut dec = code.decoder(k, T, true, &mut Rng::new(6));
                for (id, p) in &received {
                    dec.add(*id, Some(p));
                }
                black_box(dec.try_decode())
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench_codes, bench_block_sizes);
criterion_main!(benches);
