//! Deterministic tests of the boundary-slip guard (estimator `compare`, spec §8.21): two packets
//! that cross an epoch boundary in opposite directions into one cell, and legitimate negative
//! clock offsets that must stay usable.

use super::*;
use crate::packet::FlowKey;
use crate::synopsis::{Observation, Synopsis};

/// Epoch length E: the runtime's 100 ms.
const EPOCH_NS: u64 = 100_000_000;
/// The epoch under test, k = 1: it spans [E, 2E).
const K: u64 = 1;

/// A single bank of 64 rows sampling every packet.
fn config(max_negative_delay_ns: u64) -> LdaConfig {
    LdaConfig { max_negative_delay_ns, ..LdaConfig::single_bank(64, 1.0, 21) }
}

/// The paper's cell: counts and timestamp sums only, no identity digest.
fn without_digest(max_negative_delay_ns: u64) -> LdaConfig {
    LdaConfig { digest_bits: 0, ..config(max_negative_delay_ns) }
}

/// One point's synopses of epochs k−1, k, k+1; each packet goes to the epoch of its own
/// timestamp, as the runtime assigns it.
struct Point {
    epochs: Vec<Lda>,
}

impl Point {
    fn new(cfg: &LdaConfig) -> Self {
        Self { epochs: (0..3).map(|_| Lda::new(cfg).unwrap()).collect() }
    }

    fn observe(&mut self, identity: u64, ts_ns: u64) {
        let flow = FlowKey::default();
        let obs = Observation {
            ts_ns,
            flow: &flow,
            flow_hash: 0,
            identity,
            exchange: None,
            encap: crate::packet::Encap::NONE,
        };
        let epoch = (ts_ns / EPOCH_NS) as usize;
        self.epochs[epoch].update(&mut (), &obs);
    }

    fn epoch_k(&self) -> &Lda {
        &self.epochs[K as usize]
    }
}

/// A packet: identity, sender timestamp, receiver timestamp (ns).
type Packet = (u64, u64, u64);

/// The slip scenario: `n` packets sent and received inside epoch k with delays in
/// [20, 100) µs and none in the `slip` cell, plus a crossing-in packet Y (A in k−1, B in k)
/// and a crossing-out packet X (A in k, B in k+1) that share the `slip` cell.
/// Returns (inside packets, Y, X).
fn scenario(cfg: &LdaConfig, n: u64) -> (Vec<Packet>, Packet, Packet) {
    let probe = Lda::new(cfg).unwrap();
    let cell = |id: u64| probe.locate(id).unwrap().flat;
    let y_id = 1_000_000;
    let slip = cell(y_id);
    let x_id = (y_id + 1..).find(|&id| cell(id) == slip).unwrap();
    let start = K * EPOCH_NS;
    let y = (y_id, start - 20_000, start + 30_000); // delay 50 µs
    let x = (x_id, start + EPOCH_NS - 10_000, start + EPOCH_NS + 40_000); // delay 50 µs
    let inside: Vec<Packet> = (0..)
        .filter(|&id| cell(id) != slip)
        .take(n as usize)
        .map(|id| {
            let ta = start + 1_000_000 + id * 97_000;
            (id, ta, ta + 20_000 + (id * 7_919) % 80_000)
        })
        .collect();
    assert!(inside.iter().all(|&(_, ta, tb)| ta / EPOCH_NS == K && tb / EPOCH_NS == K));
    (inside, y, x)
}

/// Feeds every packet to both points and estimates epoch k.
fn run(cfg: &LdaConfig, packets: &[Packet]) -> LdaReport {
    let (mut a, mut b) = (Point::new(cfg), Point::new(cfg));
    for &(id, ta, tb) in packets {
        a.observe(id, ta);
        b.observe(id, tb);
    }
    estimate(a.epoch_k(), b.epoch_k()).unwrap()
}

fn delay_sum(packets: &[Packet]) -> i128 {
    packets.iter().map(|&(_, ta, tb)| i128::from(tb) - i128::from(ta)).sum()
}

