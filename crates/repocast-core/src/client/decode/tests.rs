//! The client's decode jobs: blocks decoded off the receiving path come
//! out as in place; short, lost or corrupt decodes; forged symbols
//! screened out.

use super::*;
use crate::client::{ClientConfig, ClientEvent};
use crate::fec::CodeKind;
use crate::fec::layout::Layout;
use crate::wire::{DataRepr, FecParams, ManifestEntry};
use crate::{BlockId, Instant, SessionId, TransmissionId};

const T: u16 = 64;
const ITEM: ItemId = ItemId(3);

/// An item of `blocks` blocks of up to `k` symbols (the last short),
/// its manifest, and every block's packets: the source symbols but
/// every fifth, then as many repair symbols, so each decode has work.
fn item(code: CodeKind, k: u32, blocks: u32) -> (ManifestEntry, Vec<Vec<DataRepr>>) {
    item_and_more(code, k, blocks, 0)
}

/// As [`item`], with `more` further repair symbols of each block after
/// its packets.
fn item_and_more(
    code: CodeKind,
    k: u32,
    blocks: u32,
    more: u32,
) -> (ManifestEntry, Vec<Vec<DataRepr>>) {
    let size = (k * blocks) as u64 * T as u64 - 100;
    let data: Vec<u8> = (0..size).map(|i| (i * 7 + i / 251) as u8).collect();
    let fec = FecParams {
        code,
        symbol_size: T,
        max_block_symbols: k,
    };
    let l = Layout::new(size, &fec).expect("layout");
    let mut hashes = Vec::new();
    let mut packets = Vec::new();
    for b in 0..l.blocks() {
        let (off, len) = (l.block_offset(b) as usize, l.block_len(b) as usize);
        let bytes = &data[off..off + len];
        hashes.push(*blake3::hash(bytes).as_bytes());
        let kb = l.block_symbols(b);
        let mut padded = bytes.to_vec();
        padded.resize(kb as usize * T as usize, 0);
        let mut enc = code.encoder(kb, T, padded).expect("encoder");
        let ids = (0..kb)
            .filter(|i| i % 5 != 0)
            .chain(kb..kb + kb / 5 + 2 + more);
        packets.push(
            ids.map(|symbol| {
                let mut payload = Vec::new();
                enc.symbol(symbol, &mut payload);
                DataRepr {
                    session: SessionId(1),
                    transmission: TransmissionId(1),
                    item: ITEM,
                    block: BlockId(b),
                    symbol,
                    seq: 0,
                    probe: None,
                    payload,
                    tag: Vec::new(),
                    encrypted: false,
                }
            })
            .collect(),
        );
    }
    let m = ManifestEntry {
        item: ITEM,
        name: "f".into(),
        size,
        hash: *blake3::hash(&data).as_bytes(),
        fec,
        block_hashes: hashes,
    };
    (m, packets)
}

fn client(jobs: usize, m: &ManifestEntry) -> Client {
    let mut c = Client::new(ClientConfig {
        decode_jobs: jobs,
        ..ClientConfig::default()
    });
    c.subscribe(Instant::ZERO, vec![m.clone()]);
    c
}

/// The blocks verified so far (block, bytes), in order of block.
fn verified(c: &mut Client) -> Vec<(u32, Vec<u8>)> {
    let mut v: Vec<_> = std::iter::from_fn(|| c.poll_event())
        .filter_map(|e| match e {
            ClientEvent::BlockVerified { block, data, .. } => Some((block, data)),
            _ => None,
        })
        .collect();
    v.sort();
    v
}

#[test]
fn blocks_decoded_in_jobs_come_out_as_they_would_in_place() {
    for code in [CodeKind::RaptorQ, CodeKind::ReedSolomon] {
        let (m, packets) = item(code, 40, 5);
        let mut here = client(0, &m);
        let mut away = client(2, &m);
        // The jobs come back late and out of order: each after the
        // next block's packets, the later one first.
        let mut out: Vec<DecodeJob> = Vec::new();
        for block in &packets {
            for p in block {
                assert_eq!(
                    here.handle_data(Instant::ZERO, p),
                    away.handle_data(Instant::ZERO, p)
                );
            }
            while let Some(mut j) = out.pop() {
                j.run();
                away.decoded(j);
            }
            out.extend(std::iter::from_fn(|| away.poll_decode()));
            assert!(away.decodes_away() <= 2);
        }
        for mut j in out {
            j.run();
            away.decoded(j);
        }
        let (a, b) = (verified(&mut here), verified(&mut away));
        assert_eq!(a.len(), 5, "{code:?}");
        assert_eq!(a, b, "{code:?}");
        assert_eq!(here.stats().decode_jobs, 0);
        assert_eq!(away.stats().decode_jobs, 5, "{code:?}");
        assert_eq!(away.decodes_away(), 0);
    }
}

