//! Issue 13's multicast probes as deterministic tests, through the
//! shipped endpoints (`Profile::Lan`: session key, signed announcements,
//! pinned server key) on the virtual LAN, with an attacker putting
//! datagrams built from the project's own wire types on the groups:
//! - probe 1: forged announcements and data of the real session and item
//!   with higher transmission ids;
//! - probe 3: forged symbols with real headers and random payloads, at ten
//!   times the server's own packet rate;
//! - an authorised client (it holds the session key) forging
//!   announcements: the tag passes, the signature does not;
//! - `serve --encrypt`: receivers verify everything, and an eavesdropper
//!   on the server's link sees none of the data in the clear.
//!
//! In each, every receiver still verifies everything, within 1.2x of the
//! time the same run takes without the attacker, and counts the forgeries.
//! Replay a seed with `REPOCAST_SEED=<n>`.

mod common;

use repocast_core::auth::{self, SessionKey};
use repocast_core::endpoint::Channel;
use repocast_core::endpoint::client::Want;
use repocast_core::fec::CodeKind;
use repocast_core::loss::LossSpec;
use repocast_core::profile::Profile;
use repocast_core::rng::Rng;
use repocast_core::wire::{AnnounceKind, AnnounceRepr, DataRepr};
use repocast_core::{BlockId, Instant, ItemId, SessionId, TransmissionId};
use repocast_sim::lan::{LanClient, VirtualLan};
use std::time::Duration;

const SESSION: SessionId = SessionId(0x5e55);
/// The key an authorised client would hold (the test sets it).
const INSIDER_KEY: [u8; 32] = [0x42; 32];
const RATE: u64 = 20_000_000;

fn seed() -> u64 {
    common::seed_or(11)
}

fn items(seed: u64) -> Vec<(String, Vec<u8>)> {
    let mut r = Rng::new(seed);
    [300_000usize, 1_000_000, 70_000]
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            let bytes = (0..n).map(|_| r.next_u64() as u8).collect();
            (format!("item{i}.bin"), bytes)
        })
        .collect()
}

fn lan(seed: u64, data: &[(String, Vec<u8>)]) -> VirtualLan {
    lan_with(seed, data, false)
}

fn lan_with(seed: u64, data: &[(String, Vec<u8>)], encrypt: bool) -> VirtualLan {
    lan_coded(seed, data, encrypt, Profile::Lan.server().code)
}

fn lan_coded(seed: u64, data: &[(String, Vec<u8>)], encrypt: bool, code: CodeKind) -> VirtualLan {
    let mut h = VirtualLan::new(
        Profile::Lan,
        |c| {
            c.seed = seed;
            c.code = code;
            c.encrypt = encrypt;
            c.session = SESSION;
            c.max_block_symbols = 64;
            c.session_key = Some(SessionKey::from_bytes(INSIDER_KEY));
            c.set_rate(RATE, false).expect("rate");
        },
        data.to_vec(),
        LossSpec::NONE,
    )
    .expect("server");
    for (k, loss) in [0.02, 0.1, 0.3].into_iter().enumerate() {
        let want = (0..data.len())
            .filter(|i| (i + k) % 3 != 2)
            .map(|i| data[i].0.clone())
            .collect();
        h.add_client(LanClient {
            want: Want::Items(want),
            loss: LossSpec::Bernoulli { p: loss },
            join_at: Instant::from_micros(k as u64 * 3_000),
            crash_at: None,
            stop_at: None,
            host: None,
        });
    }
    h
}

/// Runs to the end; every outcome verified and equal to its source.
/// Returns the slowest receiver's delay and the forgeries counted.
fn finish(mut h: VirtualLan, data: &[(String, Vec<u8>)], what: &str) -> (Duration, u64) {
    finish_keeping(&mut h, data, what)
}

/// [`finish`], leaving the run to look at.
fn finish_keeping(h: &mut VirtualLan, data: &[(String, Vec<u8>)], what: &str) -> (Duration, u64) {
    assert!(
        h.run(Instant::from_micros(300_000_000)),
        "{what}: unfinished"
    );
    let mut slowest = Duration::ZERO;
    let mut forged = 0;
    for (i, r) in h.reports().iter().enumerate() {
        assert!(!r.outcomes.is_empty(), "{what}: client {i}");
        for o in &r.outcomes {
            assert_eq!(o.result, Ok(()), "{what}: client {i}: {}", o.name);
            let src = data.iter().find(|d| d.0 == o.name).expect("name");
            assert_eq!(r.files.get(&o.name), Some(&src.1), "{what}: {}", o.name);
        }
        assert_eq!(
            r.client.corrupt_blocks, 0,
            "{what}: a forged symbol was decoded"
        );
        slowest = slowest.max(r.delay.expect("finished"));
        forged += r.stats.forged;
    }
    (slowest, forged)
}

