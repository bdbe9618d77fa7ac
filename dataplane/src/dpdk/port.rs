//! Ethernet ports: configuration (queues, symmetric RSS, rx timestamps, jumbo frames,
//! promiscuous mode), start/stop, statistics, and the per-queue rx/tx handles workers own.

use std::ffi::{CStr, CString, c_char};
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use super::eal::Eal;
use super::error::{DpdkError, PortSetting, RteErrno};
use super::mempool::Mempool;

mod info;
mod queue;

use info::empty_info;
pub use info::{LinkStatus, PortInfo, PortStats};
pub use queue::{RxQueue, TxQueue};

/// Symmetric Toeplitz key: the 16-bit pattern 0x6d5a repeated makes the RSS hash of
/// (src, dst) equal to that of (dst, src), so both directions of a flow reach the same queue
/// and thus the same worker. 52 bytes covers every device's `hash_key_size` in practice.
const SYMMETRIC_RSS_KEY: [u8; 52] = {
    let mut key = [0u8; 52];
    let mut i = 0;
    while i < key.len() {
        key[i] = if i % 2 == 0 { 0x6d } else { 0x5a };
        i += 1;
    }
    key
};

/// Ethernet header + CRC + two VLAN tags: frame bytes beyond the MTU.
const FRAME_OVERHEAD_BYTES: u32 = 14 + 4 + 8;

/// Drivers that send through a Linux interface's transmit path, which refuses frames above
/// its MTU (a tap device's frames enter the kernel as received ones instead, so it is not
/// listed).
const KERNEL_BACKED_DRIVERS: [&str; 2] = ["net_af_packet", "net_af_xdp"];

/// Frame bytes beyond the MTU that a Linux interface transmits: the Ethernet header and one
/// VLAN tag (no CRC: the kernel's frames exclude it).
const KERNEL_TX_OVERHEAD_BYTES: u32 = 14 + 4;

/// What to ask of a port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortSettings {
    /// Rx queues (one per worker).
    pub rx_queues: u16,
    /// Tx queues (one per worker).
    pub tx_queues: u16,
    /// Rx ring size per queue (adjusted to the device's limits).
    pub rx_descriptors: u16,
    /// Tx ring size per queue (adjusted to the device's limits).
    pub tx_descriptors: u16,
    /// Receive frames for every destination MAC (a bump in the wire must).
    pub promiscuous: bool,
    /// Enable the hardware rx timestamp offload when the device advertises it.
    pub rx_timestamp: bool,
    /// Requested MTU; clamped to the device's advertised maximum, and refused with an error
    /// when the device cannot be set to it at all.
    pub mtu: u16,
    /// Received frames this long or longer may have been cut by the device (a kernel ring
    /// frame of `net_af_packet` filled to its end): see [`PortInfo::rx_cut_at`]. `u32::MAX`
    /// when the device hands over whole frames only.
    pub rx_cut_at: u32,
    /// The Linux interface under a kernel-backed port (`iface=` of `net_af_packet` or
    /// `net_af_xdp`): its MTU is set directly and the drops of the driver's packet rings or
    /// XDP sockets are read into [`PortStats::rx_missed`].
    pub kernel_iface: Option<String>,
    /// `mtu` was asked for by the operator (not a default). A `net_af_xdp` port refuses an
    /// asked-for MTU above what its driver takes, and without one keeps its interface's MTU.
    pub mtu_explicit: bool,
}

/// The driver DPDK 22.11 names `net_af_xdp`.
const AF_XDP_DRIVER: &str = "net_af_xdp";

/// A configured and started port; stopped and closed on drop.
pub struct Port<'pool> {
    info: PortInfo,
    /// Index of the kernel interface whose packet-ring drops count as `imissed`.
    kernel_ifindex: Option<u32>,
    /// `tp_drops` read so far (the kernel resets it on each read).
    kernel_drops: AtomicU64,
    /// The port is `net_af_xdp`: its XDP sockets' `rx_ring_full` is added to `imissed`.
    xdp: bool,
    /// The port's XDP sockets (those opened while its rx queues were set up).
    xdp_sockets: Vec<std::os::fd::RawFd>,
    rx_taken: Vec<AtomicBool>,
    tx_taken: Vec<AtomicBool>,
    _pool: PhantomData<&'pool ()>,
}

