//! Per-subset attribution of samples: customer prefixes on the client side, server ports, or
//! the encapsulation identifier (VLAN, VNI, TEID, ...) the response arrived in.
//!
//! The subset of a sample is decided from its **response's** 5-tuple, because that is the
//! packet at hand when the sample is produced: a response travels server → client, so the
//! client (the customer, the requester) is its destination and the server port its source
//! port. Only matched responses are attributed, so the linear scan here costs nothing per
//! ordinary packet. Never allocates after construction.

use super::config::SubsetRule;
use crate::packet::{Encap, FlowKey};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

/// An IPv4 or IPv6 prefix such as `192.0.2.0/24` (host bits must be zero).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct IpPrefix {
    addr: IpAddr,
    len: u8,
}

impl IpPrefix {
    /// A prefix; `None` if `len` exceeds the family's width or host bits are set.
    pub fn new(addr: IpAddr, len: u8) -> Option<Self> {
        let (bits, width) = addr_bits(addr);
        if u32::from(len) > width {
            return None;
        }
        let host = !mask(len, width) & full(width);
        (bits & host == 0).then_some(Self { addr, len })
    }

    /// True when `addr16` (16 bytes, IPv4-mapped for IPv4) of IP version `version` lies inside.
    fn contains(&self, addr16: &[u8; 16], version: u8) -> bool {
        let (bits, width) = addr_bits(self.addr);
        let (is_v4, other) = match self.addr {
            IpAddr::V4(_) => (true, u128::from_be_bytes(*addr16) & 0xffff_ffff),
            IpAddr::V6(_) => (false, u128::from_be_bytes(*addr16)),
        };
        if is_v4 != (version == 4) {
            return false;
        }
        other & mask(self.len, width) == bits
    }

    /// Prefix length in bits.
    pub fn len(&self) -> u8 {
        self.len
    }

    /// True for a zero-length prefix (matches the whole family).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

fn addr_bits(a: IpAddr) -> (u128, u32) {
    match a {
        IpAddr::V4(v4) => (u128::from(u32::from(v4)), 32),
        IpAddr::V6(v6) => (u128::from(v6), 128),
    }
}

fn full(width: u32) -> u128 {
    if width >= 128 { u128::MAX } else { (1u128 << width) - 1 }
}

fn mask(len: u8, width: u32) -> u128 {
    let len = u32::from(len).min(width);
    if len == 0 { 0 } else { full(width) & !(full(width) >> len) }
}

impl fmt::Display for IpPrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

impl FromStr for IpPrefix {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (a, l) = s.split_once('/').ok_or_else(|| format!("prefix {s:?} has no '/length'"))?;
        let addr: IpAddr = a.parse().map_err(|e| format!("prefix {s:?}: bad address: {e}"))?;
        let len: u8 = l.parse().map_err(|e| format!("prefix {s:?}: bad length: {e}"))?;
        Self::new(addr, len).ok_or_else(|| {
            format!("prefix {s:?}: length beyond the address width, or host bits set after /{len}")
        })
    }
}

impl TryFrom<String> for IpPrefix {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}

impl From<IpPrefix> for String {
    fn from(p: IpPrefix) -> String {
        p.to_string()
    }
}

/// Subset index 0 is the "other" bucket; configured subsets are 1..=n in config order.
pub const OTHER_SUBSET: usize = 0;

/// Decides the subset of a response from its flow (built once from the config).
#[derive(Clone, Debug, PartialEq)]
pub struct SubsetMatcher {
    rule: SubsetRule,
}

impl SubsetMatcher {
    /// A matcher for `rule` (already validated).
    pub fn new(rule: &SubsetRule) -> Self {
        Self { rule: rule.clone() }
    }

    /// Number of histogram buckets: configured subsets plus "other".
    pub fn buckets(&self) -> usize {
        self.rule.len() + 1
    }

    /// Bucket of a sample whose response has 5-tuple `response` and arrived in encapsulation
    /// `encap`: the client is its destination and the server port its source port. Longest
    /// prefix wins.
    #[inline]
    pub fn bucket_of_response(&self, response: &FlowKey, encap: Encap) -> usize {
        match &self.rule {
            SubsetRule::None => OTHER_SUBSET,
            SubsetRule::Encap { ids } => ids.iter().position(|e| *e == encap).map_or(OTHER_SUBSET, |i| i + 1),
            SubsetRule::ServerPort { ports } => {
                ports.iter().position(|p| *p == response.src_port).map_or(OTHER_SUBSET, |i| i + 1)
            }
            SubsetRule::ClientPrefix { prefixes } => {
                let mut best = OTHER_SUBSET;
                let mut best_len = 0u8;
                for (i, p) in prefixes.iter().enumerate() {
                    if p.contains(&response.dst_addr, response.ip_version)
                        && (best == OTHER_SUBSET || p.len() > best_len)
                    {
                        best = i + 1;
                        best_len = p.len();
                    }
                }
                best
            }
        }
    }

