//! Helpers shared by the integration tests: configurations, a scratch directory, and an
//! independent reading of the written pcaps (etherparse and hand-rolled pcap parsing, not the
//! crate's own parser), so the tests check the generator against code it does not share.

#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use wirelat_dataplane::sim::{DelayModel, LossModel};
use wirelat_trace::generate::GenConfig;
use wirelat_trace::segment::{DelaySpec, SegmentConfig};
use wirelat_trace::traffic::TrafficConfig;

/// A scratch directory removed on drop.
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(name: &str) -> Self {
        let p = std::env::temp_dir().join(format!("wirelat-trace-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Scratch(p)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn segment(delay: DelayModel, loss: LossModel) -> SegmentConfig {
    SegmentConfig { delay: DelaySpec::Iid(delay), loss, fifo: false, reorder: None, paths: vec![] }
}

/// ~15k packets over 1.5 s, Weibull delays (mean 50 µs), 1 % uniform loss.
pub fn small(seed: u64) -> GenConfig {
    let traffic = TrafficConfig {
        packet_rate_pps: 10_000.0,
        duration_ns: 1_500_000_000,
        max_flow_packets: 2_000,
        ..TrafficConfig::default()
    };
    GenConfig::synthetic(
        seed,
        traffic,
        segment(DelayModel::Weibull { shape: 0.7, mean: 50_000.0 }, LossModel::Uniform { rate: 0.01 }),
    )
}

/// A pcap record read by the tests' own parser.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rec {
    pub ts_ns: u64,
    pub data: Vec<u8>,
}

/// Reads a little-endian nanosecond pcap by hand; panics on anything else.
pub fn read_ns_pcap(path: &Path) -> Vec<Rec> {
    let b = std::fs::read(path).unwrap();
    assert_eq!(&b[0..4], &[0x4d, 0x3c, 0xb2, 0xa1], "{}: magic a1b23c4d (ns, LE)", path.display());
    assert_eq!(u32::from_le_bytes(b[20..24].try_into().unwrap()), 1, "link type Ethernet");
    let mut off = 24;
    let mut out = Vec::new();
    while off < b.len() {
        let h = &b[off..off + 16];
        let sec = u64::from(u32::from_le_bytes(h[0..4].try_into().unwrap()));
        let nsec = u64::from(u32::from_le_bytes(h[4..8].try_into().unwrap()));
        let incl = u32::from_le_bytes(h[8..12].try_into().unwrap()) as usize;
        let orig = u32::from_le_bytes(h[12..16].try_into().unwrap()) as usize;
        assert!(nsec < 1_000_000_000);
        assert_eq!(incl, orig);
        out.push(Rec { ts_ns: sec * 1_000_000_000 + nsec, data: b[off + 16..off + 16 + incl].to_vec() });
        off += 16 + incl;
    }
    assert_eq!(off, b.len());
    out
}

/// The four pcaps of a pair directory, in the order a0, a1, b0, b1.
pub fn read_pair(dir: &Path) -> [Vec<Rec>; 4] {
    ["a_port0", "a_port1", "b_port0", "b_port1"].map(|n| read_ns_pcap(&dir.join(format!("{n}.pcap"))))
}

/// Bytes that survive a router (independent of the crate's `parse`): the IP packet up to its
/// length with TOS/traffic class, TTL/hop limit and IPv4 checksum zeroed. None for non-IP.
pub fn identity(frame: &[u8]) -> Option<Vec<u8>> {
    let p = etherparse::SlicedPacket::from_ethernet(frame).ok()?;
    match p.net? {
        etherparse::NetSlice::Ipv4(ip) => {
            let h = ip.header();
            if h.is_fragmenting_payload() {
                return None;
            }
            let len = usize::from(h.total_len());
            let mut v = frame[14..14 + len].to_vec();
            v[1] = 0;
            v[8] = 0;
            v[10] = 0;
            v[11] = 0;
            Some(v)
        }
        etherparse::NetSlice::Ipv6(ip) => {
            let len = 40 + usize::from(ip.header().payload_length());
            let mut v = frame[14..14 + len].to_vec();
            v[0] &= 0xf0;
            v[1] &= 0x0f;
            v[7] = 0;
            Some(v)
        }
        _ => None,
    }
}

/// The directional 5-tuple as text (independent of `FlowKey`).
pub fn flow_text(frame: &[u8]) -> Option<String> {
    let p = etherparse::SlicedPacket::from_ethernet(frame).ok()?;
    let (src, dst, proto) = match p.net? {
        etherparse::NetSlice::Ipv4(ip) => (
            ip.header().source_addr().to_string(),
            ip.header().destination_addr().to_string(),
            ip.header().protocol().0,
        ),
        etherparse::NetSlice::Ipv6(ip) => (
            ip.header().source_addr().to_string(),
            ip.header().destination_addr().to_string(),
            ip.header().next_header().0,
        ),
        _ => return None,
    };
    let (sp, dp) = match p.transport {
        Some(etherparse::TransportSlice::Tcp(t)) => (t.source_port(), t.destination_port()),
        Some(etherparse::TransportSlice::Udp(u)) => (u.source_port(), u.destination_port()),
        _ => (0, 0),
    };
    Some(format!("{src} {dst} {sp} {dp} {proto}"))
}

/// Exact count, mean and population std-dev from integer sums.
#[derive(Clone, Copy, Debug, Default)]
pub struct Exact {
    pub n: i128,
    pub sum: i128,
    pub sumsq: i128,
}

impl Exact {
    pub fn push(&mut self, x: i64) {
        self.n += 1;
        self.sum += i128::from(x);
        self.sumsq += i128::from(x) * i128::from(x);
    }
    pub fn mean(&self) -> f64 {
        if self.n == 0 { 0.0 } else { self.sum as f64 / self.n as f64 }
    }
    pub fn sd(&self) -> f64 {
        if self.n == 0 {
            return 0.0;
        }
        let num = self.n * self.sumsq - self.sum * self.sum;
        (num as f64 / (self.n * self.n) as f64).sqrt()
    }
}

/// For one direction: the upstream packets (in file order) with their identity and the
/// downstream timestamp of the matching copy, if any. Panics on a duplicate identity.
pub fn matched(up: &[Rec], down: &[Rec]) -> Vec<(u64, Option<u64>, Vec<u8>)> {
    let mut index: HashMap<Vec<u8>, u64> = HashMap::new();
    for r in down {
        if let Some(id) = identity(&r.data) {
            assert!(index.insert(id, r.ts_ns).is_none(), "duplicate identity downstream");
        }
    }
    let mut out = Vec::new();
    for r in up {
        if let Some(id) = identity(&r.data) {
            let d = index.remove(&id);
            out.push((r.ts_ns, d, r.data.clone()));
        }
    }
    assert!(index.is_empty(), "{} downstream packets without an upstream copy", index.len());
    out
}