fn announce(item: u32, transmission: u32, kind: AnnounceKind) -> Vec<u8> {
    let mut b = Vec::new();
    AnnounceRepr {
        session: SESSION,
        transmission: TransmissionId(transmission),
        item: ItemId(item),
        kind,
        first_block: 0,
        block_count: 1_000,
        total_packets: 1_000_000,
        duration_us: 80_000_000_000,
        nak_window_min_us: 1_000,
        nak_window_max_us: 2_000,
    }
    .emit(&mut b);
    b
}

fn data_packet(rng: &mut Rng, item: u32, transmission: u32, tag: Vec<u8>) -> Vec<u8> {
    let mut b = Vec::new();
    DataRepr {
        session: SESSION,
        transmission: TransmissionId(transmission),
        item: ItemId(item),
        block: BlockId(rng.next_u64() as u32 % 16),
        symbol: rng.next_u64() as u32 % 100,
        seq: 0,
        probe: None,
        payload: (0..1280).map(|_| rng.next_u64() as u8).collect(),
        tag,
        encrypted: false,
    }
    .emit(&mut b);
    b
}

#[test]
fn forged_announcements_and_data_with_higher_transmission_ids_are_ignored() {
    let s = seed();
    let data = items(s);
    let (clean, none) = finish(lan(s, &data), &data, "clean");
    assert_eq!(none, 0);
    let mut h = lan(s, &data);
    let mut rng = Rng::new(s ^ 0xbad);
    // Every 20 ms, for every item: a start, a repair and an end of a far
    // later transmission, untagged, tagged with a guessed key, and with a
    // trailer of the right length but junk; and data of it.
    let stranger = SessionKey::from_bytes([7; 32]);
    for step in 0..200u64 {
        let at = Instant::from_micros(step * 20_000);
        for item in 0..data.len() as u32 {
            for kind in [AnnounceKind::First, AnnounceKind::Repair, AnnounceKind::End] {
                let plain = announce(item, 1_000 + step as u32, kind);
                let mut guessed = plain.clone();
                auth::seal_announce_unsigned(&stranger, &mut guessed);
                let mut junk = plain.clone();
                junk.extend((0..auth::ANNOUNCE_TRAILER_LEN).map(|_| rng.next_u64() as u8));
                for b in [plain, guessed, junk] {
                    h.inject(at, Channel::Announce, b);
                }
            }
            let p = data_packet(&mut rng, item, 1_000 + step as u32, vec![]);
            h.inject(at, Channel::Data, p);
        }
    }
    let (attacked, forged) = finish(h, &data, "forged announcements");
    assert!(forged > 1_000, "forgeries counted: {forged}");
    assert!(
        attacked.as_secs_f64() <= clean.as_secs_f64() * 1.2,
        "{attacked:?} against {clean:?} without the attacker"
    );
}

#[test]
fn a_flood_of_forged_symbols_at_ten_times_the_server_rate_changes_nothing() {
    let s = seed();
    let data = items(s);
    let (clean, _) = finish(lan(s, &data), &data, "clean");
    let mut h = lan(s, &data);
    let mut rng = Rng::new(s ^ 0xf100d);
    // The server sends 1,356-byte packets at 20 Mbit/s: about 1,840 a
    // second. The flood: ten times that, real headers (this session, the
    // first transmission ids, every item), random symbols, tags made with
    // a guessed key, until twice the clean run's time.
    let packets_per_s = RATE as f64 / ((1280 + 31 + 17 + 28) * 8) as f64;
    let every = Duration::from_secs_f64(1.0 / (10.0 * packets_per_s));
    let guessed = SessionKey::from_bytes([9; 32]);
    let mut at = Instant::ZERO;
    let end = Instant::ZERO + clean * 2;
    let mut n = 0u64;
    while at < end {
        let item = (n % data.len() as u64) as u32;
        let mut p = data_packet(&mut rng, item, 1 + (n % 4) as u32, vec![0; auth::TAG_LEN]);
        auth::seal_data(&guessed, n, &mut p);
        h.inject(at, Channel::Data, p);
        at = at + every;
        n += 1;
    }
    let (attacked, forged) = finish(h, &data, "flood");
    assert!(forged > n / 4, "forged {forged} of {n} injected");
    assert!(
        attacked.as_secs_f64() <= clean.as_secs_f64() * 1.2,
        "{attacked:?} against {clean:?} without the flood"
    );
}

