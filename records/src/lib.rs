//! The JSON-lines records of a run: what the collector (`wirelat-control`'s peer) writes and the
//! accuracy scorer (`wirelat-trace`) reads. This crate is the one definition of that schema, on
//! its own so that the producer and the reader depend on it and not on each other.
//!
//! # Schema (version [`RECORD_VERSION`])
//!
//! One JSON object per line, internally tagged by `"record"`. Lines whose `"record"` is not one
//! of the names below (or that have none) are skipped and counted, so a run may interleave
//! other records (metrics, diagnostics). All times are ns; estimates use the data plane's
//! `Estimate` shape `{"value": f64, "samples": u64, "interval": null | {"level", "low", "high"}}`,
//! `null` where the synopsis gave no estimate.
//!
//! - `{"record": "run", "version": 1}` — optional header; a different version is refused.
//! - `{"record": "segment", "synopsis": "lda"|"rda"|..., "direction": "forward"|"reverse",
//!   "epoch": k, "mean_ns": Estimate|null, "std_dev_ns": Estimate|null}` — one segment
//!   direction's delay in epoch k ([k·E, (k+1)·E) of the upstream point's clock).
//! - `{"record": "flow", "synopsis": "lds"|"colate"|..., "direction": ..., "epoch_first": k0,
//!   "epoch_last": k1, "flow": FlowId, "encap": FlowEncap, "mean_ns": Estimate|null,
//!   "std_dev_ns": Estimate|null}` — one directional flow over epochs k0..=k1. `encap` may be
//!   absent (read as unknown at both points).
//! - `{"record": "fridge_quantiles", "point": "a"|"b", "kind": "tcp_handshake"|"dns",
//!   "epoch_first": k0, "epoch_last": k1, "quantiles": [{"q": 0.5, "delay_ns": 1.2e6}, ...]}` —
//!   the fridge's delay distribution at one point over the samples whose response fell in epochs
//!   k0..=k1.
//!
//! `FlowId` = `{"src": "192.0.2.1", "dst": "198.51.100.7", "src_port": 1234, "dst_port": 80,
//! "protocol": 6}` (ports 0 for protocols without ports).
//!
//! `FlowEncap` = `{"upstream": "none"|"vlan:10"|"vni:5001"|...|null, "downstream": ...}`: the
//! encapsulation the flow's packets arrived in at the segment's upstream and downstream point
//! (`packet::Encap`'s "kind:id" form; `null` where that point did not log the flow). A flow
//! attribute, not part of the flow's identity: the same flow may be plain at one point and
//! inside a tunnel at the other.

#![forbid(unsafe_code)]

use serde::{Deserialize, Serialize};
use std::net::IpAddr;
pub use wirelat_dataplane::direction::Direction;
use wirelat_dataplane::packet::{Encap, ExchangeKind, FlowKey};
use wirelat_dataplane::synopsis::SynopsisKind;
use wirelat_dataplane::synopsis::estimate::Estimate;

/// The record schema version this crate reads and writes.
pub const RECORD_VERSION: u32 = 1;

/// A directional 5-tuple in readable JSON form.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct FlowId {
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// Source port (0 without ports).
    pub src_port: u16,
    /// Destination port (0 without ports).
    pub dst_port: u16,
    /// IP protocol number.
    pub protocol: u8,
}

impl From<FlowKey> for FlowId {
    fn from(k: FlowKey) -> Self {
        FlowId {
            src: k.src_ip(),
            dst: k.dst_ip(),
            src_port: k.src_port,
            dst_port: k.dst_port,
            protocol: k.protocol,
        }
    }
}

impl FlowId {
    /// The data plane's key for this flow.
    pub fn key(&self) -> FlowKey {
        FlowKey::new(self.src, self.dst, self.src_port, self.dst_port, self.protocol)
    }
}

/// The encapsulation a flow arrived in at each point of its segment (see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FlowEncap {
    /// At the upstream point; `None` where its flow log does not list the flow.
    pub upstream: Option<Encap>,
    /// At the downstream point; `None` where its flow log does not list the flow.
    pub downstream: Option<Encap>,
}

/// A segment direction's delay in one epoch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SegmentRecord {
    /// Which synopsis estimated it.
    pub synopsis: SynopsisKind,
    /// Segment direction.
    pub direction: Direction,
    /// Epoch k.
    pub epoch: u64,
    /// Mean delay estimate.
    pub mean_ns: Option<Estimate>,
    /// Std-dev estimate.
    pub std_dev_ns: Option<Estimate>,
}

/// One flow's delay over a range of epochs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FlowRecord {
    /// Which synopsis estimated it.
    pub synopsis: SynopsisKind,
    /// Segment direction the flow's packets take.
    pub direction: Direction,
    /// First epoch covered.
    pub epoch_first: u64,
    /// Last epoch covered (inclusive).
    pub epoch_last: u64,
    /// The directional flow.
    pub flow: FlowId,
    /// Its encapsulation at each point (a flow attribute; unknown when absent).
    #[serde(default)]
    pub encap: FlowEncap,
    /// Mean delay estimate.
    pub mean_ns: Option<Estimate>,
    /// Std-dev estimate.
    pub std_dev_ns: Option<Estimate>,
}

/// One estimated quantile of a delay distribution.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct QuantilePoint {
    /// Probability in (0, 1].
    pub q: f64,
    /// The delay at that quantile, ns.
    pub delay_ns: f64,
}