#[test]
fn a_block_away_asks_for_nothing_and_past_the_bound_blocks_decode_in_place() {
    let (m, packets) = item(CodeKind::RaptorQ, 40, 3);
    let mut c = client(1, &m);
    for p in packets.iter().flatten() {
        c.handle_data(Instant::ZERO, p);
    }
    // One job away (the first block ready); the others decoded here.
    let mut job = c.poll_decode().expect("a job");
    assert!(c.poll_decode().is_none());
    assert_eq!((job.item(), job.block()), (ITEM, 0));
    let got: Vec<u32> = verified(&mut c).into_iter().map(|v| v.0).collect();
    assert_eq!(got, vec![1, 2]);
    let it = c.items.get(&ITEM).expect("item");
    assert!(it.block_need(0).is_none(), "a block away is not asked for");
    // Symbols for it now are of no use.
    assert!(!c.handle_data(Instant::ZERO, &packets[0][0]));
    job.run();
    assert_eq!(job.outcome(), DecodeOutcome::Verified);
    c.decoded(job);
    assert_eq!(verified(&mut c).len(), 1);
    assert_eq!(c.items.get(&ITEM).map(|i| i.blocks_left), Some(0));
}

#[test]
fn a_short_lost_or_corrupt_decode_takes_the_block_up_again() {
    let (m, packets) = item(CodeKind::RaptorQ, 40, 1);
    let feed = |c: &mut Client, ps: &[DataRepr]| {
        for p in ps {
            c.handle_data(Instant::ZERO, p);
        }
    };
    // Short (RaptorQ short of rank): the decoder comes back and the
    // next symbol makes another job.
    let mut c = client(2, &m);
    feed(&mut c, &packets[0]);
    let mut job = c.poll_decode().expect("job");
    job.outcome = DecodeOutcome::Short;
    c.decoded(job);
    assert!(c.items.get(&ITEM).and_then(|i| i.block_need(0)).is_some());
    // The block's last symbol came while it was away (of no use
    // then); now it is taken, and makes another job.
    let last = packets[0].last().expect("symbols");
    assert!(c.handle_data(Instant::ZERO, last));
    let mut job = c.poll_decode().expect("a second job");
    job.run();
    c.decoded(job);
    assert_eq!(verified(&mut c).len(), 1);

    // Lost (its thread panicked): the block starts over.
    let mut c = client(2, &m);
    feed(&mut c, &packets[0]);
    let mut job = c.poll_decode().expect("job");
    job.lose();
    c.decoded(job);
    let k = Layout::new(m.size, &m.fec)
        .expect("layout")
        .block_symbols(0);
    assert_eq!(
        c.items
            .get(&ITEM)
            .and_then(|i| i.block_need(0))
            .map(|n| n.count),
        Some(k)
    );
    feed(&mut c, &packets[0]);
    let mut job = c.poll_decode().expect("job again");
    job.run();
    c.decoded(job);
    assert_eq!(verified(&mut c).len(), 1);
    assert_eq!(c.stats().corrupt_blocks, 0);

    // Corrupt (the bytes fail the block's hash, and its symbols may
    // not be screened: the item's screenings kept finding nothing):
    // counted, and over. Suspect where they may: kept, more needed.
    for screen in [false, true] {
        let (m, packets) = item(CodeKind::ReedSolomon, 40, 1);
        let mut c = client(2, &m);
        feed(&mut c, &packets[0]);
        let mut job = c.poll_decode().expect("job");
        job.hash = [0; 32];
        job.screen = screen;
        job.run();
        c.decoded(job);
        assert_eq!(c.stats().corrupt_blocks, 1);
        assert!(verified(&mut c).is_empty());
        let need = c.items.get(&ITEM).and_then(|i| i.block_need(0));
        let need = need.map_or(0, |n| n.count);
        let k = Layout::new(m.size, &m.fec)
            .expect("layout")
            .block_symbols(0);
        if screen {
            // The K it decoded from (the last symbol came while it was
            // away), and an eighth more asked for.
            assert_eq!(c.held_symbols(ITEM, 0), k);
            assert!((5..=10).contains(&need), "{need} more asked");
        } else {
            assert_eq!(need, k, "over: k again");
            feed(&mut c, &packets[0]);
            assert!(c.poll_decode().is_some());
        }
    }
}

