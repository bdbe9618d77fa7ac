//! Writes the traffic of `scripts/bench-measure.sh`: realistic frames the packet layer parses,
//! for DPDK's pcap device to replay endlessly (`infinite_rx=1`).
//!
//! - `mixed`: one point's view of a synthetic trace pair (TCP handshakes and data, DNS, UDP,
//!   ICMP, ARP; IPv4 and IPv6; sizes from 60 B to 1514 B), both directions in one file so the
//!   fridge sees requests and responses.
//! - `64`: 64-byte frames only (60 B + FCS on the wire): TCP SYN → SYN/ACK pairs and UDP
//!   datagrams over 4096 flows.
//!
//! ```sh
//! cargo run --release --example bench_pcap -- mixed out.pcap
//! cargo run --release --example bench_pcap -- 64 out.pcap
//! ```

use std::path::Path;

use wirelat_dataplane::packet::synth::syn_udp_mix_64;
use wirelat_dataplane::sim::{DelayModel, LossModel};
use wirelat_trace::generate::{GenConfig, generate};
use wirelat_trace::segment::{DelaySpec, SegmentConfig};
use wirelat_trace::topology::{Point, Tap};
use wirelat_trace::traffic::TrafficConfig;

fn mixed() -> Vec<(u64, Vec<u8>)> {
    let traffic =
        TrafficConfig { packet_rate_pps: 200_000.0, duration_ns: 1_000_000_000, ..TrafficConfig::default() };
    let seg = SegmentConfig {
        delay: DelaySpec::Iid(DelayModel::Weibull { shape: 0.7, mean: 50_000.0 }),
        loss: LossModel::Uniform { rate: 0.001 },
        fifo: false,
        reorder: None,
        paths: vec![],
    };
    let pair = match generate(&GenConfig::synthetic(1, traffic, seg)) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("bench_pcap: {e}");
            std::process::exit(1);
        }
    };
    let mut all: Vec<(u64, Vec<u8>)> = Vec::new();
    for port in 0..2u8 {
        all.extend(pair.capture(Tap { point: Point::A, port }).iter().map(|c| (c.ts_ns, c.frame.clone())));
    }
    all.sort_by_key(|(t, _)| *t);
    all
}

fn small() -> Vec<(u64, Vec<u8>)> {
    let t0: u64 = 1_700_000_000_000_000_000;
    syn_udp_mix_64(4096).into_iter().enumerate().map(|(i, f)| (t0 + 100 * i as u64, f)).collect()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(kind), Some(path)) = (args.get(1), args.get(2)) else {
        eprintln!("usage: bench_pcap mixed|64 OUT.pcap");
        std::process::exit(2);
    };
    let frames = match kind.as_str() {
        "mixed" => mixed(),
        "64" => small(),
        other => {
            eprintln!("bench_pcap: unknown traffic {other} (mixed or 64)");
            std::process::exit(2);
        }
    };
    if let Err(e) =
        wirelat_trace::pcap_io::write_file(Path::new(path), frames.iter().map(|(t, f)| (*t, f.as_slice())))
    {
        eprintln!("bench_pcap: {e}");
        std::process::exit(1);
    }
    let bytes: usize = frames.iter().map(|(_, f)| f.len()).sum();
    println!("{path}: {} frames, mean {:.0} B", frames.len(), bytes as f64 / frames.len().max(1) as f64);
}
