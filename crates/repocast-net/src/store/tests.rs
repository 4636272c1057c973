//! The store's tests, and the small item they (and `share`'s tests)
//! share ([`fixture`]).

/// A small item for the store's tests.
pub(super) mod fixture {
    use super::super::*;
    use repocast_core::fec::CodeKind;
    use repocast_core::wire::FecParams;

    /// Block `b` of `data`.
    pub fn block<'a>(data: &'a [u8], layout: &Layout, b: u32) -> &'a [u8] {
        let at = layout.block_offset(b) as usize;
        &data[at..at + layout.block_len(b) as usize]
    }

    /// A 100-byte item named `d/f` of two blocks (64 and 36 bytes): its
    /// bytes, manifest and layout.
    pub fn two_blocks(item: ItemId) -> (Vec<u8>, ManifestEntry, Layout) {
        let data: Vec<u8> = (0..100u32).map(|i| (i * 13 + 5) as u8).collect();
        let fec = FecParams {
            code: CodeKind::RaptorQ,
            symbol_size: 16,
            max_block_symbols: 4,
        };
        let layout = Layout::new(100, &fec).expect("layout");
        let m = ManifestEntry {
            item,
            name: "d/f".into(),
            size: 100,
            hash: *blake3::hash(&data).as_bytes(),
            fec,
            block_hashes: (0..2)
                .map(|b| *blake3::hash(block(&data, &layout, b)).as_bytes())
                .collect(),
        };
        (data, m, layout)
    }
}

use super::lock::is_at;
use super::*;

/// Symbol `i` of the tests' items (16 bytes of `i`).
fn sym(i: u32) -> (u32, Vec<u8>) {
    (i, vec![i as u8; 16])
}

#[test]
fn names_that_leave_the_directory_are_refused() {
    let root = Path::new("/out");
    assert_eq!(
        safe_path(root, "a/b.txt").ok(),
        Some(PathBuf::from("/out/a/b.txt"))
    );
    for bad in [
        "",
        "/etc/passwd",
        "../x",
        "a/../../x",
        "a//b",
        "./a",
        "a/.",
        ".repocast/partial/x",
        "a\\..\\b",
        "a\0b",
    ] {
        assert!(safe_path(root, bad).is_err(), "{bad:?}");
    }
    assert!(safe_path(root, &"a/".repeat(100)).is_err());
}

/// A written block is in the journal at once, so a store dropped
/// without closing (a killed client) resumes it; a block the journal
/// names whose bytes are not there (a power loss took them) is not
/// kept; the rest written, the file finishes verified and byte for
/// byte.
#[test]
fn written_blocks_are_journaled_and_resume() {
    let dir = tempfile::tempdir().expect("tmp");
    let (data, m, layout) = fixture::two_blocks(ItemId(3));
    assert_eq!(layout.blocks(), 2);
    let block = |b: u32| fixture::block(&data, &layout, b).to_vec();
    let mut st = Store::new(dir.path()).expect("store");
    assert!(matches!(st.open(&m), Ok(Resume::Blocks(b)) if b.is_empty()));
    st.write_block(ItemId(3), 1, layout.block_offset(1), &block(1))
        .expect("written");
    drop(st);
    // Block 0 named in the journal, its place still zeros.
    let partial = dir.path().join(STATE_DIR).join("partial");
    let journal = fs::read_dir(&partial)
        .expect("partial dir")
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "journal"))
        .expect("a journal");
    let mut j = OpenOptions::new()
        .append(true)
        .open(&journal)
        .expect("journal");
    j.write_all(&0u32.to_le_bytes()).expect("append");
    drop(j);
    let mut st = Store::new(dir.path()).expect("store");
    assert_eq!(
        st.held("d/f").map(|h| h.blocks),
        Some(vec![0, 1]),
        "as listed"
    );
    // Opening checks each against its hash: only block 1 is kept.
    assert!(matches!(st.open(&m), Ok(Resume::Blocks(b)) if b == vec![1]));
    st.write_block(ItemId(3), 0, 0, &block(0)).expect("written");
    assert!(st.finish(ItemId(3)).expect("finished"), "verified");
    assert_eq!(fs::read(dir.path().join("d/f")).expect("final file"), data);
}

