//! Frame builder for tests, benches, fuzz seeds and trace generators: Ethernet, VLAN tags,
//! IPv4 (with options) or IPv6 (with extension headers), TCP/UDP/ICMP or any protocol, and a
//! payload, with every length and the IPv4 header checksum filled in.
//!
//! Not used per packet: it allocates. Transport checksums are left at the value given (the
//! packet layer never reads them).

use super::ethernet::ethertype;

pub mod encap;

/// The network layer of a synthetic frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IpSpec {
    /// IPv4.
    V4 {
        /// Source address.
        src: [u8; 4],
        /// Destination address.
        dst: [u8; 4],
        /// TOS byte (DSCP and ECN).
        tos: u8,
        /// Identification.
        ident: u16,
        /// Flags and fragment offset field, as carried (0x4000 = DF).
        flags_frag: u16,
        /// Time to live.
        ttl: u8,
        /// Options, padded by the caller to a multiple of 4 bytes.
        options: Vec<u8>,
    },
    /// IPv6.
    V6 {
        /// Source address.
        src: [u8; 16],
        /// Destination address.
        dst: [u8; 16],
        /// Traffic class (DSCP and ECN).
        traffic_class: u8,
        /// Flow label (20 bits).
        flow_label: u32,
        /// Hop limit.
        hop_limit: u8,
        /// Extension headers in order: (its next-header value, its bytes). The builder
        /// overwrites the first byte of each with the value of what follows.
        ext: Vec<(u8, Vec<u8>)>,
    },
}

/// The transport layer of a synthetic frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum L4Spec {
    /// TCP with options (padded by the caller to a multiple of 4 bytes).
    Tcp {
        /// Source port.
        src_port: u16,
        /// Destination port.
        dst_port: u16,
        /// Sequence number.
        seq: u32,
        /// Acknowledgment number.
        ack: u32,
        /// Flag byte (see [`super::tcp::flags`]).
        flags: u8,
        /// Window.
        window: u16,
        /// Checksum as carried.
        checksum: u16,
        /// Options.
        options: Vec<u8>,
    },
    /// UDP.
    Udp {
        /// Source port.
        src_port: u16,
        /// Destination port.
        dst_port: u16,
        /// Checksum as carried.
        checksum: u16,
    },
    /// ICMP (protocol 1) or ICMPv6 (58), chosen by the IP version.
    Icmp {
        /// Type.
        msg_type: u8,
        /// Code.
        code: u8,
        /// The 4 bytes after the checksum.
        rest: [u8; 4],
    },
    /// Any other protocol: the payload follows the IP header directly.
    Raw {
        /// IP protocol number.
        protocol: u8,
    },
}

/// A whole synthetic frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrameSpec {
    /// Destination MAC.
    pub dst_mac: [u8; 6],
    /// Source MAC.
    pub src_mac: [u8; 6],
    /// VLAN tags, outermost first: (TPID, TCI).
    pub vlan_tags: Vec<(u16, u16)>,
    /// Network layer.
    pub ip: IpSpec,
    /// Transport layer.
    pub l4: L4Spec,
    /// Transport payload.
    pub payload: Vec<u8>,
    /// Pad the frame with zeros to at least this length (60 = Ethernet minimum without FCS).
    pub min_frame_len: usize,
}

impl IpSpec {
    /// An IPv4 header with TTL 64, DF set and identification `ident`.
    pub fn v4(src: [u8; 4], dst: [u8; 4], ident: u16) -> Self {
        IpSpec::V4 { src, dst, tos: 0, ident, flags_frag: 0x4000, ttl: 64, options: Vec::new() }
    }

    /// An IPv6 header with hop limit 64 and no extension headers.
    pub fn v6(src: [u8; 16], dst: [u8; 16]) -> Self {
        IpSpec::V6 { src, dst, traffic_class: 0, flow_label: 0, hop_limit: 64, ext: Vec::new() }
    }
}

