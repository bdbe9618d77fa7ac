//! The Linux interface under a kernel-backed port (`net_af_packet`, `net_af_xdp`): its MTU,
//! its receive offloads, its rx queues, and the drops of the packet-socket rings or XDP
//! sockets the driver opened on it.
//!
//! DPDK 22.11's af_packet driver neither applies an MTU above its advertised 1518-byte frame
//! limit (ethdev refuses it before the driver sees it) nor reports the frames its kernel ring
//! dropped when full (`imissed` stays 0 while the kernel's `tp_drops` grows). Both are done
//! here, on the control lcore only, never per packet: the MTU through `SIOCSIFMTU`, the drops
//! through `getsockopt(PACKET_STATISTICS)` on the driver's own sockets, found among this
//! process's descriptors by their bound interface.
//!
//! DPDK 22.11's af_xdp driver reports in `imissed` only the XDP sockets' `rx_dropped` (no
//! free buffer on the fill ring, or a frame too long for one); frames the kernel could not
//! put on a full rx ring (`rx_ring_full`) are counted nowhere. They are read here from
//! `getsockopt(XDP_STATISTICS)` on the driver's sockets, found the same way.

use std::ffi::CString;
use std::os::fd::RawFd;

/// Errors of the kernel-interface calls, with the interface and the OS error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KernelIfaceError {
    /// The interface name is not a valid Linux interface name.
    #[error("`{0}` is not a valid interface name")]
    BadName(String),
    /// An ioctl or socket call failed.
    #[error("{iface}: {operation} failed: {error}")]
    Os {
        /// Interface.
        iface: String,
        /// What was attempted.
        operation: &'static str,
        /// `strerror` text.
        error: String,
    },
}

/// The interface's index, or `None` when there is no such interface.
pub fn index(iface: &str) -> Option<u32> {
    let name = CString::new(iface).ok()?;
    // SAFETY: `name` is a valid NUL-terminated string.
    let i = unsafe { libc::if_nametoindex(name.as_ptr()) };
    (i != 0).then_some(i)
}

/// The interface's MTU as the kernel has it.
pub fn mtu(iface: &str) -> Result<u32, KernelIfaceError> {
    let (sock, mut req) = ifreq_socket(iface)?;
    // SAFETY: `req` is an ifreq naming the interface; SIOCGIFMTU fills ifr_mtu.
    let ret = unsafe { libc::ioctl(sock.0, libc::SIOCGIFMTU, &mut req) };
    if ret < 0 {
        return Err(os_error(iface, "SIOCGIFMTU"));
    }
    // SAFETY: SIOCGIFMTU wrote the ifru_mtu member of the union.
    Ok(u32::try_from(unsafe { req.ifr_ifru.ifru_mtu }).unwrap_or(0))
}

/// Sets the interface's MTU (the kernel refuses values outside the device's range).
pub fn set_mtu(iface: &str, mtu: u32) -> Result<(), KernelIfaceError> {
    let (sock, mut req) = ifreq_socket(iface)?;
    req.ifr_ifru.ifru_mtu = i32::try_from(mtu).unwrap_or(i32::MAX);
    // SAFETY: `req` names the interface and carries the MTU; SIOCSIFMTU only reads it.
    let ret = unsafe { libc::ioctl(sock.0, libc::SIOCSIFMTU, &req) };
    if ret < 0 {
        return Err(os_error(iface, "SIOCSIFMTU"));
    }
    Ok(())
}

/// `ETHTOOL_GGRO` (linux/ethtool.h): read the generic-receive-offload flag.
const ETHTOOL_GGRO: u32 = 0x2b;

/// `struct ethtool_value` (linux/ethtool.h).
#[repr(C)]
struct EthtoolValue {
    cmd: u32,
    data: u32,
}

/// Generic receive offload is on: the kernel merges received TCP segments into frames far
/// above the MTU before a packet socket sees them, which the ring then cuts (and the
/// forwarder drops as truncated). Checked at start so the operator is told.
pub fn gro_enabled(iface: &str) -> Result<bool, KernelIfaceError> {
    let (sock, mut req) = ifreq_socket(iface)?;
    let mut value = EthtoolValue { cmd: ETHTOOL_GGRO, data: 0 };
    req.ifr_ifru.ifru_data = (&mut value as *mut EthtoolValue).cast();
    // SAFETY: `req` names the interface and points at `value`, which outlives the call;
    // ETHTOOL_GGRO writes one ethtool_value.
    let ret = unsafe { libc::ioctl(sock.0, libc::SIOCETHTOOL, &mut req) };
    if ret < 0 {
        return Err(os_error(iface, "SIOCETHTOOL ETHTOOL_GGRO"));
    }
    Ok(value.data != 0)
}

