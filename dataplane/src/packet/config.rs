//! Configuration of the packet layer: the identity seed, the payload prefix hashed into the
//! packet identity, and which request/response classifiers run.
//!
//! Both measurement points of a segment must use the same [`PacketConfig::identity_seed`] and
//! [`PacketConfig::payload_prefix_bytes`], or their identities never match. Validation happens
//! once at start-up; [`super::inspect`] still clamps every value so an unvalidated config
//! cannot make it misbehave.

use super::encap::EncapConfig;
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Largest accepted payload prefix. With it the identity input stays at most 120 bytes, inside
/// xxh3's fast path for inputs of up to 128 bytes (see [`super::identity`]).
pub const MAX_PAYLOAD_PREFIX_BYTES: usize = 64;

/// Default payload prefix: covers RTP's sequence number and timestamp, a QUIC short header with
/// a 20-byte connection id and its packet number, and the first bytes of application data.
pub const DEFAULT_PAYLOAD_PREFIX_BYTES: usize = 32;

/// Default identity seed ("wirelat1" in ASCII). Any value works as long as both points agree.
pub const DEFAULT_IDENTITY_SEED: u64 = 0x7769_7265_6c61_7431;

/// Domain tag of [`PacketConfig::identity_fingerprint`], so it never equals a synopsis's.
const IDENTITY_FINGERPRINT_TAG: &[u8; 8] = b"WLIDENT1";

/// Most DNS ports the classifier checks per packet.
pub const MAX_DNS_PORTS: usize = 8;

/// The packet layer's settings (TOML table `[packet]`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PacketConfig {
    /// Seed of the packet identity, the flow hash and the exchange ids (xxh3). Must be equal at
    /// every point of a segment.
    pub identity_seed: u64,
    /// How many bytes of transport payload go into the packet identity: a multiple of 8 from 0
    /// to [`MAX_PAYLOAD_PREFIX_BYTES`] (multiples of 8 keep every read of the hash aligned with
    /// the stores that built its input; see [`super::identity`]). Shorter payloads are
    /// zero-padded. Must be equal at every point of a segment.
    pub payload_prefix_bytes: usize,
    /// Which request/response classifiers run (for the fridge; a pipeline without one turns
    /// them all off, [`crate::pipeline::Pipeline::new`]).
    pub classify: ClassifierConfig,
    /// Which encapsulations are walked to the measured packet (see [`super::encap`]).
    pub encap: EncapConfig,
    /// Whether measurements carry the flow hash and the packet identity (else both are 0).
    /// Not a setting: never read from or written to a file. A pipeline whose synopses are all
    /// one-point turns it off ([`crate::pipeline::Pipeline::new`]): the fridge pairs by its
    /// exchange ids and reads neither hash, which cost about a third of the packet layer at
    /// 64 B (BENCHMARKS.md, W17 twenty-fifth session).
    #[serde(skip, default = "hashes_on")]
    pub hashes: bool,
}

fn hashes_on() -> bool {
    true
}

impl Default for PacketConfig {
    fn default() -> Self {
        Self {
            identity_seed: DEFAULT_IDENTITY_SEED,
            payload_prefix_bytes: DEFAULT_PAYLOAD_PREFIX_BYTES,
            classify: ClassifierConfig::default(),
            encap: EncapConfig::default(),
            hashes: true,
        }
    }
}

/// Request/response classifiers (TOML table `[packet.classify]`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ClassifierConfig {
    /// TCP SYN -> SYN/ACK.
    pub tcp_handshake: bool,
    /// DNS query -> reply over UDP and TCP.
    pub dns: bool,
    /// TCP data segment -> the ACK that acknowledges exactly its last byte. Off by default:
    /// delayed and cumulative ACKs leave most segments unanswered (fridge.md §6.2: 13 %).
    pub tcp_data: bool,
    /// Server ports that mark DNS traffic (1 to [`MAX_DNS_PORTS`] non-zero ports).
    pub dns_ports: Vec<u16>,
}

impl Default for ClassifierConfig {
    fn default() -> Self {
        Self { tcp_handshake: true, dns: true, tcp_data: false, dns_ports: vec![53] }
    }
}

impl ClassifierConfig {
    /// Every classifier off (the DNS ports kept): what the packet layer runs with when no
    /// synopsis reads the classification.
    pub fn off(&self) -> Self {
        Self { tcp_handshake: false, dns: false, tcp_data: false, dns_ports: self.dns_ports.clone() }
    }

    /// True when `port` is a configured DNS port.
    #[inline(always)]
    pub(crate) fn is_dns_port(&self, port: u16) -> bool {
        self.dns_ports.iter().take(MAX_DNS_PORTS).any(|p| *p == port)
    }
}