/// An insider's announcements of every one of `items`, every 30 ms for
/// 3 s, of ever later transmissions: a valid tag (it holds the session
/// key) and a made-up signature. Returns how many.
fn insider_announces(h: &mut VirtualLan, items: u32) -> u64 {
    let insider = SessionKey::from_bytes(INSIDER_KEY);
    let mut sent = 0;
    for step in 0..100u64 {
        let at = Instant::from_micros(step * 30_000);
        for item in 0..items {
            let mut b = announce(item, 2_000 + step as u32, AnnounceKind::First);
            auth::seal_announce_unsigned(&insider, &mut b);
            h.inject(at, Channel::Announce, b);
            sent += 1;
        }
    }
    sent
}

#[test]
fn an_authorised_client_cannot_forge_announcements() {
    let s = seed();
    let data = items(s);
    let (clean, _) = finish(lan(s, &data), &data, "clean");
    let mut h = lan(s, &data);
    let forged_sent = insider_announces(&mut h, data.len() as u32);
    let (attacked, forged) = finish(h, &data, "insider");
    assert!(forged > 0 && forged <= forged_sent * 3, "{forged}");
    assert!(
        attacked.as_secs_f64() <= clean.as_secs_f64() * 1.2,
        "{attacked:?} against {clean:?}"
    );
}

/// A receiver checks the server's signature (about 50 µs) only on
/// announcements that bear on it: of items it waits for, or ending a
/// transmission it listens to. Each of the three receivers here wants two
/// of the three items, so it hears announcements of the third: those it
/// checks on their session tag alone and otherwise ignores (strays). An
/// insider's announcements of every item, with a good tag and a made-up
/// signature, are refused and counted where they bear on a receiver, and
/// change nothing elsewhere; every receiver still verifies everything, in
/// about the same time.
#[test]
fn announcements_of_items_a_receiver_does_not_wait_for_are_taken_on_their_tag() {
    let s = seed();
    let data = items(s);
    let mut h = lan(s, &data);
    assert!(h.run(Instant::from_micros(300_000_000)), "unfinished");
    let strays: Vec<u64> = (h.reports().iter())
        .map(|r| r.stats.stray_announcements)
        .collect();
    assert!(strays.iter().all(|&n| n > 0), "{strays:?}");
    let (checked, _) = h.signatures();
    let (clean, _) = finish(lan(s, &data), &data, "clean");

    let mut h = lan(s, &data);
    insider_announces(&mut h, data.len() as u32);
    let (attacked, forged) = finish_keeping(&mut h, &data, "insider");
    let (checked_attacked, _) = h.signatures();
    assert!(forged > 0, "forgeries of wanted items refused");
    assert!(
        checked_attacked > checked,
        "the forgeries of wanted items were checked: {checked_attacked} against {checked}"
    );
    assert!(
        attacked.as_secs_f64() <= clean.as_secs_f64() * 1.2,
        "{attacked:?} against {clean:?}"
    );
}

/// Of `tapped` data datagrams, how many carry a payload whose first 16
/// bytes occur somewhere in the served data, and how many are flagged
/// encrypted.
fn in_the_clear(tapped: &[Vec<u8>], data: &[(String, Vec<u8>)]) -> (usize, usize) {
    let windows: std::collections::HashSet<&[u8]> =
        (data.iter()).flat_map(|d| d.1.windows(16)).collect();
    let parsed: Vec<DataRepr> = (tapped.iter())
        .map(|b| DataRepr::parse(b).expect("the server's own packet"))
        .collect();
    let clear = (parsed.iter())
        .filter(|p| p.payload.len() >= 16 && windows.contains(&p.payload[..16]))
        .count();
    (clear, parsed.iter().filter(|p| p.encrypted).count())
}

