//! The synthetic trace "S1" of spec §11.1: about 146,000 flows and 7.77 M packets with
//! Lomax-distributed sizes and bimodal, temporally uncorrelated delays (two independent
//! queueing classes), standing in for the paper's unavailable trace. Deterministic from a seed.
//!
//! - sizes: deterministic Lomax(a = 1, σ = 4.1) quantiles s_i = max(1, ⌈σ((1 − u_i)^(−1/a) − 1)⌉),
//!   u_i = (i + ½)/N, then shuffled;
//! - timing: duration D = min(T, 10 ms × size), start ~ U(0, T − D), send times iid
//!   U(start, start + D), sorted globally, T = 287 s;
//! - delay: class 1 (base 600 µs) with probability 0.3, else class 0 (400 µs); δ = max(1 µs,
//!   base_c + Q_c(t) + J), Q_c an AR(1) path per class ([`crate::sim::Ar1Path`]), J ~ Exp(20 µs);
//! - identity: a uniform random 64-bit value per packet (the content hash).
//!
//! Used by the seeded tests, the `lds_repro` example and the bench. No I/O.

use crate::packet::FlowKey;
use crate::sim::{self, Ar1Path, DelayModel, LossModel, LossProcess};
use rand::Rng;
use rand::seq::SliceRandom;
use serde::{Deserialize, Serialize};
use std::net::{IpAddr, Ipv4Addr};

/// Seed the packet layer would use for flow hashes (a stand-in: any fixed value works).
pub const FLOW_HASH_SEED: u64 = 0x5331_5f66_6c6f_7773;

/// Parameters of the trace (defaults: spec §11.1).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TraceConfig {
    /// Number of flows N.
    pub flows: u32,
    /// Lomax shape a.
    pub lomax_shape: f64,
    /// Lomax scale σ.
    pub lomax_scale: f64,
    /// Trace duration T in ns.
    pub duration_ns: u64,
    /// Flow duration per packet (D = min(T, this × size)) in ns.
    pub flow_ns_per_packet: u64,
    /// Probability that a flow takes the slower class 1.
    pub class1_probability: f64,
    /// Base delay of class 0 and class 1 in ns.
    pub base_delay_ns: [f64; 2],
    /// Grid step of the queueing process in ns.
    pub queue_step_ns: f64,
    /// Correlation time of the queueing process in grid steps (φ = e^(−1/this)).
    pub queue_corr_steps: f64,
    /// Stationary standard deviation of the queueing process in ns.
    pub queue_sd_ns: f64,
    /// Mean of the exponential per-packet jitter in ns.
    pub jitter_mean_ns: f64,
    /// Smallest delay in ns.
    pub min_delay_ns: f64,
    /// Control trace: every flow in class 0 (one FIFO-like path, temporally correlated).
    pub correlated: bool,
    /// Absolute time of the trace start in ns (Unix-epoch-like, so timestamp sums wrap).
    pub start_ns: u64,
    /// Seed of every random choice.
    pub seed: u64,
}

impl TraceConfig {
    /// The spec's S1 trace (146,000 flows) for `seed`.
    pub fn s1(seed: u64) -> Self {
        Self {
            flows: 146_000,
            lomax_shape: 1.0,
            lomax_scale: 4.1,
            duration_ns: 287_000_000_000,
            flow_ns_per_packet: 10_000_000,
            class1_probability: 0.3,
            base_delay_ns: [400_000.0, 600_000.0],
            queue_step_ns: 1_000_000.0,
            queue_corr_steps: 50.0,
            queue_sd_ns: 40_000.0,
            jitter_mean_ns: 20_000.0,
            min_delay_ns: 1_000.0,
            correlated: false,
            start_ns: 1_700_000_000_000_000_000,
            seed,
        }
    }

    /// The flow sizes before shuffling: deterministic Lomax quantiles.
    pub fn sizes(&self) -> Vec<u32> {
        let n = f64::from(self.flows);
        (0..self.flows)
            .map(|i| {
                let u = (f64::from(i) + 0.5) / n;
                let s = (self.lomax_scale * ((1.0 - u).powf(-1.0 / self.lomax_shape) - 1.0)).ceil();
                s.clamp(1.0, f64::from(u32::MAX)) as u32
            })
            .collect()
    }
}

/// One flow of the trace.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TraceFlow {
    /// Its 5-tuple.
    pub key: FlowKey,
    /// `key.hash(FLOW_HASH_SEED)`: the packet layer's flow hash.
    pub flow_hash: u64,
    /// Packets sent.
    pub packets: u32,
    /// Delay class (0 or 1).
    pub class: u8,
}

