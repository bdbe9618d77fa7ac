//! Per-flow integer weights (paper §4.1): an operator policy over header fields that both
//! points evaluate identically, so a flow's packets count `w` times in s and n and the flow
//! outweighs the flows it collides with.
//!
//! The policy is compiled once into masks ([`WeightMatcher`]); matching a packet is a few
//! integer compares and never allocates. Never reads anything but the flow key.

use crate::packet::FlowKey;
use crate::synopsis::{ConfigError, SynopsisKind};
use serde::{Deserialize, Serialize};
use std::net::IpAddr;

/// An address prefix such as 10.0.0.0/8.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IpPrefix {
    /// Network address (host bits are ignored).
    pub addr: IpAddr,
    /// Prefix length in bits (≤ 32 for IPv4, ≤ 128 for IPv6).
    pub len: u8,
}

/// An inclusive port range.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortRange {
    /// First port.
    pub first: u16,
    /// Last port (inclusive).
    pub last: u16,
}

/// One rule: every given field must match; the first matching rule sets the weight.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WeightRule {
    /// The weight of matching flows (≥ 1).
    pub weight: u32,
    /// Source prefix.
    #[serde(default)]
    pub src: Option<IpPrefix>,
    /// Destination prefix.
    #[serde(default)]
    pub dst: Option<IpPrefix>,
    /// IP protocol number.
    #[serde(default)]
    pub protocol: Option<u8>,
    /// Source ports.
    #[serde(default)]
    pub src_ports: Option<PortRange>,
    /// Destination ports.
    #[serde(default)]
    pub dst_ports: Option<PortRange>,
}

/// The weight policy: ordered rules plus a default weight.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WeightPolicy {
    /// Weight of flows no rule matches (paper: 1).
    pub default_weight: u32,
    /// Rules, first match wins.
    pub rules: Vec<WeightRule>,
}

impl Default for WeightPolicy {
    fn default() -> Self {
        Self { default_weight: 1, rules: Vec::new() }
    }
}

/// Most rules a policy may hold (each packet may be tested against all of them).
pub const MAX_WEIGHT_RULES: usize = 64;

impl WeightPolicy {
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        let err = |field: String, reason: String| ConfigError::new(SynopsisKind::Lds, field, reason);
        if self.default_weight == 0 {
            return Err(err("weights.default_weight".into(), "must be at least 1".into()));
        }
        if self.rules.len() > MAX_WEIGHT_RULES {
            return Err(err(
                "weights.rules".into(),
                format!("{} rules exceed the limit of {MAX_WEIGHT_RULES}", self.rules.len()),
            ));
        }
        for (i, r) in self.rules.iter().enumerate() {
            if r.weight == 0 {
                return Err(err(format!("weights.rules[{i}].weight"), "must be at least 1".into()));
            }
            for (name, p) in [("src", r.src), ("dst", r.dst)] {
                if let Some(p) = p {
                    let max = if p.addr.is_ipv4() { 32 } else { 128 };
                    if p.len > max {
                        return Err(err(
                            format!("weights.rules[{i}].{name}.len"),
                            format!("{} exceeds {max} for this address family", p.len),
                        ));
                    }
                }
            }
            for (name, pr) in [("src_ports", r.src_ports), ("dst_ports", r.dst_ports)] {
                if let Some(pr) = pr
                    && pr.first > pr.last
                {
                    return Err(err(
                        format!("weights.rules[{i}].{name}"),
                        format!("first {} is after last {}", pr.first, pr.last),
                    ));
                }
            }
        }
        Ok(())
    }
}

/// A prefix as a masked 128-bit compare on the flow key's 16-byte address (also the monitor
/// mode's inside prefixes, `pipeline::split`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PrefixMask {
    version: u8,
    net: u128,
    mask: u128,
}

impl PrefixMask {
    pub(crate) fn new(p: &IpPrefix) -> Self {
        // Flow keys store IPv4 as IPv4-mapped IPv6 (::ffff:a.b.c.d): the first 96 bits are fixed.
        let (version, bits, len) = match p.addr {
            IpAddr::V4(a) => {
                (4, u128::from_be_bytes(a.to_ipv6_mapped().octets()), 96 + u32::from(p.len.min(32)))
            }
            IpAddr::V6(a) => (6, u128::from_be_bytes(a.octets()), u32::from(p.len.min(128))),
        };
        let mask = if len == 0 { 0 } else { u128::MAX << (128 - len) };
        Self { version, net: bits & mask, mask }
    }

