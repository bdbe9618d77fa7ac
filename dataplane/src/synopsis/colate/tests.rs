//! Tests of COLATE across its modules, one submodule per kind: [`formulas`] against
//! hand-computed values, [`statistical`] (seeded; each tolerance written next to its assertion
//! with the formula it comes from), [`negative`] findings, and [`epochs`] (closing,
//! conservation, encoding). Here: the configurations, traces and truths they share.

use super::epoch::flags;
use super::query::{
    FLOOR_MIN_CELLS, distinct_pairings, eq4, ordered_pairing_sequences, same_subvector_probability,
    second_moment_exact, second_moment_pairings,
};
use super::sizing::{self, Eq21Form, SizingRequest, Verdict};
use super::trace::{self, TraceConfig};
use super::*;
use crate::sim::{self, DelayModel};
use crate::synopsis::codec::DecodeError;
use crate::synopsis::estimate::NoEstimate;
use crate::synopsis::hash::mix64;
use crate::synopsis::{Synopsis, SynopsisConfig};
use proptest::prelude::*;
use rand::Rng;

fn cfg(n: u32, m: u32, counts: bool) -> ColateConfig {
    ColateConfig { packet_counts: counts, seed: 5, ..ColateConfig::new(n, m, 64, u64::MAX) }
}

/// One packet: flow hash, identity, tick at S, tick at R.
type Pkt = (u64, u64, u64, u64);

/// S and R vectors of one window each, fed `pkts`.
fn record(c: &ColateConfig, pkts: &[Pkt]) -> (Colate, Colate) {
    let mut s = Colate::new(c).unwrap();
    let mut r = Colate::new(c).unwrap();
    for &(f, id, ts, tr) in pkts {
        s.update_raw(f, id, ts);
        r.update_raw(f, id, tr);
    }
    (s, r)
}

/// The single epoch a window makes.
fn epoch(point: u32, v: &Colate) -> CounterEpoch {
    let mut acc = EpochAccumulator::new(v.config(), point, 0).unwrap();
    assert!(acc.push_window(0, v).unwrap().is_none());
    acc.flush().unwrap()
}

/// Records `pkts` at both points and returns the two single-epoch sides.
fn epochs(c: &ColateConfig, pkts: &[Pkt]) -> (CounterEpoch, CounterEpoch) {
    let (s, r) = record(c, pkts);
    (epoch(0, &s), epoch(1, &r))
}

/// A flow of `p` packets at ticks in [start, start + span) with delays from `model` (ticks).
fn flow(rng: &mut sim::SimRng, f: u64, p: usize, start: u64, span: u64, model: DelayModel) -> Vec<Pkt> {
    let d = model.sampler().unwrap();
    (0..p)
        .map(|_| {
            let ts = start + rng.random_range(0..span);
            let lat = d.sample(rng).round() as u64;
            (f, rng.random::<u64>(), ts, ts + lat)
        })
        .collect()
}

/// (p_f, μ_f, σ_f, Σ d²) of flow `f` in `pkts` (ticks).
fn truth(pkts: &[Pkt], f: u64) -> (u64, f64, f64, f64) {
    let d: Vec<f64> = pkts.iter().filter(|p| p.0 == f).map(|p| p.3 as f64 - p.2 as f64).collect();
    let n = d.len() as f64;
    let mu = d.iter().sum::<f64>() / n;
    let var = d.iter().map(|x| (x - mu).powi(2)).sum::<f64>() / n;
    (d.len() as u64, mu, var.sqrt(), d.iter().map(|x| x * x).sum())
}

fn mean_sd(x: &[f64]) -> (f64, f64) {
    let n = x.len() as f64;
    let m = x.iter().sum::<f64>() / n;
    (m, (x.iter().map(|v| (v - m).powi(2)).sum::<f64>() / (n - 1.0)).sqrt())
}

fn median(mut x: Vec<f64>) -> f64 {
    x.sort_by(f64::total_cmp);
    x[x.len() / 2]
}

/// A synthetic two-point trace (1 µs ticks) as packets and per-flow truth, for flows with at
/// least `min_packets` delivered packets.
struct TwoPoint {
    pkts: Vec<Pkt>,
    flows: Vec<(u64, trace::FlowTruth)>,
}

fn two_point(seed: u64, flows: u32, seconds: u64, mean_ppf: f64, min_packets: u64) -> TwoPoint {
    let tr = trace::generate(&TraceConfig::new(seed, flows, seconds * 1_000_000_000, mean_ppf));
    let truth = trace::truth(&tr, 0, 1_000);
    let pkts = tr
        .packets
        .iter()
        .filter_map(|p| {
            p.ts_r_ns.map(|r| (tr.flow_hashes[p.flow as usize], p.identity, p.ts_s_ns / 1_000, r / 1_000))
        })
        .collect();
    let flows = truth
        .into_iter()
        .enumerate()
        .filter(|(_, t)| t.packets >= min_packets)
        .map(|(i, t)| (tr.flow_hashes[i], t))
        .collect();
    TwoPoint { pkts, flows }
}

/// Relative errors of Eq 3 for every flow of `tp` when the two points use `cs` and `cr`, each
/// flow's Eq 4 taken with its own point's cell map (what a query without the fingerprint
/// check would compute).
fn mean_errors_raw(tp: &TwoPoint, cs: &ColateConfig, cr: &ColateConfig, extra_at_r: &[Pkt]) -> Vec<f64> {
    let mut s = Colate::new(cs).unwrap();
    let mut r = Colate::new(cr).unwrap();
    for &(f, id, ts, tr) in &tp.pkts {
        s.update_raw(f, id, ts);
        r.update_raw(f, id, tr);
    }
    for &(f, id, _, tr) in extra_at_r {
        r.update_raw(f, id, tr);
    }
    let t_hat = |v: &Colate, f: u64| {
        let sub: u128 = v.cell_map().subvector(f).iter().map(|&i| v.sum(i) as u128).sum();
        let c = v.config();
        eq4(sub, v.total_ticks(), c.counters as u64, c.cells_per_flow as u64)
    };
    tp.flows
        .iter()
        .map(|(f, t)| ((t_hat(&r, *f) - t_hat(&s, *f)) / t.packets as f64 / t.mean() - 1.0).abs())
        .collect()
}

mod epochs;
mod formulas;
mod negative;
mod statistical;
