//! Wraps a synthetic frame in encapsulations: VLAN tags, MPLS labels (with or without an
//! Ethernet pseudowire), PPPoE, GRE, VXLAN, GTP-U and IP-in-IP, in any stack, for tests,
//! benches, fuzz seeds and trace generators. Allocates; never used per packet.

use super::{FrameSpec, IpSpec, L4Spec};
use crate::packet::encap::{GTPU_PORT, VXLAN_PORT};
use crate::packet::ethernet::{HEADER_LEN, ethertype};

const MPLS: u16 = 0x8847;
const PPPOE_SESSION: u16 = 0x8864;
const TRANSPARENT_ETHERNET: u16 = 0x6558;

/// One encapsulation layer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Layer {
    /// A VLAN tag: TPID (0x8100, 0x88a8, 0x9100) and VLAN id.
    Vlan(u16, u16),
    /// One MPLS label; stacked labels are consecutive `Mpls` layers (outermost first).
    Mpls(u32),
    /// An Ethernet pseudowire over MPLS: bottom label, then a control word if `true`, then
    /// the frame inside with its own Ethernet header.
    MplsPseudowire(u32, bool),
    /// A PPPoE session with this id.
    Pppoe(u16),
    /// GRE over IPv4, with an optional key and sequence number; `true` carries the inner
    /// frame's Ethernet header (transparent Ethernet bridging).
    Gre {
        /// Key (K bit).
        key: Option<u32>,
        /// Sequence number (S bit).
        seq: Option<u32>,
        /// Ethernet inside (0x6558) rather than the IP packet.
        ethernet: bool,
    },
    /// VXLAN over IPv4 UDP to port 4789, with this VNI.
    Vxlan(u32),
    /// GTP-U over IPv4 UDP to port 2152, with this TEID; `true` adds a PDU-session extension
    /// header (as 5G N3 does).
    Gtpu(u32, bool),
    /// The IP packet inside an outer IPv4 header (protocol 4 or 41); `true` for an outer IPv6
    /// header instead.
    IpInIp(bool),
}

/// The outer addresses of the IP tunnels (documentation prefixes).
const OUTER4: ([u8; 4], [u8; 4]) = ([192, 0, 2, 250], [198, 51, 100, 250]);
const OUTER6: ([u8; 16], [u8; 16]) = (
    [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 1],
    [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 2],
);

/// The bytes of an outer IP packet carrying `payload` over `l4`, without its Ethernet header.
fn outer_ip(v6: bool, l4: L4Spec, payload: Vec<u8>) -> (u16, Vec<u8>) {
    let ip = if v6 { IpSpec::v6(OUTER6.0, OUTER6.1) } else { IpSpec::v4(OUTER4.0, OUTER4.1, 0x0b0b) };
    let spec = FrameSpec { min_frame_len: 0, ..FrameSpec::new(ip, l4, payload) };
    let frame = spec.build();
    (if v6 { ethertype::IPV6 } else { ethertype::IPV4 }, frame[HEADER_LEN..].to_vec())
}

