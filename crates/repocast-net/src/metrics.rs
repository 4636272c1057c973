//! `/metrics` (Prometheus text) and `/status` (JSON) on a small HTTP port,
//! readable while the server runs. The server loop publishes a [`Snapshot`]
//! after each batch of work; this module only formats and serves it.

use repocast_core::server::encoders::JobCounts;
use repocast_core::server::{ClientSummary, ServerStats};
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// What the server publishes.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// The core's counters.
    pub stats: ServerStats,
    /// Connected clients with what the server knows of each.
    pub clients: Vec<(u32, ClientSummary)>,
    /// Items waiting for a scheduled send.
    pub queue: usize,
    /// Items in the repository.
    pub items: usize,
    /// Datagrams or frames dropped as malformed or foreign.
    pub malformed: u64,
    /// Scheme in the one notation.
    pub scheme: String,
    /// Seconds since start.
    pub uptime_s: f64,
    /// Push mode: the catalogue version on air and the pusher's counters.
    pub push: Option<(u64, repocast_core::endpoint::push::PushStats)>,
    /// The session key's epoch (rotations so far, modulo 256).
    pub key_epoch: u8,
    /// Connections refused for a missing or unknown access token.
    pub refused_unauthorized: u64,
    /// Admitted connections closed because their token was withdrawn.
    pub revoked: u64,
    /// Block encoders prepared off the sending path (`serve` and `push`).
    pub prepare_jobs: JobCounts,
}

/// Shared handle the server writes and the HTTP task reads.
pub type Shared = Arc<Mutex<Snapshot>>;

fn counter(out: &mut String, name: &str, help: &str, v: u64) {
    let _ = writeln!(
        out,
        "# HELP repocast_{name} {help}\n# TYPE repocast_{name} counter\nrepocast_{name} {v}"
    );
}

fn gauge(out: &mut String, name: &str, help: &str, v: f64) {
    let _ = writeln!(
        out,
        "# HELP repocast_{name} {help}\n# TYPE repocast_{name} gauge\nrepocast_{name} {v}"
    );
}

/// Prometheus text exposition of `s`.
pub fn prometheus(s: &Snapshot) -> String {
    let mut o = String::new();
    let t = &s.stats;
    counter(
        &mut o,
        "transmissions_total",
        "Transmissions started.",
        t.transmissions,
    );
    counter(
        &mut o,
        "items_sent_total",
        "Scheduled sends of an item (not repairs).",
        t.transmissions - t.repair_transmissions,
    );
    counter(
        &mut o,
        "repair_transmissions_total",
        "Repair transmissions.",
        t.repair_transmissions,
    );
    counter(
        &mut o,
        "symbols_sent_total",
        "Data packets (symbols) sent.",
        t.data_packets,
    );
    counter(
        &mut o,
        "symbol_bytes_sent_total",
        "Bytes of the symbols sent (without packet headers).",
        t.symbol_bytes,
    );
    counter(
        &mut o,
        "repair_symbols_sent_total",
        "Symbols sent in repairs.",
        t.repair_packets,
    );
    counter(&mut o, "naks_total", "NAKs received.", t.naks);
    counter(
        &mut o,
        "rescheduled_total",
        "NAKs answered by rescheduling.",
        t.rescheduled,
    );
    counter(
        &mut o,
        "items_done_total",
        "Items reported complete by clients.",
        t.items_done,
    );
    counter(
        &mut o,
        "report_timeouts_total",
        "Reports that never came.",
        t.report_timeouts,
    );
    counter(
        &mut o,
        "over_budget_total",
        "NAKs refused past a client's repair budget (the item failed for it).",
        t.over_budget,
    );
    counter(
        &mut o,
        "unreported_failures_total",
        "Items failed for a client that reported on none of the repair budget's number of their sends in a row.",
        t.unreported_failures,
    );
    counter(
        &mut o,
        "grown_packets_total",
        "Data packets added to scheduled sends after early loss reports.",
        t.grown_packets,
    );
    counter(
        &mut o,
        "trimmed_packets_total",
        "Data packets taken off scheduled sends after early loss reports.",
        t.trimmed_packets,
    );
    counter(
        &mut o,
        "preemptions_total",
        "Repairs that interrupted a scheduled send (which then resumed).",
        t.preemptions,
    );
    counter(
        &mut o,
        "early_naks_total",
        "NAKs for a transmission still on air or interrupted (short-block hints among them).",
        t.early_naks,
    );
    counter(
        &mut o,
        "empty_naks_total",
        "Reports that needed nothing (the client was decoding what it had): no repair.",
        t.empty_naks,
    );
    counter(
        &mut o,
        "hastened_symbols_total",
        "Symbols a send moved forward on short-block hints (same packets, sent sooner).",
        t.hastened,
    );
    counter(
        &mut o,
        "batch_holds_total",
        "Times the batching hold left the link idle (--batch-hold-idle).",
        t.holds,
    );
    gauge(
        &mut o,
        "batch_hold_idle_seconds",
        "Link time the batching hold left idle so far.",
        t.hold_idle_us as f64 / 1e6,
    );
    counter(
        &mut o,
        "bad_requests_total",
        "Control messages refused.",
        t.bad_requests,
    );
    counter(
        &mut o,
        "refused_unauthorized_total",
        "Connections refused for a missing or unknown access token.",
        s.refused_unauthorized,
    );
    counter(
        &mut o,
        "revoked_total",
        "Connections closed because their access token was withdrawn.",
        s.revoked,
    );
    let jobs = &s.prepare_jobs;
    counter(
        &mut o,
        "encoder_jobs_total",
        "Block encoders handed to another thread to prepare, off the sending path.",
        jobs.offered,
    );
    counter(
        &mut o,
        "encoder_jobs_used_total",
        "Of those, prepared in time: the sending path did not have to.",
        jobs.used,
    );
    counter(
        &mut o,
        "encoder_jobs_late_total",
        "Of those, back too late (the sending path had done the work).",
        jobs.late,
    );
    gauge(
        &mut o,
        "key_epoch",
        "Session key rotations so far, modulo 256.",
        s.key_epoch as f64,
    );
    counter(
        &mut o,
        "malformed_total",
        "Malformed or foreign messages dropped.",
        s.malformed,
    );
    gauge(
        &mut o,
        "clients",
        "Connected clients.",
        s.clients.len() as f64,
    );
    gauge(
        &mut o,
        "queue",
        "Items waiting for a scheduled send.",
        s.queue as f64,
    );
    gauge(&mut o, "items", "Items in the repository.", s.items as f64);
    let _ = writeln!(
        o,
        "# HELP repocast_client_loss Estimated loss rate per client.\n# TYPE repocast_client_loss gauge"
    );
    for (id, c) in &s.clients {
        let _ = writeln!(o, "repocast_client_loss{{client=\"{id}\"}} {:.4}", c.loss);
    }
    let _ = writeln!(
        o,
        "# HELP repocast_client_items_done Items each client has completed.\n# TYPE repocast_client_items_done gauge"
    );
    for (id, c) in &s.clients {
        let _ = writeln!(
            o,
            "repocast_client_items_done{{client=\"{id}\"}} {}",
            c.done
        );
    }
    if let Some((version, p)) = &s.push {
        gauge(
            &mut o,
            "push_catalogue_version",
            "Catalogue version on air.",
            *version as f64,
        );
        counter(
            &mut o,
            "push_catalogue_pieces_total",
            "Signed catalogue pieces sent.",
            p.catalogue_pieces,
        );
        counter(
            &mut o,
            "push_passes_total",
            "Fcast passes over an item begun.",
            p.passes,
        );
        counter(
            &mut o,
            "push_versions_total",
            "Catalogue versions published.",
            p.versions,
        );
    }
    o
}

