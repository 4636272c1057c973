//! Multicast UDP sockets (socket2): senders and receivers for the data and
//! announcement channels, IPv4 and IPv6, on a chosen interface, with
//! source-specific joins where a source is given (IPv6's through libc),
//! large receive buffers, and send buffers sized to the sending rate.

use crate::NetError;
use repocast_core::profile::{AUTO_MTU_CAP, symbol_size_for_mtu};
use socket2::{Domain, InterfaceIndexOrAddress, Protocol, SockAddr, Socket, Type};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use tokio::net::UdpSocket;

/// Receive buffer asked for: about 2.5 s at 100 Mbit/s, so datagrams that
/// arrive while a listener decodes its last blocks wait instead of being
/// dropped. A privileged process gets it whatever net.core.rmem_max says
/// (`SO_RCVBUFFORCE`); others get at most net.core.rmem_max.
pub const RECV_BUFFER: usize = 32 << 20;
/// Data a sender lets wait at its own interface, as time at its rate:
/// when the link (or a shaper on it) is slower than the rate asked for,
/// a full send buffer holds the pump back instead of a queue building up
/// in front of the link, where it would delay the control traffic (TCP on
/// the same link) and drop packets for every receiver at once.
pub const SEND_QUEUE_TIME: std::time::Duration = std::time::Duration::from_millis(20);
/// The send buffer's bounds, whatever the rate.
pub const SEND_BUFFER: (usize, usize) = (64 << 10, 8 << 20);

/// The send buffer asked for at `rate_bps`: [`SEND_QUEUE_TIME`] of data,
/// within [`SEND_BUFFER`] (the kernel doubles it for its bookkeeping,
/// which at about 1.5 kB per packet still holds about that long).
pub fn send_buffer(rate_bps: u64) -> usize {
    let bytes = u128::from(rate_bps) * SEND_QUEUE_TIME.as_micros() / 8_000_000;
    usize::try_from(bytes)
        .unwrap_or(usize::MAX)
        .clamp(SEND_BUFFER.0, SEND_BUFFER.1)
}

/// The interface multicast goes out of and is joined on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Interface {
    /// An IPv4 address of the interface (IPv4 joins and sends).
    pub v4: Option<Ipv4Addr>,
    /// Its index (IPv6, and IPv4 joins by index); 0 lets the kernel choose.
    pub index: u32,
    /// Its name, when given by name (sending is bound to it).
    pub name: Option<String>,
}

impl Interface {
    /// The `--interface` text that parses back to this interface (none:
    /// the kernel chooses).
    pub fn spec(&self) -> Option<String> {
        self.name.clone().or(self.v4.map(|a| a.to_string()))
    }

    /// Parses `--interface`: an IPv4 address (`127.0.0.1`) or a name
    /// (`eth0`, looked up in /sys/class/net); `None` lets the kernel choose.
    pub fn parse(spec: Option<&str>) -> Result<Interface, NetError> {
        let Some(spec) = spec else {
            return Ok(Interface::default());
        };
        if let Ok(ip) = spec.parse::<IpAddr>() {
            return match ip {
                IpAddr::V4(v4) => Ok(Interface {
                    v4: Some(v4),
                    ..Default::default()
                }),
                IpAddr::V6(_) => Err(NetError::Interface {
                    name: spec.to_owned(),
                    why: "give an IPv6 interface by name (e.g. eth0), not by address",
                }),
            };
        }
        if spec.contains('/') || spec.is_empty() {
            return Err(NetError::Interface {
                name: spec.to_owned(),
                why: "not an interface name",
            });
        }
        let index = sysfs_number(spec, "ifindex").ok_or_else(|| NetError::Interface {
            name: spec.to_owned(),
            why: "no such interface",
        })?;
        Ok(Interface {
            v4: None,
            index,
            name: Some(spec.to_owned()),
        })
    }
}

/// A number the kernel shows for interface `name`
/// (`/sys/class/net/NAME/ATTR`: its index, its MTU).
fn sysfs_number(name: &str, attr: &str) -> Option<u32> {
    let text = std::fs::read_to_string(format!("/sys/class/net/{name}/{attr}")).ok()?;
    text.trim().parse().ok()
}

fn domain(ip: &IpAddr) -> Domain {
    if ip.is_ipv4() {
        Domain::IPV4
    } else {
        Domain::IPV6
    }
}