/// `inner` (an Ethernet frame as [`FrameSpec::build`] makes it, padding allowed) inside
/// `layers`, outermost first, as a frame padded to 60 bytes. The padding of `inner` is cut
/// off first (by its IP length) so each layer's length fields describe the packet alone.
pub fn encapsulate(inner: &[u8], layers: &[Layer]) -> Vec<u8> {
    let (macs, rest) = inner.split_at(12.min(inner.len()));
    let mut ether = rest.get(..2).map_or(0, |e| u16::from_be_bytes([e[0], e[1]]));
    let mut body = unpadded(ether, rest.get(2..).unwrap_or_default()).to_vec();
    for layer in layers.iter().rev() {
        let eth_frame = |ether: u16, body: &[u8]| -> Vec<u8> {
            let mut f = macs.to_vec();
            f.extend_from_slice(&ether.to_be_bytes());
            f.extend_from_slice(body);
            f
        };
        (ether, body) = match layer {
            Layer::Vlan(tpid, vid) => {
                let mut b = vid.to_be_bytes().to_vec();
                b.extend_from_slice(&ether.to_be_bytes());
                b.extend_from_slice(&body);
                (*tpid, b)
            }
            Layer::Mpls(label) => {
                // Bottom of stack unless the layer inside is MPLS too.
                let bos = u32::from(ether != MPLS);
                let mut b = ((label << 12) | (bos << 8) | 64).to_be_bytes().to_vec();
                b.extend_from_slice(&body);
                (MPLS, b)
            }
            Layer::MplsPseudowire(label, cw) => {
                let mut b = ((label << 12) | (1 << 8) | 64).to_be_bytes().to_vec();
                if *cw {
                    b.extend_from_slice(&[0, 0, 0, 0]);
                }
                b.extend_from_slice(&eth_frame(ether, &body));
                (MPLS, b)
            }
            Layer::Pppoe(session) => {
                let protocol: u16 = if ether == ethertype::IPV6 { 0x0057 } else { 0x0021 };
                let mut b = vec![0x11, 0x00];
                b.extend_from_slice(&session.to_be_bytes());
                b.extend_from_slice(&((body.len() + 2) as u16).to_be_bytes());
                b.extend_from_slice(&protocol.to_be_bytes());
                b.extend_from_slice(&body);
                (PPPOE_SESSION, b)
            }
            Layer::Gre { key, seq, ethernet } => {
                let flags =
                    if key.is_some() { 0x2000u16 } else { 0 } | if seq.is_some() { 0x1000 } else { 0 };
                let proto = if *ethernet { TRANSPARENT_ETHERNET } else { ether };
                let mut g = flags.to_be_bytes().to_vec();
                g.extend_from_slice(&proto.to_be_bytes());
                for w in [key, seq].into_iter().flatten() {
                    g.extend_from_slice(&w.to_be_bytes());
                }
                g.extend_from_slice(&if *ethernet { eth_frame(ether, &body) } else { body.clone() });
                outer_ip(false, L4Spec::Raw { protocol: 47 }, g)
            }
            Layer::Vxlan(vni) => {
                let mut v = vec![0x08, 0, 0, 0];
                v.extend_from_slice(&(vni << 8).to_be_bytes());
                v.extend_from_slice(&eth_frame(ether, &body));
                outer_ip(false, L4Spec::udp(49152 + (*vni as u16 & 0x3fff), VXLAN_PORT), v)
            }
            Layer::Gtpu(teid, ext) => {
                let mut tail = Vec::new();
                if *ext {
                    // Sequence/N-PDU/next type 0x85 (PDU session container), one 4-byte unit.
                    tail.extend_from_slice(&[0, 0, 0, 0x85, 1, 0x00, 0x09, 0]);
                }
                tail.extend_from_slice(&body);
                let flags = if *ext { 0x34 } else { 0x30 };
                let mut g = vec![flags, 0xff];
                g.extend_from_slice(&(tail.len() as u16).to_be_bytes());
                g.extend_from_slice(&teid.to_be_bytes());
                g.extend_from_slice(&tail);
                outer_ip(false, L4Spec::udp(GTPU_PORT, GTPU_PORT), g)
            }
            Layer::IpInIp(v6) => {
                let protocol = if ether == ethertype::IPV6 { 41 } else { 4 };
                outer_ip(*v6, L4Spec::Raw { protocol }, body.clone())
            }
        };
    }
    let mut f = macs.to_vec();
    f.extend_from_slice(&ether.to_be_bytes());
    f.extend_from_slice(&body);
    if f.len() < 60 {
        f.resize(60, 0);
    }
    f
}

/// `body` (what follows an ethertype) without Ethernet padding: cut at the IP length, or at
/// the end of the last VLAN tag's content for a tagged inner frame.
fn unpadded(ether: u16, body: &[u8]) -> &[u8] {
    let len = match ether {
        ethertype::IPV4 => body.get(2..4).map(|l| usize::from(u16::from_be_bytes([l[0], l[1]]))),
        ethertype::IPV6 => body.get(4..6).map(|l| 40 + usize::from(u16::from_be_bytes([l[0], l[1]]))),
        0x8100 | 0x88a8 | 0x9100 => {
            let inner = body.get(2..4).map_or(0, |e| u16::from_be_bytes([e[0], e[1]]));
            body.get(4..).map(|rest| 4 + unpadded(inner, rest).len())
        }
        _ => None,
    };
    body.get(..len.unwrap_or(body.len())).unwrap_or(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layers_wrap_in_order_and_padding_is_cut() {
        let inner =
            FrameSpec::new(IpSpec::v4([10, 0, 0, 1], [10, 0, 0, 2], 1), L4Spec::udp(1, 53), vec![1, 2, 3])
                .build();
        assert_eq!(inner.len(), 60);
        let f = encapsulate(&inner, &[Layer::Vlan(0x88a8, 100), Layer::Vlan(0x8100, 10), Layer::Pppoe(7)]);
        assert_eq!(&f[12..20], &[0x88, 0xa8, 0x00, 100, 0x81, 0x00, 0x00, 10]);
        assert_eq!(&f[20..22], &[0x88, 0x64]);
        // PPPoE length: PPP protocol (2) + IPv4 (20 + 8 + 3).
        assert_eq!(&f[26..28], &33u16.to_be_bytes());
        assert_eq!(f.len(), 22 + 6 + 33);
        let two = encapsulate(&inner, &[Layer::Mpls(100), Layer::Mpls(200)]);
        assert_eq!(&two[14..18], &((100u32 << 12) | 64).to_be_bytes());
        assert_eq!(&two[18..22], &((200u32 << 12) | 0x100 | 64).to_be_bytes());
    }
}
