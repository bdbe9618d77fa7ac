//! The two ports of `wirelat run`: the checks on their kernel interfaces and replay files
//! before the EAL starts, opening and starting them, the refusals that name a `[[port]]`
//! setting, and one direction of a worker (an rx queue of one port, the tx queue of the other).

use tracing::{info, warn};
use wirelat_control::config::{Config, PortKey};
use wirelat_dataplane::dpdk::{
    self, DpdkError, Eal, Mempool, Port, PortSetting, PortSettings, RxTimestampField,
};
use wirelat_dataplane::worker::{Direction, FrameScreen, Path, PathInfo};

/// A `[[port]]` setting that the device or the machine refuses: the operator's configuration
/// must change, so `wirelat run` exits 2 naming the file, line, column and key
/// ([`wirelat_control::config::Config::port_refusal`]), where a runtime failure exits 1.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct PortRefused {
    /// Index of the `[[port]]` table.
    pub index: usize,
    /// The setting refused.
    pub key: PortKey,
    /// One sentence: what was refused and what to do.
    pub message: String,
}

impl PortRefused {
    /// `error` as a refusal of port `index`'s setting when the device refused one (anything
    /// else is returned as it was).
    fn from_open(index: usize, error: DpdkError) -> anyhow::Error {
        match error {
            DpdkError::PortRefused { setting, .. } => {
                let key = match setting {
                    PortSetting::Mtu => PortKey::Mtu,
                    PortSetting::Queues => PortKey::Queues,
                    PortSetting::Device => PortKey::Device,
                };
                anyhow::Error::new(PortRefused { index, key, message: error.to_string() })
            }
            // A port absent after probing stays a runtime failure: its driver's probe can fail
            // for reasons of the moment (ring memory, a packet-fanout group id another process
            // took), and the ring geometries the kernel refuses are checked when the
            // configuration is loaded (`af_packet::ring`).
            other => other.into(),
        }
    }
}

/// Refuses, before the EAL starts, an af_xdp port whose interface is missing or has too few rx
/// queues for its sockets (the driver's own error is a bare EINVAL), and warns of receive VLAN
/// offload, which hands XDP frames without their tags on NICs that strip them.
fn check_af_xdp_interface(
    index: usize,
    device: &str,
    xdp: &wirelat_control::af_xdp::AfXdpPort,
) -> Result<(), PortRefused> {
    let refused = |message: String| PortRefused { index, key: PortKey::Device, message };
    if dpdk::kernel_iface_index(&xdp.iface).is_none() {
        return Err(refused(format!("{device}: interface `{}` does not exist", xdp.iface)));
    }
    let needed = xdp.start_queue.saturating_add(xdp.queue_count);
    if let Some(have) = dpdk::kernel_iface_rx_queues(&xdp.iface)
        && have < needed
    {
        return Err(refused(format!(
            "{device}: interface `{}` has {have} rx queue(s) but the XDP sockets need queues {}..{} \
             (start_queue + one per worker); give it more (`ethtool -L`, or `numrxqueues` for a \
             veth) or use fewer workers",
            xdp.iface,
            xdp.start_queue,
            needed - 1
        )));
    }
    if dpdk::kernel_iface_rx_vlan_offload(&xdp.iface).unwrap_or(false) {
        warn!(
            iface = %xdp.iface,
            "receive VLAN offload is on: a NIC that strips VLAN tags hands XDP the frame without its \
             tag, and wirelat would forward it untagged; turn it off with `ethtool -K {} rxvlan off` \
             (README, \"On a real host\")",
            xdp.iface
        );
    }
    Ok(())
}

/// Checks, before the EAL starts, what the ports need from the machine: their kernel
/// interfaces (refused when missing or short of queues; warned of offloads that break
/// forwarding) and the pcap files they replay (warned of records cut by the snap length).
pub(super) fn check_interfaces(config: &Config) -> anyhow::Result<()> {
    for (index, port) in config.ports.get_ref().iter().enumerate() {
        if let Some(Ok(ring)) = port.af_packet_ring(config.queues()) {
            if dpdk::kernel_iface_index(&ring.iface).is_none() {
                return Err(PortRefused {
                    index,
                    key: PortKey::Device,
                    message: format!("{}: interface `{}` does not exist", port.device.get_ref(), ring.iface),
                }
                .into());
            }
            if dpdk::kernel_iface_gro(&ring.iface).unwrap_or(false) {
                warn!(
                    iface = %ring.iface,
                    "generic receive offload is on: the kernel merges TCP segments into frames above \
                     the MTU, which the ring cuts and wirelat drops as truncated_dropped; turn it off \
                     with `ethtool -K {} gro off` (README, \"On a real host\")",
                    ring.iface
                );
            }
        }
        if let Some(Ok(xdp)) = port.af_xdp_port(config.queues()) {
            check_af_xdp_interface(index, port.device.get_ref(), &xdp)?;
        }
        for file in crate::pcap_input::rx_pcap_files(port.device.get_ref()) {
            let found = crate::pcap_input::check_replay_file(&file)?;
            if let Some(first) = found.first_cut {
                warn!(
                    file = %file.display(),
                    cut_records = found.cut_records,
                    records = found.records,
                    first_cut_record = first,
                    "records cut by the capture's snap length: DPDK's pcap device forwards each as a \
                     whole frame of its cut length (the parser counts them as skipped_truncated)"
                );
            }
        }
    }
    Ok(())
}