/// A socket that sends to multicast groups of `family` (taken from
/// `group`): TTL/hops `ttl`, loopback on (so local receivers hear it), bound
/// to `source` when one of the group's family is given (what receivers
/// joined source-specifically expect), a send buffer of
/// [`send_buffer`]`(rate_bps)`.
pub fn sender(
    group: &SocketAddr,
    iface: &Interface,
    ttl: u32,
    source: Option<IpAddr>,
    rate_bps: u64,
) -> Result<UdpSocket, NetError> {
    let s = sending_socket(group, iface, ttl, source)?;
    let _ = s.set_send_buffer_size(send_buffer(rate_bps));
    s.set_nonblocking(true)
        .map_err(sending_error(group, "set non-blocking"))?;
    UdpSocket::from_std(s.into()).map_err(sending_error(group, "register"))
}

/// The data and announcement senders of a server or pusher: [`sender`]
/// for each group, with the same interface, TTL, source and rate.
pub fn senders(
    data: &SocketAddr,
    announce: &SocketAddr,
    iface: &Interface,
    ttl: u32,
    source: Option<IpAddr>,
    rate_bps: u64,
) -> Result<(UdpSocket, UdpSocket), NetError> {
    Ok((
        sender(data, iface, ttl, source, rate_bps)?,
        sender(announce, iface, ttl, source, rate_bps)?,
    ))
}

/// What failed while setting up a socket sending to `group`.
fn sending_error(
    group: &SocketAddr,
    what: &str,
) -> impl FnOnce(std::io::Error) -> NetError + use<> {
    let what = format!("{what} for sending to {group}");
    move |e| NetError::socket(what, e)
}

/// The MTU of the link multicast to `group` leaves by on `iface`: the
/// kernel's route MTU (`IP_MTU` / `IPV6_MTU`) for a socket set up as
/// [`sender`]'s and connected to the group; without a route, the named
/// interface's MTU (`/sys/class/net/NAME/mtu`). None when it cannot tell.
pub fn path_mtu(group: &SocketAddr, iface: &Interface) -> Option<u32> {
    route_mtu(group, iface).or_else(|| sysfs_number(iface.name.as_ref()?, "mtu").filter(|&m| m > 0))
}

/// The symbol size a sender uses: `set` if given, else the largest whose
/// data packet (with its authentication tag if `tagged`, an ARM probe if
/// `probes`) fits the MTU of the link multicast to `group` leaves by on
/// `iface`, at most a 1,500-byte frame's ([`symbol_size_for_mtu`]); a
/// 1,500-byte frame's when the MTU cannot be told. Also says which, for
/// the banner.
pub fn symbol_size(
    set: Option<u16>,
    group: &SocketAddr,
    iface: &Interface,
    tagged: bool,
    probes: bool,
) -> (u16, String) {
    if let Some(t) = set {
        return (t, "as set".into());
    }
    let ipv6 = group.is_ipv6();
    match path_mtu(group, iface) {
        Some(mtu) => (
            symbol_size_for_mtu(mtu, ipv6, tagged, probes),
            format!("fits the {mtu}-byte MTU"),
        ),
        None => (
            symbol_size_for_mtu(AUTO_MTU_CAP, ipv6, tagged, probes),
            "the MTU could not be told".into(),
        ),
    }
}

/// The address packets to `group` leave from on `iface` when the sender
/// binds none: the kernel's choice for a socket set up as [`sender`]'s and
/// connected to the group (what a listener joining source-specifically
/// names). None when it cannot tell.
pub fn default_source(group: &SocketAddr, iface: &Interface) -> Option<IpAddr> {
    let ip = route_probe(group, iface)?
        .local_addr()
        .ok()?
        .as_socket()?
        .ip();
    (!ip.is_unspecified()).then_some(ip)
}

/// A socket set up as [`sender`]'s (no source bound) and connected to
/// `group`: the kernel has chosen its route, which the caller reads.
fn route_probe(group: &SocketAddr, iface: &Interface) -> Option<Socket> {
    let s = sending_socket(group, iface, 1, None).ok()?;
    s.connect(&SockAddr::from(*group)).ok()?;
    Some(s)
}

