//! Device arguments for DPDK's `net_af_packet` ports, derived from the port's MTU, ring size
//! and queue count, so that a kernel port takes jumbo frames whole and has ring frames enough
//! for bursts without hand-picked `blocksz`/`framesz`/`framecnt`.
//!
//! Facts of DPDK 22.11's driver and Linux's TPACKET_V2 ring these numbers rest on:
//! - The kernel writes a frame's data at `macoff` = TPACKET_ALIGN(52 + 16) − 14 = 66 bytes into
//!   a ring frame of `framesz` bytes, and cuts anything longer than `framesz − 66` to that
//!   length (reporting the cut only in a header field the driver ignores). So a received frame
//!   of `framesz − 66` bytes or more may have been cut: [`AfPacketRing::rx_cut_at`].
//! - The driver refuses an rx queue whose mbufs hold fewer than `framesz − 32` bytes, and
//!   refuses an MTU above `framesz − 52`.
//! - `blocksz` must be a multiple of the page size and hold whole frames; `framesz` a multiple
//!   of 16; the ring has `framecnt` frames, for receive and again for transmit, per queue pair.
//!
//! Arguments the operator wrote in the device string win; only missing ones are added.

/// Bytes before the frame's data in a TPACKET_V2 ring frame (Ethernet, no reserve).
pub const TPACKET2_MAC_OFFSET: u32 = 66;
/// Bytes of a ring frame the driver requires the mbuf data room to hold beyond the frame data
/// (`TPACKET2_HDRLEN − sizeof(sockaddr_ll)`).
pub const DRIVER_FRAME_HEADER: u32 = 32;
/// Frame bytes beyond the MTU the ring must hold whole: Ethernet header, two VLAN tags, slack.
pub const FRAME_OVERHEAD: u32 = 14 + 8 + 4;
/// DPDK's mbuf headroom (`RTE_PKTMBUF_HEADROOM`), part of `[mempool] data_room_bytes`.
pub const MBUF_HEADROOM: u32 = 128;
/// The driver's default (and our smallest) ring frame.
const MIN_FRAME_SIZE: u32 = 2048;
const PAGE_SIZE: u32 = 4096;
/// Blocks larger than this are hard for the kernel to allocate contiguously.
const MAX_BLOCK_SIZE: u32 = 128 * 1024;
/// Ring frames per rx descriptor: the kernel ring absorbs bursts while the worker is away (an
/// iperf3 run lost 5 % of its frames at the driver's default of 512 frames, none at 8192).
const FRAMES_PER_DESCRIPTOR: u32 = 4;

/// The kernel ring of one `net_af_packet` port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AfPacketRing {
    /// The device string with every derived argument appended.
    pub device: String,
    /// Kernel interface name (`iface=`).
    pub iface: String,
    /// Ring frame size in bytes.
    pub frame_size: u32,
    /// Ring block size in bytes.
    pub block_size: u32,
    /// Ring frames per queue and direction.
    pub frame_count: u32,
    /// Received frames this long or longer may have been cut by the kernel.
    pub rx_cut_at: u32,
    /// `[mempool] data_room_bytes` the driver needs for this ring.
    pub min_data_room: u32,
}

