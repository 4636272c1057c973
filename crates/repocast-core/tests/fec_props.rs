//! Property tests for every erasure code: any loss pattern that leaves
//! enough symbols decodes to the original bytes; too few never yields bytes.

use proptest::prelude::*;
use repocast_core::fec::{CodeKind, layout::Layout};
use repocast_core::rng::Rng;
use repocast_core::wire::FecParams;

const T: u16 = 32;

/// Sends source ids then repair ids, dropping per `lost`, until the decoder
/// decodes or `budget` symbols were sent. Returns (decoded bytes, symbols
/// received, needed reported before the last symbol).
fn run(code: CodeKind, k: u32, data: &[u8], lost: &[bool], budget: u32) -> (Option<Vec<u8>>, u32) {
    let mut enc = code.encoder(k, T, data.to_vec()).expect("valid block");
    let mut dec = code.decoder(k, T, true, &mut Rng::new(1));
    let mut buf = Vec::new();
    let space = code.symbol_space(k);
    let mut received = 0;
    for i in 0..budget {
        let esi = i % space;
        if lost.get(i as usize).copied().unwrap_or(false) {
            continue;
        }
        enc.symbol(esi, &mut buf);
        if dec.add(esi, Some(&buf)) {
            received += 1;
        }
        if let Some(out) = dec.try_decode() {
            return (Some(out), received);
        }
    }
    (None, received)
}

fn block(seed: u64, k: u32) -> Vec<u8> {
    let mut r = Rng::new(seed);
    (0..k as usize * T as usize)
        .map(|_| r.next_u64() as u8)
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn raptorq_and_rs_decode_from_any_k_symbols(
        k in 1u32..40, seed in any::<u64>(), loss in proptest::collection::vec(any::<bool>(), 0..200),
        rs in any::<bool>(),
    ) {
        let code = if rs { CodeKind::ReedSolomon } else { CodeKind::RaptorQ };
        let data = block(seed, k);
        let (out, received) = run(code, k, &data, &loss, 400);
        let out = out.expect("enough symbols were sent");
        prop_assert_eq!(out, data);
        // MDS: exactly k; RaptorQ: k plus at most a couple.
        if rs { prop_assert_eq!(received, k); } else { prop_assert!(received <= k + 3); }
    }

    #[test]
    fn xor_and_exact_decode_and_match(
        k in 1u32..=32, seed in any::<u64>(), loss in proptest::collection::vec(any::<bool>(), 0..64),
        xor in any::<bool>(),
    ) {
        let code = if xor { CodeKind::Xor } else { CodeKind::Exact };
        let data = block(seed, k);
        let (out, _) = run(code, k, &data, &loss, 4000);
        prop_assert_eq!(out.expect("decodes"), data);
    }

    #[test]
    fn too_few_symbols_never_decode(k in 2u32..40, seed in any::<u64>(), code_i in 0usize..4, drop in 1u32..5) {
        let code = CodeKind::ALL[code_i];
        let k = k.min(code.max_block_symbols());
        let data = block(seed, k);
        let mut enc = code.encoder(k, T, data).expect("valid");
        let mut dec = code.decoder(k, T, true, &mut Rng::new(2));
        let mut buf = Vec::new();
        // Distinct source symbols only, `drop` short of k.
        for esi in 0..k.saturating_sub(drop) {
            enc.symbol(esi, &mut buf);
            prop_assert!(dec.add(esi, Some(&buf)));
            prop_assert!(dec.try_decode().is_none());
        }
        prop_assert_eq!(dec.needed(), drop.min(k));
    }

    #[test]
    fn accounting_agrees_with_real_decoding_for_mds_codes(
        k in 1u32..40, seed in any::<u64>(), loss in proptest::collection::vec(any::<bool>(), 0..120),
        code_i in 1usize..4,
    ) {
        let code = CodeKind::ALL[code_i];
        let k = k.min(code.max_block_symbols());
        let data = block(seed, k);
        let mut enc = code.encoder(k, T, data).expect("valid");
        let mut real = code.decoder(k, T, true, &mut Rng::new(3));
        let mut acct = code.decoder(k, T, false, &mut Rng::new(3));
        let mut buf = Vec::new();
        for i in 0..300u32 {
            if loss.get(i as usize).copied().unwrap_or(false) { continue; }
            let esi = i % code.symbol_space(k);
            enc.symbol(esi, &mut buf);
            prop_assert_eq!(real.add(esi, Some(&buf)), acct.add(esi, None));
            prop_assert_eq!(real.needed(), acct.needed());
            let (r, a) = (real.try_decode(), acct.try_decode());
            prop_assert_eq!(r.is_some(), a.is_some());
            if r.is_some() { break; }
        }
    }
}

#[test]
fn malformed_symbols_are_refused_not_panicking() {
    for code in CodeKind::ALL {
        let mut dec = code.decoder(4, T, true, &mut Rng::new(4));
        assert!(!dec.add(0, Some(&[1, 2, 3])), "{code:?} short payload");
        assert!(!dec.add(0, None), "{code:?} missing payload");
        assert!(
            !dec.add(u32::MAX, Some(&[0; T as usize])),
            "{code:?} huge id"
        );
        assert!(code.encoder(4, T, vec![0; 5]).is_err());
    }
}

#[test]
fn an_item_streams_through_its_layout_block_by_block() {
    let fec = FecParams {
        code: CodeKind::RaptorQ,
        symbol_size: T,
        max_block_symbols: 10,
    };
    let item: Vec<u8> = block(9, 37).into_iter().take(37 * T as usize - 5).collect();
    let l = Layout::new(item.len() as u64, &fec).expect("fits");
    assert_eq!(l.blocks(), 4);
    let mut rebuilt = Vec::new();
    for b in 0..l.blocks() {
        let k = l.block_symbols(b);
        let off = l.block_offset(b) as usize;
        let mut data = item[off..off + l.block_len(b) as usize].to_vec();
        data.resize(k as usize * T as usize, 0);
        let (out, _) = run(fec.code, k, &data, &[true, false, true], 100);
        rebuilt.extend_from_slice(&out.expect("decodes")[..l.block_len(b) as usize]);
    }
    assert_eq!(rebuilt, item);
}
