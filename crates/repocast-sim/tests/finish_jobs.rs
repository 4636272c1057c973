//! Items put in place by finish jobs (`repocast_core::endpoint::finish`):
//! a store that hands an item's last I/O out (`get`'s fsync and rename)
//! has the item counted verified, and reported done to the server, only
//! once its job is back; at most `MAX_FINISH_JOBS` are out at once; a job
//! whose thread was lost fails its item with a reason, and the rest of the
//! request goes on.

use repocast_core::Instant;
use repocast_core::endpoint::client::{ClientEndpoint, ClientEndpointConfig, Event, Want};
use repocast_core::endpoint::finish::{FinishJob, MAX_FINISH_JOBS};
use repocast_core::endpoint::server::ServerEndpoint;
use repocast_core::endpoint::store::MemoryStore;
use repocast_core::endpoint::{Channel, Dest};
use repocast_core::profile::Profile;
use repocast_sim::source::MemorySource;
use std::time::Duration;

type Client = ClientEndpoint<MemoryStore>;

/// Items of a run: two more than can be out being finished at once.
const FILES: usize = MAX_FINISH_JOBS + 2;

/// [`FILES`] one-packet items, and their bytes.
fn files() -> Vec<(String, Vec<u8>)> {
    (0..FILES as u32)
        .map(|i| {
            let bytes = (0..100 + 20 * i).map(|b| (b * 7 + i) as u8).collect();
            (format!("f{i}"), bytes)
        })
        .collect()
}

struct Run {
    server: ServerEndpoint,
    conn: repocast_core::ClientId,
    source: MemorySource,
    client: Client,
    now: Instant,
}

impl Run {
    fn new(finish_as_jobs: bool) -> Run {
        let cfg = Profile::Lan.server();
        let fec = cfg.base_fec();
        let files = files();
        let infos = (files.iter())
            .map(|(n, b)| MemorySource::item_info(n, b, &fec).expect("item"))
            .collect();
        let source = MemorySource::new(files.iter().map(|f| f.1.clone()).collect());
        let mut server = ServerEndpoint::new(cfg, Profile::Lan.limits(), infos).expect("server");
        let conn = server.accept(Instant::ZERO).expect("accepted");
        let want = Want::Items(files.iter().map(|f| f.0.clone()).collect());
        let mut store = MemoryStore::default();
        store.finish_as_jobs = finish_as_jobs;
        let client = ClientEndpoint::new(
            Instant::ZERO,
            ClientEndpointConfig::new(Profile::Lan.client(), want),
            store,
        );
        Run {
            server,
            conn,
            source,
            client,
            now: Instant::ZERO,
        }
    }

    /// Runs for `steps` of 200 µs, decoding blocks as they are ready and
    /// taking every finish job handed out (not run) into `out`.
    fn run(&mut self, steps: u32, out: &mut Vec<FinishJob>) {
        let mut buf = Vec::new();
        for _ in 0..steps {
            while self.client.poll_transmit(&mut buf) {
                self.server.handle_stream(self.now, self.conn, &buf);
            }
            while let Some(ev) = self.client.poll_event() {
                if let Event::Join(_) = ev {
                    self.client.joined(self.now);
                }
            }
            while let Some(d) = self
                .server
                .poll_transmit(self.now, &mut self.source, &mut buf)
            {
                match d {
                    Dest::Conn(_) => self.client.handle_stream(self.now, &buf),
                    Dest::Data => self.client.handle_datagram(self.now, Channel::Data, &buf),
                    Dest::Announce => {
                        self.client
                            .handle_datagram(self.now, Channel::Announce, &buf)
                    }
                }
            }
            self.client.decode_here(self.now);
            while let Some(job) = self.client.poll_finish() {
                out.push(job);
            }
            self.now = self.now + Duration::from_micros(200);
            self.server.handle_timeout(self.now);
            self.client.handle_timeout(self.now);
        }
    }

    /// Runs every finish job in `jobs`, hands it back, and takes those
    /// handed out next, until none is away (what a driver does before it
    /// lets go of the endpoint).
    fn finish_all(&mut self, jobs: &mut Vec<FinishJob>) {
        while self.client.finishes_away() > 0 {
            for mut job in jobs.drain(..) {
                job.run();
                self.client.finished(self.now, job);
            }
            while let Some(job) = self.client.poll_finish() {
                jobs.push(job);
            }
        }
    }

    fn done_at_server(&self) -> u64 {
        self.server.server().stats().items_done
    }
}