/// One packet of the trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TracePacket {
    /// Send time at the upstream point, ns.
    pub send_ns: u64,
    /// One-way delay, ns (receive time = send + delay).
    pub delay_ns: u32,
    /// Index of its flow in [`Trace::flows`].
    pub flow: u32,
    /// Packet identity (content hash) both points compute.
    pub identity: u64,
}

impl TracePacket {
    /// Receive time at the downstream point, ns.
    pub fn recv_ns(&self) -> u64 {
        self.send_ns.wrapping_add(u64::from(self.delay_ns))
    }
}

/// A generated trace.
#[derive(Clone, Debug)]
pub struct Trace {
    /// The configuration it was generated from.
    pub config: TraceConfig,
    /// Flows, indexed by [`TracePacket::flow`].
    pub flows: Vec<TraceFlow>,
    /// Packets in send-time order.
    pub packets: Vec<TracePacket>,
}

/// A distinct IPv4 5-tuple for flow `i` (i < 2^24).
pub fn flow_key(i: u32) -> FlowKey {
    let src = Ipv4Addr::from(0x0a00_0000 | (i & 0x00ff_ffff));
    let dst = Ipv4Addr::from(0xc612_0000 | (i.wrapping_mul(2_654_435_761) >> 16));
    let proto = if i.is_multiple_of(4) { 17 } else { 6 };
    FlowKey::new(IpAddr::V4(src), IpAddr::V4(dst), 1024 + (i % 60_000) as u16, 443, proto)
}

impl Trace {
    /// Generates the trace; `None` if a parameter is out of range.
    pub fn generate(cfg: &TraceConfig) -> Option<Self> {
        let mut rng = sim::rng(cfg.seed);
        let mut sizes = cfg.sizes();
        sizes.shuffle(&mut rng);
        let t_ns = cfg.duration_ns as f64;
        let phi = (-1.0 / cfg.queue_corr_steps).exp();
        let paths = [
            Ar1Path::new(&mut rng, t_ns, cfg.queue_step_ns, phi, cfg.queue_sd_ns)?,
            Ar1Path::new(&mut rng, t_ns, cfg.queue_step_ns, phi, cfg.queue_sd_ns)?,
        ];
        // Exponential jitter: a Weibull of shape 1.
        let jitter = DelayModel::Weibull { shape: 1.0, mean: cfg.jitter_mean_ns }.sampler()?;
        let total: u64 = sizes.iter().map(|&s| u64::from(s)).sum();
        let mut packets = Vec::with_capacity(usize::try_from(total).ok()?);
        let mut flows = Vec::with_capacity(sizes.len());
        for (i, &size) in sizes.iter().enumerate() {
            let class = u8::from(!cfg.correlated && rng.random::<f64>() < cfg.class1_probability);
            let key = flow_key(i as u32);
            flows.push(TraceFlow { key, flow_hash: key.hash(FLOW_HASH_SEED), packets: size, class });
            let dur = t_ns.min(cfg.flow_ns_per_packet as f64 * f64::from(size));
            let start = rng.random::<f64>() * (t_ns - dur);
            let path = &paths[usize::from(class)];
            let base = cfg.base_delay_ns[usize::from(class)];
            for _ in 0..size {
                let t = start + rng.random::<f64>() * dur;
                let delay = (base + path.at(t) + jitter.sample(&mut rng)).max(cfg.min_delay_ns);
                packets.push(TracePacket {
                    send_ns: cfg.start_ns.wrapping_add(t as u64),
                    delay_ns: delay.round().min(f64::from(u32::MAX)) as u32,
                    flow: i as u32,
                    identity: rng.random(),
                });
            }
        }
        packets.sort_unstable_by_key(|p| (p.send_ns, p.identity));
        Some(Self { config: cfg.clone(), flows, packets })
    }

    /// Which packets a segment with loss `model` drops (in send order), drawn from `seed`.
    pub fn losses(&self, model: LossModel, seed: u64) -> Vec<bool> {
        let mut rng = sim::rng(seed);
        let mut p = LossProcess::new(model);
        self.packets.iter().map(|_| p.next_lost(&mut rng)).collect()
    }

