//! Device arguments for DPDK's `net_af_xdp` ports (an XDP socket per queue on a Linux
//! interface), derived from the worker count, and the MTU rule such a port follows.
//!
//! Facts of DPDK 22.11's driver these rules rest on:
//! - `iface=` names the interface; the sockets bind to its rx queues `start_queue` ..
//!   `start_queue + queue_count − 1` (defaults 0 and 1). One socket per DPDK queue, so
//!   `queue_count` must equal the worker count, and the interface must have that many rx
//!   queues from `start_queue` on (a veth has one unless created with `numrxqueues`).
//! - A frame is received into one page-sized buffer (no XDP multi-buffer in 22.11): the
//!   driver's `max_mtu` is about 3 500 bytes, and the kernel refuses to attach the XDP program
//!   to an interface whose MTU its XDP path cannot hold (veth: about 3 500 bytes too). Jumbo
//!   frames therefore need `net_af_packet`.
//! - Each rx queue takes [`FILL_RING_MBUFS`] mbufs from the pool for its fill ring at start
//!   (the pool is sized for them: `Config::mempool_mbufs`).
//! - The driver applies no MTU of its own at configure time; wirelat sets the kernel
//!   interface's MTU before the sockets are created, as for `net_af_packet`.
//!
//! Arguments the operator wrote in the device string win; only missing ones are added.

/// Mbufs each `net_af_xdp` rx queue takes from the pool at start to stock its fill ring
/// (22.11's `ETH_AF_XDP_DFLT_NUM_DESCS`); the queue does not start when the pool lacks them.
pub const FILL_RING_MBUFS: u32 = 2048;

/// The XDP sockets of one `net_af_xdp` port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AfXdpPort {
    /// The device string with every derived argument appended.
    pub device: String,
    /// Kernel interface name (`iface=`).
    pub iface: String,
    /// First interface rx queue the sockets bind to.
    pub start_queue: u32,
    /// Interface rx queues used (= worker count).
    pub queue_count: u32,
}

/// Why a device string cannot be made into a working `net_af_xdp` port.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AfXdpError {
    /// A numeric argument is not a number.
    #[error("net_af_xdp argument `{key}={value}` is not a number")]
    NotANumber {
        /// Argument name.
        key: String,
        /// Its text.
        value: String,
    },
    /// The device names no interface.
    #[error("net_af_xdp needs `iface=<interface>` in its device string")]
    NoInterface,
    /// `queue_count` disagrees with the worker count.
    #[error("net_af_xdp queue_count={given} but {queues} workers need {queues} queues; remove queue_count")]
    QueueCount {
        /// Given.
        given: u32,
        /// Needed.
        queues: u16,
    },
}

/// The device is DPDK's af_xdp driver.
pub fn is_af_xdp(device: &str) -> bool {
    device.trim().starts_with("net_af_xdp")
}

/// Completes a `net_af_xdp` device string for `queues` queues (one per worker).
pub fn sockets(device: &str, queues: u16) -> Result<AfXdpPort, AfXdpError> {
    let device = device.trim();
    let args = crate::device_args::DeviceArgs::parse(device);
    let get = |key: &str| -> Result<Option<u32>, AfXdpError> {
        args.number(key).map_err(|e| AfXdpError::NotANumber { key: e.key, value: e.value })
    };
    let iface = args.iface().map(str::to_owned).ok_or(AfXdpError::NoInterface)?;
    let start_queue = get("start_queue")?.unwrap_or(0);
    let mut full = device.to_owned();
    let queue_count = match get("queue_count")? {
        Some(q) if q != u32::from(queues) => return Err(AfXdpError::QueueCount { given: q, queues }),
        Some(q) => q,
        None => {
            if queues > 1 {
                full.push_str(&format!(",queue_count={queues}"));
            }
            u32::from(queues)
        }
    };
    Ok(AfXdpPort { device: full, iface, start_queue, queue_count })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derives_the_queue_count_from_the_workers_and_keeps_what_was_written() {
        let p = sockets("net_af_xdp0,iface=veth0", 1).unwrap();
        assert_eq!(p.device, "net_af_xdp0,iface=veth0");
        assert_eq!((p.iface.as_str(), p.start_queue, p.queue_count), ("veth0", 0, 1));
        let p = sockets(" net_af_xdp1,iface=eth1,start_queue=2 ", 4).unwrap();
        assert_eq!(p.device, "net_af_xdp1,iface=eth1,start_queue=2,queue_count=4");
        assert_eq!((p.start_queue, p.queue_count), (2, 4));
        let p = sockets("net_af_xdp1,iface=eth1,queue_count=2", 2).unwrap();
        assert_eq!(p.device, "net_af_xdp1,iface=eth1,queue_count=2");
    }

    #[test]
    fn refuses_what_cannot_work_with_a_sentence_naming_the_argument() {
        assert_eq!(sockets("net_af_xdp0", 1).unwrap_err(), AfXdpError::NoInterface);
        assert_eq!(sockets("net_af_xdp0,iface=", 1).unwrap_err(), AfXdpError::NoInterface);
        let e = sockets("net_af_xdp0,iface=v,queue_count=1", 2).unwrap_err();
        assert_eq!(e, AfXdpError::QueueCount { given: 1, queues: 2 });
        assert!(e.to_string().contains("remove queue_count"), "{e}");
        let e = sockets("net_af_xdp0,iface=v,start_queue=x", 1).unwrap_err();
        assert!(e.to_string().contains("`start_queue=x` is not a number"), "{e}");
        assert!(is_af_xdp("net_af_xdp3,iface=x") && !is_af_xdp("net_af_packet0,iface=x"));
    }
}
