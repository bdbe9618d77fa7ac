//! Formula, statistical and negative-finding tests of COLATE across its modules.

use super::*;
use crate::sim::{self, DelayModel};
use crate::synopsis::codec::DecodeError;
use crate::synopsis::hash::mix64;
use crate::synopsis::{Synopsis, SynopsisConfig};
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

/// A flow of `p` packets spread over [start, start + span) with delays from `model` (ticks).
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

fn truth(pkts: &[Pkt], f: u64) -> (u64, f64, f64) {
    let d: Vec<f64> = pkts.iter().filter(|p| p.0 == f).map(|p| p.3 as f64 - p.2 as f64).collect();
    let n = d.len() as f64;
    let mu = d.iter().sum::<f64>() / n;
    let var = d.iter().map(|x| (x - mu).powi(2)).sum::<f64>() / n;
    (d.len() as u64, mu, var.sqrt())
}

#[test]
fn debug_counts_sd_noise_free() {
    let mut rng = sim::rng(1);
    let pk = flow(&mut rng, 77, 2000, 1_000_000, 1_000_000, DelayModel::Weibull { shape: 0.8, mean: 300.0 });
    let (p, mu, sd) = truth(&pk, 77);
    let mut est = Vec::new();
    for seed in 0..200u64 {
        let c = ColateConfig { seed, ..cfg(10_007, 20, true) };
        let (s, r) = record(&c, &pk);
        let (es, er) = (epoch(0, &s), epoch(1, &r));
        let seg = Segment::new(vec![&es], vec![&er]).unwrap();
        let rep = seg.query(77, p, &QueryOptions::default());
        est.push((rep.mean_ns.unwrap().value, rep.std_dev_counts_ns.unwrap().value, rep.std_dev_paper_ns.unwrap().value));
    }
    let k = est.len() as f64;
    let mean_mu = est.iter().map(|e| e.0).sum::<f64>() / k;
    let mean_var = est.iter().map(|e| e.1 * e.1).sum::<f64>() / k;
    let mean_pv = est.iter().map(|e| e.2 * e.2).sum::<f64>() / k;
    eprintln!("mu {mu} est {mean_mu}; var {} counts {mean_var} paper {mean_pv}", sd * sd);
}