/// The files under `OUT/.repocast/partial/`, by extension.
fn partial_files(root: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(root.join(STATE_DIR).join("partial"))
        .expect("partial dir")
        .flatten()
        .filter_map(|e| {
            e.path()
                .extension()
                .map(|x| x.to_string_lossy().into_owned())
        })
        .collect();
    v.sort();
    v
}

/// An item costs one partial file (its own lock) and a journal only
/// for the blocks before its last: the last is renamed into place at
/// once, and nothing is left behind.
#[test]
fn an_item_journals_all_but_its_last_block_and_leaves_nothing() {
    let dir = tempfile::tempdir().expect("tmp");
    let (data, m, layout) = fixture::two_blocks(ItemId(3));
    let block = |b: u32| fixture::block(&data, &layout, b).to_vec();
    let mut st = Store::new(dir.path()).expect("store");
    assert!(matches!(st.open(&m), Ok(Resume::Blocks(b)) if b.is_empty()));
    assert_eq!(partial_files(dir.path()), ["part"]);
    st.write_block(ItemId(3), 1, layout.block_offset(1), &block(1))
        .expect("written");
    assert_eq!(partial_files(dir.path()), ["journal", "part"]);
    st.write_block(ItemId(3), 0, 0, &block(0)).expect("written");
    let journal = fs::read_dir(dir.path().join(STATE_DIR).join("partial"))
        .expect("partial dir")
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "journal"))
        .expect("a journal");
    let listed = read_journal(&fs::read(journal).expect("journal")).map(|j| j.2);
    assert_eq!(listed, Some(vec![1]), "the last block is not journaled");
    assert!(st.finish(ItemId(3)).expect("finished"), "verified");
    assert_eq!(fs::read(dir.path().join("d/f")).expect("final file"), data);
    assert!(partial_files(dir.path()).is_empty());
}

/// The item's folder is made only when it is missing at the rename: one
/// removed while the item was received is made again, and one replaced
/// by a symlink meanwhile is refused (nothing written through it).
#[test]
fn a_missing_folder_is_made_at_the_rename_and_a_symlinked_one_refused() {
    let dir = tempfile::tempdir().expect("tmp");
    let (data, m, layout) = fixture::two_blocks(ItemId(3));
    let write_all = |st: &mut Store, item: ItemId| {
        for b in 0..2 {
            let bytes = fixture::block(&data, &layout, b);
            (st.write_block(item, b, layout.block_offset(b), bytes)).expect("written");
        }
    };
    let mut st = Store::new(dir.path()).expect("store");
    fs::create_dir(dir.path().join("d")).expect("folder");
    assert!(matches!(st.open(&m), Ok(Resume::Blocks(b)) if b.is_empty()));
    fs::remove_dir(dir.path().join("d")).expect("removed");
    write_all(&mut st, ItemId(3));
    assert!(st.finish(ItemId(3)).expect("finished"), "verified");
    assert_eq!(fs::read(dir.path().join("d/f")).expect("final file"), data);

    // The same bytes again as item 4, its folder a symlink by the rename.
    let elsewhere = tempfile::tempdir().expect("tmp");
    let m = ManifestEntry {
        item: ItemId(4),
        ..m
    };
    fs::remove_file(dir.path().join("d/f")).expect("removed");
    assert!(matches!(st.open(&m), Ok(Resume::Blocks(b)) if b.is_empty()));
    fs::remove_dir(dir.path().join("d")).expect("removed");
    std::os::unix::fs::symlink(elsewhere.path(), dir.path().join("d")).expect("symlink");
    write_all(&mut st, ItemId(4));
    assert!(
        matches!(st.finish(ItemId(4)), Err(StoreError::UnsafeName { .. })),
        "refused"
    );
    assert!(
        !elsewhere.path().join("f").exists(),
        "nothing written through it"
    );
}