/// Why a device string cannot be made into a working `net_af_packet` port.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AfPacketError {
    /// A numeric argument is not a number.
    #[error("net_af_packet argument `{key}={value}` is not a number")]
    NotANumber {
        /// Argument name.
        key: String,
        /// Its text.
        value: String,
    },
    /// The device names no interface.
    #[error("net_af_packet needs `iface=<interface>` in its device string")]
    NoInterface,
    /// The ring frames cannot hold the MTU.
    #[error(
        "net_af_packet framesz={frame_size} holds frames of at most {} bytes, too few for MTU {mtu} \
         (needs framesz >= {}); remove framesz to have it derived, or lower the MTU",
        frame_size.saturating_sub(TPACKET2_MAC_OFFSET), mtu + FRAME_OVERHEAD + TPACKET2_MAC_OFFSET
    )]
    FrameTooSmall {
        /// The given frame size.
        frame_size: u32,
        /// The port's MTU.
        mtu: u32,
    },
    /// `qpairs` disagrees with the worker count.
    #[error("net_af_packet qpairs={given} but {queues} workers need {queues} queue pairs; remove qpairs")]
    QueuePairs {
        /// Given.
        given: u32,
        /// Needed.
        queues: u16,
    },
    /// The ring's geometry is one the kernel refuses (`PACKET_RX_RING`): the driver's probe
    /// would fail and the port would be absent, which is refused here with the rule instead.
    #[error(
        "net_af_packet blocksz={block_size}, framesz={frame_size}, framecnt={frame_count}: the kernel \
         takes a ring only with framesz a multiple of 16, blocksz a multiple of {PAGE_SIZE} and at \
         least framesz, and framecnt a multiple of the frames per block (blocksz / framesz); \
         remove the ones you gave to have them derived"
    )]
    BadRing {
        /// Block size (given or derived).
        block_size: u32,
        /// Frame size (given or derived).
        frame_size: u32,
        /// Frame count (given or derived).
        frame_count: u32,
    },
    /// The mbufs are too large for a u16 data room.
    #[error("a ring frame of {0} bytes needs an mbuf data room above 65535 bytes; lower the MTU")]
    DataRoomTooLarge(u32),
}

/// The device is DPDK's af_packet driver.
pub fn is_af_packet(device: &str) -> bool {
    device.trim().starts_with("net_af_packet") || device.trim().starts_with("eth_af_packet")
}

/// Completes an `net_af_packet` device string for a port of `mtu` with `rx_descriptors` per
/// queue and `queues` queue pairs.
pub fn ring(device: &str, mtu: u16, rx_descriptors: u16, queues: u16) -> Result<AfPacketRing, AfPacketError> {
    let device = device.trim();
    let args = crate::device_args::DeviceArgs::parse(device);
    let get = |key: &str| -> Result<Option<u32>, AfPacketError> {
        args.number(key).map_err(|e| AfPacketError::NotANumber { key: e.key, value: e.value })
    };
    let iface = args.iface().map(str::to_owned).ok_or(AfPacketError::NoInterface)?;
    let mtu = u32::from(mtu);
    let needed = mtu + FRAME_OVERHEAD + TPACKET2_MAC_OFFSET;

    let mut extra = Vec::new();
    let frame_size = match get("framesz")? {
        Some(f) if f < needed => return Err(AfPacketError::FrameTooSmall { frame_size: f, mtu }),
        Some(f) => f,
        None => {
            let f = needed.next_multiple_of(256).max(MIN_FRAME_SIZE);
            extra.push(format!("framesz={f}"));
            f
        }
    };
    let block_size = match get("blocksz")? {
        Some(b) => b,
        None => {
            // The smallest block that holds whole frames without waste, if not too large.
            let lcm = lcm(frame_size, PAGE_SIZE);
            let b = if lcm <= MAX_BLOCK_SIZE { lcm } else { frame_size.next_multiple_of(PAGE_SIZE) };
            extra.push(format!("blocksz={b}"));
            b
        }
    };
    let frames_per_block = block_size / frame_size.max(1);
    let frame_count = match get("framecnt")? {
        Some(c) => c,
        None => {
            let c = (u32::from(rx_descriptors) * FRAMES_PER_DESCRIPTOR)
                .max(512)
                .next_multiple_of(frames_per_block.max(1));
            extra.push(format!("framecnt={c}"));
            c
        }
    };
    if frame_size % 16 != 0
        || block_size % PAGE_SIZE != 0
        || frames_per_block == 0
        || frame_count % frames_per_block != 0
        || frame_count == 0
    {
        return Err(AfPacketError::BadRing { block_size, frame_size, frame_count });
    }
    match get("qpairs")? {
        Some(q) if q != u32::from(queues) => return Err(AfPacketError::QueuePairs { given: q, queues }),
        Some(_) => {}
        None if queues > 1 => extra.push(format!("qpairs={queues}")),
        None => {}
    }
    let min_data_room = frame_size - DRIVER_FRAME_HEADER + MBUF_HEADROOM;
    if min_data_room > u32::from(u16::MAX) {
        return Err(AfPacketError::DataRoomTooLarge(frame_size));
    }
    let mut full = device.to_owned();
    for a in extra {
        full.push(',');
        full.push_str(&a);
    }
    Ok(AfPacketRing {
        device: full,
        iface,
        frame_size,
        block_size,
        frame_count,
        rx_cut_at: frame_size - TPACKET2_MAC_OFFSET,
        min_data_room,
    })
}