    #[inline]
    pub(crate) fn matches(&self, version: u8, addr: &[u8; 16]) -> bool {
        version == self.version && (u128::from_be_bytes(*addr) & self.mask) == self.net
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct CompiledRule {
    weight: u32,
    src: Option<PrefixMask>,
    dst: Option<PrefixMask>,
    protocol: Option<u8>,
    src_ports: Option<(u16, u16)>,
    dst_ports: Option<(u16, u16)>,
}

impl CompiledRule {
    #[inline]
    fn matches(&self, f: &FlowKey) -> bool {
        self.protocol.is_none_or(|p| p == f.protocol)
            && self.src_ports.is_none_or(|(a, b)| (a..=b).contains(&f.src_port))
            && self.dst_ports.is_none_or(|(a, b)| (a..=b).contains(&f.dst_port))
            && self.src.is_none_or(|m| m.matches(f.ip_version, &f.src_addr))
            && self.dst.is_none_or(|m| m.matches(f.ip_version, &f.dst_addr))
    }
}

/// A [`WeightPolicy`] compiled for per-packet use.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WeightMatcher {
    default_weight: u32,
    rules: Vec<CompiledRule>,
}

impl WeightMatcher {
    /// Compiles a (validated) policy.
    pub fn new(policy: &WeightPolicy) -> Self {
        let rules = policy
            .rules
            .iter()
            .map(|r| CompiledRule {
                weight: r.weight.max(1),
                src: r.src.as_ref().map(PrefixMask::new),
                dst: r.dst.as_ref().map(PrefixMask::new),
                protocol: r.protocol,
                src_ports: r.src_ports.map(|p| (p.first, p.last)),
                dst_ports: r.dst_ports.map(|p| (p.first, p.last)),
            })
            .collect();
        Self { default_weight: policy.default_weight.max(1), rules }
    }

    /// True when every flow gets the default weight (no rule to test).
    pub fn is_uniform(&self) -> bool {
        self.rules.is_empty()
    }

    /// The weight of flow `f` (≥ 1).
    #[inline]
    pub fn weight_of(&self, f: &FlowKey) -> u32 {
        for r in &self.rules {
            if r.matches(f) {
                return r.weight;
            }
        }
        self.default_weight
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(src: &str, dst: &str, sp: u16, dp: u16, proto: u8) -> FlowKey {
        FlowKey::new(src.parse().unwrap(), dst.parse().unwrap(), sp, dp, proto)
    }

    #[test]
    fn first_matching_rule_wins() {
        let policy = WeightPolicy {
            default_weight: 1,
            rules: vec![
                WeightRule {
                    weight: 2500,
                    src: None,
                    dst: Some(IpPrefix { addr: "10.1.0.0".parse().unwrap(), len: 16 }),
                    protocol: Some(17),
                    src_ports: None,
                    dst_ports: Some(PortRange { first: 5000, last: 5010 }),
                },
                WeightRule {
                    weight: 25,
                    src: Some(IpPrefix { addr: "2001:db8::".parse().unwrap(), len: 32 }),
                    dst: None,
                    protocol: None,
                    src_ports: None,
                    dst_ports: None,
                },
                WeightRule {
                    weight: 10,
                    src: None,
                    dst: Some(IpPrefix { addr: "10.0.0.0".parse().unwrap(), len: 8 }),
                    protocol: None,
                    src_ports: None,
                    dst_ports: None,
                },
            ],
        };
        policy.validate().unwrap();
        let m = WeightMatcher::new(&policy);
        assert!(!m.is_uniform());
        assert_eq!(m.weight_of(&key("192.0.2.1", "10.1.2.3", 1, 5005, 17)), 2500);
        assert_eq!(m.weight_of(&key("192.0.2.1", "10.1.2.3", 1, 5011, 17)), 10);
        assert_eq!(m.weight_of(&key("192.0.2.1", "10.1.2.3", 1, 5005, 6)), 10);
        assert_eq!(m.weight_of(&key("192.0.2.1", "11.1.2.3", 1, 5005, 17)), 1);
        assert_eq!(m.weight_of(&key("2001:db8::1", "2001:db9::1", 1, 2, 6)), 25);
        assert_eq!(m.weight_of(&key("2001:db9::1", "2001:db8::1", 1, 2, 6)), 1);
        // An IPv4 prefix never matches an IPv6 key and vice versa, even ::ffff:10.x.
        assert_eq!(m.weight_of(&key("::1", "::ffff:10.1.2.3", 1, 5005, 17)), 1);
    }

    #[test]
    fn zero_length_prefix_matches_its_family_only() {
        let m = PrefixMask::new(&IpPrefix { addr: "0.0.0.0".parse().unwrap(), len: 0 });
        let k = key("1.2.3.4", "5.6.7.8", 1, 2, 6);
        assert!(m.matches(4, &k.src_addr));
        assert!(!m.matches(6, &k.src_addr));
    }

    #[test]
    fn invalid_policies_are_refused() {
        let mut p = WeightPolicy { default_weight: 0, rules: vec![] };
        assert_eq!(p.validate().unwrap_err().field, "weights.default_weight");
        p.default_weight = 1;
        p.rules.push(WeightRule {
            weight: 1,
            src: Some(IpPrefix { addr: "1.2.3.4".parse().unwrap(), len: 33 }),
            dst: None,
            protocol: None,
            src_ports: None,
            dst_ports: None,
        });
        assert_eq!(p.validate().unwrap_err().field, "weights.rules[0].src.len");
        p.rules[0].src = None;
        p.rules[0].dst_ports = Some(PortRange { first: 9, last: 8 });
        assert_eq!(p.validate().unwrap_err().field, "weights.rules[0].dst_ports");
        p.rules[0].dst_ports = None;
        p.rules[0].weight = 0;
        assert_eq!(p.validate().unwrap_err().field, "weights.rules[0].weight");
    }
}