/// Two stores into one folder after the same item each hold a partial
/// file of their own; once one is gone its file is free again.
#[test]
fn stores_into_one_folder_never_share_a_partial() {
    let dir = tempfile::tempdir().expect("tmp");
    let (data, m, layout) = fixture::two_blocks(ItemId(3));
    let mut a = Store::new(dir.path()).expect("store");
    let mut b = Store::new(dir.path()).expect("store");
    assert!(a.open(&m).is_ok() && b.open(&m).is_ok());
    let tmp = |s: &Store| s.items[&ItemId(3)].tmp.clone();
    assert_ne!(tmp(&a), tmp(&b));
    assert_eq!(partial_files(dir.path()), ["part", "part"]);
    let first = tmp(&a);
    a.write_block(
        ItemId(3),
        1,
        layout.block_offset(1),
        fixture::block(&data, &layout, 1),
    )
    .expect("written");
    drop(a);
    // A store after `a` takes its partial, and resumes its block.
    let mut c = Store::new(dir.path()).expect("store");
    assert!(matches!(c.open(&m), Ok(Resume::Blocks(v)) if v == vec![1]));
    assert_eq!(tmp(&c), first);
}

/// Spilled symbols go in their block's own place while whole symbols
/// fit there, the rest to the side file; all come back, in order,
/// once; the block's place is then free for the next spill.
#[test]
fn spilled_symbols_go_in_their_blocks_place_and_overflow_aside() {
    use repocast_core::fec::CodeKind;
    use repocast_core::wire::FecParams;
    let dir = tempfile::tempdir().expect("tmp");
    let mut st = Store::new(dir.path()).expect("store");
    let fec = FecParams {
        code: CodeKind::RaptorQ,
        symbol_size: 16,
        max_block_symbols: 4,
    };
    // Blocks of 4 symbols (64 bytes); the last, 40 bytes, has room
    // for 2 whole symbols.
    let m = ManifestEntry {
        item: ItemId(0),
        name: "f".into(),
        size: 104,
        hash: [0; 32],
        fec,
        block_hashes: vec![[0; 32]; 2],
    };
    assert!(matches!(st.open(&m), Ok(Resume::Blocks(_))));
    let side = |st: &Store| st.items[&ItemId(0)].spill.is_some();
    st.spill(ItemId(0), 0, &[sym(1), sym(2)]).expect("spill");
    st.spill(ItemId(0), 0, &[sym(9)]).expect("spill");
    assert!(!side(&st), "three symbols fit block 0's place");
    st.spill(ItemId(0), 1, &[sym(3), sym(4), sym(5)])
        .expect("spill");
    assert!(side(&st), "the third of block 1 does not fit");
    assert!(st.is_spilled(ItemId(0), 0) && st.is_spilled(ItemId(0), 1));
    assert_eq!(
        st.unspill(ItemId(0), 0).expect("back"),
        vec![sym(1), sym(2), sym(9)]
    );
    assert_eq!(
        st.unspill(ItemId(0), 1).expect("back"),
        vec![sym(3), sym(4), sym(5)]
    );
    assert!(!st.is_spilled(ItemId(0), 0));
    assert_eq!(st.unspill(ItemId(0), 0).expect("nothing"), Vec::new());
    assert_eq!(
        st.items[&ItemId(0)].spill_len,
        0,
        "the side file starts over"
    );
    st.spill(ItemId(0), 0, &[sym(7)]).expect("again");
    assert_eq!(st.unspill(ItemId(0), 0).expect("back"), vec![sym(7)]);
}

/// The log of spilled symbols beside `root`'s partial file, if there is
/// one.
fn spill_log(root: &Path) -> Option<PathBuf> {
    fs::read_dir(root.join(STATE_DIR).join("partial"))
        .expect("partial dir")
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "kept"))
}