    /// Human-readable name of bucket `b` for reports.
    pub fn name(&self, b: usize) -> String {
        if b == OTHER_SUBSET {
            return "other".to_string();
        }
        match &self.rule {
            SubsetRule::None => "other".to_string(),
            SubsetRule::ServerPort { ports } => {
                ports.get(b - 1).map_or_else(|| "other".to_string(), |p| format!("server port {p}"))
            }
            SubsetRule::ClientPrefix { prefixes } => {
                prefixes.get(b - 1).map_or_else(|| "other".to_string(), |p| format!("client {p}"))
            }
            SubsetRule::Encap { ids } => {
                ids.get(b - 1).map_or_else(|| "other".to_string(), |e| e.to_string())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resp(server: &str, sport: u16, client: &str, cport: u16) -> FlowKey {
        FlowKey::new(server.parse().unwrap(), client.parse().unwrap(), sport, cport, 6)
    }

    #[test]
    fn prefixes_parse_and_refuse_host_bits() {
        assert_eq!("10.0.0.0/8".parse::<IpPrefix>().unwrap().to_string(), "10.0.0.0/8");
        assert!("10.1.0.0/8".parse::<IpPrefix>().is_err());
        assert!("10.0.0.0/33".parse::<IpPrefix>().is_err());
        assert!("2001:db8::/129".parse::<IpPrefix>().is_err());
        assert!("2001:db8::".parse::<IpPrefix>().is_err());
        assert!("0.0.0.0/0".parse::<IpPrefix>().is_ok());
        let j = serde_json::to_string(&"2001:db8::/32".parse::<IpPrefix>().unwrap()).unwrap();
        assert_eq!(j, "\"2001:db8::/32\"");
    }

    #[test]
    fn client_side_is_the_response_destination_and_longest_prefix_wins() {
        let rule = SubsetRule::ClientPrefix {
            prefixes: vec![
                "10.0.0.0/8".parse().unwrap(),
                "10.1.0.0/16".parse().unwrap(),
                "2001:db8::/32".parse().unwrap(),
            ],
        };
        let m = SubsetMatcher::new(&rule);
        assert_eq!(m.buckets(), 4);
        assert_eq!(m.bucket_of_response(&resp("192.0.2.1", 443, "10.2.3.4", 5000), Encap::NONE), 1);
        assert_eq!(m.bucket_of_response(&resp("192.0.2.1", 443, "10.1.3.4", 5000), Encap::NONE), 2);
        // The server being inside a customer prefix does not matter: only the client side.
        assert_eq!(
            m.bucket_of_response(&resp("10.1.3.4", 443, "192.0.2.1", 5000), Encap::NONE),
            OTHER_SUBSET
        );
        assert_eq!(m.bucket_of_response(&resp("2001:db9::1", 53, "2001:db8::5", 5000), Encap::NONE), 3);
        // An IPv4 prefix never matches an IPv6 client that merely shares bits.
        assert_eq!(
            m.bucket_of_response(&resp("2001:db9::1", 53, "::a01:304", 5000), Encap::NONE),
            OTHER_SUBSET
        );
        assert_eq!(m.name(2), "client 10.1.0.0/16");
        assert_eq!(m.name(0), "other");
    }

    #[test]
    fn server_port_is_the_response_source_port() {
        let m = SubsetMatcher::new(&SubsetRule::ServerPort { ports: vec![53, 443] });
        assert_eq!(m.bucket_of_response(&resp("192.0.2.1", 443, "10.0.0.1", 53), Encap::NONE), 2);
        assert_eq!(m.bucket_of_response(&resp("192.0.2.1", 80, "10.0.0.1", 53), Encap::NONE), OTHER_SUBSET);
        assert_eq!(m.name(1), "server port 53");
    }

    #[test]
    fn encapsulation_ids() {
        let ids = vec!["vlan:10".parse().unwrap(), "vni:5001".parse().unwrap()];
        let m = SubsetMatcher::new(&SubsetRule::Encap { ids });
        let r = resp("192.0.2.1", 443, "10.0.0.1", 5000);
        let e = |s: &str| s.parse::<Encap>().unwrap();
        assert_eq!(m.bucket_of_response(&r, e("vni:5001")), 2);
        assert_eq!(m.bucket_of_response(&r, e("vlan:10")), 1);
        // Same number, other kind: not the same tenant.
        assert_eq!(m.bucket_of_response(&r, e("mpls:10")), OTHER_SUBSET);
        assert_eq!(m.bucket_of_response(&r, Encap::NONE), OTHER_SUBSET);
        assert_eq!((m.name(1), m.name(2), m.name(0)), ("vlan:10".into(), "vni:5001".into(), "other".into()));
    }
}