/// A packet-layer setting that is out of range.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("packet.{field}: {reason}")]
pub struct PacketConfigError {
    /// The offending field (dotted path inside `[packet]`).
    pub field: &'static str,
    /// What is wrong.
    pub reason: String,
}

impl PacketConfig {
    /// Checks ranges.
    pub fn validate(&self) -> Result<(), PacketConfigError> {
        if self.payload_prefix_bytes > MAX_PAYLOAD_PREFIX_BYTES
            || !self.payload_prefix_bytes.is_multiple_of(8)
        {
            return Err(PacketConfigError {
                field: "payload_prefix_bytes",
                reason: format!(
                    "{} is not a multiple of 8 between 0 and {MAX_PAYLOAD_PREFIX_BYTES}",
                    self.payload_prefix_bytes
                ),
            });
        }
        let ports = &self.classify.dns_ports;
        if self.classify.dns && ports.is_empty() {
            return Err(PacketConfigError {
                field: "classify.dns_ports",
                reason: "the DNS classifier is on but no port is given".into(),
            });
        }
        if ports.len() > MAX_DNS_PORTS {
            return Err(PacketConfigError {
                field: "classify.dns_ports",
                reason: format!("{} ports given, at most {MAX_DNS_PORTS} allowed", ports.len()),
            });
        }
        if ports.contains(&0) {
            return Err(PacketConfigError {
                field: "classify.dns_ports",
                reason: "port 0 is not a port".into(),
            });
        }
        self.encap.validate().map_err(|(field, reason)| PacketConfigError { field, reason })
    }

    /// Fingerprint of what two points of a segment must share for their packet identities and
    /// flow hashes to agree: the identity seed and the payload prefix length actually hashed.
    /// The classifiers are left out: they only decide what the fridge, which pairs packets at
    /// one point, sees. Two-point synopses fold this into the fingerprint the peer checks
    /// (`wirelat_control::synopses`), so points with different packet settings are refused
    /// rather than paired into near-total loss.
    ///
    /// Of `[packet.encap]`, only the IP tunnels (and, with one on, their ports and the depth
    /// limit) are folded in, and only when some tunnel is on: a tunnel opened at one point and
    /// not at the other gives its packets different identities. Tags, MPLS and PPPoE change no
    /// identity (a point that does not walk them skips those frames), so a configuration
    /// without tunnels keeps the fingerprint of the builds before the walk existed, and their
    /// archives and peers stay compatible.
    pub fn identity_fingerprint(&self) -> u64 {
        let mut bytes = Vec::with_capacity(48);
        bytes.extend_from_slice(IDENTITY_FINGERPRINT_TAG);
        bytes.extend_from_slice(&self.identity_seed.to_le_bytes());
        bytes.extend_from_slice(&(self.prefix_len() as u64).to_le_bytes());
        if self.encap.opens_tunnels() {
            bytes.extend_from_slice(&self.encap.fingerprint_bytes());
        }
        xxhash_rust::xxh3::xxh3_64(&bytes)
    }

