//! One `[[port]]` table: the device string, how the EAL is told about it, and what a kernel
//! port (`net_af_packet`, `net_af_xdp`, a live `net_pcap`) derives from it.

use serde::Deserialize;
use toml::Spanned;

use crate::af_packet::{self, AfPacketError, AfPacketRing};
use crate::af_xdp::{self, AfXdpError, AfXdpPort};

/// One `[[port]]` table.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortConfig {
    /// Any DPDK device string: a PCI address (`0000:3b:00.0`, optionally with `,key=value`
    /// device arguments) or a virtual device (`net_pcap0,rx_pcap=in.pcap,tx_pcap=out.pcap`).
    pub device: Spanned<String>,
    /// Receive frames for every MAC address (a bump in the wire must).
    #[serde(default = "yes")]
    pub promiscuous: bool,
    /// Use the NIC's rx timestamp offload when the device advertises it.
    #[serde(default = "yes")]
    pub rx_timestamp: bool,
    /// MTU to apply; clamped to the device's advertised maximum, and refused (the run does not
    /// start) when the device cannot be set to it. For `net_af_packet` it is set on the kernel
    /// interface and sizes the ring frames ([`crate::af_packet`]). Jumbo by default so that
    /// nothing the wire carries is dropped by the appliance.
    #[serde(default = "default_mtu")]
    pub mtu: Spanned<u16>,
    /// Rx descriptors per queue.
    #[serde(default = "default_descriptors")]
    pub rx_descriptors: Spanned<u16>,
    /// Tx descriptors per queue.
    #[serde(default = "default_descriptors")]
    pub tx_descriptors: Spanned<u16>,
}

fn yes() -> bool {
    true
}

fn default_mtu() -> Spanned<u16> {
    Spanned::new(0..0, 9000)
}

fn default_descriptors() -> Spanned<u16> {
    Spanned::new(0..0, 1024)
}

/// How a device string is handed to the EAL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeviceKind {
    /// A PCI device: `-a <device string>`.
    Pci,
    /// A virtual device: `--vdev=<device string>`.
    Virtual,
}

impl PortConfig {
    /// How the EAL must be told about this device.
    pub fn device_kind(&self) -> DeviceKind {
        if is_pci_address(self.device_head()) { DeviceKind::Pci } else { DeviceKind::Virtual }
    }

    /// The ethdev name DPDK gives the device: the part before the first comma, with the PCI
    /// domain added when omitted.
    pub fn device_name(&self) -> String {
        ethdev_name(self.device.get_ref())
    }

    /// The live interface whose kernel receive times the port delivers: DPDK's pcap device
    /// opened on an interface (`iface=`, `rx_iface=` or `rx_iface_in=`); `None` for any other
    /// device (a pcap file, af_packet, a NIC).
    pub fn kernel_timestamp_iface(&self) -> Option<&str> {
        let mut parts = self.device.get_ref().split(',');
        if !parts.next().unwrap_or("").trim().starts_with("net_pcap") {
            return None;
        }
        parts.find_map(|kv| {
            let (k, v) = kv.split_once('=')?;
            matches!(k.trim(), "iface" | "rx_iface" | "rx_iface_in").then(|| v.trim())
        })
    }

    pub(super) fn device_head(&self) -> &str {
        self.device.get_ref().split(',').next().unwrap_or("").trim()
    }

    /// For a `net_af_packet` port: its kernel ring, with the device arguments derived from the
    /// MTU, the rx ring size and `queues` (see [`crate::af_packet`]). `None` for other devices.
    pub fn af_packet_ring(&self, queues: u16) -> Option<Result<AfPacketRing, AfPacketError>> {
        af_packet::is_af_packet(self.device.get_ref()).then(|| {
            af_packet::ring(
                self.device.get_ref(),
                *self.mtu.get_ref(),
                *self.rx_descriptors.get_ref(),
                queues,
            )
        })
    }

    /// For a `net_af_xdp` port: its XDP sockets, with the device arguments derived from
    /// `queues` (see [`crate::af_xdp`]). `None` for other devices.
    pub fn af_xdp_port(&self, queues: u16) -> Option<Result<AfXdpPort, AfXdpError>> {
        af_xdp::is_af_xdp(self.device.get_ref()).then(|| af_xdp::sockets(self.device.get_ref(), queues))
    }

    /// The MTU was written in the configuration (not the default).
    pub fn mtu_is_explicit(&self) -> bool {
        self.mtu.span() != (0..0)
    }

    /// The Linux interface under a kernel-backed port (`net_af_packet` or `net_af_xdp`).
    pub fn kernel_iface(&self, queues: u16) -> Option<String> {
        match (self.af_packet_ring(queues), self.af_xdp_port(queues)) {
            (Some(Ok(ring)), _) => Some(ring.iface),
            (_, Some(Ok(port))) => Some(port.iface),
            _ => None,
        }
    }

    /// The device string handed to the EAL: as written, or completed for kernel ports.
    pub fn eal_device(&self, queues: u16) -> String {
        match (self.af_packet_ring(queues), self.af_xdp_port(queues)) {
            (Some(Ok(ring)), _) => ring.device,
            (_, Some(Ok(port))) => port.device,
            _ => self.device.get_ref().trim().to_owned(),
        }
    }
}

/// The ethdev name DPDK gives a device string: the part before the first comma, with the PCI
/// domain added when omitted (also `wirelat replay`'s streams).
pub fn ethdev_name(device: &str) -> String {
    let head = device.split(',').next().unwrap_or("").trim();
    match is_pci_address(head) {
        true if head.matches(':').count() == 1 => format!("0000:{}", head.to_ascii_lowercase()),
        true => head.to_ascii_lowercase(),
        false => head.to_owned(),
    }
}

/// `DDDD:BB:DD.F` or `BB:DD.F`, hexadecimal.
pub fn is_pci_address(s: &str) -> bool {
    let parts: Vec<&str> = s.split(':').collect();
    let (bus, dev_fn) = match parts.as_slice() {
        [domain, bus, dev_fn] if domain.len() == 4 && is_hex(domain) => (bus, dev_fn),
        [bus, dev_fn] => (bus, dev_fn),
        _ => return false,
    };
    let Some((dev, func)) = dev_fn.split_once('.') else { return false };
    bus.len() == 2 && is_hex(bus) && dev.len() == 2 && is_hex(dev) && func.len() == 1 && is_hex(func)
}

fn is_hex(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_hexdigit())
}