/// The fridge's distribution at one point.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FridgeRecord {
    /// The point.
    pub point: Point,
    /// Exchange kind.
    pub kind: ExchangeKind,
    /// First epoch of the responses covered.
    pub epoch_first: u64,
    /// Last epoch (inclusive).
    pub epoch_last: u64,
    /// Estimated quantiles.
    pub quantiles: Vec<QuantilePoint>,
}

/// A record the scorer understands.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "record", rename_all = "snake_case")]
pub enum Record {
    /// Header with the schema version.
    Run {
        /// Must equal [`RECORD_VERSION`].
        version: u32,
    },
    /// Segment delay per epoch.
    Segment(SegmentRecord),
    /// Per-flow delay.
    Flow(FlowRecord),
    /// Fridge quantiles.
    FridgeQuantiles(FridgeRecord),
}

/// An appliance of the two-point deployment the records describe.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Point {
    /// The upstream appliance (client side).
    A,
    /// The downstream appliance (server side).
    B,
}

impl Point {
    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Point::A => "a",
            Point::B => "b",
        }
    }
}

/// Why record lines could not be read.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// A line is not JSON, or claims a record name without its shape.
    #[error("{context}: {source}")]
    Json {
        /// Where (source label and line).
        context: String,
        /// The underlying error.
        source: serde_json::Error,
    },
    /// A `run` header of another schema version.
    #[error("invalid configuration: {0}")]
    Version(String),
}

/// The result of reading records.
pub type Result<T> = std::result::Result<T, RecordError>;

const KNOWN: [&str; 4] = ["run", "segment", "flow", "fridge_quantiles"];

/// Records parsed from JSON lines, and how many lines were skipped as not ours.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Parsed {
    /// The records, in input order.
    pub records: Vec<Record>,
    /// Non-empty lines that are not records of this schema.
    pub skipped: usize,
}

/// Parses JSON lines (`label` names the source in errors). A line that claims a known record
/// name but does not match its shape is an error with its line number; so is invalid JSON.
pub fn parse_lines(text: &str, label: &str) -> Result<Parsed> {
    let mut out = Parsed::default();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let ctx = || format!("{label}:{}", i + 1);
        let v: serde_json::Value =
            serde_json::from_str(line).map_err(|e| RecordError::Json { context: ctx(), source: e })?;
        let known = v.get("record").and_then(|r| r.as_str()).is_some_and(|r| KNOWN.contains(&r));
        if !known {
            out.skipped += 1;
            continue;
        }
        let r: Record =
            serde_json::from_value(v).map_err(|e| RecordError::Json { context: ctx(), source: e })?;
        if let Record::Run { version } = r
            && version != RECORD_VERSION
        {
            return Err(RecordError::Version(format!(
                "{}: record schema version {version}, this build reads {RECORD_VERSION}",
                ctx()
            )));
        }
        out.records.push(r);
    }
    Ok(out)
}

/// The JSON line of `r` (no trailing newline).
pub fn to_line(r: &Record) -> String {
    // These types have no maps and serde_json writes non-finite floats as null, so this cannot
    // fail; an empty object is the fallback all the same.
    serde_json::to_string(r).unwrap_or_else(|_| "{}".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_round_trip_and_unknown_lines_are_skipped() {
        let flow =
            FlowId::from(FlowKey::new("192.0.2.1".parse().unwrap(), "192.0.2.9".parse().unwrap(), 1, 2, 6));
        assert_eq!(flow.key().src_ip().to_string(), "192.0.2.1");
        let rs = vec![
            Record::Run { version: RECORD_VERSION },
            Record::Segment(SegmentRecord {
                synopsis: SynopsisKind::Lda,
                direction: Direction::Forward,
                epoch: 7,
                mean_ns: Estimate::new(10.0, 5).ok(),
                std_dev_ns: None,
            }),
            Record::Flow(FlowRecord {
                synopsis: SynopsisKind::Lds,
                direction: Direction::Reverse,
                epoch_first: 1,
                epoch_last: 2,
                flow,
                encap: FlowEncap { upstream: Some(Encap::NONE), downstream: "vni:5001".parse().ok() },
                mean_ns: None,
                std_dev_ns: None,
            }),
            Record::FridgeQuantiles(FridgeRecord {
                point: Point::A,
                kind: ExchangeKind::Dns,
                epoch_first: 0,
                epoch_last: 9,
                quantiles: vec![QuantilePoint { q: 0.5, delay_ns: 3.0 }],
            }),
        ];
        let mut text: String = rs.iter().map(|r| to_line(r) + "\n").collect();
        text.push_str("{\"record\":\"metrics\",\"x\":1}\n\n{\"other\":true}\n");
        let p = parse_lines(&text, "mem").unwrap();
        assert_eq!(p.records, rs);
        assert_eq!(p.skipped, 2);
        assert!(text.contains("\"record\":\"fridge_quantiles\""));
        assert!(text.contains("\"encap\":{\"upstream\":\"none\",\"downstream\":\"vni:5001\"}"), "{text}");
        // A flow record without `encap` (written before it existed) reads as unknown.
        let old =
            to_line(&rs[2]).replace(",\"encap\":{\"upstream\":\"none\",\"downstream\":\"vni:5001\"}", "");
        match &parse_lines(&old, "old").unwrap().records[..] {
            [Record::Flow(f)] => assert_eq!(f.encap, FlowEncap::default()),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn malformed_known_records_and_versions_are_errors() {
        assert!(parse_lines("{\"record\":\"segment\",\"epoch\":\"x\"}", "m").is_err());
        assert!(parse_lines("{\"record\":\"run\",\"version\":99}", "m").is_err());
        assert!(parse_lines("not json", "m").is_err());
    }
}