/// A run that ends short, even killed, leaves its spill: the next run
/// opening the same content (under another item id) finds the symbols of
/// every block not verified since, with their counts, reads them back as
/// they were, and goes on with the log; once nothing is spilled the log
/// goes.
#[test]
fn spilled_symbols_come_back_in_the_next_run() {
    let dir = tempfile::tempdir().expect("tmp");
    let (data, m, layout) = fixture::two_blocks(ItemId(3));
    let mut st = Store::new(dir.path()).expect("store");
    assert!(matches!(st.open(&m), Ok(Resume::Blocks(b)) if b.is_empty()));
    // Block 1 (36 bytes) has room for two whole symbols: the third goes
    // to the side file.
    st.spill(ItemId(3), 0, &[sym(1), sym(6)]).expect("spill");
    st.spill(ItemId(3), 1, &[sym(3), sym(4)]).expect("spill");
    st.spill(ItemId(3), 1, &[sym(5)]).expect("spill");
    assert!(spill_log(dir.path()).is_some());
    // Block 0 comes back and verifies: the journal names it.
    assert_eq!(
        st.unspill(ItemId(3), 0).expect("back"),
        vec![sym(1), sym(6)]
    );
    let block0 = fixture::block(&data, &layout, 0).to_vec();
    st.write_block(ItemId(3), 0, 0, &block0).expect("written");
    drop(st); // killed

    let mut st = Store::new(dir.path()).expect("store");
    let again = ManifestEntry {
        item: ItemId(8),
        ..m.clone()
    };
    assert!(matches!(st.open(&again), Ok(Resume::Blocks(b)) if b == vec![0]));
    assert_eq!(st.spilled_counts(ItemId(8)), vec![(1, 3)]);
    assert!(st.is_spilled(ItemId(8), 1) && !st.is_spilled(ItemId(8), 0));
    // This run goes on with the log.
    st.spill(ItemId(8), 1, &[sym(7)]).expect("spill");
    drop(st);
    let mut st = Store::new(dir.path()).expect("store");
    assert!(st.open(&again).is_ok());
    assert_eq!(st.spilled_counts(ItemId(8)), vec![(1, 4)]);
    assert_eq!(
        st.unspill(ItemId(8), 1).expect("back"),
        vec![sym(3), sym(4), sym(5), sym(7)]
    );
    assert!(spill_log(dir.path()).is_none(), "nothing spilled");
    drop(st);
    let mut st = Store::new(dir.path()).expect("store");
    assert!(st.open(&again).is_ok());
    assert!(st.spilled_counts(ItemId(8)).is_empty());
}

/// An item closed (a new catalogue version) keeps its spill only when
/// the run keeps it; a log of other content is not used (and goes), and
/// a torn last entry is cut off.
#[test]
fn a_spill_log_is_used_only_while_it_is_true() {
    let dir = tempfile::tempdir().expect("tmp");
    let (_, m, _) = fixture::two_blocks(ItemId(3));
    let mut st = Store::new(dir.path()).expect("store");
    assert!(st.open(&m).is_ok());
    st.spill(ItemId(3), 1, &[sym(3), sym(4), sym(5)])
        .expect("spill");
    st.close(ItemId(3));
    assert!(spill_log(dir.path()).is_none(), "closed, not kept");
    assert!(st.open(&m).is_ok());
    assert!(st.spilled_counts(ItemId(3)).is_empty());
    st.spill(ItemId(3), 1, &[sym(3), sym(4), sym(5)])
        .expect("spill");
    st.keep_spilled(ItemId(3)).expect("kept");
    st.close(ItemId(3));
    assert!(st.open(&m).is_ok());
    assert_eq!(st.spilled_counts(ItemId(3)), vec![(1, 3)]);
    st.spill(ItemId(3), 0, &[sym(2)]).expect("spill");
    drop(st);
    // The last entry torn (block 0's): the rest is used.
    let path = spill_log(dir.path()).expect("a log");
    let bytes = fs::read(&path).expect("log");
    fs::write(&path, &bytes[..bytes.len() - 3]).expect("write");
    let mut st = Store::new(dir.path()).expect("store");
    assert!(st.open(&m).is_ok());
    assert_eq!(st.spilled_counts(ItemId(3)), vec![(1, 3)]);
    st.spill(ItemId(3), 0, &[sym(2)]).expect("spill");
    drop(st);
    let mut st = Store::new(dir.path()).expect("store");
    assert!(st.open(&m).is_ok());
    assert_eq!(st.spilled_counts(ItemId(3)), vec![(0, 1), (1, 3)]);
    drop(st);
    // A damaged or foreign log: not used, and removed.
    let mut bytes = fs::read(&path).expect("log");
    for bad in [b"not a log".to_vec(), {
        bytes[20] ^= 1; // another hash
        bytes
    }] {
        fs::write(&path, &bad).expect("write");
        let mut st = Store::new(dir.path()).expect("store");
        assert!(st.open(&m).is_ok());
        assert!(st.spilled_counts(ItemId(3)).is_empty());
        assert!(spill_log(dir.path()).is_none());
        drop(st);
    }
}

