//! What a port is and reports: its configuration once started ([`PortInfo`]), its device
//! counters ([`PortStats`]) and its link state ([`LinkStatus`]).

/// What the port ended up with after configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortInfo {
    /// DPDK port id.
    pub id: u16,
    /// Device name (e.g. `net_pcap0` or a PCI address).
    pub name: String,
    /// PMD name (e.g. `net_pcap`).
    pub driver: String,
    /// Bus the device sits on: `pci`, `vdev` (virtual device), ...
    pub bus: String,
    /// Configured rx queues.
    pub rx_queues: u16,
    /// Configured tx queues.
    pub tx_queues: u16,
    /// Rx descriptors per queue after adjustment.
    pub rx_descriptors: u16,
    /// Tx descriptors per queue after adjustment.
    pub tx_descriptors: u16,
    /// RSS with the symmetric key is active.
    pub symmetric_rss: bool,
    /// The hardware rx timestamp offload is enabled.
    pub rx_timestamp_offload: bool,
    /// Rx scatter (multi-segment mbufs for frames above the data room) is enabled.
    pub rx_scatter: bool,
    /// The device transmits multi-segment mbufs.
    pub tx_multi_segment: bool,
    /// MTU in force once started (as the device reports it).
    pub mtu: u32,
    /// Promiscuous mode is on.
    pub promiscuous: bool,
    /// Received frames this long or longer may have been cut by the device and are never
    /// forwarded as whole (`u32::MAX`: no such length).
    pub rx_cut_at: u32,
    /// Longest frame the device transmits whole (`u32::MAX`: no limit known). Longer ones are
    /// dropped and counted before transmission, because some drivers cut or silently discard
    /// them (22.11's `net_af_packet` frees frames longer than its ring frames, and the kernel
    /// refuses frames above the interface MTU).
    pub tx_max_frame: u32,
    /// Longest chained (multi-segment) frame the device transmits whole: 0 when it cannot
    /// send chains at all; 16 128 for 22.11's `net_pcap`, which writes at most
    /// `RTE_ETHER_MAX_JUMBO_FRAME_LEN` bytes of a chain and crashes on some longer ones.
    pub tx_chained_max: u32,
}

impl PortInfo {
    /// The port is a DPDK virtual device (pcap, ring, null, tap, af_packet, ...).
    pub fn is_virtual(&self) -> bool {
        self.bus == "vdev"
    }

    /// The port can hand the application chained (multi-segment) mbufs: with rx scatter on,
    /// or as a virtual device (the pcap driver chains frames longer than the data room
    /// without advertising scatter).
    pub fn may_receive_chained_mbufs(&self) -> bool {
        self.rx_scatter || self.is_virtual()
    }

    /// The port transmits chained mbufs whole: it advertises the multi-segment tx offload, or
    /// it is a virtual device (DPDK's software drivers copy or pass whole chains; the pcap
    /// driver of 22.11 does so without advertising the offload, up to
    /// [`Self::tx_chained_max`] bytes).
    pub fn transmits_chained_mbufs(&self) -> bool {
        self.tx_multi_segment || self.is_virtual()
    }

    /// The longest chained frame this port sends whole (see [`Self::tx_chained_max`]).
    pub(super) fn chained_limit(&self) -> u32 {
        if !self.transmits_chained_mbufs() {
            0
        } else if self.driver == "net_pcap" {
            dpdk_sys::RTE_ETHER_MAX_JUMBO_FRAME_LEN
        } else {
            u32::MAX
        }
    }
}

/// Device counters (`rte_eth_stats`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortStats {
    /// Frames received.
    pub rx_packets: u64,
    /// Frames sent.
    pub tx_packets: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Frames the device dropped because no rx descriptor was free (we polled too slowly);
    /// for a kernel port, the frames its packet rings dropped when full (`tp_drops`).
    pub rx_missed: u64,
    /// Erroneous received frames.
    pub rx_errors: u64,
    /// Failed transmissions.
    pub tx_errors: u64,
    /// Rx mbuf allocation failures (the mempool ran dry).
    pub rx_nombuf: u64,
}

/// A port's link state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkStatus {
    /// The link is up.
    pub up: bool,
    /// Its speed in Mbit/s (0 when unknown; virtual devices report a nominal value).
    pub speed_mbps: u32,
}

/// A [`PortInfo`] before configuration: nothing enabled, no limits known.
pub(super) fn empty_info(id: u16, name: &str) -> PortInfo {
    PortInfo {
        id,
        name: name.to_owned(),
        driver: String::new(),
        bus: String::new(),
        rx_queues: 0,
        tx_queues: 0,
        rx_descriptors: 0,
        tx_descriptors: 0,
        symmetric_rss: false,
        rx_timestamp_offload: false,
        rx_scatter: false,
        tx_multi_segment: false,
        mtu: 0,
        promiscuous: false,
        rx_cut_at: u32::MAX,
        tx_max_frame: u32::MAX,
        tx_chained_max: u32::MAX,
    }
}
