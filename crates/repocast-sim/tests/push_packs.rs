//! Push mode's packs of small files on a virtual LAN: the push and listen
//! endpoints `repocast push` and `repocast listen` run, with the shipped
//! [`Profile::Push`] settings, through seeded loss. Small files share
//! packs of up to a block; a listener receives the packs of the files it
//! selected and cuts those files out.

mod common;

use common::push::*;
use common::seed_or;
use repocast_core::auth::Identity;
use repocast_core::endpoint::Channel;
use repocast_core::endpoint::listen::{CUT_JOBS, ListenConfig, ListenEndpoint, ListenEvent};
use repocast_core::endpoint::pack::PushSet;
use repocast_core::endpoint::push::{PushConfig, PushEndpoint};
use repocast_core::endpoint::store::MemoryStore;
use repocast_core::endpoint::unpack::UnpackJob;
use repocast_core::profile::Profile;
use repocast_core::server::{BlockSource, SourceError};
use repocast_core::{Instant, ItemId};
use repocast_sim::push_lan::{PushLan, push_items};
use repocast_sim::source::MemorySource;

/// `n` files of 500 bytes to 50 KB, log-uniform (a quarter of them one
/// symbol), and two larger ones sent alone.
fn site(seed: u64, n: u64) -> Vec<(String, Vec<u8>)> {
    let mut files = tiny_site(seed, n);
    files.push(("site/video.bin".into(), bytes(1 << 20, seed + n)));
    files.push(("site/style.css".into(), bytes(300_000, seed + n + 1)));
    files
}

/// The shipped push config and `files` planned into a set (small files
/// packed), with the source the pusher reads them from.
fn planned(files: &[(String, Vec<u8>)]) -> (PushConfig, PushSet, MemorySource) {
    let cfg = config();
    let (items, mut source) = push_items(files, |s| cfg.server.item_fec(s)).expect("items");
    let set = cfg.plan(items, &mut source).expect("plan");
    (cfg, set, source)
}

/// A listener of everything, pinned to `id`, storing into `store`.
fn pinned_listener(id: &Identity, store: MemoryStore) -> ListenEndpoint<MemoryStore> {
    let mut lcfg = ListenConfig::new(Profile::Push.client());
    lcfg.trust = Some(id.public());
    ListenEndpoint::new(Instant::ZERO, lcfg, store)
}

/// Hands `ep` every datagram `push` has due at `now`, decoding (and
/// cutting packs) as they complete.
fn deliver_due(
    push: &mut PushEndpoint,
    source: &mut dyn BlockSource,
    ep: &mut ListenEndpoint<MemoryStore>,
    now: Instant,
    buf: &mut Vec<u8>,
) {
    while let Some(dest) = push.poll_transmit(now, source, buf) {
        if let Some(ch) = dest.channel() {
            ep.handle_datagram(now, ch, buf);
            ep.decode_here(now);
        }
    }
}

/// Hands `ep` one datagram, running the decode jobs it gives (not the
/// cuts of packs: the caller says when those run).
fn hear(ep: &mut ListenEndpoint<MemoryStore>, now: Instant, ch: Channel, buf: &[u8]) {
    ep.handle_datagram(now, ch, buf);
    while let Some(mut job) = ep.poll_decode() {
        job.run();
        ep.decoded(now, job);
    }
}

/// Runs `push` to `ep` until `until`, decoding but holding the packs it
/// gives to cut: returns them and the time.
fn cuts_held(
    push: &mut PushEndpoint,
    source: &mut dyn BlockSource,
    ep: &mut ListenEndpoint<MemoryStore>,
    until: Instant,
    buf: &mut Vec<u8>,
) -> (Vec<UnpackJob>, Instant) {
    let (mut now, mut held) = (Instant::ZERO, Vec::new());
    while now < until {
        while let Some(dest) = push.poll_transmit(now, source, buf) {
            let Some(ch) = dest.channel() else { continue };
            hear(ep, now, ch, buf);
        }
        held.extend(ep.poll_unpack());
        now = push.poll_timeout().expect("deadline");
        ep.handle_timeout(now);
    }
    (held, now)
}