    /// Ground truth (spec P14): each flow's mean delay in ns over its delivered packets
    /// (`lost[i]` for packet i; `None` = nothing lost); `None` for flows with none delivered.
    pub fn true_means(&self, lost: Option<&[bool]>) -> Vec<Option<f64>> {
        let mut sum = vec![0u64; self.flows.len()];
        let mut count = vec![0u64; self.flows.len()];
        for (i, p) in self.packets.iter().enumerate() {
            if lost.and_then(|l| l.get(i)).copied().unwrap_or(false) {
                continue;
            }
            if let (Some(s), Some(c)) = (sum.get_mut(p.flow as usize), count.get_mut(p.flow as usize)) {
                *s += u64::from(p.delay_ns);
                *c += 1;
            }
        }
        sum.iter().zip(&count).map(|(&s, &c)| (c > 0).then(|| s as f64 / c as f64)).collect()
    }

    /// Mean delay of all (delivered) packets.
    pub fn global_mean(&self, lost: Option<&[bool]>) -> f64 {
        let (mut s, mut c) = (0u128, 0u64);
        for (i, p) in self.packets.iter().enumerate() {
            if !lost.and_then(|l| l.get(i)).copied().unwrap_or(false) {
                s += u128::from(p.delay_ns);
                c += 1;
            }
        }
        if c == 0 { 0.0 } else { s as f64 / c as f64 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_match_the_spec_statistics() {
        // Spec §11.1: total 7,770,873 packets, largest flow 1,197,196, and the flows per bin.
        let sizes = TraceConfig::s1(0).sizes();
        let total: u64 = sizes.iter().map(|&s| u64::from(s)).sum();
        assert_eq!(total, 7_770_873);
        assert_eq!(sizes.iter().copied().max(), Some(1_197_196));
        let bins = [(1, 9, 100_305), (10, 49, 34_422), (50, 99, 5_467), (100, 499, 4_616)];
        for (lo, hi, n) in bins {
            assert_eq!(sizes.iter().filter(|&&s| (lo..=hi).contains(&s)).count(), n, "{lo}–{hi}");
        }
        let bins = [(500, 999, 593), (1000, 9999, 537), (10_000, u32::MAX, 60)];
        for (lo, hi, n) in bins {
            assert_eq!(sizes.iter().filter(|&&s| (lo..=hi).contains(&s)).count(), n, "{lo}–{hi}");
        }
        // 18.4% of packets in flows of fewer than 100 packets (paper: 20%).
        let small: u64 = sizes.iter().filter(|&&s| s < 100).map(|&s| u64::from(s)).sum();
        assert!((small as f64 / total as f64 - 0.184).abs() < 0.001);
    }

    #[test]
    fn small_trace_is_deterministic_and_consistent() {
        let cfg = TraceConfig { flows: 2_000, duration_ns: 10_000_000_000, ..TraceConfig::s1(5) };
        let a = Trace::generate(&cfg).unwrap();
        let b = Trace::generate(&cfg).unwrap();
        assert_eq!(a.packets, b.packets);
        assert_eq!(a.packets.len() as u64, cfg.sizes().iter().map(|&s| u64::from(s)).sum::<u64>());
        assert!(a.packets.windows(2).all(|w| w[0].send_ns <= w[1].send_ns));
        for f in &a.flows {
            assert_eq!(f.flow_hash, f.key.hash(FLOW_HASH_SEED));
        }
        let per_flow: u64 = a.flows.iter().map(|f| u64::from(f.packets)).sum();
        assert_eq!(per_flow, a.packets.len() as u64);
        let c = Trace::generate(&TraceConfig { seed: 6, ..cfg.clone() }).unwrap();
        assert_ne!(a.packets, c.packets);
        // Delays: class 0 flows centre near 400 µs + jitter, class 1 near 600 µs.
        let means = a.true_means(None);
        for (f, m) in a.flows.iter().zip(&means) {
            let m = m.unwrap();
            if f.packets >= 50 {
                let base = cfg.base_delay_ns[usize::from(f.class)] + cfg.jitter_mean_ns;
                // Q has sd 40 µs and a flow of ≥ 50 packets lasts ≥ 10 correlation times, so its
                // mean is within 4 sd of Q (160 µs) of the base; the other class is 200 µs away.
                assert!((m - base).abs() < 4.0 * 40_000.0, "{m} vs {base}");
            }
        }
        let lost = a.losses(LossModel::Uniform { rate: 0.5 }, 1);
        let delivered = lost.iter().filter(|l| !**l).count();
        assert!(a.true_means(Some(&lost)).iter().flatten().count() <= a.flows.len());
        assert!(delivered > 0 && delivered < lost.len());
    }
}