    /// The payload prefix length actually used: the configured one, clamped to the maximum and
    /// rounded down to a multiple of 8 (what validation demands anyway).
    #[inline(always)]
    pub(crate) fn prefix_len(&self) -> usize {
        self.payload_prefix_bytes.min(MAX_PAYLOAD_PREFIX_BYTES) & !7
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_validate_and_round_trip() {
        let c = PacketConfig::default();
        c.validate().unwrap();
        let json = serde_json::to_string(&c).unwrap();
        assert_eq!(serde_json::from_str::<PacketConfig>(&json).unwrap(), c);
        // Missing fields take their defaults.
        let partial: PacketConfig = serde_json::from_str(r#"{"classify":{"tcp_data":true}}"#).unwrap();
        assert!(partial.classify.tcp_data && partial.classify.dns);
        assert_eq!(partial.identity_seed, DEFAULT_IDENTITY_SEED);
    }

    #[test]
    fn unknown_fields_are_refused() {
        assert!(serde_json::from_str::<PacketConfig>(r#"{"identity_sed":1}"#).is_err());
        assert!(serde_json::from_str::<PacketConfig>(r#"{"classify":{"dsn":true}}"#).is_err());
    }

    #[test]
    fn out_of_range_values_are_refused() {
        let c = PacketConfig { payload_prefix_bytes: 65, ..Default::default() };
        assert_eq!(c.validate().unwrap_err().field, "payload_prefix_bytes");
        assert_eq!(c.prefix_len(), MAX_PAYLOAD_PREFIX_BYTES);
        let c = PacketConfig { payload_prefix_bytes: 20, ..Default::default() };
        assert!(c.validate().unwrap_err().reason.contains("multiple of 8"));
        assert_eq!(c.prefix_len(), 16);
        let mut c = PacketConfig::default();
        c.classify.dns_ports.clear();
        assert_eq!(c.validate().unwrap_err().field, "classify.dns_ports");
        c.classify.dns = false;
        c.validate().unwrap();
        c.classify.dns_ports = vec![53; 9];
        assert!(c.validate().is_err());
        c.classify.dns_ports = vec![53, 0];
        assert!(c.validate().unwrap_err().to_string().contains("port 0"));
        let mut c = PacketConfig::default();
        c.encap.max_depth = 0;
        assert_eq!(c.validate().unwrap_err().field, "encap.max_depth");
        c.encap.max_depth = 17;
        assert_eq!(c.validate().unwrap_err().field, "encap.max_depth");
        c.encap.max_depth = 16;
        c.validate().unwrap();
        c.encap.vxlan = true;
        c.encap.vxlan_ports.clear();
        assert_eq!(c.validate().unwrap_err().field, "encap.vxlan_ports");
        c.encap.vxlan_ports = vec![4789, 0];
        assert!(c.validate().unwrap_err().reason.contains("port 0"));
        c.encap.vxlan_ports = vec![1, 2, 3, 4, 5];
        assert!(c.validate().unwrap_err().reason.contains("at most 4"));
        c.encap.vxlan_ports = vec![4789];
        c.encap.gtpu = true;
        c.encap.gtpu_ports.clear();
        assert_eq!(c.validate().unwrap_err().field, "encap.gtpu_ports");
    }

    /// `identity_fingerprint` of the defaults, fixed when it was introduced (wire version 2).
    const PINNED_DEFAULT_IDENTITY_FINGERPRINT: u64 = 0x72f7_288c_61e8_7d36;

    #[test]
    fn identity_fingerprint_covers_what_two_points_must_share() {
        let a = PacketConfig::default();
        let f = a.identity_fingerprint();
        assert_eq!(f, a.clone().identity_fingerprint());
        assert_ne!(f, PacketConfig { identity_seed: 1, ..a.clone() }.identity_fingerprint());
        assert_ne!(f, PacketConfig { payload_prefix_bytes: 24, ..a.clone() }.identity_fingerprint());
        assert_ne!(
            PacketConfig { payload_prefix_bytes: 0, ..a.clone() }.identity_fingerprint(),
            PacketConfig { payload_prefix_bytes: 8, ..a.clone() }.identity_fingerprint()
        );
        // The classifiers change nothing another point pairs with.
        let mut c = a.clone();
        c.classify.tcp_data = true;
        c.classify.dns_ports = vec![53, 5353];
        assert_eq!(c.identity_fingerprint(), f);
        // Pinned: both points may run different builds, so the value must not drift silently.
        assert_eq!(f, PINNED_DEFAULT_IDENTITY_FINGERPRINT);
        // Layer-2 encapsulations change no identity, so they leave the fingerprint alone...
        let mut l2 = a.clone();
        l2.encap.vlan = false;
        l2.encap.mpls = false;
        l2.encap.pppoe = false;
        l2.encap.max_depth = 3;
        l2.encap.vxlan_ports = vec![8472];
        assert_eq!(l2.identity_fingerprint(), f);
        // ...and every tunnel setting that moves a packet's identity changes it.
        let mut seen = vec![f];
        for change in [
            |c: &mut PacketConfig| c.encap.gre = true,
            |c: &mut PacketConfig| c.encap.vxlan = true,
            |c: &mut PacketConfig| c.encap.gtpu = true,
            |c: &mut PacketConfig| c.encap.ip_in_ip = true,
            |c: &mut PacketConfig| {
                c.encap.vxlan = true;
                c.encap.vxlan_ports = vec![8472];
            },
            |c: &mut PacketConfig| {
                c.encap.gtpu = true;
                c.encap.gtpu_ports = vec![2152, 2153];
            },
            |c: &mut PacketConfig| {
                c.encap.gre = true;
                c.encap.max_depth = 4;
            },
        ] {
            let mut c = a.clone();
            change(&mut c);
            let g = c.identity_fingerprint();
            assert!(!seen.contains(&g), "{:?}", c.encap);
            seen.push(g);
        }
    }

    #[test]
    fn dns_ports_lookup() {
        let c = ClassifierConfig { dns_ports: vec![53, 5353], ..Default::default() };
        assert!(c.is_dns_port(5353) && c.is_dns_port(53) && !c.is_dns_port(80));
    }
}