impl<'pool> Port<'pool> {
    /// Finds the device named `name` (the part of its device string before the first comma),
    /// configures it with `settings` and buffers from `pool`, and starts it.
    pub fn open<'eal: 'pool>(
        eal: &'eal Eal,
        name: &str,
        pool: &'pool Mempool<'eal>,
        settings: &PortSettings,
    ) -> Result<Self, DpdkError> {
        let id = find_port(name)?;
        let mut port = Port {
            info: empty_info(id, name),
            kernel_ifindex: None,
            kernel_drops: AtomicU64::new(0),
            xdp: false,
            xdp_sockets: Vec::new(),
            rx_taken: Vec::new(),
            tx_taken: Vec::new(),
            _pool: PhantomData,
        };
        port.configure(eal, pool, settings)?;
        Ok(port)
    }

    fn configure(&mut self, eal: &Eal, pool: &Mempool<'_>, settings: &PortSettings) -> Result<(), DpdkError> {
        let id = self.info.id;
        let dev = self.device_info()?;
        if settings.rx_queues == 0 || settings.tx_queues == 0 {
            return Err(self.capability("at least one rx and one tx queue are needed".into()));
        }
        if settings.rx_queues > dev.max_rx_queues || settings.tx_queues > dev.max_tx_queues {
            return Err(self.refused(
                PortSetting::Queues,
                format!(
                    "{} rx / {} tx queues requested, the device supports at most {} / {}",
                    settings.rx_queues, settings.tx_queues, dev.max_rx_queues, dev.max_tx_queues
                ),
            ));
        }
        // SAFETY: the driver name is a static C string owned by the PMD (or null).
        self.info.driver = unsafe { c_str_or_empty(dev.driver_name) };
        if !dev.device.is_null() {
            // SAFETY: `dev.device` is the ethdev's live rte_device; the bus and its name are
            // static for the life of the EAL.
            self.info.bus = unsafe {
                let bus = dpdk_sys::rte_dev_bus(dev.device);
                if bus.is_null() { String::new() } else { c_str_or_empty(dpdk_sys::rte_bus_name(bus)) }
            };
        }

        let mut conf = dpdk_sys::rte_eth_conf::default();
        let mut rss_key = SYMMETRIC_RSS_KEY;
        let rss_hf =
            u64::from(dpdk_sys::RTE_ETH_RSS_IP | dpdk_sys::RTE_ETH_RSS_TCP | dpdk_sys::RTE_ETH_RSS_UDP)
                & dev.flow_type_rss_offloads;
        if settings.rx_queues > 1 && rss_hf != 0 {
            conf.rxmode.mq_mode = dpdk_sys::rte_eth_rx_mq_mode::RTE_ETH_MQ_RX_RSS;
            let key_len = if dev.hash_key_size == 0 { 40 } else { dev.hash_key_size };
            if usize::from(key_len) > rss_key.len() {
                return Err(self.capability(format!("RSS key of {key_len} bytes is not supported")));
            }
            conf.rx_adv_conf.rss_conf.rss_key = rss_key.as_mut_ptr();
            conf.rx_adv_conf.rss_conf.rss_key_len = key_len;
            conf.rx_adv_conf.rss_conf.rss_hf = rss_hf;
            self.info.symmetric_rss = true;
        }
        let rx_capa = dev.rx_offload_capa;
        let tx_capa = dev.tx_offload_capa;
        if settings.rx_timestamp && rx_capa & u64::from(dpdk_sys::RTE_ETH_RX_OFFLOAD_TIMESTAMP) != 0 {
            conf.rxmode.offloads |= u64::from(dpdk_sys::RTE_ETH_RX_OFFLOAD_TIMESTAMP);
            self.info.rx_timestamp_offload = true;
        }
        // MTU: the largest the device advertises up to the requested one, given at configure
        // time when the device's frame limit allows it; otherwise set after configure (drivers
        // such as net_af_packet advertise a 1518-byte frame limit but set their kernel
        // interface's MTU), and refused if that fails too.
        self.xdp = self.info.driver == AF_XDP_DRIVER;
        let mtu = match (&settings.kernel_iface, self.xdp) {
            (Some(iface), true) => self.xdp_mtu(&dev, iface, settings)?,
            _ => u32::from(settings.mtu.clamp(dev.min_mtu, dev.max_mtu.max(dev.min_mtu))),
        };
        let max_frame = mtu + FRAME_OVERHEAD_BYTES;
        let mtu_at_configure = dev.max_mtu > 0 && dev.max_rx_pktlen >= max_frame;
        if mtu_at_configure {
            conf.rxmode.mtu = mtu;
        }
        // Frames longer than one mbuf need chained segments on receive and on transmit.
        let data_room = pool_data_room(pool);
        if max_frame > data_room && rx_capa & u64::from(dpdk_sys::RTE_ETH_RX_OFFLOAD_SCATTER) != 0 {
            conf.rxmode.offloads |= u64::from(dpdk_sys::RTE_ETH_RX_OFFLOAD_SCATTER);
            self.info.rx_scatter = true;
        }
        if tx_capa & u64::from(dpdk_sys::RTE_ETH_TX_OFFLOAD_MULTI_SEGS) != 0 {
            conf.txmode.offloads |= u64::from(dpdk_sys::RTE_ETH_TX_OFFLOAD_MULTI_SEGS);
            self.info.tx_multi_segment = true;
        }

        // SAFETY: `conf` is a fully initialised rte_eth_conf; DPDK copies the RSS key before
        // returning, and `rss_key` outlives the call.
        let ret =
            unsafe { dpdk_sys::rte_eth_dev_configure(id, settings.rx_queues, settings.tx_queues, &conf) };
        self.check(ret, "rte_eth_dev_configure")?;
        // An XDP socket's interface gets its MTU before the socket (created at rx queue
        // setup) attaches the XDP program, which the kernel refuses above its XDP limit.
        if !mtu_at_configure || (self.xdp && settings.kernel_iface.is_some()) {
            match &settings.kernel_iface {
                Some(iface) => self.set_kernel_mtu(iface, mtu)?,
                None => self.set_mtu(mtu)?,
            }
        }

        let mut rx_desc = settings.rx_descriptors;
        let mut tx_desc = settings.tx_descriptors;
        // SAFETY: both pointers refer to live u16 locals.
        let ret = unsafe { dpdk_sys::rte_eth_dev_adjust_nb_rx_tx_desc(id, &mut rx_desc, &mut tx_desc) };
        self.check(ret, "rte_eth_dev_adjust_nb_rx_tx_desc")?;

        // SAFETY: plain query.
        let socket = unsafe { dpdk_sys::rte_eth_dev_socket_id(id) };
        let socket = u32::try_from(socket).unwrap_or_else(|_| eal.lcore_socket(eal.main_lcore()));
        let sockets_before = if self.xdp { super::kernel_iface::xdp_sockets() } else { Vec::new() };
        let mut rxconf = dev.default_rxconf;
        rxconf.offloads = conf.rxmode.offloads;
        for q in 0..settings.rx_queues {
            // SAFETY: the port is configured with this many rx queues; the pool outlives the
            // port (lifetime 'pool); rxconf is a valid copy of the device default.
            let ret =
                unsafe { dpdk_sys::rte_eth_rx_queue_setup(id, q, rx_desc, socket, &rxconf, pool.as_ptr()) };
            if ret < 0 && self.xdp {
                // The driver says only EINVAL; libxdp's own lines above name the kernel's reason.
                return Err(self.refused(
                    PortSetting::Device,
                    format!(
                        "rx queue {q}: the kernel refused the XDP socket on interface {} ({}; libxdp's \
                     message above gives the kernel's reason): an MTU above what the interface's XDP \
                     path takes (on a veth, its peer's MTU counts too: about 3 500 bytes at most), \
                     fewer rx queues than start_queue + queue_count, or large receive offload on",
                        settings.kernel_iface.as_deref().unwrap_or("?"),
                        RteErrno::from_code(ret)
                    ),
                ));
            }
            self.check(ret, "rte_eth_rx_queue_setup")?;
        }
        if self.xdp {
            self.xdp_sockets = super::kernel_iface::xdp_sockets()
                .into_iter()
                .filter(|fd| !sockets_before.contains(fd))
                .collect();
        }
        let mut txconf = dev.default_txconf;
        txconf.offloads = conf.txmode.offloads;
        for q in 0..settings.tx_queues {
            // SAFETY: the port is configured with this many tx queues.
            let ret = unsafe { dpdk_sys::rte_eth_tx_queue_setup(id, q, tx_desc, socket, &txconf) };
            self.check(ret, "rte_eth_tx_queue_setup")?;
        }

        // SAFETY: the port is configured and all queues are set up.
        let ret = unsafe { dpdk_sys::rte_eth_dev_start(id) };
        self.check(ret, "rte_eth_dev_start")?;

        if settings.promiscuous {
            // SAFETY: the port is started. Devices without a MAC filter (pcap, ring, null)
            // answer ENOTSUP: they already see every frame.
            let ret = unsafe { dpdk_sys::rte_eth_promiscuous_enable(id) };
            if ret != 0 && ret != -(libc_enotsup()) {
                self.check(ret, "rte_eth_promiscuous_enable")?;
            }
            // SAFETY: plain query.
            self.info.promiscuous = unsafe { dpdk_sys::rte_eth_promiscuous_get(id) } == 1;
        }
        self.info.mtu = match &settings.kernel_iface {
            // ethdev keeps its own idea of the MTU; the kernel's is the one frames obey.
            Some(iface) => {
                self.kernel_ifindex = super::kernel_iface::index(iface);
                super::kernel_iface::mtu(iface).map_err(|e| self.capability(e.to_string()))?
            }
            None => {
                let mut mtu_now: u16 = 0;
                // SAFETY: `mtu_now` is a valid out-parameter for a started port.
                let ret = unsafe { dpdk_sys::rte_eth_dev_get_mtu(id, &mut mtu_now) };
                self.check(ret, "rte_eth_dev_get_mtu")?;
                u32::from(mtu_now)
            }
        };
        self.info.rx_cut_at = settings.rx_cut_at;
        self.info.tx_chained_max = self.info.chained_limit();
        // A software device over a kernel interface (af_packet, af_xdp) transmits through the
        // kernel, which refuses frames above the interface MTU plus an Ethernet header and one
        // VLAN tag (22.11's af_packet then drops them uncounted). Others take any length.
        self.info.tx_max_frame = if KERNEL_BACKED_DRIVERS.contains(&self.info.driver.as_str()) {
            (self.info.mtu + KERNEL_TX_OVERHEAD_BYTES).min(settings.rx_cut_at.saturating_sub(1))
        } else {
            u32::MAX
        };
        self.info.rx_queues = settings.rx_queues;
        self.info.tx_queues = settings.tx_queues;
        self.info.rx_descriptors = rx_desc;
        self.info.tx_descriptors = tx_desc;
        self.rx_taken = (0..settings.rx_queues).map(|_| AtomicBool::new(false)).collect();
        self.tx_taken = (0..settings.tx_queues).map(|_| AtomicBool::new(false)).collect();
        Ok(())
    }

