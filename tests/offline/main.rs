//! `wirelat offline` (also in a build without DPDK): the measurement over pcap files, its JSON
//! lines, its body dumps, exact shard merging with several emulated workers, and shipping
//! through `[ship]` to `wirelat collect`, whose records are scored against the generator's truth.
//!
//! One test binary in four modules: [`measurement`] (epochs, dumps and merged workers over
//! pcaps; bad input), [`shipping`] (points shipping to a collector, waiting for it, or failing
//! to reach it), [`metrics`] (the point's and the collector's metrics endpoints against their
//! logs and records) and [`collectors`] (segments routed over several collectors). Here: the
//! configuration and the generated trace pair they share.

mod collectors;
#[path = "../common/mod.rs"]
mod common;
mod measurement;
mod metrics;
mod shipping;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Child;

use common::*;
use wirelat_dataplane::sim::{DelayModel, LossModel};
use wirelat_dataplane::synopsis::Synopsis;
use wirelat_dataplane::synopsis::lda::{Lda, LdaConfig};
use wirelat_trace::generate::{GenConfig, generate};
use wirelat_trace::segment::{DelaySpec, SegmentConfig};
use wirelat_trace::topology::{Point, Tap};
use wirelat_trace::traffic::TrafficConfig;

const CONFIG: &str = r#"
[point]
id = 4
[segments]
forward = 40
reverse = 41
[epochs]
length_ms = 100
[synopses.fridge]
[synopses.lda]
banks = [{ rows = 256, p = 1.0 }]
seed = 9
[synopses.rda]
binding = { mode = "online", buckets_per_bank = 256 }
cache_capacity = 65536
"#;

/// A generated two-point trace pair (4 pcaps and truth.json) in `dir`: 500 ms of synthetic
/// traffic at 6000 packets/s, a constant 30 µs segment delay, no loss. Returns A's two pcaps.
fn trace(dir: &Path) -> [PathBuf; 2] {
    let traffic =
        TrafficConfig { packet_rate_pps: 6_000.0, duration_ns: 500_000_000, ..TrafficConfig::default() };
    let seg = SegmentConfig {
        delay: DelaySpec::Iid(DelayModel::Constant { delay: 30_000.0 }),
        loss: LossModel::None,
        fifo: false,
        reorder: None,
        paths: vec![],
    };
    generate(&GenConfig::synthetic(3, traffic, seg))
        .expect("generate")
        .write_dir(dir)
        .expect("write the pair");
    [0, 1].map(|port| dir.join(format!("{}.pcap", Tap { point: Point::A, port }.name())))
}