/// Forged symbols that keep making its blocks fail their hash fail the
/// item, with the reason, once more than `corrupt_limit` have, where
/// the settings say so (a listener that drops out: push has no repair
/// budget to end it); otherwise it keeps collecting.
/// One forged symbol among a block's: the decode fails its hash, the
/// decoder keeps its symbols and asks for an eighth more than K; then
/// one of the decodes with a share left out verifies. Two forged
/// symbols in different shares: no share gives the block, which
/// starts over. In place and as a job alike, RaptorQ and
/// Reed-Solomon alike (a forged source symbol, 7, and a forged repair
/// one, 180).
#[test]
fn a_forged_symbol_is_screened_out_of_a_block() {
    let k = 200;
    let first = k as usize + 2;
    let codes = [CodeKind::RaptorQ, CodeKind::ReedSolomon];
    for (code, (jobs, forged)) in codes.into_iter().flat_map(|c| {
        [
            (2, vec![7]),
            (0, vec![180]),
            (2, vec![7, 12]),
            (0, vec![7, 180]),
        ]
        .map(|j| (c, j))
    }) {
        let (m, packets) = item_and_more(code, k, 1, k / 3);
        let mut c = client(jobs, &m);
        for (i, p) in packets[0].iter().enumerate() {
            let mut p = p.clone();
            if forged.contains(&i) {
                p.payload[3] ^= 0x5a;
            }
            c.handle_data(Instant::ZERO, &p);
            while let Some(mut job) = c.poll_decode() {
                job.run();
                c.decoded(job);
            }
            if i + 1 == first {
                // The first decode failed its hash; its symbols kept.
                assert_eq!(c.stats().corrupt_blocks, 1, "{code:?} {jobs} {forged:?}");
                let need = c.items.get(&ITEM).and_then(|i| i.block_need(0));
                let need = need.map_or(0, |n| n.count);
                assert!((20..=40).contains(&need), "{need} more asked");
                assert_eq!(c.held_symbols(ITEM, 0), first as u32);
            }
        }
        let got = verified(&mut c).len();
        if forged.len() == 1 {
            assert_eq!(got, 1, "{code:?} {jobs}: screened and verified");
            assert_eq!(c.stats().screened_blocks, 1);
            assert_eq!(c.stats().screens_failed, 0);
        } else {
            assert_eq!(got, 0, "{code:?} {jobs}: two bad shares");
            assert_eq!(c.stats().screens_failed, 1);
            // Started over: K symbols needed again.
            let need = c.items.get(&ITEM).and_then(|i| i.block_need(0));
            let need = need.map_or(0, |n| n.count);
            assert!(need >= k - 40, "{need} needed");
        }
        assert_eq!(c.stats().corrupt_blocks, 1);
    }
}

/// Forged symbols too many for a screening to find (two in a block,
/// again and again): after three screenings that found nothing and
/// none that found the bad share, the item's blocks start over
/// without one (each costs up to eight more decodes).
#[test]
fn screenings_that_keep_finding_nothing_stop() {
    let k = 200;
    let (m, packets) = item_and_more(CodeKind::RaptorQ, k, 1, k / 3);
    let mut c = client(2, &m);
    for round in 0..8 {
        for (i, p) in packets[0].iter().enumerate() {
            let mut p = p.clone();
            // Two forged in every eight packets' window.
            if i % 8 == 3 || i % 8 == 6 {
                p.payload[3] ^= 0x5a;
            }
            c.handle_data(Instant::ZERO, &p);
            while let Some(mut job) = c.poll_decode() {
                job.run();
                c.decoded(job);
            }
        }
        assert!(verified(&mut c).is_empty(), "round {round}");
    }
    let s = c.stats();
    assert_eq!((s.screened_blocks, s.screens_failed), (0, 3), "{s:?}");
    assert!(s.corrupt_blocks >= 6, "{s:?}");
}

