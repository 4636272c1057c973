//! The sockets on a real host: route MTUs (IPv4 and IPv6), the default
//! source address, source-specific joins, send and receive buffers, and
//! the kernel's item filter.

use super::*;

/// The route MTU is the interface's: loopback's (as IP sees it),
/// whether the interface is named or given by address, on IPv4 and
/// IPv6.
#[test]
fn path_mtu_is_the_interfaces() {
    let Some(lo_mtu) = sysfs_number("lo", "mtu") else {
        return; // not Linux with sysfs: nothing to compare against
    };
    // An IP packet is at most 65,535 bytes, whatever the link allows.
    let lo_mtu = lo_mtu.min(65_535);
    let group: SocketAddr = (Ipv4Addr::new(239, 255, 47, 172), 4772).into();
    for spec in ["lo", "127.0.0.1"] {
        let lo = Interface::parse(Some(spec)).expect("lo");
        assert_eq!(path_mtu(&group, &lo), Some(lo_mtu), "{spec}");
    }
    let lo = Interface::parse(Some("lo")).expect("lo");
    let v6: SocketAddr = "[ff15::4772]:4772".parse().expect("v6 group");
    if std::fs::metadata("/proc/net/if_inet6").is_ok() {
        // Loopback often has no IPv6 multicast route: then sysfs says.
        assert_eq!(path_mtu(&v6, &lo).map(|m| m.min(65_535)), Some(lo_mtu));
    }
}

/// A source-specific receiver hears the named source only. Both
/// receivers are members of the same group; the kernel delivers to all
/// members at once, so once the right one has the datagram the other's
/// queue is settled.
#[tokio::test]
async fn a_source_specific_join_filters_other_sources() {
    let lo = Interface::parse(Some("127.0.0.1")).expect("lo");
    let group: SocketAddr = (Ipv4Addr::new(239, 255, 47, 171), 4771).into();
    let right = receiver(&group, &lo, Some(Ipv4Addr::LOCALHOST.into())).expect("ssm right");
    let wrong = receiver(&group, &lo, Some(Ipv4Addr::new(127, 0, 0, 2).into())).expect("ssm wrong");
    let tx = sender(&group, &lo, 1, Some(Ipv4Addr::LOCALHOST.into()), RATE).expect("sender");
    tx.send_to(b"from 127.0.0.1", group).await.expect("send");
    let mut buf = [0u8; 64];
    let got = tokio::time::timeout(std::time::Duration::from_secs(5), right.recv_from(&mut buf))
        .await
        .expect("the named source is heard")
        .expect("recv");
    assert_eq!(&buf[..got.0], b"from 127.0.0.1");
    assert!(
        wrong.try_recv_from(&mut buf).is_err(),
        "another source's join heard it"
    );
}

/// A source that is not this host's address is refused with a reason
/// that names it.
#[tokio::test]
async fn a_source_not_of_this_host_is_named_in_the_error() {
    let lo = Interface::parse(Some("127.0.0.1")).expect("lo");
    let group: SocketAddr = (Ipv4Addr::new(239, 255, 47, 172), 4772).into();
    let src = Ipv4Addr::new(192, 0, 2, 7).into();
    match sender(&group, &lo, 1, Some(src), RATE) {
        Err(e) => assert!(e.to_string().contains("source 192.0.2.7"), "{e}"),
        Ok(_) => panic!("bound to an address this host does not have"),
    }
}

/// A sender that binds no source sends from its interface's address,
/// which is what the banner tells listeners to name.
#[test]
fn the_default_source_is_the_interfaces_address() {
    let lo = Interface::parse(Some("127.0.0.1")).expect("lo");
    let group: SocketAddr = (Ipv4Addr::new(232, 255, 47, 173), 4773).into();
    assert_eq!(
        default_source(&group, &lo),
        Some(Ipv4Addr::LOCALHOST.into())
    );
}

/// A sending rate for the tests' senders.
const RATE: u64 = 100_000_000;

/// The send buffer holds about 20 ms at the rate, within its bounds,
/// and the sender's socket asks for no more (the kernel doubles what
/// it is given and caps it at net.core.wmem_max).
#[tokio::test]
async fn the_send_buffer_holds_a_few_milliseconds_at_the_rate() {
    assert_eq!(send_buffer(100_000_000), 250_000);
    assert_eq!(send_buffer(1_000_000_000), 2_500_000);
    assert_eq!(send_buffer(1_000_000), SEND_BUFFER.0);
    assert_eq!(send_buffer(u64::MAX), SEND_BUFFER.1);
    let lo = Interface::parse(Some("127.0.0.1")).expect("lo");
    let group: SocketAddr = (Ipv4Addr::new(239, 255, 47, 174), 4774).into();
    for rate in [1_000_000, RATE, 1_000_000_000] {
        let tx = sender(&group, &lo, 1, None, rate).expect("sender");
        let got = socket2::SockRef::from(&tx)
            .send_buffer_size()
            .expect("SO_SNDBUF");
        assert!(
            got >= 4096 && got <= 2 * send_buffer(rate),
            "{got} bytes of send buffer at {rate} bit/s"
        );
    }
}

/// A receiver asks for [`RECV_BUFFER`]. Run as root (CI and the lab
/// are) it gets all of it whatever net.core.rmem_max says; otherwise it
/// gets what the sysctl allows, and the test says it was skipped.
#[tokio::test]
async fn a_privileged_receiver_gets_the_whole_buffer_it_asks_for() {
    let lo = Interface::parse(Some("127.0.0.1")).expect("lo");
    let group: SocketAddr = (Ipv4Addr::new(239, 255, 47, 175), 4775).into();
    let rx = receiver(&group, &lo, None).expect("receiver");
    let got = recv_buffer(&rx);
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped (needs root): got {got} bytes of receive buffer");
        assert!(got > 0);
        return;
    }
    assert!(got >= RECV_BUFFER, "{got} bytes of receive buffer as root");
}

