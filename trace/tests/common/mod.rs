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

/// The seed shift the environment variable `var` asks for (default 0, the traces the golden
/// digests hold): `WIRELAT_MATRIX_SEED` for the segment and flow matrices,
/// `WIRELAT_COLATE_MATRIX_SEED` for COLATE's; how their checks are repeated on traces nobody
/// looked at. A value that is not an integer stops the test with a message naming `var`: a
/// typo must not silently rerun the default traces.
pub fn seed_shift(var: &str) -> u64 {
    match std::env::var(var) {
        Err(std::env::VarError::NotPresent) => 0,
        Ok(s) => s.trim().parse().unwrap_or_else(|_| panic!("{var}={s:?}: expected an integer")),
        Err(e) => panic!("{var}: {e}"),
    }
}

/// `WIRELAT_SIZE_FACTOR` (issue 24, W17): the factor every synopsis's table size is multiplied
/// by in the accuracy matrices (`scripts/size-curve.sh` runs them at ¼, 1 and 4). Unset means 1,
/// the sizes the golden digests hold. A value that is not a finite number above 0 stops the
/// test with a message naming the variable: a typo must not silently run the default sizes.
pub fn size_factor() -> f64 {
    match std::env::var("WIRELAT_SIZE_FACTOR") {
        Err(std::env::VarError::NotPresent) => 1.0,
        Ok(s) => match s.trim().parse::<f64>() {
            Ok(f) if f.is_finite() && f > 0.0 => f,
            _ => panic!("WIRELAT_SIZE_FACTOR={s:?}: expected a number above 0 (e.g. 0.25, 1 or 4)"),
        },
        Err(e) => panic!("WIRELAT_SIZE_FACTOR: {e}"),
    }
}

/// `n` × `factor` rounded to the nearest integer, at least `min`: a size the configs accept.
/// Exactly `n` at factor 1 (for any `n ≥ min`), so the default matrices are unchanged.
pub fn scaled(n: u64, factor: f64, min: u64) -> u64 {
    ((n as f64 * factor).round() as u64).max(min)
}

/// `n` × `factor` rounded to the nearest even number, at least 2 (LDA's rows pair into signed
/// buckets, so a bank's rows must be even). Exactly `n` at factor 1 for an even `n`.
pub fn scaled_even(n: u32, factor: f64) -> u32 {
    ((((f64::from(n) * factor) / 2.0).round() as u32) * 2).max(2)
}

/// The checks of a matrix run at some size factor: a failure always fails the test; a check
/// that is an operator-facing guarantee of the default sizing (a coverage target, a decode
/// that the default tables always complete) fails at factor 1 but at another factor is only
/// marked, with its measured value, because smaller tables are allowed to break it.
pub struct Checks {
    pub factor: f64,
    pub failures: Vec<String>,
    pub marks: Vec<String>,
}

impl Checks {
    pub fn new(factor: f64) -> Self {
        Self { factor, failures: Vec::new(), marks: Vec::new() }
    }

    /// A check whose bound comes from the estimator's own numbers or from the scaled size:
    /// it holds at every factor.
    pub fn fail(&mut self, what: String) {
        self.failures.push(what);
    }

    /// A guarantee of the default sizing: fails at factor 1, marked at any other.
    pub fn guarantee(&mut self, what: String) {
        if self.factor == 1.0 {
            self.failures.push(what);
        } else {
            self.marks.push(what);
        }
    }

    /// Prints the marks (size-dependent guarantees broken at this factor), then fails the test
    /// on any failure.
    pub fn finish(&self) {
        for m in &self.marks {
            println!("MARKED at size factor {}: {m}", self.factor);
        }
        assert!(self.failures.is_empty(), "{} failures:\n{}", self.failures.len(), self.failures.join("\n"));
    }
}

/// One machine-readable headline line per synopsis and matrix, which `scripts/size-curve.sh`
/// collects into its table: `SIZE-CURVE|matrix|synopsis|factor|bytes per point|figures…`.
pub fn headline(matrix: &str, synopsis: &str, factor: f64, bytes: u64, figures: &[(&str, String)]) {
    let f: Vec<String> = figures.iter().map(|(k, v)| format!("{k}={v}")).collect();
    println!("SIZE-CURVE|{matrix}|{synopsis}|{factor}|{bytes}|{}", f.join("|"));
}