#[test]
fn an_item_counts_as_verified_only_once_its_finish_job_is_back() {
    let mut r = Run::new(true);
    let mut jobs = Vec::new();
    r.run(2_000, &mut jobs);
    // Every item is in, but only MAX_FINISH_JOBS are out being finished,
    // and none is verified or reported done.
    assert_eq!(jobs.len(), MAX_FINISH_JOBS);
    assert_eq!(r.client.finishes_away(), FILES);
    assert!(!r.client.is_finished());
    assert!(r.client.outcomes().iter().all(|o| o.result.is_err()));
    assert_eq!(r.done_at_server(), 0);
    assert_eq!(r.client.store().file("f0"), None);
    // One back: its item is verified, and the next goes out.
    let mut job = jobs.remove(0);
    let first = job.item();
    job.run();
    r.client.finished(r.now, job);
    assert_eq!(r.client.finishes_away(), FILES - 1);
    r.run(10, &mut jobs);
    assert_eq!(jobs.len(), MAX_FINISH_JOBS, "the next went out");
    assert_eq!(r.done_at_server(), 1);
    let verified: Vec<_> = (r.client.outcomes().into_iter())
        .filter(|o| o.result.is_ok())
        .collect();
    assert_eq!(verified.len(), 1);
    assert_eq!(
        r.client.store().file(&verified[0].name).map(|b| b.len()),
        Some(100 + 20 * first.0 as usize)
    );
    // The rest back: every item verified and done at the server.
    r.finish_all(&mut jobs);
    r.run(50, &mut jobs);
    assert!(r.client.is_finished());
    for (name, bytes) in files() {
        assert_eq!(r.client.store().file(&name), Some(&bytes[..]), "{name}");
    }
    assert_eq!(r.done_at_server(), FILES as u64);
}

#[test]
fn a_lost_finish_job_fails_its_item_and_the_rest_go_on() {
    let mut r = Run::new(true);
    let mut jobs = Vec::new();
    r.run(2_000, &mut jobs);
    let mut lost = jobs.remove(0);
    lost.lose();
    r.client.finished(r.now, lost);
    r.finish_all(&mut jobs);
    r.run(50, &mut jobs);
    assert!(r.client.is_finished());
    let outcomes = r.client.outcomes();
    let failed: Vec<_> = outcomes.iter().filter(|o| o.result.is_err()).collect();
    assert_eq!(failed.len(), 1);
    let reason = failed[0].result.clone().unwrap_err();
    assert!(reason.contains("put the file in place"), "{reason}");
    assert_eq!(
        outcomes.iter().filter(|o| o.result.is_ok()).count(),
        FILES - 1
    );
}

#[test]
fn a_store_that_finishes_in_place_hands_out_no_job() {
    let mut r = Run::new(false);
    let mut jobs = Vec::new();
    r.run(2_000, &mut jobs);
    assert!(jobs.is_empty());
    assert_eq!(r.client.finishes_away(), 0);
    assert!(r.client.is_finished());
    assert!(r.client.outcomes().iter().all(|o| o.result.is_ok()));
    assert_eq!(r.done_at_server(), FILES as u64);
}

#[test]
fn an_item_out_being_finished_at_a_stop_is_verified_when_its_job_is_back() {
    let mut r = Run::new(true);
    let mut jobs = Vec::new();
    r.run(2_000, &mut jobs);
    r.client.stop("stopped");
    assert!(r.client.is_finished());
    assert_eq!(r.client.finishes_away(), FILES, "a driver waits for these");
    // What a driver does before it lets go: every job out and queued.
    r.finish_all(&mut jobs);
    assert!(r.client.outcomes().iter().all(|o| o.result.is_ok()));
    for (name, bytes) in files() {
        assert_eq!(r.client.store().file(&name), Some(&bytes[..]), "{name}");
    }
}

/// A finish job that runs late (a busy disk) does not make the server
/// send its item again. The item's report falls due while its job is out,
/// and a NAK that needs nothing says the client holds it; the server then
/// waits for the done report as long as the job takes. Before session 62
/// it counted each report missing after 550 ms, sent the item again to
/// everyone, and after 8 sends gave up on it for the client.
#[test]
fn a_finish_job_running_late_is_waited_for_not_sent_again() {
    let mut r = Run::new(true);
    let mut jobs = Vec::new();
    // 20 s with the jobs held.
    r.run(100_000, &mut jobs);
    let s = r.server.server().stats();
    assert_eq!(r.client.client_stats().placing_reports, FILES as u64);
    assert_eq!(s.empty_naks, FILES as u64, "{s:?}");
    assert_eq!(s.report_timeouts, 0, "{s:?}");
    assert_eq!(s.unreported_failures, 0, "{s:?}");
    assert_eq!(s.transmissions, FILES as u64, "each item sent once: {s:?}");
    assert_eq!(r.done_at_server(), 0);
    r.finish_all(&mut jobs);
    r.run(10, &mut jobs);
    let outcomes = r.client.outcomes();
    assert!(outcomes.iter().all(|o| o.result.is_ok()), "{outcomes:?}");
    assert_eq!(r.done_at_server(), FILES as u64);
    assert!(r.client.is_finished());
}

/// A job back before the item's report falls due sends only the done
/// report: the report that needs nothing is for late jobs.
#[test]
fn a_finish_job_back_in_time_sends_no_extra_report() {
    let mut r = Run::new(true);
    let mut jobs = Vec::new();
    let mut back = 0;
    // Every job handed back within 200 us of going out: well inside the
    // NAK window, from which the report's delay is drawn.
    for _ in 0..2_000 {
        r.run(1, &mut jobs);
        for mut job in jobs.drain(..) {
            job.run();
            r.client.finished(r.now, job);
            back += 1;
        }
    }
    assert_eq!(back, FILES);
    assert!(r.client.is_finished());
    assert_eq!(r.client.client_stats().placing_reports, 0);
    assert_eq!(r.server.server().stats().empty_naks, 0);
    assert_eq!(r.done_at_server(), FILES as u64);
}