    /// What the port was configured with.
    pub fn info(&self) -> &PortInfo {
        &self.info
    }

    /// DPDK port id.
    pub fn id(&self) -> u16 {
        self.info.id
    }

    /// The handle for rx queue `queue`; each queue can be taken once (DPDK queues are not
    /// thread-safe, so exactly one worker owns each).
    pub fn rx_queue(&self, queue: u16) -> Result<RxQueue<'_>, DpdkError> {
        self.take(&self.rx_taken, "rx", queue)?;
        Ok(RxQueue { port: self.info.id, queue, _port: PhantomData })
    }

    /// The handle for tx queue `queue`; each queue can be taken once.
    pub fn tx_queue(&self, queue: u16) -> Result<TxQueue<'_>, DpdkError> {
        self.take(&self.tx_taken, "tx", queue)?;
        Ok(TxQueue { port: self.info.id, queue, _port: PhantomData })
    }

    fn take(&self, taken: &[AtomicBool], kind: &'static str, queue: u16) -> Result<(), DpdkError> {
        match taken.get(usize::from(queue)) {
            Some(flag) if !flag.swap(true, Ordering::AcqRel) => Ok(()),
            Some(_) => {
                Err(DpdkError::QueueTaken { port: self.info.id, name: self.info.name.clone(), kind, queue })
            }
            None => Err(self.capability(format!("{kind} queue {queue} does not exist"))),
        }
    }

    /// The device's counters. Safe to call from the control lcore while workers run.
    pub fn stats(&self) -> Result<PortStats, DpdkError> {
        let mut s = dpdk_sys::rte_eth_stats::default();
        // SAFETY: `s` is a valid out-parameter; reading stats concurrently with the data path
        // is supported by ethdev.
        let ret = unsafe { dpdk_sys::rte_eth_stats_get(self.info.id, &mut s) };
        self.check(ret, "rte_eth_stats_get")?;
        // A kernel port's ring drops, which its driver does not report (see `kernel_iface`).
        let kernel_drops = match self.kernel_ifindex {
            // The driver already counts the sockets' `rx_dropped`; the full-ring drops are added.
            Some(_) if self.xdp => super::kernel_iface::xdp_socket_drops(&self.xdp_sockets).rx_ring_full,
            Some(ifindex) => {
                let new = super::kernel_iface::packet_ring_drops(ifindex);
                self.kernel_drops.fetch_add(new, Ordering::Relaxed) + new
            }
            None => 0,
        };
        Ok(PortStats {
            rx_packets: s.ipackets,
            tx_packets: s.opackets,
            rx_bytes: s.ibytes,
            tx_bytes: s.obytes,
            rx_missed: s.imissed + kernel_drops,
            rx_errors: s.ierrors,
            tx_errors: s.oerrors,
            rx_nombuf: s.rx_nombuf,
        })
    }

    /// The device's clock (the unit of its rx timestamps), where the driver offers it
    /// (`rte_eth_read_clock`). Safe to call from the control lcore while workers run.
    pub fn read_clock(&self) -> Result<u64, DpdkError> {
        let mut clock: u64 = 0;
        // SAFETY: `clock` is a valid out-parameter for a started port.
        let ret = unsafe { dpdk_sys::rte_eth_read_clock(self.info.id, &mut clock) };
        self.check(ret, "rte_eth_read_clock")?;
        Ok(clock)
    }

    /// The link as the driver sees it now (does not wait for auto-negotiation).
    pub fn link(&self) -> Result<LinkStatus, DpdkError> {
        let mut link = dpdk_sys::rte_eth_link::default();
        // SAFETY: `link` is a valid out-parameter for a port id that exists.
        let ret = unsafe { dpdk_sys::rte_eth_link_get_nowait(self.info.id, &mut link) };
        self.check(ret, "rte_eth_link_get_nowait")?;
        Ok(LinkStatus { up: link.link_status() != 0, speed_mbps: link.link_speed })
    }

    /// The MTU of a `net_af_xdp` port on `iface`: the asked-for one, or the interface's own
    /// when none was asked for; refused above the driver's maximum (DPDK 22.11 receives each
    /// frame into one page-sized buffer and has no XDP multi-buffer, so jumbo frames need
    /// `net_af_packet`).
    fn xdp_mtu(
        &self,
        dev: &dpdk_sys::rte_eth_dev_info,
        iface: &str,
        settings: &PortSettings,
    ) -> Result<u32, DpdkError> {
        let max = u32::from(dev.max_mtu);
        let (mtu, whose) = if settings.mtu_explicit {
            (u32::from(settings.mtu), "[[port]] mtu".to_owned())
        } else {
            let current = super::kernel_iface::mtu(iface).map_err(|e| self.capability(e.to_string()))?;
            (current, format!("interface {iface}'s MTU (no [[port]] mtu given)"))
        };
        if mtu > max {
            return Err(self.refused(
                PortSetting::Mtu,
                format!(
                    "MTU {mtu} ({whose}) is above the {max} bytes net_af_xdp takes: DPDK 22.11 receives \
                 each frame into one page, without XDP multi-buffer; set [[port]] mtu to at most \
                 {max}, or use net_af_packet for jumbo frames"
                ),
            ));
        }
        Ok(mtu.max(u32::from(dev.min_mtu)))
    }

    /// Sets the MTU of the kernel interface under the port (unless it already has it).
    fn set_kernel_mtu(&self, iface: &str, mtu: u32) -> Result<(), DpdkError> {
        use super::kernel_iface;
        let current = kernel_iface::mtu(iface).map_err(|e| self.capability(e.to_string()))?;
        if current != mtu {
            kernel_iface::set_mtu(iface, mtu).map_err(|e| {
                self.refused(
                    PortSetting::Mtu,
                    format!("MTU {mtu} cannot be applied to interface {iface} (it has {current}): {e}"),
                )
            })?;
        }
        Ok(())
    }

    /// Sets the MTU of a configured port, or says clearly why it cannot be set.
    fn set_mtu(&self, mtu: u32) -> Result<(), DpdkError> {
        let Ok(mtu16) = u16::try_from(mtu) else {
            return Err(self.refused(PortSetting::Mtu, format!("MTU {mtu} is above 65535")));
        };
        // SAFETY: the port is configured; the driver applies or refuses the MTU.
        let ret = unsafe { dpdk_sys::rte_eth_dev_set_mtu(self.info.id, mtu16) };
        if ret < 0 {
            return Err(self.refused(
                PortSetting::Mtu,
                format!(
                    "MTU {mtu} cannot be applied ({}); for net_af_packet the ring frames (framesz) \
                 must hold MTU + 66 bytes and the kernel interface must accept the MTU; \
                 lower [[port]] mtu or raise framesz",
                    RteErrno::from_code(ret)
                ),
            ));
        }
        Ok(())
    }

    fn device_info(&self) -> Result<dpdk_sys::rte_eth_dev_info, DpdkError> {
        let mut dev = dpdk_sys::rte_eth_dev_info::default();
        // SAFETY: `dev` is a valid out-parameter for a port id that exists.
        let ret = unsafe { dpdk_sys::rte_eth_dev_info_get(self.info.id, &mut dev) };
        self.check(ret, "rte_eth_dev_info_get")?;
        Ok(dev)
    }

    fn check(&self, ret: i32, operation: &'static str) -> Result<(), DpdkError> {
        if ret < 0 {
            Err(DpdkError::Port {
                port: self.info.id,
                name: self.info.name.clone(),
                operation,
                reason: RteErrno::from_code(ret),
            })
        } else {
            Ok(())
        }
    }

    fn capability(&self, detail: String) -> DpdkError {
        DpdkError::PortCapability { port: self.info.id, name: self.info.name.clone(), detail }
    }

    /// The configuration asks for what this device or its interface refuses (exit code 2).
    fn refused(&self, setting: PortSetting, detail: String) -> DpdkError {
        DpdkError::PortRefused { port: self.info.id, name: self.info.name.clone(), setting, detail }
    }
}