/// A block spilled and taken back over and over while another stays
/// spilled: the log is rewritten as it grows (it stays small), and what
/// it says stays true.
#[test]
fn a_spill_log_is_rewritten_as_it_grows() {
    let dir = tempfile::tempdir().expect("tmp");
    let (_, m, _) = fixture::two_blocks(ItemId(3));
    let mut st = Store::new(dir.path()).expect("store");
    assert!(st.open(&m).is_ok());
    st.spill(ItemId(3), 1, &[sym(3), sym(4), sym(5)])
        .expect("spill");
    for i in 0..2000u32 {
        st.spill(ItemId(3), 0, &[sym(i % 200)]).expect("spill");
        assert_eq!(st.unspill(ItemId(3), 0).expect("back"), vec![sym(i % 200)]);
    }
    st.spill(ItemId(3), 0, &[sym(9), sym(8)]).expect("spill");
    drop(st);
    let len = fs::metadata(spill_log(dir.path()).expect("a log"))
        .expect("log")
        .len();
    // 4,000 entries of 18-33 bytes, rewritten whenever past 4 KiB.
    assert!(len < 5 << 10, "log of {len} bytes");
    let mut st = Store::new(dir.path()).expect("store");
    assert!(st.open(&m).is_ok());
    assert_eq!(st.spilled_counts(ItemId(3)), vec![(0, 2), (1, 3)]);
    assert_eq!(
        st.unspill(ItemId(3), 0).expect("back"),
        vec![sym(9), sym(8)]
    );
    assert_eq!(
        st.unspill(ItemId(3), 1).expect("back"),
        vec![sym(3), sym(4), sym(5)]
    );
}

/// A name opened with other content (the file changed at the sender)
/// removes its older content's partial file, journal, spill and log: they
/// could never be used here again. Other names' partial files stay, and
/// so do those of the older content another store still holds.
#[test]
fn a_name_opened_with_new_content_removes_the_older_contents_partial_files() {
    let dir = tempfile::tempdir().expect("tmp");
    let (data, m, layout) = fixture::two_blocks(ItemId(3));
    let other = ManifestEntry {
        item: ItemId(4),
        name: "d/g".into(),
        ..m.clone()
    };
    let newer = ManifestEntry {
        item: ItemId(5),
        hash: [9; 32],
        ..m.clone()
    };
    let mut st = Store::new(dir.path()).expect("store");
    assert!(st.open(&m).is_ok() && st.open(&other).is_ok());
    st.write_block(
        ItemId(3),
        1,
        layout.block_offset(1),
        fixture::block(&data, &layout, 1),
    )
    .expect("written");
    st.spill(ItemId(3), 0, &[sym(1), sym(2), sym(3), sym(4), sym(5)])
        .expect("spill");
    st.keep_spilled(ItemId(3)).expect("kept");
    st.close(ItemId(3));
    assert_eq!(
        partial_files(dir.path()),
        ["journal", "kept", "part", "part", "spill"]
    );
    // Held by another store meanwhile: they stay.
    let mut holder = Store::new(dir.path()).expect("store");
    assert!(matches!(holder.open(&m), Ok(Resume::Blocks(b)) if b == vec![1]));
    let mut st = Store::new(dir.path()).expect("store");
    assert!(st.open(&newer).is_ok());
    assert_eq!(
        partial_files(dir.path()),
        ["journal", "kept", "part", "part", "part", "spill"]
    );
    drop((holder, st));
    let mut st = Store::new(dir.path()).expect("store");
    assert!(st.open(&newer).is_ok());
    // `d/g`'s partial file and the newer content's.
    assert_eq!(partial_files(dir.path()), ["part", "part"]);
    assert!(st.held("d/f").is_none(), "no journal of the older content");
}