#[test]
fn encrypted_data_verifies_and_an_eavesdropper_reads_none_of_it() {
    let s = seed();
    let data = items(s);
    // Without --encrypt the source symbols travel in the clear: the check
    // below can tell.
    let mut plain = lan_with(s, &data, false);
    plain.tap_data(500);
    let (plain_time, _) = finish_keeping(&mut plain, &data, "plain");
    let (clear, flagged) = in_the_clear(plain.tapped(), &data);
    assert_eq!(plain.tapped().len(), 500);
    assert!(
        clear > 250 && flagged == 0,
        "{clear} in the clear, {flagged}"
    );

    let mut h = lan_with(s, &data, true);
    h.tap_data(500);
    let (time, forged) = finish_keeping(&mut h, &data, "encrypted");
    assert_eq!(forged, 0);
    let (clear, flagged) = in_the_clear(h.tapped(), &data);
    assert_eq!((clear, flagged), (0, 500));
    // Encryption adds no bytes: the same run, in the same virtual time.
    assert_eq!(time, plain_time);
}

/// What stays open: an insider holding the session key pollutes symbols
/// that pass the tag check. Nothing polluted is ever written (the block
/// hashes catch it), and every receiver still ends, each item verified
/// (equal to its source) or failed with a reason: never a hang.
#[test]
fn an_insider_polluting_symbols_corrupts_nothing_and_every_receiver_ends() {
    let s = seed();
    let data = items(s);
    let mut h = lan(s, &data);
    h.idle_timeout = Duration::from_secs(10);
    let key = SessionKey::from_bytes(INSIDER_KEY);
    h.pollute(repocast_sim::insider::Polluter::new(0.05, key, s));
    assert!(h.run(Instant::from_micros(600_000_000)), "a receiver hung");
    assert!(h.polluter().is_some_and(|p| p.sent > 10));
    let mut corrupt = 0;
    for (i, r) in h.reports().iter().enumerate() {
        assert!(r.delay.is_some() && !r.outcomes.is_empty(), "client {i}");
        for o in &r.outcomes {
            match &o.result {
                Ok(()) => {
                    let src = data.iter().find(|d| d.0 == o.name).expect("name");
                    assert_eq!(r.files.get(&o.name), Some(&src.1), "{}", o.name);
                }
                Err(why) => assert!(!why.is_empty(), "client {i}: {}", o.name),
            }
        }
        corrupt += r.client.corrupt_blocks;
    }
    assert!(corrupt > 0, "the polluted symbols reached the decoders");
}

/// An insider's rare forged symbols among the ids the server sends next
/// (the only ones a Reed-Solomon block takes): a block decoded from one
/// fails its hash and is screened for it, with the repairs its eighth
/// more asks for, and every receiver verifies every item, RaptorQ and
/// Reed-Solomon alike.
#[test]
fn an_insiders_forged_symbols_are_screened_out_of_blocks_of_either_code() {
    let s = seed();
    let data = items(s);
    for code in [CodeKind::RaptorQ, CodeKind::ReedSolomon] {
        let mut h = lan_coded(s, &data, false, code);
        let key = SessionKey::from_bytes(INSIDER_KEY);
        h.pollute(repocast_sim::insider::Polluter::new(0.003, key, s).ahead());
        assert!(
            h.run(Instant::from_micros(300_000_000)),
            "{code:?}: unfinished"
        );
        let (mut corrupt, mut screened) = (0, 0);
        for (i, r) in h.reports().iter().enumerate() {
            for o in &r.outcomes {
                assert_eq!(o.result, Ok(()), "{code:?}: client {i}: {}", o.name);
                let src = data.iter().find(|d| d.0 == o.name).expect("name");
                assert_eq!(r.files.get(&o.name), Some(&src.1), "{}", o.name);
            }
            corrupt += r.client.corrupt_blocks;
            screened += r.client.screened_blocks;
        }
        eprintln!("{code:?}: {corrupt} blocks failed their hash, {screened} screened");
        assert!(corrupt > 0, "{code:?}: no forged symbol reached a decoder");
        assert!(screened > 0, "{code:?}: none screened");
    }
}