/// JSON status of `s`.
pub fn json(s: &Snapshot) -> String {
    let t = &s.stats;
    let clients: Vec<String> = s
        .clients
        .iter()
        .map(|(id, c)| {
            format!(
                "{{\"id\":{id},\"requested\":{},\"done\":{},\"loss\":{:.4},\"naks\":{}}}",
                c.requested, c.done, c.loss, c.naks
            )
        })
        .collect();
    format!(
        "{{\"scheme\":\"{}\",\"uptime_s\":{:.1},\"items\":{},\"queue\":{},\"transmissions\":{},\"repair_transmissions\":{},\"data_packets\":{},\"repair_packets\":{},\"naks\":{},\"rescheduled\":{},\"items_done\":{},\"malformed\":{},\"refused_unauthorized\":{},\"revoked\":{},\"key_epoch\":{},\"clients\":[{}]}}\n",
        s.scheme.replace('"', "'"),
        s.uptime_s,
        s.items,
        s.queue,
        t.transmissions,
        t.repair_transmissions,
        t.data_packets,
        t.repair_packets,
        t.naks,
        t.rescheduled,
        t.items_done,
        s.malformed,
        s.refused_unauthorized,
        s.revoked,
        s.key_epoch,
        clients.join(",")
    )
}

/// The latest published snapshot (a poisoned lock still holds one).
pub fn read(shared: &Shared) -> Snapshot {
    match shared.lock() {
        Ok(g) => g.clone(),
        Err(p) => p.into_inner().clone(),
    }
}

/// Binds `/metrics` and `/status` at `addr` (none: off) and serves them
/// from `shared` in a task; the address bound.
pub async fn start(
    addr: Option<std::net::SocketAddr>,
    shared: &Shared,
) -> Result<Option<std::net::SocketAddr>, crate::NetError> {
    let Some(a) = addr else {
        return Ok(None);
    };
    let l = TcpListener::bind(a)
        .await
        .map_err(|e| crate::NetError::socket(format!("metrics on {a}"), e))?;
    let la = l
        .local_addr()
        .map_err(|e| crate::NetError::socket("local address", e))?;
    tokio::spawn(serve(l, shared.clone()));
    Ok(Some(la))
}

/// Serves `/metrics` and `/status` until the listener fails.
pub async fn serve(listener: TcpListener, shared: Shared) {
    loop {
        let Ok((mut sock, _)) = listener.accept().await else {
            return;
        };
        let shared = shared.clone();
        tokio::spawn(async move {
            let mut buf = [0u8; 1024];
            let n =
                match tokio::time::timeout(std::time::Duration::from_secs(5), sock.read(&mut buf))
                    .await
                {
                    Ok(Ok(n)) => n,
                    _ => return,
                };
            let req = String::from_utf8_lossy(&buf[..n]);
            let path = req.split_whitespace().nth(1).unwrap_or("/");
            let snap = match shared.lock() {
                Ok(g) => g.clone(),
                Err(p) => p.into_inner().clone(),
            };
            let (status, ctype, body) = match path {
                "/metrics" => ("200 OK", "text/plain; version=0.0.4", prometheus(&snap)),
                "/status" => ("200 OK", "application/json", json(&snap)),
                _ => (
                    "404 Not Found",
                    "text/plain",
                    "try /metrics or /status\n".to_owned(),
                ),
            };
            let resp = format!(
                "HTTP/1.0 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = sock.write_all(resp.as_bytes()).await;
        });
    }
}
