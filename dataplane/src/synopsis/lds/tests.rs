//! LDS tests, one submodule per concept: [`oracles`] (deterministic claims of spec §11.6: exact
//! estimates, loss and collisions seen per cell, the simple delay sketch as a special case),
//! [`selection`] (which cells the estimator selects, against a brute-force recomputation),
//! [`cells`] (what a cell holds: Count-Min sizes, weights, overflow, wrapping sums, empty
//! cells), [`enumeration`] (flow enumeration and the report), [`updates`] (located updates and
//! merged shards), [`encoding`] (round trips and decode rejections) and the seeded CI-sized
//! reproduction of spec §11 ([`statistical`]). Here: the flows, streams and sketches they share.

use super::cell::Cell;
use super::config::{EstimatorConfig, LdsConfig, OffsetMode, SelectionRule};
use super::estimator::{Estimator, FlowEstimate, NoFlowEstimate, estimate_all, estimate_flow, report};
use super::sds::SimpleDelaySketch;
use super::sketch::Lds;
use super::weights::{IpPrefix, WeightPolicy, WeightRule};
use crate::packet::FlowKey;
use crate::sim;
use crate::synopsis::codec::DecodeError;
use crate::synopsis::estimate::NoEstimate;
use crate::synopsis::{MergeError, Observation, Synopsis, SynopsisConfig};
use rand::Rng;

mod cells;
mod encoding;
mod enumeration;
mod oracles;
mod selection;
mod statistical;
mod updates;

const T0: u64 = 1_700_000_000_000_000_000;

fn key(i: u32) -> FlowKey {
    super::trace::flow_key(i)
}

fn flow_hash(i: u32) -> u64 {
    key(i).hash(super::trace::FLOW_HASH_SEED)
}

/// A packet of the tests' streams: flow index, identity, send time, delay.
#[derive(Clone, Copy, Debug)]
struct Pkt {
    flow: u32,
    identity: u64,
    send_ns: u64,
    delay_ns: u64,
}

/// `n` packets over `flows` flows (flow i gets weight ∝ 1/(i+1)), delays 100–900 µs by flow.
fn stream(seed: u64, flows: u32, n: usize) -> Vec<Pkt> {
    let mut rng = sim::rng(seed);
    let h: f64 = (1..=flows).map(|i| 1.0 / f64::from(i)).sum();
    (0..n)
        .map(|i| {
            let mut u = rng.random::<f64>() * h;
            let mut flow = 0;
            while flow + 1 < flows && u > 1.0 / f64::from(flow + 1) {
                u -= 1.0 / f64::from(flow + 1);
                flow += 1;
            }
            let base = 100_000 + u64::from(flow % 9) * 100_000;
            Pkt {
                flow,
                identity: rng.random(),
                send_ns: T0 + i as u64 * 1_000,
                delay_ns: base + rng.random_range(0..50_000),
            }
        })
        .collect()
}

fn observe(lds: &mut Lds, p: &Pkt, ts_ns: u64) {
    let k = key(p.flow);
    let obs = Observation {
        ts_ns,
        flow: &k,
        flow_hash: flow_hash(p.flow),
        identity: p.identity,
        exchange: None,
        encap: crate::packet::Encap::NONE,
    };
    lds.update(&mut (), &obs);
}

/// Sender and receiver sketches; `drop(i)` removes packet i at the receiver.
fn run(cfg: &LdsConfig, pkts: &[Pkt], drop: impl Fn(usize) -> bool) -> (Lds, Lds) {
    let mut s = Lds::new(cfg).unwrap();
    let mut r = Lds::new(cfg).unwrap();
    for (i, p) in pkts.iter().enumerate() {
        observe(&mut s, p, p.send_ns);
        if !drop(i) {
            observe(&mut r, p, p.send_ns + p.delay_ns);
        }
    }
    (s, r)
}

fn true_mean(pkts: &[Pkt], flow: u32, drop: impl Fn(usize) -> bool) -> f64 {
    let (mut s, mut n) = (0u64, 0u64);
    for (i, p) in pkts.iter().enumerate() {
        if p.flow == flow && !drop(i) {
            s += p.delay_ns;
            n += 1;
        }
    }
    s as f64 / n as f64
}

/// `LdsConfig::new(rows, width)` with vLDAs of `k` cells, estimated by row agreement (α = 0).
fn row_agreement(rows: u32, width: u32, k: u32) -> LdsConfig {
    LdsConfig {
        vlda_len: k,
        estimator: EstimatorConfig {
            alpha: 0.0,
            strict_alpha: false,
            selection: SelectionRule::RowAgreement,
        },
        ..LdsConfig::new(rows, width)
    }
}

fn mean_of(e: &FlowEstimate) -> f64 {
    e.mean_delay_ns.as_ref().unwrap().value
}