#[test]
fn an_item_whose_blocks_keep_failing_their_hash_fails() {
    // Blocks not screened (as after screenings that kept finding
    // nothing): each failure starts its block over. A screened one
    // counts the same (above).
    let (m, packets) = item(CodeKind::ReedSolomon, 40, 2);
    let limit = crate::client::corrupt_limit(2);
    assert_eq!(limit, 14);
    for fail in [true, false] {
        let mut c = Client::new(ClientConfig {
            decode_jobs: 2,
            fail_on_forgery: fail,
            ..ClientConfig::default()
        });
        c.subscribe(Instant::ZERO, vec![m.clone()]);
        let mut failed = Vec::new();
        for n in 1..=limit + 1 {
            for p in &packets[(n % 2) as usize] {
                c.handle_data(Instant::ZERO, p);
            }
            let mut job = c.poll_decode().expect("job");
            job.hash = [0; 32];
            job.screen = false;
            job.run();
            c.decoded(job);
            failed.extend(
                std::iter::from_fn(|| c.poll_event()).filter_map(|e| match e {
                    ClientEvent::ItemFailed { reason, .. } => Some((n, reason)),
                    _ => None,
                }),
            );
        }
        assert_eq!(c.stats().corrupt_blocks, u64::from(limit) + 1);
        if !fail {
            assert!(failed.is_empty() && !c.is_finished(), "{failed:?}");
            continue;
        }
        assert_eq!(failed.len(), 1, "{failed:?}");
        assert_eq!(failed[0].0, limit + 1, "failed after {limit} more");
        assert!(failed[0].1.contains("failed their hash"), "{}", failed[0].1);
        assert!(c.is_finished());
        assert!(c.poll_decode().is_none());
    }
}

#[test]
fn a_job_for_a_block_no_longer_waited_on_is_dropped() {
    let (m, packets) = item(CodeKind::ReedSolomon, 40, 2);
    let feed = |c: &mut Client| {
        for p in packets.iter().flatten() {
            c.handle_data(Instant::ZERO, p);
        }
    };
    // Resumed from disk meanwhile.
    let mut c = client(2, &m);
    feed(&mut c);
    let mut job = c.poll_decode().expect("job");
    c.resume_block(ITEM, job.block());
    job.run();
    c.decoded(job);
    assert!(verified(&mut c).iter().all(|v| v.0 != 0));
    assert_eq!(c.stats().decode_jobs, 0);
    // Abandoned meanwhile.
    let mut c = client(2, &m);
    feed(&mut c);
    let jobs: Vec<_> = std::iter::from_fn(|| c.poll_decode()).collect();
    c.abandon(ITEM, "gone".into());
    for mut j in jobs {
        j.run();
        c.decoded(j);
    }
    assert!(verified(&mut c).is_empty());
    assert_eq!(c.decodes_away(), 0);
    // A job of the client this one replaced (a listener's new
    // version) never counts for this one's blocks, whose ids go on.
    let mut old = client(2, &m);
    feed(&mut old);
    let stale = old.poll_decode().expect("job");
    let mut new = client(2, &m);
    new.carry_jobs(old.jobs_out());
    assert_eq!(new.decodes_away(), 1);
    feed(&mut new);
    // The old job counts against the bound: one of this one's two
    // blocks goes out, the other is decoded in place.
    let mut mine: Vec<_> = std::iter::from_fn(|| new.poll_decode()).collect();
    assert_eq!((mine.len(), new.decodes_away()), (1, 2));
    let mut stale = stale;
    stale.run();
    new.decoded(stale);
    let got: Vec<u32> = verified(&mut new).into_iter().map(|v| v.0).collect();
    assert_eq!(got, vec![1]);
    for j in &mut mine {
        j.run();
    }
    for j in mine {
        new.decoded(j);
    }
    let got: Vec<u32> = verified(&mut new).into_iter().map(|v| v.0).collect();
    assert_eq!(got, vec![0]);
    assert_eq!(new.decodes_away(), 0);
}