/// Frames the kernel dropped, since the previous call, because the rings of this process's
/// packet sockets bound to interface `ifindex` were full (`tp_drops`; the kernel resets the
/// counters on every read, so callers add the results up). Errors are treated as no drops:
/// a statistic must never stop the appliance.
pub fn packet_ring_drops(ifindex: u32) -> u64 {
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else { return 0 };
    let mut drops = 0u64;
    for entry in dir.flatten() {
        let Some(fd) = entry.file_name().to_str().and_then(|s| s.parse::<RawFd>().ok()) else { continue };
        if bound_packet_ifindex(fd) != Some(ifindex) {
            continue;
        }
        let mut stats = libc::tpacket_stats { tp_packets: 0, tp_drops: 0 };
        let mut len = std::mem::size_of::<libc::tpacket_stats>() as libc::socklen_t;
        // SAFETY: `fd` is a packet socket of this process; `stats`/`len` are valid out-parameters
        // of the size PACKET_STATISTICS writes for TPACKET_V2 rings.
        let ret = unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                (&mut stats as *mut libc::tpacket_stats).cast(),
                &mut len,
            )
        };
        if ret == 0 {
            drops += u64::from(stats.tp_drops);
        }
    }
    drops
}

/// What the kernel counted on a set of XDP sockets, summed over them (the counters are
/// cumulative since each socket's creation). Errors are treated as zeros: a statistic must
/// never stop the appliance.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct XdpSocketDrops {
    /// Frames dropped for want of a fill-ring buffer or for being too long for one.
    pub rx_dropped: u64,
    /// Frames dropped because the socket's rx ring was full (the application polled too
    /// slowly).
    pub rx_ring_full: u64,
    /// Sockets that answered.
    pub sockets: u32,
}

/// This process's AF_XDP sockets. An XDP socket cannot tell its interface (`getsockname` is
/// not implemented for them), so a port finds its own as those that appeared while its
/// queues were set up.
pub fn xdp_sockets() -> Vec<RawFd> {
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else { return Vec::new() };
    let mut fds: Vec<RawFd> = dir
        .flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|s| s.parse::<RawFd>().ok()))
        .filter(|&fd| socket_domain(fd) == Some(libc::AF_XDP))
        .collect();
    fds.sort_unstable();
    fds
}

/// The drop counters of the XDP sockets `fds` (see [`XdpSocketDrops`]).
pub fn xdp_socket_drops(fds: &[RawFd]) -> XdpSocketDrops {
    let mut drops = XdpSocketDrops::default();
    for &fd in fds {
        // SAFETY: an all-zero xdp_statistics is a valid value.
        let mut stats: libc::xdp_statistics = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::xdp_statistics>() as libc::socklen_t;
        // SAFETY: `stats`/`len` are valid out-parameters (the kernel writes at most `len`
        // bytes, fewer before Linux 5.9); a descriptor that is not an XDP socket fails.
        let ret = unsafe {
            libc::getsockopt(
                fd,
                libc::SOL_XDP,
                libc::XDP_STATISTICS,
                (&mut stats as *mut libc::xdp_statistics).cast(),
                &mut len,
            )
        };
        if ret == 0 {
            drops.rx_dropped += stats.rx_dropped;
            drops.rx_ring_full += stats.rx_ring_full;
            drops.sockets += 1;
        }
    }
    drops
}