/// A partial file removed (or replaced) between a store's open and its
/// lock is not the path's file: `lock_part` takes the path's own.
#[test]
fn a_lock_is_taken_on_the_file_at_the_path() {
    let dir = tempfile::tempdir().expect("tmp");
    let path = dir.path().join("x.part");
    let first = lock_part(&path, 10).expect("lock").expect("free");
    assert!(is_at(&first, &path));
    fs::remove_file(&path).expect("rm");
    assert!(!is_at(&first, &path), "removed");
    let second = lock_part(&path, 10).expect("lock").expect("a new file");
    assert!(is_at(&second, &path) && !is_at(&first, &path), "replaced");
    assert_eq!(fs::metadata(&path).expect("meta").len(), 10);
}

/// A folder is fsynced once its last open item is renamed into it, and
/// the count of open items per folder follows opens, finishes, closes and
/// discards (it replaced a scan of every open item per item).
#[test]
fn a_folder_is_synced_when_its_last_open_item_is_in() {
    let dir = tempfile::tempdir().expect("tmp");
    let (data, m, layout) = fixture::two_blocks(ItemId(1));
    let block = |b: u32| fixture::block(&data, &layout, b).to_vec();
    let renamed = |mut m: ManifestEntry, item: u32, name: &str| {
        m.item = ItemId(item);
        m.name = name.into();
        m
    };
    let mut st = Store::new(dir.path()).expect("store");
    let d = dir.path().join("d");
    for (item, name) in [(1, "d/f"), (2, "d/g"), (3, "d/h"), (4, "e/f")] {
        assert!(st.open(&renamed(m.clone(), item, name)).is_ok());
    }
    assert_eq!(st.open_in.get(&d), Some(&3));
    for b in [1, 0] {
        let at = layout.block_offset(b);
        st.write_block(ItemId(1), b, at, &block(b))
            .expect("written");
    }
    assert!(st.finish(ItemId(1)).expect("finished"));
    assert!(st.unsynced.contains(&d), "d/g and d/h are still open");
    st.close(ItemId(2));
    assert!(st.unsynced.contains(&d));
    st.discard(ItemId(3));
    assert!(st.unsynced.is_empty(), "d's last open item is gone");
    assert_eq!(st.open_in.len(), 1, "e/f is open: {:?}", st.open_in);
    st.discard(ItemId(4));
    assert!(st.open_in.is_empty());
}

/// An item handed out as a finish job: nothing is at its final path until
/// the job runs, its folder waits for its rename (it counts as open
/// meanwhile), and once the job is back the folder is synced and the item
/// can be lent. A store that is not asked to hand items out keeps
/// finishing them in place.
#[test]
fn an_item_finished_by_a_job_is_in_place_only_when_the_job_has_run() {
    let dir = tempfile::tempdir().expect("tmp");
    let (data, m, layout) = fixture::two_blocks(ItemId(1));
    let write_all = |st: &mut Store| {
        for b in [1, 0] {
            let at = layout.block_offset(b);
            let bytes = fixture::block(&data, &layout, b).to_vec();
            st.write_block(ItemId(1), b, at, &bytes).expect("written");
        }
    };
    let mut inline = Store::new(dir.path()).expect("store");
    assert!(inline.open(&m).is_ok());
    write_all(&mut inline);
    assert!(inline.finish_work(ItemId(1)).is_none(), "not asked to");
    drop(inline);

    let mut st = Store::new(dir.path()).expect("store").finish_away(true);
    assert!(st.open(&m).is_ok());
    write_all(&mut st);
    let d = dir.path().join("d");
    let work = st.finish_work(ItemId(1)).expect("a job");
    assert!(!d.join("f").exists());
    assert_eq!(st.open_in.get(&d), Some(&1), "its folder waits for it");
    assert!(st.lend("d/f").is_none());
    assert!(work().expect("placed"), "verified");
    assert_eq!(fs::read(d.join("f")).expect("final file"), data);
    st.finished(ItemId(1), true);
    assert!(st.open_in.is_empty());
    assert!(st.unsynced.is_empty(), "d synced once its item is in");
    assert!(st.lend("d/f").is_some(), "lent once in place");
    assert!(partial_files(dir.path()).is_empty());
}