fn median(x: &[f64]) -> f64 {
    let mut v = x.to_vec();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// A site of 600 small files: packed, a listener at 5% loss takes about
/// the time the bytes need, and one at 50% not much more; each file alone
/// (`--no-packs`) their passes give the smallest files several times
/// their size and a 50% listener waits cycles for its unluckiest file.
/// (A pass is sized so a 5% listener has every block after one pass with
/// 90% odds: about one in ten waits a second cycle for its unluckiest
/// block, packed or not.)
#[test]
fn a_site_of_small_files_in_packs_takes_about_the_time_its_bytes_need() {
    let seed = seed_or(11);
    let files = site(seed, 600);
    let run = |packs: bool, loss: f64, n: u64| {
        let mut cfg = config();
        cfg.packs = packs;
        delay_ratios(cfg, &files, loss, n, 0.037, seed * 10, 120.0)
    };
    let (packed5, packed50) = (run(true, 0.05, 10), run(true, 0.5, 3));
    let (alone5, alone50) = (run(false, 0.05, 10), run(false, 0.5, 3));
    eprintln!(
        "packed: 5% {packed5:.3?}, 50% {packed50:.3?}; alone: 5% {alone5:.3?}, 50% {alone50:.3?}"
    );
    let second = packed5.iter().filter(|&&x| x > 1.12).count();
    assert!(second <= 2, "{packed5:.3?}");
    assert!(median(&packed5) < 1.05, "{packed5:.3?}");
    assert!(packed50.iter().all(|&x| x < 1.3), "{packed50:.3?}");
    assert!(median(&alone5) > 1.25 * median(&packed5), "{alone5:.3?}");
    assert!(median(&alone50) > 1.25 * median(&packed50), "{alone50:.3?}");
}

/// Listeners naming some small files receive their packs and keep only
/// those files, each verified, at 20% loss; a name that is in no pack and
/// no file fails alone.
#[test]
fn a_listener_naming_small_files_keeps_only_those() {
    let seed = seed_or(12);
    let files = site(seed, 300);
    let mut lan = PushLan::new(config(), Identity::from_seed([7; 32]), 1, &files).expect("lan");
    assert!(lan.pusher().catalogue_len() > 0);
    let selects: [&[&str]; 3] = [
        &["site/p007.html"],
        &["site/p1*.html", "site/video.bin"],
        &["site/p007.html", "site/missing.html"],
    ];
    for (i, s) in selects.iter().enumerate() {
        let mut l = listener(0.2, 0.01 * i as f64);
        l.cfg.select = s.iter().map(|x| x.to_string()).collect();
        l.cfg.timeout = std::time::Duration::from_secs(5);
        lan.listener(l, seed * 10 + i as u64);
    }
    lan.run(secs(60.0));
    let reports = lan.reports();
    let want = |r: &repocast_sim::push_lan::PushReport, names: Vec<&str>| {
        let mut got: Vec<&str> = r.files.keys().map(String::as_str).collect();
        got.sort();
        let mut names = names;
        names.sort();
        assert_eq!(got, names);
        for n in names {
            let src = files.iter().find(|f| f.0 == n).expect("a file of the set");
            assert_eq!(r.files.get(n), Some(&src.1), "{n}");
        }
    };
    want(&reports[0], vec!["site/p007.html"]);
    assert!(reports[0].outcomes.iter().all(|o| o.result.is_ok()));
    let hundreds: Vec<&str> = (files.iter())
        .map(|f| f.0.as_str())
        .filter(|n| n.starts_with("site/p1") || *n == "site/video.bin")
        .collect();
    assert_eq!(hundreds.len(), 101);
    want(&reports[1], hundreds);
    assert_eq!(reports[1].outcomes.len(), 101);
    // The missing name is never found: the listener takes the one it
    // found once its wait for the rest of the catalogue ends.
    let r = &reports[2];
    let ok: Vec<&str> = (r.outcomes.iter())
        .filter(|o| o.result.is_ok())
        .map(|o| o.name.as_str())
        .collect();
    assert_eq!(ok, vec!["site/p007.html"], "{:?}", r.outcomes);
}

/// A listener killed after some packs verified: restarted with what its
/// store made durable, it receives only the packs it had not, and every
/// file verifies.
#[test]
fn a_listener_killed_midway_keeps_the_packs_it_verified() {
    let seed = seed_or(13);
    let files = site(seed, 600);
    // About 8.5 MB at 100 Mbit/s: a cycle of 0.75 s. The kill must fall in
    // the middle of a pack's pass (between two it loses nothing, and the
    // run is the same as one never killed): the first of these times that
    // does, for this seed's set.
    let run = |kill: f64| {
        let mut lan = PushLan::new(config(), Identity::from_seed([7; 32]), 1, &files).expect("lan");
        let mut l = listener(0.0, 0.0);
        l.crash_at = Some(secs(kill));
        lan.listener(l, seed);
        lan.listener(listener(0.0, 0.0), seed + 1);
        lan.run(secs(60.0));
        lan.reports()
    };
    let reports = ([0.5, 0.45, 0.55, 0.4, 0.6].into_iter())
        .map(run)
        .find(|r| r[0].delay > r[1].delay)
        .expect("a kill that left work");
    check_files(&reports[0], &files);
    check_files(&reports[1], &files);
    let (killed, whole) = (&reports[0], &reports[1]);
    eprintln!(
        "killed: {:?}, {} blocks, {} heard; whole: {:?}, {} blocks, {} heard",
        killed.delay,
        killed.blocks_written,
        killed.data_heard,
        whole.delay,
        whole.blocks_written,
        whole.data_heard
    );
    // Blocks written: the same as a listener never killed.
    assert_eq!(killed.blocks_written, whole.blocks_written);
    // It was killed with packs verified (it heard less than twice the set).
    assert!(killed.data_heard < 2 * whole.data_heard);
}

/// A pack whose member does not match its hash in the catalogue (a
/// faulty pusher; `plan` itself leaves out a file that does not read as
/// its hash): that member fails with a reason, the rest of its pack and of
/// the set verify.
#[test]
fn a_member_that_does_not_match_its_hash_fails_alone() {
    let seed = seed_or(14);
    let files = site(seed, 40);
    let id = Identity::from_seed([7; 32]);
    let (cfg, mut set, mut source) = planned(&files);
    set.files[3].info.hash = [0xee; 32];
    assert!(
        set.packs.iter().any(|p| p.members.contains(&3)),
        "file 3 is packed"
    );
    let mut push = PushEndpoint::new(Instant::ZERO, cfg, id.clone(), 1, set).expect("pusher");
    let mut ep = pinned_listener(&id, MemoryStore::default());
    let (mut now, mut buf) = (Instant::ZERO, Vec::new());
    while !ep.is_finished() && now < secs(30.0) {
        deliver_due(&mut push, &mut source, &mut ep, now, &mut buf);
        now = push
            .poll_timeout()
            .expect("a running pusher has a deadline");
        ep.handle_timeout(now);
    }
    let outcomes = ep.outcomes();
    assert_eq!(outcomes.len(), files.len());
    for o in &outcomes {
        if o.name == files[3].0 {
            let e = o.result.as_ref().expect_err("the changed member fails");
            assert!(e.contains("hash"), "{e}");
        } else {
            assert_eq!(o.result, Ok(()), "{}", o.name);
        }
    }
    let store = ep.store().expect("store");
    assert!(store.file(&files[3].0).is_none());
    assert_eq!(store.file(&files[4].0), Some(&files[4].1[..]));
}

/// A store that cuts packs off the receiving path (as `listen`'s on disk
/// does): each verified pack comes out as a job, one at a time; the
/// listener is not finished while one is out; its members get their
/// outcomes when it comes back, and a job lost (its thread died) fails its
/// members with a reason instead of leaving them unsaid.
#[test]
fn packs_cut_off_the_receiving_path_give_outcomes_when_back() {
    let seed = seed_or(15);
    let files = site(seed, 600);
    let id = Identity::from_seed([7; 32]);
    let (cfg, set, mut source) = planned(&files);
    let packs = set.packs.len();
    assert!(packs >= 2, "{packs} packs");
    let mut push = PushEndpoint::new(Instant::ZERO, cfg, id.clone(), 1, set).expect("pusher");
    let mut store = MemoryStore::default();
    store.unpack_as_jobs = true;
    let mut ep = pinned_listener(&id, store);
    let (mut now, mut buf) = (Instant::ZERO, Vec::new());
    let (mut seen, mut last) = (0, None);
    // Every job but the last is run and handed back at once; the last is
    // held.
    while last.is_none() && now < secs(30.0) {
        while let Some(dest) = push.poll_transmit(now, &mut source, &mut buf) {
            let Some(ch) = dest.channel() else { continue };
            hear(&mut ep, now, ch, &buf);
            if let Some(mut job) = ep.poll_unpack() {
                seen += 1;
                assert!(!ep.is_finished(), "a job is out");
                if seen == packs {
                    last = Some(job);
                    break;
                }
                job.run();
                ep.unpacked(now, job);
            }
        }
        now = push.poll_timeout().expect("deadline");
        ep.handle_timeout(now);
    }
    let mut last = last.expect("every pack verified");
    assert!(!ep.is_finished(), "the last job is out");
    last.lose();
    ep.unpacked(now, last);
    assert!(ep.is_finished());
    let outcomes = ep.outcomes();
    assert_eq!(outcomes.len(), files.len());
    let failed: Vec<_> = (outcomes.iter())
        .filter_map(|o| o.result.as_ref().err())
        .collect();
    // The lost pack's members fail, saying why; every other file verified.
    assert!(!failed.is_empty());
    assert!(failed.iter().all(|e| e.contains("not cut")), "{failed:?}");
    assert!(failed.len() < files.len() / 2, "{}", failed.len());
}

/// Files that no longer read as scanned (rewritten with their size and
/// time kept, behind the pusher's hash cache): the pusher stops sending
/// their items and names the files, so its driver scans again and hashes
/// them afresh: a file sent alone, and every member of a pack one of whose
/// members changed. Its server's events are taken as it goes (a pass
/// each, for as long as it runs).
#[test]
fn items_that_no_longer_read_as_scanned_are_named_for_a_new_scan() {
    let seed = seed_or(16);
    let files = site(seed, 600);
    let (cfg, set, _) = planned(&files);
    let pack: Vec<String> = (set.packs[0].members.iter())
        .map(|&m| files[m].0.clone())
        .collect();
    let alone = (files.iter())
        .position(|f| f.0 == "site/video.bin")
        .expect("video");
    let mut changed = files.clone();
    changed[set.packs[0].members[1]].1[0] ^= 1;
    changed[alone].1[5] ^= 1;
    let (_, mut source) = push_items(&changed, |s| cfg.server.item_fec(s)).expect("items");
    let id = Identity::from_seed([7; 32]);
    let mut push = PushEndpoint::new(Instant::ZERO, cfg, id, 1, set).expect("pusher");
    let (mut now, mut buf, mut failed) = (Instant::ZERO, Vec::new(), Vec::new());
    while now < secs(3.0) {
        while push.poll_transmit(now, &mut source, &mut buf).is_some() {}
        failed.extend(std::iter::from_fn(|| push.poll_failed()));
        now = push.poll_timeout().expect("deadline");
    }
    let mut names: Vec<Vec<String>> = failed.iter().map(|f| f.names.clone()).collect();
    names.sort();
    let mut want = vec![pack, vec!["site/video.bin".to_string()]];
    want.sort();
    assert_eq!(names, want);
    assert!(failed.iter().all(|f| !f.reason.is_empty()));
    // Many passes went out (the set is about 9 MB, 0.75 s a cycle), and
    // no event was left behind.
    assert!(push.stats().passes > 20, "{}", push.stats().passes);
    assert_eq!(push.server().events_waiting(), 0);
}

/// A source whose reads of one item fail while `failing` is set (a disk
/// or network file system that stops answering for a while).
struct Flaky {
    inner: MemorySource,
    item: ItemId,
    failing: bool,
}

impl BlockSource for Flaky {
    fn read(
        &mut self,
        item: ItemId,
        offset: u64,
        len: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), SourceError> {
        if self.failing && item == self.item {
            return Err(SourceError::Io {
                path: "site/video.bin".into(),
                source: std::io::Error::other("the disk does not answer"),
            });
        }
        self.inner.read(item, offset, len, out)
    }
}

/// A file whose reads fail for a while: the passes that cannot read it
/// fail its item, which is named once; the first pass after the reads
/// heal sends it again, so a listener that tuned in meanwhile gets every
/// file, that one included, with no new version.
#[test]
fn an_item_whose_reads_fail_for_a_while_goes_out_again_once_they_heal() {
    let seed = seed_or(17);
    let files = site(seed, 100);
    let id = Identity::from_seed([7; 32]);
    let (cfg, set, source) = planned(&files);
    let mut push = PushEndpoint::new(Instant::ZERO, cfg, id.clone(), 1, set).expect("pusher");
    let video = (push.items().iter())
        .position(|i| i.info.name == "site/video.bin")
        .expect("video");
    assert!(
        (push.channel_items().iter()).any(|(_, f)| f == &[video]),
        "sent alone"
    );
    // The source is read by file (a pack's members one by one).
    let mut source = Flaky {
        inner: source,
        item: ItemId(video as u32),
        failing: true,
    };
    let mut ep = pinned_listener(&id, MemoryStore::default());
    let (mut now, mut buf, mut failed) = (Instant::ZERO, Vec::new(), Vec::new());
    let mut healed_at = None;
    while !ep.is_finished() && now < secs(60.0) {
        // The reads heal once the item has failed, and a while after.
        if healed_at.is_none() && !failed.is_empty() && now >= secs(2.0) {
            source.failing = false;
            healed_at = Some(now);
        }
        deliver_due(&mut push, &mut source, &mut ep, now, &mut buf);
        failed.extend(std::iter::from_fn(|| push.poll_failed()));
        now = push.poll_timeout().expect("deadline");
        ep.handle_timeout(now);
    }
    assert!(healed_at.is_some(), "the item failed while its reads did");
    let names: Vec<Vec<String>> = failed.iter().map(|f| f.names.clone()).collect();
    assert_eq!(names, vec![vec!["site/video.bin".to_string()]]);
    assert!(ep.is_finished(), "the listener finished by {now:?}");
    let outcomes = ep.outcomes();
    assert_eq!(outcomes.len(), files.len());
    assert!(outcomes.iter().all(|o| o.result.is_ok()));
    assert_eq!(push.version(), 1);
}

/// A satellite listener still cutting packs out when a new version comes
/// (one file added) does not receive those packs again: their members are
/// on their way into place. Every file of the new version ends in place,
/// verified. (Before, every pack whose cut was out or queued was received
/// again: its members were not in place yet.)
#[test]
fn a_new_version_while_packs_are_cut_does_not_receive_them_again() {
    let seed = seed_or(17);
    let v1 = site(seed, 600);
    let mut v2 = v1.clone();
    v2.push(("site/zz-new.html".into(), bytes(3_000, seed + 1)));
    let id = Identity::from_seed([7; 32]);
    let (cfg, set, mut source) = planned(&v1);
    let mut push = PushEndpoint::new(Instant::ZERO, cfg, id.clone(), 1, set).expect("pusher");
    let mut store = MemoryStore::default();
    store.unpack_as_jobs = true;
    let mut lcfg = ListenConfig::new(Profile::Push.client());
    lcfg.trust = Some(id.public());
    lcfg.satellite = true;
    let mut ep = ListenEndpoint::new(Instant::ZERO, lcfg, store);
    let mut buf = Vec::new();
    // Version 1 for 5 s (about 8.5 MB: several passes), its cuts held.
    let (held, mut now) = cuts_held(&mut push, &mut source, &mut ep, secs(5.0), &mut buf);
    assert_eq!(held.len(), CUT_JOBS, "cuts out at once");
    assert!(ep.unpacking());
    let (_, set2, mut source2) = planned(&v2);
    let largest = (set2.packs.iter()).map(|p| p.members.len()).max();
    push.replace(now, 2, set2).expect("version 2");
    let mut receiving = None;
    while receiving.is_none() && now < secs(8.0) {
        while let Some(dest) = push.poll_transmit(now, &mut source2, &mut buf) {
            let Some(ch) = dest.channel() else { continue };
            ep.handle_datagram(now, ch, &buf);
            while let Some(ev) = ep.poll_event() {
                if let ListenEvent::Version {
                    version: 2,
                    receiving: r,
                    ..
                } = ev
                {
                    receiving = Some(r);
                }
            }
        }
        now = push.poll_timeout().expect("deadline");
        ep.handle_timeout(now);
    }
    let receiving = receiving.expect("version 2 taken");
    eprintln!("version 2 receives {receiving} of {} files", v2.len());
    // The new file's pack (a pack's cut depends on names, so one file
    // added changes its own pack): no more than the largest pack holds.
    let largest = largest.expect("packs");
    assert!(receiving <= largest, "{receiving} files received again");
    for mut job in held {
        job.run();
        ep.unpacked(now, job);
    }
    while now < secs(12.0) {
        deliver_due(&mut push, &mut source2, &mut ep, now, &mut buf);
        while let Some(mut job) = ep.poll_unpack() {
            job.run();
            ep.unpacked(now, job);
        }
        now = push.poll_timeout().expect("deadline");
        ep.handle_timeout(now);
    }
    assert!(!ep.unpacking());
    let outcomes = ep.outcomes();
    assert_eq!(outcomes.len(), v2.len());
    assert!(outcomes.iter().all(|o| o.result.is_ok()), "{outcomes:?}");
    let mut store = ep.into_store().expect("store");
    store.land();
    for (name, b) in &v2 {
        assert_eq!(store.file(name), Some(b.as_slice()), "{name}");
    }
}

/// A listener that drops out, with a pack's cut out when a new version
/// changes every file: the cut's outcomes, back late, are the old
/// version's and count for nothing; it ends with the new version's files.
#[test]
fn a_tiddo_listener_ends_with_the_newest_files_when_a_cut_comes_back_late() {
    let seed = seed_or(19);
    let v1 = site(seed, 300);
    let v2: Vec<_> = (site(seed + 1_000, 300).into_iter())
        .zip(&v1)
        .map(|((_, b), (n, _))| (n.clone(), b))
        .collect();
    let mut run = LateCuts::new(&v1);
    // One back at once: room for another, but not for version 2's while
    // version 1's other is out.
    let mut back = run.held.remove(0);
    back.run();
    run.ep.unpacked(run.now, back);
    let cut = |ep: &ListenEndpoint<MemoryStore>| {
        (ep.outcomes().iter())
            .filter(|o| o.result.is_ok() && o.name.starts_with("site/p"))
            .count()
    };
    // Until then no small file of version 2 is cut.
    let late = |ep: &ListenEndpoint<MemoryStore>, now| {
        if ep.version() == Some(2) {
            assert_eq!(cut(ep), 0, "version 2 cut at {now:?}");
        }
    };
    run.finish(&v2, late);
}

/// A pusher of version 1 and a listener of it that drops out, its packs
/// cut as jobs, after 1 s: the cuts it gave then are held.
struct LateCuts {
    push: PushEndpoint,
    ep: ListenEndpoint<MemoryStore>,
    held: Vec<UnpackJob>,
    now: Instant,
}

impl LateCuts {
    fn new(v1: &[(String, Vec<u8>)]) -> Self {
        let id = Identity::from_seed([7; 32]);
        let (cfg, set, mut source) = planned(v1);
        let mut push = PushEndpoint::new(Instant::ZERO, cfg, id.clone(), 1, set).expect("pusher");
        let mut store = MemoryStore::default();
        store.unpack_as_jobs = true;
        let mut ep = pinned_listener(&id, store);
        let (held, now) = cuts_held(&mut push, &mut source, &mut ep, secs(1.0), &mut Vec::new());
        assert_eq!(held.len(), CUT_JOBS, "cuts out at once");
        LateCuts {
            push,
            ep,
            held,
            now,
        }
    }

    /// Pushes version 2 (`v2`) until the listener finishes: the held cuts
    /// come back 3 s after it came, the others at once; `while_late` looks
    /// at the listener before each round while they are out. It must end
    /// with every file of `v2` verified and in place.
    fn finish(
        self,
        v2: &[(String, Vec<u8>)],
        mut while_late: impl FnMut(&ListenEndpoint<MemoryStore>, Instant),
    ) {
        let LateCuts {
            mut push,
            mut ep,
            held,
            mut now,
        } = self;
        let (_, set2, mut source) = planned(v2);
        push.replace(now, 2, set2).expect("version 2");
        let (replaced, mut late, mut buf) = (now, Some(held), Vec::new());
        while !ep.is_finished() && now < secs(20.0) {
            deliver_due(&mut push, &mut source, &mut ep, now, &mut buf);
            if late.is_some() {
                while_late(&ep, now);
            }
            if now >= replaced + std::time::Duration::from_secs(3) {
                for mut job in late.take().into_iter().flatten() {
                    job.run();
                    ep.unpacked(now, job);
                }
            }
            while let Some(mut job) = ep.poll_unpack() {
                job.run();
                ep.unpacked(now, job);
            }
            now = push.poll_timeout().expect("deadline");
            ep.handle_timeout(now);
        }
        assert!(late.is_none() && ep.is_finished(), "finished at {now:?}");
        assert_eq!(ep.version(), Some(2));
        let outcomes = ep.outcomes();
        assert_eq!(outcomes.len(), v2.len());
        assert!(outcomes.iter().all(|o| o.result.is_ok()), "{outcomes:?}");
        let mut store = ep.into_store().expect("store");
        store.land();
        for (name, b) in v2 {
            assert!(store.file(name) == Some(b.as_slice()), "{name} differs");
        }
    }
}

/// A small file that grows past a pack's share in a new version goes
/// alone. With the older version's cut of its pack still out when the new
/// version came, the new version was taken at once: the lone file landed,
/// then the late cut put the older content over it, and the listener said
/// the new content was verified. The new version now waits for that cut;
/// the listener ends with the new content.
#[test]
fn a_file_that_leaves_its_pack_is_not_overwritten_by_a_late_cut() {
    let seed = seed_or(20);
    let v1 = site(seed, 300);
    let run = LateCuts::new(&v1);
    let grown = run.held[0].members()[0].name.clone();
    let mut v2 = v1.clone();
    for (_, b) in v2.iter_mut().filter(|(n, _)| *n == grown) {
        *b = bytes(400_000, seed + 7);
    }
    let (_, set2, _) = planned(&v2);
    let alone = (set2.files.iter().position(|f| f.info.name == grown))
        .is_some_and(|i| set2.packs.iter().all(|p| !p.members.contains(&i)));
    assert!(alone, "{grown} is sent alone in version 2");
    // Version 2 waits for the cut that holds the grown file's old content.
    let late = |ep: &ListenEndpoint<MemoryStore>, now| {
        assert_ne!(ep.version(), Some(2), "version 2 taken at {now:?}");
    };
    run.finish(&v2, late);
}

/// A set of many tiny files (configuration, a package index, a site of
/// small pages): their catalogue is a large part of what a listener needs,
/// and it takes the share of the rate that its bytes are of a cycle's
/// (catalogue and one pass), up to half. Listeners at 5% and 50% have
/// every file in about the time the catalogue and the data take together
/// at the rate. (At a fixed 5% of the rate, a copy of this catalogue took
/// about ten times as long as a pass of the data, and listeners 6.6 times
/// the time above.)
#[test]
fn a_set_of_tiny_files_takes_about_its_catalogue_and_data_time() {
    let seed = seed_or(18);
    let mut r = repocast_core::rng::Rng::new(seed);
    let files: Vec<(String, Vec<u8>)> = (0..5000u64)
        .map(|i| {
            let len = (64.0 * 8f64.powf((r.next_u64() % 1000) as f64 / 1000.0)) as usize;
            (format!("etc/conf{i:04}.toml"), bytes(len, seed + i))
        })
        .collect();
    let cfg = config();
    let packet = cfg.server.packet_interval.as_secs_f64();
    let t = cfg.server.symbol_size as f64;
    let mut lan = PushLan::new(cfg, Identity::from_seed([7; 32]), 1, &files).expect("lan");
    let pieces = lan.pusher().catalogue_len() as f64;
    let data: f64 = files.iter().map(|f| f.1.len() as f64).sum::<f64>() / t;
    assert!(
        pieces > data / 4.0,
        "{pieces} pieces, {data:.0} symbols of data"
    );
    let losses = [0.05, 0.05, 0.05, 0.05, 0.5, 0.5];
    for (i, &loss) in losses.iter().enumerate() {
        lan.listener(listener(loss, 0.031 * i as f64), seed * 10 + i as u64);
    }
    // Each needs well under a second (the catalogue alone at 5% of the
    // rate took about one).
    lan.run(secs(3.0));
    let ratios: Vec<f64> = (lan.reports().iter().zip(losses))
        .map(|(rep, loss)| {
            check_files(rep, &files);
            let ideal = packet * (pieces + data) / (1.0 - loss);
            rep.delay.expect("finished").as_secs_f64() / ideal
        })
        .collect();
    eprintln!("{pieces} pieces, {data:.0} symbols of data: ratios {ratios:.3?}");
    assert!(ratios.iter().all(|&x| x < 2.0), "{ratios:.3?}");
    assert!(median(&ratios[..4]) < 1.5, "{ratios:.3?}");
}