fn gcd(a: u32, b: u32) -> u32 {
    if b == 0 { a } else { gcd(b, a % b) }
}

fn lcm(a: u32, b: u32) -> u32 {
    let g = gcd(a, b).max(1);
    (u64::from(a) / u64::from(g) * u64::from(b)).try_into().unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standard_mtu_keeps_the_driver_frame_and_sizes_the_ring_from_the_descriptors() {
        let r = ring("net_af_packet0,iface=veth0", 1500, 1024, 1).unwrap();
        assert_eq!(r.device, "net_af_packet0,iface=veth0,framesz=2048,blocksz=4096,framecnt=4096");
        assert_eq!(r.iface, "veth0");
        assert_eq!(r.rx_cut_at, 2048 - 66);
        assert!(r.rx_cut_at > 1500 + 14 + 8, "a whole frame at the MTU with two VLAN tags fits");
        assert_eq!(r.min_data_room, 2048 - 32 + 128);
    }

    #[test]
    fn jumbo_mtu_gets_frames_that_hold_it_and_blocks_without_waste() {
        let r = ring("net_af_packet1,iface=v1", 9000, 1024, 2).unwrap();
        assert_eq!(r.frame_size, 9216);
        assert_eq!(r.block_size % 4096, 0);
        assert_eq!(r.block_size % r.frame_size, 0);
        assert!(r.rx_cut_at > 9000 + 14 + 8);
        assert_eq!(r.frame_count % (r.block_size / r.frame_size), 0);
        assert!(r.device.ends_with(",qpairs=2"), "{}", r.device);
        // The driver's own MTU check (framesz − 52 ≥ MTU) passes.
        assert!(r.frame_size - 52 >= 9000);
    }

    #[test]
    fn operator_arguments_win_and_bad_ones_are_refused_clearly() {
        let r =
            ring("net_af_packet0,iface=v0,framesz=16384,blocksz=16384,framecnt=64", 9000, 1024, 1).unwrap();
        assert_eq!(r.device, "net_af_packet0,iface=v0,framesz=16384,blocksz=16384,framecnt=64");
        assert_eq!(r.rx_cut_at, 16384 - 66);
        let e = ring("net_af_packet0,iface=v0,framesz=2048", 9000, 1024, 1).unwrap_err();
        assert!(matches!(e, AfPacketError::FrameTooSmall { frame_size: 2048, mtu: 9000 }));
        assert!(e.to_string().contains("framesz >= 9092"), "{e}");
        assert_eq!(ring("net_af_packet0", 1500, 1024, 1).unwrap_err(), AfPacketError::NoInterface);
        assert!(matches!(
            ring("net_af_packet0,iface=v,qpairs=1", 1500, 1024, 2),
            Err(AfPacketError::QueuePairs { given: 1, queues: 2 })
        ));
        assert!(matches!(
            ring("net_af_packet0,iface=v,framecnt=x", 1500, 1024, 1),
            Err(AfPacketError::NotANumber { .. })
        ));
        assert!(matches!(
            ring("net_af_packet0,iface=v", 65500, 1024, 1),
            Err(AfPacketError::DataRoomTooLarge(_))
        ));
        // Geometries the kernel refuses: caught here, not as a port absent after probing.
        for bad in ["blocksz=1024", "blocksz=5000", "framesz=2056", "framecnt=513", "framecnt=0"] {
            assert!(
                matches!(
                    ring(&format!("net_af_packet0,iface=x,{bad}"), 1500, 1024, 1),
                    Err(AfPacketError::BadRing { .. })
                ),
                "{bad}"
            );
        }
        assert!(matches!(
            ring("net_af_packet0,iface=x,framesz=4096,blocksz=8192,framecnt=515", 1500, 1024, 1),
            Err(AfPacketError::BadRing { .. })
        ));
    }
}