impl Drop for Port<'_> {
    fn drop(&mut self) {
        // SAFETY: every queue handle borrows the port, so no worker uses it any more. Stop
        // and close flush what the driver buffered (the pcap driver closes its output file);
        // their errors leave nothing to undo.
        unsafe {
            dpdk_sys::rte_eth_dev_stop(self.info.id);
            dpdk_sys::rte_eth_dev_close(self.info.id);
        }
    }
}

fn find_port(name: &str) -> Result<u16, DpdkError> {
    let c_name = CString::new(name).map_err(|_| DpdkError::InvalidArgument {
        what: "port name",
        detail: format!("{name:?} contains a NUL byte"),
    })?;
    let mut id: u16 = 0;
    // SAFETY: valid C string and out-parameter.
    let ret = unsafe { dpdk_sys::rte_eth_dev_get_port_by_name(c_name.as_ptr(), &mut id) };
    if ret == 0 {
        return Ok(id);
    }
    Err(DpdkError::PortNotFound { name: name.to_owned(), available: port_names() })
}

/// Names of every probed port, for error messages.
fn port_names() -> Vec<String> {
    let mut names = Vec::new();
    for id in 0..dpdk_sys::RTE_MAX_ETHPORTS as u16 {
        let mut buf = [0 as c_char; dpdk_sys::RTE_ETH_NAME_MAX_LEN as usize];
        // SAFETY: `buf` has RTE_ETH_NAME_MAX_LEN bytes as the API requires.
        if unsafe { dpdk_sys::rte_eth_dev_get_name_by_port(id, buf.as_mut_ptr()) } == 0 {
            // SAFETY: on success DPDK wrote a NUL-terminated name into `buf`.
            names.push(unsafe { c_str_or_empty(buf.as_ptr()) });
        }
    }
    names
}

fn pool_data_room(pool: &Mempool<'_>) -> u32 {
    // SAFETY: the pool is a pktmbuf pool (created by rte_pktmbuf_pool_create).
    let room = unsafe { dpdk_sys::rte_pktmbuf_data_room_size(pool.as_ptr()) };
    u32::from(room).saturating_sub(dpdk_sys::RTE_PKTMBUF_HEADROOM)
}

/// # Safety
/// `ptr` is null or a valid NUL-terminated string.
unsafe fn c_str_or_empty(ptr: *const c_char) -> String {
    if ptr.is_null() {
        String::new()
    } else {
        // SAFETY: non-null and NUL-terminated by the caller's contract.
        unsafe { CStr::from_ptr(ptr) }.to_string_lossy().into_owned()
    }
}

/// ENOTSUP on Linux (DPDK returns `-ENOTSUP` for operations a driver lacks).
const fn libc_enotsup() -> i32 {
    95
}