fn data(item: u32) -> Vec<u8> {
    let p = repocast_core::wire::DataRepr {
        session: repocast_core::SessionId(1),
        transmission: repocast_core::TransmissionId(1),
        item: repocast_core::ItemId(item),
        block: repocast_core::BlockId(0),
        symbol: 0,
        seq: 0,
        probe: None,
        payload: vec![item as u8; 16],
        tag: vec![],
        encrypted: false,
    };
    let mut b = Vec::new();
    p.emit(&mut b);
    b
}

/// The item of each of the next `n` datagrams (-1: not a data packet),
/// and that nothing else came.
async fn received(rx: &UdpSocket, n: usize) -> Vec<i64> {
    let mut got = Vec::new();
    let mut buf = [0u8; 256];
    for _ in 0..n {
        let (n, _) =
            tokio::time::timeout(std::time::Duration::from_secs(5), rx.recv_from(&mut buf))
                .await
                .expect("heard")
                .expect("recv");
        got.push(match repocast_core::wire::DataRepr::parse(&buf[..n]) {
            Ok(p) => p.item.0 as i64,
            Err(_) => -1,
        });
    }
    assert!(rx.try_recv_from(&mut buf).is_err(), "nothing else");
    got
}

/// The kernel filter keeps the wanted items' data packets (and
/// anything that is not a data packet) and drops the rest; `None`
/// takes everything again.
#[tokio::test]
async fn the_item_filter_drops_unwanted_items_in_the_kernel() {
    use repocast_core::ItemId;
    let lo = Interface::parse(Some("127.0.0.1")).expect("lo");
    let group: SocketAddr = (Ipv4Addr::new(239, 255, 47, 173), 4773).into();
    let rx = receiver(&group, &lo, None).expect("receiver");
    let tx = sender(&group, &lo, 1, None, RATE).expect("sender");
    filter_items(&rx, Some(&[ItemId(5), ItemId(7)])).expect("filter");
    for item in [6, 5, 8, 7] {
        tx.send_to(&data(item), group).await.expect("send");
    }
    tx.send_to(b"not a data packet", group).await.expect("send");
    filter_items(&rx, None).expect("unfilter");
    tx.send_to(&data(9), group).await.expect("send");
    assert_eq!(received(&rx, 4).await, vec![5, 7, -1, 9]);
}

fn ids(v: &[u32]) -> Vec<repocast_core::ItemId> {
    v.iter().map(|&i| repocast_core::ItemId(i)).collect()
}

/// Runs of ids become ranges; past the bound the smallest gaps close
/// first (ties: the lowest); every id stays covered.
#[test]
fn item_ranges_cover_the_items_in_at_most_the_bound() {
    let v = ids(&[10, 8, 7, 1, 2, 3, 3]);
    assert_eq!(item_ranges(&v, 10), [(1, 3), (7, 8), (10, 10)]);
    assert_eq!(item_ranges(&v, 2), [(1, 3), (7, 10)], "gap of 2 closed");
    assert_eq!(item_ranges(&v, 1), [(1, 10)]);
    assert_eq!(item_ranges(&v, 0), [(1, 10)], "at least one");
    assert!(item_ranges(&[], 5).is_empty());
    let top = ids(&[u32::MAX, u32::MAX - 1, 0]);
    assert_eq!(item_ranges(&top, 5), [(0, 0), (u32::MAX - 1, u32::MAX)]);
    // A scattered set: covered, ascending, disjoint, within the bound.
    let mut x = 12345u64;
    let mut scattered = Vec::new();
    for _ in 0..3000 {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        scattered.push(repocast_core::ItemId((x >> 33) as u32 % 20_000));
    }
    let r = item_ranges(&scattered, MAX_FILTER_RANGES);
    assert_eq!(r.len(), MAX_FILTER_RANGES);
    assert!(r.windows(2).all(|w| w[0].1 < w[1].0));
    assert!(r.iter().all(|&(lo, hi)| lo <= hi));
    for i in &scattered {
        assert!(r.iter().any(|&(lo, hi)| lo <= i.0 && i.0 <= hi), "{i:?}");
    }
}

/// A wanted set in more ranges than the filter checks: the closed gaps
/// let their ids through, the others still drop.
#[tokio::test]
async fn the_item_filter_covers_a_large_wanted_set_with_ranges() {
    let lo = Interface::parse(Some("127.0.0.1")).expect("lo");
    let group: SocketAddr = (Ipv4Addr::new(239, 255, 47, 174), 4774).into();
    let rx = receiver(&group, &lo, None).expect("receiver");
    let tx = sender(&group, &lo, 1, None, RATE).expect("sender");
    // 300 items 3 apart: the 200 lowest gaps close, so 0..=600 is one
    // range and 603, 606, ..., 897 are one each.
    let want: Vec<u32> = (0..300).map(|i| i * 3).collect();
    assert_eq!(item_ranges(&ids(&want), MAX_FILTER_RANGES)[0], (0, 600));
    filter_items(&rx, Some(&ids(&want))).expect("filter");
    for item in [1, 601, 603, 1000, 898, 897] {
        tx.send_to(&data(item), group).await.expect("send");
    }
    // Every item wanted again: one range.
    let all: Vec<u32> = (0..4000).collect();
    filter_items(&rx, Some(&ids(&all))).expect("filter");
    tx.send_to(&data(3999), group).await.expect("send");
    tx.send_to(&data(4000), group).await.expect("send");
    tx.send_to(b"not a data packet", group).await.expect("send");
    assert_eq!(received(&rx, 5).await, vec![1, 603, 897, 3999, -1]);
}