/// The address family of socket `fd` (`SO_DOMAIN`), `None` if `fd` is not a socket.
fn socket_domain(fd: RawFd) -> Option<i32> {
    let mut domain: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: `domain`/`len` are valid out-parameters; a descriptor that is not a socket fails.
    let ret = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_DOMAIN,
            (&mut domain as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    (ret == 0).then_some(domain)
}

/// The interface's rx queues (`/sys/class/net/<iface>/queues/rx-*`), `None` when unreadable.
pub fn rx_queues(iface: &str) -> Option<u32> {
    let dir = std::fs::read_dir(format!("/sys/class/net/{iface}/queues")).ok()?;
    let n = dir.flatten().filter(|e| e.file_name().to_str().is_some_and(|n| n.starts_with("rx-"))).count();
    u32::try_from(n).ok()
}

/// `ETHTOOL_GFLAGS` (linux/ethtool.h): read the legacy offload flags.
const ETHTOOL_GFLAGS: u32 = 0x25;
/// `ETH_FLAG_RXVLAN`: receive VLAN tag stripping.
const ETH_FLAG_RXVLAN: u32 = 1 << 8;

/// Receive VLAN offload is on: a NIC that strips tags in hardware hands the frame to XDP
/// without its tag (the tag travels in metadata an XDP socket never sees), so a port on
/// `net_af_xdp` would forward it untagged. Checked at start so the operator is told.
pub fn rx_vlan_offload(iface: &str) -> Result<bool, KernelIfaceError> {
    let (sock, mut req) = ifreq_socket(iface)?;
    let mut value = EthtoolValue { cmd: ETHTOOL_GFLAGS, data: 0 };
    req.ifr_ifru.ifru_data = (&mut value as *mut EthtoolValue).cast();
    // SAFETY: `req` names the interface and points at `value`, which outlives the call;
    // ETHTOOL_GFLAGS writes one ethtool_value.
    let ret = unsafe { libc::ioctl(sock.0, libc::SIOCETHTOOL, &mut req) };
    if ret < 0 {
        return Err(os_error(iface, "SIOCETHTOOL ETHTOOL_GFLAGS"));
    }
    Ok(value.data & ETH_FLAG_RXVLAN != 0)
}

/// The interface index `fd` is bound to, if `fd` is an AF_PACKET socket.
fn bound_packet_ifindex(fd: RawFd) -> Option<u32> {
    // SAFETY: an all-zero sockaddr_ll is a valid value.
    let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
    // SAFETY: `addr`/`len` are valid out-parameters; a descriptor that is not a socket fails
    // with ENOTSOCK and is skipped.
    let ret = unsafe { libc::getsockname(fd, (&mut addr as *mut libc::sockaddr_ll).cast(), &mut len) };
    if ret != 0 || i32::from(addr.sll_family) != libc::AF_PACKET {
        return None;
    }
    u32::try_from(addr.sll_ifindex).ok()
}

struct Fd(RawFd);

impl Drop for Fd {
    fn drop(&mut self) {
        // SAFETY: the descriptor was opened by `ifreq_socket` and is closed once.
        unsafe { libc::close(self.0) };
    }
}

fn ifreq_socket(iface: &str) -> Result<(Fd, libc::ifreq), KernelIfaceError> {
    let bytes = iface.as_bytes();
    if bytes.is_empty() || bytes.len() >= libc::IFNAMSIZ || bytes.contains(&0) {
        return Err(KernelIfaceError::BadName(iface.to_owned()));
    }
    // SAFETY: an all-zero ifreq is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(bytes) {
        *dst = *src as libc::c_char;
    }
    // SAFETY: plain socket creation; the descriptor is owned by the returned Fd.
    let sock = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if sock < 0 {
        return Err(os_error(iface, "socket"));
    }
    Ok((Fd(sock), req))
}

fn os_error(iface: &str, operation: &'static str) -> KernelIfaceError {
    KernelIfaceError::Os {
        iface: iface.to_owned(),
        operation,
        error: std::io::Error::last_os_error().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_loopback_mtu_and_refuses_bad_names() {
        assert!(index("lo").is_some());
        assert!(mtu("lo").unwrap() >= 1500);
        assert!(matches!(mtu("a-name-far-too-long-for-linux"), Err(KernelIfaceError::BadName(_))));
        assert!(matches!(mtu("w13-no-such-if"), Err(KernelIfaceError::Os { .. })));
        assert_eq!(packet_ring_drops(u32::MAX), 0);
        assert_eq!(xdp_socket_drops(&[-1]), XdpSocketDrops::default());
        assert!(xdp_sockets().is_empty());
        assert!(rx_queues("lo").is_some_and(|n| n >= 1));
        assert_eq!(rx_queues("w13-no-such-if"), None);
        assert!(rx_vlan_offload("lo").is_ok());
        assert!(gro_enabled("lo").is_ok());
        assert!(matches!(gro_enabled("w13-no-such-if"), Err(KernelIfaceError::Os { .. })));
    }
}

/// Holds the kernel's receive timestamping on for as long as it lives (host-wide).
///
/// Without it, each packet socket reading a frame stamps it itself with the time of its own
/// read (`ktime_get_real` in `tpacket_rcv`): two sockets on one interface (two points on one
/// host, or a point and tcpdump) get stamps that differ by the time between their reads,
/// measured here at 0.45–0.83 µs on average per frame (README, "Clocks"). Once any socket asks
/// for receive timestamps (`SO_TIMESTAMPNS`), the kernel stamps every frame once as it enters
/// the receive path (`netif_rx` / `netif_receive_skb`, before the packet taps), and every
/// packet socket reports that one stamp: earlier, and the same for every reader. This holds one
/// such socket (unbound: it never receives anything); the kernel turns the stamping off again
/// when the last such socket closes. The cost is one clock read per received frame on the host.
#[derive(Debug)]
pub struct NetTimestamping {
    _socket: std::os::fd::OwnedFd,
}

impl NetTimestamping {
    /// Opens the socket and asks for receive timestamps.
    pub fn enable() -> Result<Self, KernelIfaceError> {
        use std::os::fd::FromRawFd;
        let os = |operation: &'static str| KernelIfaceError::Os {
            iface: "(any)".into(),
            operation,
            error: std::io::Error::last_os_error().to_string(),
        };
        // SAFETY: plain socket(2) call; the descriptor is checked and owned below.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(os("socket(AF_INET, SOCK_DGRAM)"));
        }
        // SAFETY: `fd` is a fresh descriptor nothing else owns.
        let socket = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
        let on: libc::c_int = 1;
        // SAFETY: `on` outlives the call and its size is passed.
        let r = unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_TIMESTAMPNS,
                (&on as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if r != 0 {
            return Err(os("setsockopt(SO_TIMESTAMPNS)"));
        }
        Ok(Self { _socket: socket })
    }
}