/// Opens and starts the two ports of `config` on `pool`, logging what each device offers.
pub(super) fn open_ports<'eal: 'pool, 'pool>(
    config: &Config,
    eal: &'eal Eal,
    pool: &'pool Mempool<'eal>,
) -> anyhow::Result<Vec<Port<'pool>>> {
    let queues = config.queues();
    let mut ports = Vec::with_capacity(2);
    for port_config in config.ports.get_ref() {
        let ring = port_config.af_packet_ring(queues).transpose()?;
        if let Some(r) = &ring {
            info!(
                device = %r.device,
                iface = %r.iface,
                framesz = r.frame_size,
                blocksz = r.block_size,
                framecnt = r.frame_count,
                rx_cut_at = r.rx_cut_at,
                "af_packet ring"
            );
        }
        let settings = PortSettings {
            rx_queues: queues,
            tx_queues: queues,
            rx_descriptors: *port_config.rx_descriptors.get_ref(),
            tx_descriptors: *port_config.tx_descriptors.get_ref(),
            promiscuous: port_config.promiscuous,
            rx_timestamp: port_config.rx_timestamp,
            mtu: *port_config.mtu.get_ref(),
            rx_cut_at: ring.as_ref().map_or(u32::MAX, |r| r.rx_cut_at),
            kernel_iface: port_config.kernel_iface(queues),
            mtu_explicit: port_config.mtu_is_explicit(),
        };
        if let Some(Ok(xdp)) = port_config.af_xdp_port(queues) {
            info!(
                device = %xdp.device,
                iface = %xdp.iface,
                start_queue = xdp.start_queue,
                queue_count = xdp.queue_count,
                "af_xdp sockets"
            );
        }
        let port = Port::open(eal, &port_config.device_name(), pool, &settings)
            .map_err(|e| PortRefused::from_open(ports.len(), e))?;
        let i = port.info();
        info!(
            port = ports.len(),
            id = i.id,
            name = %i.name,
            driver = %i.driver,
            bus = %i.bus,
            queues = i.rx_queues,
            rx_descriptors = i.rx_descriptors,
            tx_descriptors = i.tx_descriptors,
            symmetric_rss = i.symmetric_rss,
            rx_timestamp_offload = i.rx_timestamp_offload,
            rx_scatter = i.rx_scatter,
            tx_multi_segment = i.tx_multi_segment,
            mtu = i.mtu,
            promiscuous = i.promiscuous,
            rx_cut_at = i.rx_cut_at,
            tx_max_frame = i.tx_max_frame,
            tx_chained_max = i.tx_chained_max,
            "port started"
        );
        if !i.transmits_chained_mbufs() {
            let data_room = u32::from(config.data_room_bytes()).saturating_sub(128);
            warn!(
                port = ports.len(),
                name = %i.name,
                data_room,
                "device cannot transmit chained mbufs: frames longer than the mbuf data room that \
                 arrive chained will be dropped and counted as oversize_dropped; raise [mempool] \
                 data_room_bytes to avoid it"
            );
        }
        if queues > 1 && !i.symmetric_rss {
            warn!(port = ports.len(), name = %i.name, "device has no RSS: flows are not steered symmetrically across queues");
        }
        ports.push(port);
    }
    Ok(ports)
}

/// One direction of worker `queue`: rx queue `queue` of `rx`, tx queue `queue` of `tx`.
pub(super) fn path<'p>(
    direction: Direction,
    queue: u16,
    rx: &'p Port<'_>,
    tx: &'p Port<'_>,
    rx_timestamp: Option<RxTimestampField>,
    monitor: bool,
) -> anyhow::Result<Path<'p>> {
    Ok(Path {
        rx: rx.rx_queue(queue)?,
        tx: tx.tx_queue(queue)?,
        info: PathInfo { direction, queue, rx_timestamp },
        screen: FrameScreen::for_ports(rx.info(), tx.info(), monitor),
    })
}
