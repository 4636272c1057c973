//! Workloads: client arrivals (Poisson or fixed spacing), what each asks
//! for, and its loss class.
//!
//! Request size is uniform on 1..=2m-1 items (m = `request_mean`, 9 in the
//! base case: 1..=17). The study gives only the mean; a uniform size keeps
//! small and large requests both common, which is what separates R/Q from
//! FIFO and most-requested, and it has no tail to swamp a day's average.
//! Items are drawn without replacement, uniformly or by a Zipf law.
//! With a web-log trace ([`crate::trace`]) the documents are the items and
//! each object is a client arriving at its time; only the loss class is
//! drawn.

use crate::engine::ClientSpec;
use crate::scenario::Scenario;
use repocast_core::loss::LossSpec;
use repocast_core::rng::Rng;
use repocast_core::{Instant, ItemId};

/// A loss spec of mean `p`, in bursts of `burst` packets (1: Bernoulli).
pub fn loss(p: f64, burst: f64) -> LossSpec {
    if burst <= 1.0 || p <= 0.0 {
        LossSpec::Bernoulli { p }
    } else {
        LossSpec::bursty(p, burst)
    }
}

/// Each item's size in bytes: the trace's documents (at least one byte),
/// or `items` items of `item_packets` packets.
pub fn catalogue(s: &Scenario) -> Vec<u64> {
    let w = &s.workload;
    match &w.parsed_trace {
        Some(t) => t.documents.iter().map(|d| d.1.max(1)).collect(),
        None => vec![w.item_packets as u64 * w.packet_bytes as u64; w.items as usize],
    }
}

/// Unicast delivery (SPEC 3.7's naive reference): every client gets its own
/// copy of each item it asks for, so a packet sent for one client is of no
/// use to any other; the server still shares one channel among them.
pub fn private_copies(clients: Vec<ClientSpec>, sizes: &[u64]) -> (Vec<ClientSpec>, Vec<u64>) {
    let mut copies = Vec::new();
    let clients = (clients.into_iter())
        .map(|mut c| {
            for it in &mut c.items {
                copies.push(sizes.get(it.0 as usize).copied().unwrap_or(0));
                *it = ItemId(copies.len() as u32 - 1);
            }
            c
        })
        .collect();
    (clients, copies)
}

/// Each item's share of all requests (MAD's access probabilities).
pub fn popularity(clients: &[ClientSpec], items: usize) -> Vec<f64> {
    let mut n = vec![0.0; items];
    for c in clients {
        for it in &c.items {
            if let Some(x) = n.get_mut(it.0 as usize) {
                *x += 1.0;
            }
        }
    }
    let total: f64 = n.iter().sum::<f64>().max(1.0);
    n.iter().map(|x| x / total).collect()
}

/// Every client of a run, in arrival order.
pub fn clients(s: &Scenario, seed: u64) -> Vec<ClientSpec> {
    if !s.clients.is_empty() {
        return s
            .clients
            .iter()
            .map(|c| ClientSpec {
                items: c.items.iter().map(|&i| ItemId(i)).collect(),
                loss: loss(c.loss.unwrap_or(s.network.client_loss), s.network.burst),
                join_at: Instant::from_micros((c.at_s * 1e6) as u64),
            })
            .collect();
    }
    let mut rng = Rng::new(seed ^ 0x0c11e47);
    let w = &s.workload;
    if let Some(t) = &w.parsed_trace {
        return (t.objects.iter())
            .take_while(|o| o.at_s < s.duration_s)
            .map(|o| {
                let p = if rng.chance(w.high_fraction) {
                    w.high_loss
                } else {
                    s.network.client_loss
                };
                ClientSpec {
                    items: o.documents.iter().map(|&d| ItemId(d)).collect(),
                    loss: loss(p, s.network.burst),
                    join_at: Instant::from_micros((o.at_s * 1e6) as u64),
                }
            })
            .collect();
    }
    let n = w.items;
    let weights: Vec<f64> = (1..=n)
        .map(|i| {
            if w.popularity == crate::scenario::Popularity::Zipf {
                1.0 / (i as f64).powf(w.zipf_s)
            } else {
                1.0
            }
        })
        .collect();
    let max_req = ((2.0 * w.request_mean).round() as u64)
        .saturating_sub(1)
        .clamp(1, n as u64);
    let end = (s.duration_s * 1e6) as u64;
    let mut t = 0u64;
    let mut out = Vec::new();
    let all: f64 = weights.iter().sum();
    let mut avail = weights.clone();
    loop {
        let gap = if w.arrivals == crate::scenario::Arrivals::Fixed {
            w.arrival_mean_s
        } else {
            -(1.0 - rng.next_f64()).ln() * w.arrival_mean_s
        };
        t += (gap * 1e6) as u64;
        if t >= end {
            break;
        }
        let size = rng.range_u64(1, max_req + 1) as usize;
        let mut items = Vec::with_capacity(size);
        avail.copy_from_slice(&weights);
        let mut total = all;
        for _ in 0..size {
            let mut u = rng.next_f64() * total;
            let mut pick = 0;
            for (i, &wt) in avail.iter().enumerate() {
                if wt > 0.0 {
                    pick = i;
                    if u < wt {
                        break;
                    }
                    u -= wt;
                }
            }
            total -= avail[pick];
            avail[pick] = 0.0;
            items.push(ItemId(pick as u32));
        }
        let high = rng.chance(w.high_fraction);
        let p = if high {
            w.high_loss
        } else {
            s.network.client_loss
        };
        out.push(ClientSpec {
            items,
            loss: loss(p, s.network.burst),
            join_at: Instant::from_micros(t),
        });
    }
    out
}