impl L4Spec {
    /// A TCP header with the given ports, sequence, acknowledgment and flags.
    pub fn tcp(src_port: u16, dst_port: u16, seq: u32, ack: u32, flags: u8) -> Self {
        L4Spec::Tcp { src_port, dst_port, seq, ack, flags, window: 65535, checksum: 0, options: Vec::new() }
    }

    /// A UDP header with the given ports.
    pub fn udp(src_port: u16, dst_port: u16) -> Self {
        L4Spec::Udp { src_port, dst_port, checksum: 0 }
    }
}

impl FrameSpec {
    /// A frame with fixed MACs, no tags and padding to 60 bytes.
    pub fn new(ip: IpSpec, l4: L4Spec, payload: Vec<u8>) -> Self {
        Self {
            dst_mac: [0x02, 0, 0, 0, 0, 0x02],
            src_mac: [0x02, 0, 0, 0, 0, 0x01],
            vlan_tags: Vec::new(),
            ip,
            l4,
            payload,
            min_frame_len: 60,
        }
    }

    fn protocol(&self) -> u8 {
        match (&self.l4, &self.ip) {
            (L4Spec::Tcp { .. }, _) => 6,
            (L4Spec::Udp { .. }, _) => 17,
            (L4Spec::Icmp { .. }, IpSpec::V4 { .. }) => 1,
            (L4Spec::Icmp { .. }, IpSpec::V6 { .. }) => 58,
            (L4Spec::Raw { protocol }, _) => *protocol,
        }
    }

    fn transport(&self) -> Vec<u8> {
        let mut t = Vec::new();
        match &self.l4 {
            L4Spec::Tcp { src_port, dst_port, seq, ack, flags, window, checksum, options } => {
                t.extend_from_slice(&src_port.to_be_bytes());
                t.extend_from_slice(&dst_port.to_be_bytes());
                t.extend_from_slice(&seq.to_be_bytes());
                t.extend_from_slice(&ack.to_be_bytes());
                let offset = ((20 + options.len()) / 4) as u8;
                t.extend_from_slice(&[offset << 4, *flags]);
                t.extend_from_slice(&window.to_be_bytes());
                t.extend_from_slice(&checksum.to_be_bytes());
                t.extend_from_slice(&[0, 0]);
                t.extend_from_slice(options);
            }
            L4Spec::Udp { src_port, dst_port, checksum } => {
                t.extend_from_slice(&src_port.to_be_bytes());
                t.extend_from_slice(&dst_port.to_be_bytes());
                let len = (8 + self.payload.len()) as u16;
                t.extend_from_slice(&len.to_be_bytes());
                t.extend_from_slice(&checksum.to_be_bytes());
            }
            L4Spec::Icmp { msg_type, code, rest } => {
                t.extend_from_slice(&[*msg_type, *code, 0, 0]);
                t.extend_from_slice(rest);
            }
            L4Spec::Raw { .. } => {}
        }
        t.extend_from_slice(&self.payload);
        t
    }