/// Key rotation: every receiver, whether welcomed before the rotation,
/// during its grace or after the switch, verifies everything without a
/// single packet refused; packets sent after the switch carry the new
/// epoch and do not check under the old key, so a client that left before
/// the rotation can neither read nor forge them.
#[test]
fn a_key_rotation_mid_run_loses_no_packet_and_shuts_out_the_old_key() {
    let s = seed();
    let mut data = items(s);
    // An item two of the first receivers want that keeps them receiving
    // across the switch (6 MB at 20 Mbit/s: about 2.5 s).
    let mut r = Rng::new(s ^ 0xb16);
    data.push((
        "big.bin".into(),
        (0..6_000_000).map(|_| r.next_u64() as u8).collect(),
    ));
    let mut h = lan_with(s, &data, true);
    let new_key = SessionKey::from_bytes([0x77; 32]);
    h.rotate_key_at(Instant::from_micros(100_000), new_key.clone());
    let grace = Profile::Lan.limits().rekey_grace;
    // Asked again while the first is pending: ignored (the first key would
    // otherwise never take over).
    let ignored = SessionKey::from_bytes([0x78; 32]);
    h.rotate_key_at(Instant::from_micros(100_000) + grace / 2, ignored);
    let switch = Instant::from_micros(100_000) + grace;
    // One receiver welcomed during the grace (it is told the next key
    // after its welcome), one after the switch (welcomed with it).
    let during = Instant::from_micros(100_000) + (grace - Duration::from_millis(200));
    for at in [during, switch + Duration::from_millis(300)] {
        h.add_client(LanClient {
            want: Want::Items(data.iter().map(|d| d.0.clone()).collect()),
            loss: LossSpec::Bernoulli { p: 0.05 },
            join_at: at,
            crash_at: None,
            stop_at: None,
            host: None,
        });
    }
    h.tap_data(usize::MAX);
    let (_, forged) = finish_keeping(&mut h, &data, "rotation");
    assert_eq!(forged, 0, "a packet was refused across the rotation");
    assert_eq!(h.server().key_epoch(), 1);
    let old = SessionKey::from_bytes(INSIDER_KEY);
    let (mut before, mut after) = (0, 0);
    for b in h.tapped() {
        let p = DataRepr::parse(b).expect("the server's own packet");
        let n = auth::tag_number(&p.tag).expect("tagged");
        match auth::epoch_of(n) {
            0 => {
                assert_eq!(auth::check_data(&old, b), Ok(()));
                before += 1;
            }
            1 => {
                assert_eq!(auth::check_data(&new_key, b), Ok(()));
                assert_eq!(auth::check_data(&old, b), Err(auth::AuthError::BadTag));
                after += 1;
            }
            e => panic!("epoch {e}"),
        }
    }
    assert!(
        before > 100 && after > 100,
        "{before} before, {after} after"
    );
}

/// Signed symbols close that: with `sign_symbols` the insider's validly
/// tagged packets are listed in no signed batch, so none reaches a
/// decoder. Every item verifies, no block fails its hash, and the
/// receivers are as quick as without the insider.
#[test]
fn signed_symbols_keep_an_insiders_pollution_from_every_decoder() {
    let s = seed();
    let data = items(s);
    let run = |pollute: bool| {
        let mut h = VirtualLan::new(
            Profile::Lan,
            |c| {
                c.seed = s;
                c.session = SESSION;
                c.max_block_symbols = 64;
                c.session_key = Some(SessionKey::from_bytes(INSIDER_KEY));
                c.sign_symbols = true;
                c.set_rate(RATE, false).expect("rate");
            },
            data.to_vec(),
            LossSpec::NONE,
        )
        .expect("server");
        for (k, loss) in [0.02, 0.1, 0.3].into_iter().enumerate() {
            h.add_client(LanClient {
                want: Want::Items(data.iter().map(|d| d.0.clone()).collect()),
                loss: LossSpec::Bernoulli { p: loss },
                join_at: Instant::from_micros(k as u64 * 3_000),
                crash_at: None,
                stop_at: None,
                host: None,
            });
        }
        if pollute {
            let key = SessionKey::from_bytes(INSIDER_KEY);
            h.pollute(repocast_sim::insider::Polluter::new(0.05, key, s));
        }
        assert!(h.run(Instant::from_micros(600_000_000)), "a receiver hung");
        if pollute {
            assert!(h.polluter().is_some_and(|p| p.sent > 10));
        }
        let mut slowest = Duration::ZERO;
        for (i, r) in h.reports().iter().enumerate() {
            assert_eq!(r.outcomes.len(), data.len(), "client {i}");
            for o in &r.outcomes {
                assert!(o.result.is_ok(), "client {i}: {o:?}");
                let src = data.iter().find(|d| d.0 == o.name).expect("name");
                assert_eq!(r.files.get(&o.name), Some(&src.1), "{}", o.name);
            }
            assert_eq!(r.client.corrupt_blocks, 0, "client {i}");
            assert!(r.stats.signing.batches > 0, "client {i} checked no batch");
            slowest = slowest.max(r.delay.expect("delay"));
        }
        slowest
    };
    let clean = run(false);
    let polluted = run(true);
    assert!(
        polluted.as_secs_f64() <= clean.as_secs_f64() * 1.2,
        "{polluted:?} against {clean:?}"
    );
}
