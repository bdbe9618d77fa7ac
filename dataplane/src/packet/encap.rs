//! Encapsulations between the Ethernet header and the measured IP packet: 802.1Q/802.1ad
//! tags, MPLS label stacks (with or without an Ethernet pseudowire), PPPoE sessions, GRE,
//! VXLAN, GTP-U and IP-in-IP, in any order and any stack, up to a depth limit.
//!
//! The packet layer measures the **innermost** IPv4/IPv6 packet: its flow key, identity and
//! exchange are what a point outside the tunnel computes for the same packet, so a point before
//! a tunnel ingress and one after its egress pair. What the walk keeps of the layers it skips
//! is one [`Encap`]: the identifier of the innermost layer that carries one (VLAN id, MPLS
//! label, PPPoE session, GRE key, VXLAN VNI, GTP-U TEID), for per-tenant subsets.
//!
//! Which layers are walked is [`EncapConfig`] (`[packet.encap]`). Layer-2 encapsulations
//! (tags, MPLS, PPPoE) are on by default: before this walk existed a tagged frame was measured
//! the same way and MPLS/PPPoE frames were skipped, so turning them on changes no packet's
//! identity. The IP tunnels (GRE, VXLAN, GTP-U, IP-in-IP) are off by default: with one on, a
//! tunnelled packet is measured as its inner packet instead of its outer one, which changes its
//! identity, so their settings are part of [`super::PacketConfig::identity_fingerprint`].
//!
//! No allocation, no panic, every read checked; each way a stack can be malformed has its own
//! [`SkipReason`].

mod walk;

pub use walk::{Inner, locate};

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Most UDP ports per tunnel kind the walk compares per UDP packet.
pub const MAX_TUNNEL_PORTS: usize = 4;

/// Largest accepted [`EncapConfig::max_depth`].
pub const MAX_DEPTH: u8 = 16;

/// The IANA UDP port of VXLAN (RFC 7348).
pub const VXLAN_PORT: u16 = 4789;

/// The UDP port of GTP-U (3GPP TS 29.281).
pub const GTPU_PORT: u16 = 2152;

/// Which encapsulations the packet layer walks through (TOML table `[packet.encap]`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EncapConfig {
    /// 802.1Q / 802.1ad / 0x9100 VLAN tags. Off: a tagged frame is an unknown ethertype.
    pub vlan: bool,
    /// MPLS label stacks (ethertypes 0x8847, 0x8848): after the bottom label, IPv4 or IPv6 by
    /// the version nibble.
    pub mpls: bool,
    /// After the bottom MPLS label, a first nibble of 0 is a pseudowire control word (RFC 4385)
    /// followed by an Ethernet frame (RFC 4448). Off: such a payload is skipped (`mpls`).
    pub mpls_control_word: bool,
    /// PPPoE session frames (ethertype 0x8864) carrying PPP IPv4 or IPv6.
    pub pppoe: bool,
    /// GRE (IP protocol 47, version 0) carrying IPv4, IPv6, MPLS or Ethernet (0x6558).
    pub gre: bool,
    /// VXLAN (RFC 7348) on the UDP destination ports [`Self::vxlan_ports`].
    pub vxlan: bool,
    /// UDP destination ports that carry VXLAN (1 to [`MAX_TUNNEL_PORTS`]).
    pub vxlan_ports: Vec<u16>,
    /// GTP-U G-PDUs (3GPP TS 29.281) on the UDP destination ports [`Self::gtpu_ports`].
    pub gtpu: bool,
    /// UDP destination ports that carry GTP-U (1 to [`MAX_TUNNEL_PORTS`]).
    pub gtpu_ports: Vec<u16>,
    /// IPv4/IPv6 inside IPv4/IPv6 (IP protocols 4 and 41).
    pub ip_in_ip: bool,
    /// Most encapsulation layers walked before the measured packet (each VLAN tag, MPLS label
    /// and PPPoE header counts one, and so does each IP tunnel: its outer IP header with the
    /// GRE, UDP + VXLAN or UDP + GTP-U header); deeper stacks are skipped
    /// (`encap_too_deep`). 1 to [`MAX_DEPTH`].
    pub max_depth: u8,
}

impl Default for EncapConfig {
    fn default() -> Self {
        Self {
            vlan: true,
            mpls: true,
            mpls_control_word: true,
            pppoe: true,
            gre: false,
            vxlan: false,
            vxlan_ports: vec![VXLAN_PORT],
            gtpu: false,
            gtpu_ports: vec![GTPU_PORT],
            ip_in_ip: false,
            max_depth: 8,
        }
    }
}

impl EncapConfig {
    /// True when a UDP datagram to `port` is a tunnel the walk opens. The fast paths ask this
    /// per UDP packet, so it costs one load and branch while VXLAN and GTP-U are off.
    #[inline(always)]
    pub(crate) fn is_tunnel_port(&self, port: u16) -> bool {
        (self.vxlan && self.is_vxlan_port(port)) || (self.gtpu && self.is_gtpu_port(port))
    }

    #[inline(always)]
    pub(crate) fn is_vxlan_port(&self, port: u16) -> bool {
        self.vxlan_ports.iter().take(MAX_TUNNEL_PORTS).any(|p| *p == port)
    }

    #[inline(always)]
    pub(crate) fn is_gtpu_port(&self, port: u16) -> bool {
        self.gtpu_ports.iter().take(MAX_TUNNEL_PORTS).any(|p| *p == port)
    }

    /// True when some IP tunnel is opened, i.e. when some packet's identity differs from what a
    /// point without the walk computes.
    pub(crate) fn opens_tunnels(&self) -> bool {
        self.gre || self.vxlan || self.gtpu || self.ip_in_ip
    }

