//! Seeded synthetic two-point traces for the RDA's tests, benches and paper reproduction
//! (spec §7.4): Poisson sender arrivals over a window, i.i.d. delays from a [`DelayModel`],
//! `lost` sender packets dropped uniformly at random, and `reordered` stragglers of the
//! previous window seen only by the receiver in the window's first `straggler_window_ns`.
//! Ground truth (exact integer sums) over the delivered packets. No I/O.

use super::banks::packet_id;
use super::estimator::exact_ratio;
use crate::sim::{DelayModel, rng};
use crate::synopsis::hash::{derive, mix64};
use rand::Rng;
use rand_distr::{Distribution, Exp};

/// One packet as one point saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Seen {
    /// Packet id (non-zero).
    pub id: u64,
    /// Timestamp at this point (ns).
    pub ts_ns: u64,
}

/// What to generate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TraceSpec {
    /// Packets the sender sees.
    pub packets: usize,
    /// Length of the window (ns).
    pub window_ns: u64,
    /// Start of the window (ns); large values exercise the wrapping sums.
    pub start_ns: u64,
    /// Per-packet delay.
    pub delay: DelayModel,
    /// Sender packets the receiver never sees (≤ `packets`).
    pub lost: usize,
    /// Receiver-only packets (stragglers of the previous window).
    pub reordered: usize,
    /// The stragglers' receiver timestamps are uniform in [start, start + this).
    pub straggler_window_ns: u64,
    /// Seed of everything random.
    pub seed: u64,
}

impl TraceSpec {
    /// The spec's DC-like recipe (§7.4): n packets over 60 s, Weibull shape 0.6 with scale
    /// 33,230 ns (mean ≈ 50 µs), d/2 lost and d/2 stragglers in the first 1 ms.
    pub fn paper(packets: usize, d: usize, seed: u64) -> Self {
        let shape = 0.6;
        let scale_ns = 33_230.0;
        Self {
            packets,
            window_ns: 60_000_000_000,
            start_ns: 1_700_000_000_000_000_000,
            delay: DelayModel::Weibull { shape, mean: scale_ns * crate::sim::gamma(1.0 + 1.0 / shape) },
            lost: d / 2,
            reordered: d - d / 2,
            straggler_window_ns: 1_000_000,
            seed,
        }
    }
}

/// Exact statistics of the delivered packets' delays.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GroundTruth {
    /// Delivered packets (seen at both points).
    pub packets: u64,
    /// Σ delay (ns).
    pub delay_sum_ns: i128,
    /// Σ delay² (ns²).
    pub delay_sq_sum_ns2: i128,
}

impl GroundTruth {
    /// Adds one delivered packet's delay.
    pub fn add(&mut self, delay_ns: i64) {
        self.packets += 1;
        self.delay_sum_ns += delay_ns as i128;
        self.delay_sq_sum_ns2 += delay_ns as i128 * delay_ns as i128;
    }

    /// The mean delay, computed like the estimator's (same reduced fraction → same bits).
    pub fn mean_ns(&self) -> f64 {
        exact_ratio(self.delay_sum_ns, self.packets as i128)
    }

    /// The population standard deviation: sqrt((N·Σx² − (Σx)²) / N²), numerator exact.
    pub fn std_dev_ns(&self) -> f64 {
        let n = self.packets as i128;
        if n == 0 {
            return 0.0;
        }
        let num = n * self.delay_sq_sum_ns2 - self.delay_sum_ns * self.delay_sum_ns;
        (num.max(0) as f64 / (n as f64 * n as f64)).sqrt()
    }
}

/// A generated two-point trace.
#[derive(Clone, Debug, PartialEq)]
pub struct Trace {
    /// What the sender saw, in time order.
    pub sender: Vec<Seen>,
    /// What the receiver saw (delivered packets in sender order, then the stragglers).
    pub receiver: Vec<Seen>,
    /// Ids seen only by the sender.
    pub lost: Vec<u64>,
    /// Ids seen only by the receiver.
    pub reordered: Vec<u64>,
    /// Statistics of the delivered packets.
    pub truth: GroundTruth,
}

/// Generates the trace `spec` describes. `None` if the delay model is invalid or `lost`
/// exceeds `packets`.
pub fn generate(spec: &TraceSpec) -> Option<Trace> {
    if spec.lost > spec.packets {
        return None;
    }
    let sampler = spec.delay.sampler()?;
    let mut r = rng(spec.seed);
    let id_base = derive(spec.seed, 0x07ac_e1d5);
    let id_of = |i: usize| packet_id(mix64(id_base.wrapping_add(i as u64 + 1)));
    let gap = Exp::new(spec.packets.max(1) as f64 / spec.window_ns.max(1) as f64).ok()?;
    let mut lost_mask = vec![false; spec.packets];
    for i in rand::seq::index::sample(&mut r, spec.packets, spec.lost) {
        if let Some(x) = lost_mask.get_mut(i) {
            *x = true;
        }
    }
    let mut sender = Vec::with_capacity(spec.packets);
    let mut receiver = Vec::with_capacity(spec.packets - spec.lost + spec.reordered);
    let mut lost = Vec::with_capacity(spec.lost);
    let mut truth = GroundTruth::default();
    let mut t = 0f64;
    for (i, &is_lost) in lost_mask.iter().enumerate() {
        t += gap.sample(&mut r);
        let ts_a = spec.start_ns.wrapping_add((t as u64).min(spec.window_ns.saturating_sub(1)));
        let id = id_of(i);
        let delay = (sampler.sample(&mut r).round() as i64).max(1);
        sender.push(Seen { id, ts_ns: ts_a });
        if is_lost {
            lost.push(id);
        } else {
            receiver.push(Seen { id, ts_ns: ts_a.wrapping_add(delay as u64) });
            truth.add(delay);
        }
    }
    let mut reordered = Vec::with_capacity(spec.reordered);
    for j in 0..spec.reordered {
        let id = id_of(spec.packets + j);
        let off = r.random_range(0..spec.straggler_window_ns.max(1));
        receiver.push(Seen { id, ts_ns: spec.start_ns.wrapping_add(off) });
        reordered.push(id);
    }
    Some(Trace { sender, receiver, lost, reordered, truth })
}