#[test]
fn crossing_pair_in_one_cell_is_anomalous_and_the_mean_exact() {
    let n = 400;
    let guarded = config(DEFAULT_MAX_NEGATIVE_DELAY_NS);
    let (inside, y, x) = scenario(&guarded, n);
    let truth = delay_sum(&inside) as f64 / n as f64;
    let mut all = inside.clone();
    all.extend([y, x]);

    // Epoch k holds the inside packets plus X at A and plus Y at B: n + 1 at each point, and
    // the slipped cell one packet at each (X at A, Y at B). Without the guards (no digest, N
    // so large that −c·N saturates) it passes the count test: S = n + 1 and Δ gains t_B(Y) − t_A(X) =
    // −E + 40 µs, so the mean is off by (E − 40 µs + truth)/(n + 1) ≈ E/S, about 249 µs here
    // against a truth near 60 µs.
    let open = run(&without_digest(u64::MAX), &all);
    assert_eq!((open.sampled_sent, open.sampled_received, open.anomalous_cells), (n + 1, n + 1, 0));
    assert_eq!((open.usable_cells, open.samples), (64, n + 1));
    let slipped = (delay_sum(&inside) + i128::from(y.2) - i128::from(x.1)) as f64 / (n + 1) as f64;
    let open_mean = open.mean_delay.clone().unwrap().value;
    assert_eq!(open_mean, slipped);
    let e_over_s = EPOCH_NS as f64 / (n + 1) as f64;
    assert!((truth - open_mean - e_over_s).abs() < 0.01 * e_over_s, "{open_mean} vs {truth}");

    // With the guard: the cell (c = 1, Δ ≈ −E < −1·10 ms) is anomalous, everything else
    // usable, and D is exactly the mean of the inside packets. Either guard catches it alone.
    let by_floor = run(&without_digest(DEFAULT_MAX_NEGATIVE_DELAY_NS), &all);
    let by_digest = run(&config(u64::MAX), &all);
    for g in [&by_floor, &by_digest] {
        assert_eq!((g.slipped_cells, g.samples), (1, n));
        assert_eq!(g.mean_delay.clone().unwrap().value, truth);
    }
    let r = run(&guarded, &all);
    assert_eq!((r.sampled_sent, r.sampled_received, r.sampled_lost), (n + 1, n + 1, 0));
    assert_eq!((r.anomalous_cells, r.usable_cells, r.samples), (1, 63, n));
    assert_eq!((r.slipped_cells, r.receiver_more_cells), (1, 0), "counted as slip");
    // The slipped cell's bucket goes too, with the inside packets of its partner row.
    let probe = Lda::new(&guarded).unwrap();
    let partner = probe.locate(y.0).unwrap().flat ^ 1;
    let in_partner = inside.iter().filter(|p| probe.locate(p.0).unwrap().flat == partner).count() as u64;
    assert_eq!((r.usable_buckets, r.collapsed_samples), (31, n - in_partner));
    assert_eq!(r.mean_delay.clone().unwrap().value, truth);

    // σ̂ too: the slipped bucket's (≈E)² dominated F; without it, F = Σ_b (signed sum)² / S̃
    // ≤ max_b k_b · max delay², so σ̂ ≤ √(max k_b)·100 µs (k_b: packets in bucket b).
    let a_k = {
        let mut p = Point::new(&guarded);
        all.iter().for_each(|&(id, ta, _)| p.observe(id, ta));
        p.epochs.swap_remove(K as usize)
    };
    let max_bucket = a_k.cells().chunks_exact(2).map(|b| b[0].count + b[1].count).max().unwrap();
    let bound = (max_bucket as f64).sqrt() * 100_000.0;
    let sd = r.paper_std_dev.clone().unwrap().value;
    let open_sd = open.paper_std_dev.clone().unwrap().value;
    assert!(sd <= bound, "σ̂ {sd} above {bound}");
    assert!(open_sd > 1_000_000.0, "the unguarded σ̂ {open_sd} should carry the slip");
}