    /// The bytes folded into the identity fingerprint: which tunnels are opened, on which
    /// ports, and the depth limit (which decides whether a deep tunnel stack is measured at
    /// all, and so which packets two points both measure).
    pub(crate) fn fingerprint_bytes(&self) -> Vec<u8> {
        let mut b =
            vec![u8::from(self.gre), u8::from(self.vxlan), u8::from(self.gtpu), u8::from(self.ip_in_ip)];
        b.push(self.max_depth);
        for (on, ports) in [(self.vxlan, &self.vxlan_ports), (self.gtpu, &self.gtpu_ports)] {
            let used: Vec<u16> =
                if on { ports.iter().take(MAX_TUNNEL_PORTS).copied().collect() } else { vec![] };
            b.push(used.len() as u8);
            for p in used {
                b.extend_from_slice(&p.to_le_bytes());
            }
        }
        b
    }

    /// Checks ranges; `Err` names the field and says why.
    pub(crate) fn validate(&self) -> Result<(), (&'static str, String)> {
        if self.max_depth == 0 || self.max_depth > MAX_DEPTH {
            return Err(("encap.max_depth", format!("{} is not between 1 and {MAX_DEPTH}", self.max_depth)));
        }
        for (field, on, ports) in [
            ("encap.vxlan_ports", self.vxlan, &self.vxlan_ports),
            ("encap.gtpu_ports", self.gtpu, &self.gtpu_ports),
        ] {
            if on && ports.is_empty() {
                return Err((field, "the tunnel is on but no port is given".into()));
            }
            if ports.len() > MAX_TUNNEL_PORTS {
                return Err((
                    field,
                    format!("{} ports given, at most {MAX_TUNNEL_PORTS} allowed", ports.len()),
                ));
            }
            if ports.contains(&0) {
                return Err((field, "port 0 is not a port".into()));
            }
        }
        Ok(())
    }
}

/// The kind of layer an [`Encap`] identifier comes from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[repr(u8)]
pub enum EncapKind {
    /// No identifying encapsulation.
    #[default]
    None,
    /// A VLAN tag: the 12-bit VLAN id.
    Vlan,
    /// An MPLS stack: the 20-bit bottom label.
    Mpls,
    /// A PPPoE session: the 16-bit session id.
    Pppoe,
    /// GRE with a key: the 32-bit key.
    Gre,
    /// VXLAN: the 24-bit VNI.
    Vxlan,
    /// GTP-U: the 32-bit TEID.
    Gtpu,
}

impl EncapKind {
    const NAMES: [(EncapKind, &'static str); 7] = [
        (EncapKind::None, "none"),
        (EncapKind::Vlan, "vlan"),
        (EncapKind::Mpls, "mpls"),
        (EncapKind::Pppoe, "pppoe"),
        (EncapKind::Gre, "gre"),
        (EncapKind::Vxlan, "vni"),
        (EncapKind::Gtpu, "teid"),
    ];

    fn name(self) -> &'static str {
        Self::NAMES.iter().find(|(k, _)| *k == self).map_or("none", |(_, n)| n)
    }

    /// The kind whose `repr(u8)` discriminant is `b` (how encodings store it).
    pub fn from_u8(b: u8) -> Option<Self> {
        Self::NAMES.iter().map(|(k, _)| *k).find(|k| *k as u8 == b)
    }
}

/// The identifier of the innermost encapsulation that carries one, e.g. `vni:5001`: the VXLAN
/// tenant, the VLAN of a customer, the GTP-U bearer. A layer without an identifier (IP-in-IP,
/// GRE without a key) leaves the one outside it in place. Outside the flow key and the
/// identity: a tag rewritten between two points, or a tagged request and an untagged response,
/// change nothing that pairs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Encap {
    /// The layer kind.
    pub kind: EncapKind,
    /// The identifier inside that layer (0 for [`EncapKind::None`]).
    pub id: u32,
}

impl Encap {
    /// No identifying encapsulation.
    pub const NONE: Encap = Encap { kind: EncapKind::None, id: 0 };

    /// An identifier of `kind`.
    #[inline(always)]
    pub const fn new(kind: EncapKind, id: u32) -> Self {
        Self { kind, id }
    }
}

impl fmt::Display for Encap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            EncapKind::None => f.write_str("none"),
            k => write!(f, "{}:{}", k.name(), self.id),
        }
    }
}

impl FromStr for Encap {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s == "none" {
            return Ok(Encap::NONE);
        }
        let (k, v) = s.split_once(':').ok_or_else(|| {
            format!("encapsulation {s:?} is not \"kind:id\" (vlan, mpls, pppoe, gre, vni, teid)")
        })?;
        let kind = EncapKind::NAMES
            .iter()
            .find(|(_, n)| *n == k && *n != "none")
            .map(|(k, _)| *k)
            .ok_or_else(|| format!("encapsulation {s:?}: unknown kind {k:?}"))?;
        let id: u32 = v.parse().map_err(|e| format!("encapsulation {s:?}: bad id: {e}"))?;
        let max = match kind {
            EncapKind::Vlan => 0x0fff,
            EncapKind::Mpls => 0x000f_ffff,
            EncapKind::Pppoe => 0xffff,
            EncapKind::Vxlan => 0x00ff_ffff,
            _ => u32::MAX,
        };
        if id > max {
            return Err(format!("encapsulation {s:?}: id above {max}"));
        }
        Ok(Encap { kind, id })
    }
}

impl TryFrom<String> for Encap {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}

impl From<Encap> for String {
    fn from(e: Encap) -> String {
        e.to_string()
    }
}

#[cfg(test)]
mod tests;