fn route_mtu(group: &SocketAddr, iface: &Interface) -> Option<u32> {
    use std::os::fd::AsRawFd;
    let s = route_probe(group, iface)?;
    let (level, name) = match group {
        SocketAddr::V4(_) => (libc::IPPROTO_IP, libc::IP_MTU),
        SocketAddr::V6(_) => (libc::IPPROTO_IPV6, libc::IPV6_MTU),
    };
    let mut mtu: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: the fd is open for the call; the kernel writes at most `len`
    // bytes into `mtu`, which is that large.
    let rc = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            level,
            name,
            (&mut mtu as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    u32::try_from(mtu).ok().filter(|&m| rc == 0 && m > 0)
}

/// [`sender`]'s socket before it is handed to tokio.
fn sending_socket(
    group: &SocketAddr,
    iface: &Interface,
    ttl: u32,
    source: Option<IpAddr>,
) -> Result<Socket, NetError> {
    let err = |what: &str| sending_error(group, what);
    let s = Socket::new(domain(&group.ip()), Type::DGRAM, Some(Protocol::UDP))
        .map_err(err("create"))?;
    if let Some(name) = &iface.name {
        s.bind_device(Some(name.as_bytes()))
            .map_err(err("bind to device"))?;
    }
    match group.ip() {
        IpAddr::V4(_) => {
            s.set_multicast_ttl_v4(ttl).map_err(err("set TTL"))?;
            s.set_multicast_loop_v4(true).map_err(err("set loopback"))?;
            if let Some(a) = iface.v4 {
                s.set_multicast_if_v4(&a).map_err(err("choose interface"))?;
            }
            let ip = source
                .filter(IpAddr::is_ipv4)
                .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
            bind_source(&s, ip, group)?;
        }
        IpAddr::V6(_) => {
            s.set_multicast_hops_v6(ttl).map_err(err("set hops"))?;
            s.set_multicast_loop_v6(true).map_err(err("set loopback"))?;
            if iface.index != 0 {
                s.set_multicast_if_v6(iface.index)
                    .map_err(err("choose interface"))?;
            }
            let ip = source
                .filter(IpAddr::is_ipv6)
                .unwrap_or(IpAddr::V6(Ipv6Addr::UNSPECIFIED));
            bind_source(&s, ip, group)?;
        }
    }
    Ok(s)
}

/// Binds a sending socket to `ip` (any port): the unspecified address, or
/// the `--source` named, which must be one of this host's.
fn bind_source(s: &Socket, ip: IpAddr, group: &SocketAddr) -> Result<(), NetError> {
    let what = match ip.is_unspecified() {
        true => "bind".to_string(),
        false => format!("bind to the source {ip} (is it an address of this host?)"),
    };
    s.bind(&SockAddr::from(SocketAddr::new(ip, 0)))
        .map_err(sending_error(group, &what))
}

/// A socket that receives `group` on `iface`, joined source-specifically
/// when `source` is given (IPv4). Several receivers on one host may bind the
/// same group and port.
pub fn receiver(
    group: &SocketAddr,
    iface: &Interface,
    source: Option<IpAddr>,
) -> Result<UdpSocket, NetError> {
    let err = |what: &str| {
        let what = format!("{what} for {group}");
        move |e| NetError::socket(what, e)
    };
    if !group.ip().is_multicast() {
        return Err(NetError::NotMulticast(group.ip()));
    }
    let s = Socket::new(domain(&group.ip()), Type::DGRAM, Some(Protocol::UDP))
        .map_err(err("create"))?;
    s.set_reuse_address(true)
        .map_err(err("set reuse address"))?;
    s.set_reuse_port(true).map_err(err("set reuse port"))?;
    ask_recv_buffer(&s, RECV_BUFFER);
    // Binding to the group address (Linux) filters out other groups on
    // the same port.
    s.bind(&SockAddr::from(*group)).map_err(err("bind"))?;
    match (group.ip(), source) {
        (IpAddr::V4(g), Some(IpAddr::V4(src))) => {
            let i = iface.v4.unwrap_or(Ipv4Addr::UNSPECIFIED);
            s.join_ssm_v4(&src, &g, &i)
                .map_err(err("source-specific join"))?;
        }
        (IpAddr::V4(g), _) => match iface.v4 {
            Some(a) => s.join_multicast_v4(&g, &a).map_err(err("join"))?,
            None => s
                .join_multicast_v4_n(&g, &InterfaceIndexOrAddress::Index(iface.index))
                .map_err(err("join"))?,
        },
        (IpAddr::V6(g), Some(IpAddr::V6(src))) => {
            join_ssm_v6(&s, &g, &src, iface.index).map_err(err("source-specific join"))?
        }
        (IpAddr::V6(g), _) => s.join_multicast_v6(&g, iface.index).map_err(err("join"))?,
    }
    s.set_nonblocking(true).map_err(err("set non-blocking"))?;
    UdpSocket::from_std(s.into()).map_err(err("register"))
}

/// Source-specific join for IPv6 (`MCAST_JOIN_SOURCE_GROUP`), which socket2
/// does not offer.
fn join_ssm_v6(
    sock: &Socket,
    group: &Ipv6Addr,
    source: &Ipv6Addr,
    index: u32,
) -> std::io::Result<()> {
    fn storage(ip: &Ipv6Addr) -> libc::sockaddr_storage {
        // SAFETY: sockaddr_storage is plain old data; all zeroes is valid.
        let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        let sin6 = libc::sockaddr_in6 {
            sin6_family: libc::AF_INET6 as libc::sa_family_t,
            sin6_port: 0,
            sin6_flowinfo: 0,
            sin6_addr: libc::in6_addr {
                s6_addr: ip.octets(),
            },
            sin6_scope_id: 0,
        };
        // SAFETY: sockaddr_storage is larger than and aligned for any
        // sockaddr, sockaddr_in6 included.
        unsafe {
            std::ptr::write(
                (&mut ss as *mut libc::sockaddr_storage).cast::<libc::sockaddr_in6>(),
                sin6,
            )
        };
        ss
    }
    let req = libc::group_source_req {
        gsr_interface: index,
        gsr_group: storage(group),
        gsr_source: storage(source),
    };
    set_option(
        sock,
        libc::IPPROTO_IPV6,
        libc::MCAST_JOIN_SOURCE_GROUP,
        &req,
    )
}

/// `setsockopt(level, name)` to `value`, for the options socket2 does not
/// offer.
fn set_option<T: Copy>(
    sock: &Socket,
    level: libc::c_int,
    name: libc::c_int,
    value: &T,
) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: the fd is open for the call; `value` is a T that outlives
    // it, and the length passed is its size.
    let rc = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            level,
            name,
            (value as *const T).cast::<libc::c_void>(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Asks for `bytes` of receive buffer: past net.core.rmem_max where the
/// process may (`SO_RCVBUFFORCE`, which needs `CAP_NET_ADMIN`), else up to
/// it. Neither failing stops the receiver: it runs with what it has.
fn ask_recv_buffer(sock: &Socket, bytes: usize) {
    let v = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    if set_option(sock, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, &v).is_err() {
        let _ = sock.set_recv_buffer_size(bytes);
    }
}

/// The receive buffer the kernel granted, as it reports it (twice what
/// was set: the kernel counts its bookkeeping too).
pub fn recv_buffer(sock: &UdpSocket) -> usize {
    socket2::SockRef::from(sock).recv_buffer_size().unwrap_or(0)
}

/// Warns, once per process, when a receiving socket got a much smaller
/// buffer than [`RECV_BUFFER`], saying how to raise it: below it, datagrams
/// that arrive while the receiver decodes are dropped by the kernel and
/// must be received again.
pub fn warn_small_recv_buffer(sock: &UdpSocket) {
    static WARNED: std::sync::Once = std::sync::Once::new();
    let got = recv_buffer(sock);
    if got >= RECV_BUFFER {
        return;
    }
    WARNED.call_once(|| {
        tracing::warn!(
            "receive buffer is {} KiB, not the {} MiB asked for (net.core.rmem_max); \
             datagrams that arrive while blocks decode may be dropped: run as root, or \
             `sysctl -w net.core.rmem_max={}`",
            got >> 10,
            RECV_BUFFER >> 20,
            RECV_BUFFER
        );
    });
}

/// Bytes of the UDP header in front of the payload, as a socket filter on
/// a UDP socket sees the datagram.
const FILTER_UDP_HEADER: u32 = 8;
/// Most wanted items a receiver hands its data-channel filter; past it
/// the filter takes everything (the list is made again whenever a
/// request's items change, so its length bounds that cost).
pub const MAX_FILTER_ITEMS: usize = 4096;
/// Most ranges of item ids a data-channel filter checks (two BPF
/// instructions each). A wanted set in more ranges is covered by fewer,
/// wider ones, the smallest gaps closed first: a few unwanted items then
/// pass, to be dropped above.
pub const MAX_FILTER_RANGES: usize = 100;

/// `items` as at most `max` (at least 1) ranges of ids, inclusive,
/// ascending, that cover every one of them: runs of consecutive ids, then
/// the smallest gaps between runs closed until `max` remain.
pub(crate) fn item_ranges(items: &[repocast_core::ItemId], max: usize) -> Vec<(u32, u32)> {
    let mut ids: Vec<u32> = items.iter().map(|i| i.0).collect();
    ids.sort_unstable();
    ids.dedup();
    let mut runs: Vec<(u32, u32)> = Vec::new();
    for id in ids {
        match runs.last_mut() {
            Some(r) if r.1.checked_add(1) == Some(id) => r.1 = id,
            _ => runs.push((id, id)),
        }
    }
    let max = max.max(1);
    if runs.len() <= max {
        return runs;
    }
    // Close the (len - max) smallest gaps (ties: the lower one first).
    let mut gaps: Vec<(u32, usize)> = (runs.windows(2).enumerate())
        .map(|(i, w)| (w[1].0 - w[0].1, i))
        .collect();
    gaps.sort_unstable();
    let mut close = vec![false; runs.len() - 1];
    for &(_, i) in &gaps[..runs.len() - max] {
        close[i] = true;
    }
    let mut out: Vec<(u32, u32)> = Vec::with_capacity(max);
    for (i, r) in runs.iter().enumerate() {
        match out.last_mut() {
            Some(last) if close[i - 1] => last.1 = r.1,
            _ => out.push(*r),
        }
    }
    out
}

/// Keeps only data packets of `items` on a data-channel socket, in the
/// kernel (a classic BPF socket filter on the item id, checked against
/// `item_ranges`): what a receiver reads, parses and wakes for follows
/// what it asked for, not the rate of the whole channel. Datagrams that
/// are not data packets pass (they are counted as malformed above).
/// `None`, or more than [`MAX_FILTER_ITEMS`], takes everything.
pub fn filter_items(
    sock: &UdpSocket,
    items: Option<&[repocast_core::ItemId]>,
) -> Result<(), NetError> {
    use socket2::SockFilter;
    const LD_W_ABS: u16 = 0x20; // BPF_LD | BPF_W | BPF_ABS
    const LD_B_ABS: u16 = 0x30; // BPF_LD | BPF_B | BPF_ABS
    const JEQ_K: u16 = 0x15; // BPF_JMP | BPF_JEQ | BPF_K
    const JGT_K: u16 = 0x25; // BPF_JMP | BPF_JGT | BPF_K
    const JGE_K: u16 = 0x35; // BPF_JMP | BPF_JGE | BPF_K
    const RET_K: u16 = 0x06; // BPF_RET | BPF_K
    let sref = socket2::SockRef::from(sock);
    let Some(items) = items.filter(|i| i.len() <= MAX_FILTER_ITEMS) else {
        return sref
            .attach_filter(&[SockFilter::new(RET_K, 0, 0, u32::MAX)])
            .map_err(|e| NetError::socket("take every item", e));
    };
    let ranges = item_ranges(items, MAX_FILTER_RANGES);
    let kind_at = FILTER_UDP_HEADER + 3;
    let item_at = FILTER_UDP_HEADER + 12;
    // 0: kind; 1: not data -> accept; 2: item id; then per range i, at
    // 3 + 2i: below its first id -> drop (the ranges ascend), and at
    // 4 + 2i: within it -> accept, above it -> the next range; 3 + 2n:
    // drop; 4 + 2n: accept. With at most 100 ranges every jump fits a
    // byte.
    let n = ranges.len();
    let jump = |to: usize, from: usize| (to - from - 1) as u8;
    let (drop, accept) = (3 + 2 * n, 4 + 2 * n);
    let mut prog = vec![
        SockFilter::new(LD_B_ABS, 0, 0, kind_at),
        SockFilter::new(
            JEQ_K,
            0,
            jump(accept, 1),
            repocast_core::wire::kind::DATA as u32,
        ),
        SockFilter::new(LD_W_ABS, 0, 0, item_at),
    ];
    for (i, &(lo, hi)) in ranges.iter().enumerate() {
        let at = 3 + 2 * i;
        prog.push(SockFilter::new(JGE_K, 0, jump(drop, at), lo));
        prog.push(SockFilter::new(JGT_K, 0, jump(accept, at + 1), hi));
    }
    prog.push(SockFilter::new(RET_K, 0, 0, 0));
    prog.push(SockFilter::new(RET_K, 0, 0, u32::MAX));
    sref.attach_filter(&prog)
        .map_err(|e| NetError::socket("filter the data channel", e))
}

#[cfg(test)]
mod tests;