    /// The frame's bytes.
    pub fn build(&self) -> Vec<u8> {
        let mut f = Vec::with_capacity(128 + self.payload.len());
        f.extend_from_slice(&self.dst_mac);
        f.extend_from_slice(&self.src_mac);
        for (tpid, tci) in &self.vlan_tags {
            f.extend_from_slice(&tpid.to_be_bytes());
            f.extend_from_slice(&tci.to_be_bytes());
        }
        let upper = self.transport();
        let protocol = self.protocol();
        match &self.ip {
            IpSpec::V4 { src, dst, tos, ident, flags_frag, ttl, options } => {
                f.extend_from_slice(&ethertype::IPV4.to_be_bytes());
                let start = f.len();
                let header_len = 20 + options.len();
                let total = (header_len + upper.len()) as u16;
                f.push(0x40 | (header_len / 4) as u8);
                f.push(*tos);
                f.extend_from_slice(&total.to_be_bytes());
                f.extend_from_slice(&ident.to_be_bytes());
                f.extend_from_slice(&flags_frag.to_be_bytes());
                f.extend_from_slice(&[*ttl, protocol, 0, 0]);
                f.extend_from_slice(src);
                f.extend_from_slice(dst);
                f.extend_from_slice(options);
                let sum = internet_checksum(&f[start..]);
                f[start + 10..start + 12].copy_from_slice(&sum.to_be_bytes());
            }
            IpSpec::V6 { src, dst, traffic_class, flow_label, hop_limit, ext } => {
                f.extend_from_slice(&ethertype::IPV6.to_be_bytes());
                let ext_len: usize = ext.iter().map(|(_, b)| b.len()).sum();
                let first = ext.first().map_or(protocol, |(kind, _)| *kind);
                let word = (6u32 << 28) | (u32::from(*traffic_class) << 20) | (flow_label & 0x000f_ffff);
                f.extend_from_slice(&word.to_be_bytes());
                f.extend_from_slice(&((ext_len + upper.len()) as u16).to_be_bytes());
                f.extend_from_slice(&[first, *hop_limit]);
                f.extend_from_slice(src);
                f.extend_from_slice(dst);
                for (i, (_, bytes)) in ext.iter().enumerate() {
                    let next = ext.get(i + 1).map_or(protocol, |(kind, _)| *kind);
                    let at = f.len();
                    f.extend_from_slice(bytes);
                    if let Some(b) = f.get_mut(at) {
                        *b = next;
                    }
                }
            }
        }
        f.extend_from_slice(&upper);
        if f.len() < self.min_frame_len {
            f.resize(self.min_frame_len, 0);
        }
        f
    }
}

/// The 64-byte benchmark mix (`scripts/bench-measure.sh`'s `64` traffic and the pipeline
/// bench): per flow f of `flows`, a TCP SYN client → server, six UDP datagrams on another
/// client port pair, and the server's SYN/ACK; every frame cut or padded to 60 bytes (64 on the
/// wire). In that order, flow after flow.
pub fn syn_udp_mix_64(flows: u32) -> Vec<Vec<u8>> {
    use super::tcp::flags;
    let mut out = Vec::new();
    for f in 0..flows {
        let client = [10, 1, (f >> 8) as u8, f as u8];
        let server = [192, 0, 2, (f % 97) as u8 + 1];
        let sport = 20_000 + (f % 40_000) as u16;
        let syn =
            FrameSpec::new(IpSpec::v4(client, server, 1), L4Spec::tcp(sport, 443, f, 0, flags::SYN), vec![]);
        let synack = FrameSpec::new(
            IpSpec::v4(server, client, 2),
            L4Spec::tcp(443, sport, 7, f.wrapping_add(1), flags::SYN | flags::ACK),
            vec![],
        );
        out.push(syn.build());
        for i in 0..6u32 {
            let d = FrameSpec::new(
                IpSpec::v4(client, server, i as u16),
                L4Spec::udp(sport, 4789),
                (f ^ i).to_le_bytes().repeat(4),
            );
            out.push(d.build());
        }
        out.push(synack.build());
    }
    for frame in &mut out {
        frame.resize(60, 0);
    }
    out
}

/// The RFC 1071 one's-complement checksum of `bytes`.
pub fn internet_checksum(bytes: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    for pair in bytes.chunks(2) {
        let word = match pair {
            [a, b] => u16::from_be_bytes([*a, *b]),
            [a] => u16::from_be_bytes([*a, 0]),
            _ => 0,
        };
        sum += u32::from(word);
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv4_header_checksum_verifies() {
        let f = FrameSpec::new(IpSpec::v4([10, 0, 0, 1], [10, 0, 0, 2], 7), L4Spec::udp(1, 2), vec![1, 2, 3])
            .build();
        assert_eq!(internet_checksum(&f[14..34]), 0);
        assert_eq!(f.len(), 60);
        assert_eq!(&f[16..18], &(20u16 + 8 + 3).to_be_bytes());
    }
}