#[test]
fn negative_clock_offset_within_the_limit_keeps_every_cell_usable() {
    // B's clock 9 ms behind A's: every delay is −9 ms + [20, 100) µs > −N, cells hold ≈ 16
    // packets each, so Δ > −c·N everywhere and every cell is usable.
    let cfg = config(DEFAULT_MAX_NEGATIVE_DELAY_NS);
    let (mut a, mut b) = (Lda::new(&cfg).unwrap(), Lda::new(&cfg).unwrap());
    let mut sum = 0i128;
    let n = 1_000u64;
    for id in 0..n {
        let ta = 5 * EPOCH_NS + id * 50_000;
        let tb = ta - 9_000_000 + 20_000 + (id * 7_919) % 80_000;
        a.update_raw(id, ta);
        b.update_raw(id, tb);
        sum += i128::from(tb) - i128::from(ta);
    }
    let r = estimate(&a, &b).unwrap();
    assert_eq!((r.anomalous_cells, r.usable_cells, r.samples, r.usable_buckets), (0, 64, n, 32));
    assert_eq!(r.mean_delay.unwrap().value, sum as f64 / n as f64);
}

#[test]
fn the_limit_is_inclusive() {
    // One packet per cell: delay exactly −N is possible (usable), −N − 1 is not.
    let cfg = config(1_000);
    let probe = Lda::new(&cfg).unwrap();
    let first = probe.locate(0).unwrap().flat;
    let other = (1..).find(|&id| probe.locate(id).unwrap().flat != first).unwrap();
    let (mut a, mut b) = (Lda::new(&cfg).unwrap(), Lda::new(&cfg).unwrap());
    for (id, delay) in [(0u64, -1_000i64), (other, -1_001)] {
        a.update_raw(id, 1_000_000);
        b.update_raw(id, 1_000_000u64.wrapping_add_signed(delay));
    }
    let r = estimate(&a, &b).unwrap();
    assert_eq!((r.anomalous_cells, r.samples), (1, 1));
    assert_eq!(r.mean_delay.unwrap().value, -1_000.0);
}

/// The issue-18 case the floor cannot see: 10-ms epochs with the default N = 10 ms. A slipped
/// cell's Δ = −E + d_X + d_Y lies above −1·N, so the count-and-floor test accepts it; the
/// identity digest refuses it, and the mean is again exactly the inside packets'.
#[test]
fn short_epochs_slip_past_the_floor_but_not_the_digest() {
    const E: u64 = 10_000_000;
    let cfg = config(DEFAULT_MAX_NEGATIVE_DELAY_NS);
    let probe = Lda::new(&cfg).unwrap();
    let cell = |id: u64| probe.locate(id).unwrap().flat;
    let (y_id, start) = (1_000_000u64, 5 * E);
    let slip = cell(y_id);
    let x_id = (y_id + 1..).find(|&id| cell(id) == slip).unwrap();
    // Y: A at start − 20 µs (epoch 4), B at start + 30 µs; X: A at end − 10 µs, B after it.
    let y = (y_id, start - 20_000, start + 30_000);
    let x = (x_id, start + E - 10_000, start + E + 40_000);
    let inside: Vec<Packet> = (0..)
        .filter(|&id| cell(id) != slip)
        .take(300)
        .map(|id| {
            let ta = start + 100_000 + id * 30_000;
            (id, ta, ta + 20_000 + (id * 7_919) % 80_000)
        })
        .collect();
    let truth = delay_sum(&inside) as f64 / inside.len() as f64;
    let run_e = |cfg: &LdaConfig| {
        let (mut a, mut b) = (Lda::new(cfg).unwrap(), Lda::new(cfg).unwrap());
        for &(id, ta, tb) in inside.iter().chain([&y, &x]) {
            if ta / E == 5 {
                a.update_raw(id, ta);
            }
            if tb / E == 5 {
                b.update_raw(id, tb);
            }
        }
        estimate(&a, &b).unwrap()
    };
    let floor_only = run_e(&without_digest(DEFAULT_MAX_NEGATIVE_DELAY_NS));
    assert_eq!(floor_only.slipped_cells, 0, "Δ ≈ −E + 90 µs > −N: the floor lets it in");
    assert!(floor_only.mean_delay.unwrap().value < truth - 0.9 * E as f64 / 301.0);
    let r = run_e(&cfg);
    assert_eq!((r.slipped_cells, r.samples), (1, 300));
    assert_eq!(r.mean_delay.unwrap().value, truth);
}
