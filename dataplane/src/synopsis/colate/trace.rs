//! A seeded synthetic two-point trace for COLATE's tests and reproduction (spec §7.7): heavy-
//! tailed flows with Poisson-like packets through a FIFO queue with RED (paper §6.1). The
//! arrival time is the timestamp at S, the departure time the timestamp at R.
//!
//! Ground truth only: no synopsis code depends on it. No I/O.

use crate::packet::FlowKey;
use crate::sim;
use rand::Rng;
use rand_distr::{Distribution, Exp, Pareto};
use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr};

/// The seed standing in for the packet layer's identity seed when hashing synthetic flow keys.
pub const TRACE_IDENTITY_SEED: u64 = 0x7ace_5eed;

/// What to generate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TraceConfig {
    /// Seed of everything.
    pub seed: u64,
    /// Number of flows.
    pub flows: u32,
    /// Length of the trace (ns); flows start uniformly in it.
    pub duration_ns: u64,
    /// Mean packets per flow before capping (Pareto).
    pub mean_packets_per_flow: f64,
    /// Pareto shape of the flow sizes (spec: 1.1–1.5).
    pub pareto_shape: f64,
    /// Cap on packets per flow.
    pub max_packets_per_flow: u32,
    /// Mean flow duration (ns, exponential, cut at the trace end).
    pub mean_flow_duration_ns: f64,
    /// Queue utilisation ρ: the service rate is set to (offered bytes)/(duration·ρ).
    pub utilisation: f64,
    /// Constant delay added after the queue (ns).
    pub propagation_ns: u64,
    /// Largest share of the mean packet rate one flow may send at (its duration is stretched
    /// to p_f·(mean gap)/share): elephants pace themselves instead of flooding the queue.
    pub max_flow_share: f64,
}

impl TraceConfig {
    /// A trace of `flows` flows over `duration_ns` with the spec's defaults (shape 1.3, ρ = 0.7).
    pub fn new(seed: u64, flows: u32, duration_ns: u64, mean_packets_per_flow: f64) -> Self {
        Self {
            seed,
            flows,
            duration_ns,
            mean_packets_per_flow,
            pareto_shape: 1.3,
            max_packets_per_flow: 200_000,
            mean_flow_duration_ns: duration_ns as f64 / 8.0,
            utilisation: 0.7,
            propagation_ns: 0,
            max_flow_share: 0.05,
        }
    }
}

/// One packet of the trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TracePacket {
    /// Index of its flow in [`Trace::keys`].
    pub flow: u32,
    /// Unique packet identity (what the packet layer hashes from invariant bytes).
    pub identity: u64,
    /// Wire size in bytes.
    pub size: u16,
    /// Arrival time at S (ns).
    pub ts_s_ns: u64,
    /// Departure time at R (ns); `None` if RED dropped it.
    pub ts_r_ns: Option<u64>,
}

/// A generated trace, packets in arrival order at S.
#[derive(Clone, Debug)]
pub struct Trace {
    /// Flow keys.
    pub keys: Vec<FlowKey>,
    /// Their packet-layer flow hashes.
    pub flow_hashes: Vec<u64>,
    /// Packets in S order.
    pub packets: Vec<TracePacket>,
    /// Queue service rate (bytes/ns).
    pub service_bytes_per_ns: f64,
    /// Packets RED dropped.
    pub dropped: u64,
}

/// Sizes mixed to an average of ≈ 730 B: 40/64 B acks, 576 B and 1500 B (spec §7.7).
fn packet_size<R: Rng>(rng: &mut R) -> u16 {
    match rng.random_range(0..10u32) {
        0..=2 => 40,
        3 => 64,
        4 | 5 => 576,
        _ => 1500,
    }
}

/// Generates a trace.
pub fn generate(cfg: &TraceConfig) -> Trace {
    let mut rng = sim::rng(cfg.seed);
    let shape = cfg.pareto_shape.max(1.01);
    let scale = cfg.mean_packets_per_flow * (shape - 1.0) / shape;
    let sizes = Pareto::new(scale.max(1e-9), shape).ok();
    let dur = Exp::new(1.0 / cfg.mean_flow_duration_ns.max(1.0)).ok();
    let mut keys = Vec::with_capacity(cfg.flows as usize);
    let mut packets = Vec::new();
    let mut next_id = 0u64;
    let mean_gap_ns = cfg.duration_ns as f64 / (cfg.flows as f64 * cfg.mean_packets_per_flow).max(1.0);
    for f in 0..cfg.flows {
        let src = Ipv4Addr::from(0x0a00_0000 | (f & 0x00ff_ffff));
        let dst = Ipv4Addr::from(0xc0a8_0000 | ((f.wrapping_mul(2_654_435_761) >> 16) & 0xffff));
        keys.push(FlowKey::new(IpAddr::V4(src), IpAddr::V4(dst), 1024 + (f % 60_000) as u16, 443, 6));
        let p = sizes.map_or(1.0, |d| d.sample(&mut rng)).ceil().clamp(1.0, cfg.max_packets_per_flow as f64)
            as u64;
        let mut start = rng.random_range(0..cfg.duration_ns.max(1));
        let paced = p as f64 * mean_gap_ns / cfg.max_flow_share.max(1e-6);
        let len = dur.map_or(0.0, |d| d.sample(&mut rng)).max(paced).min(cfg.duration_ns as f64) as u64;
        start = start.min(cfg.duration_ns - len);
        for _ in 0..p {
            next_id += 1;
            packets.push(TracePacket {
                flow: f,
                identity: crate::synopsis::hash::mix64(next_id ^ cfg.seed.rotate_left(32)),
                size: packet_size(&mut rng),
                ts_s_ns: start + if len > 0 { rng.random_range(0..=len) } else { 0 },
                ts_r_ns: None,
            });
        }
    }
    packets.sort_by_key(|p| (p.ts_s_ns, p.identity));
    let offered: f64 = packets.iter().map(|p| p.size as f64).sum();
    let c = offered / (cfg.duration_ns.max(1) as f64 * cfg.utilisation.clamp(0.01, 10.0));
    let dropped = red_queue(&mut packets, c, cfg.propagation_ns, &mut rng);
    let flow_hashes = keys.iter().map(|k| k.hash(TRACE_IDENTITY_SEED)).collect();
    Trace { keys, flow_hashes, packets, service_bytes_per_ns: c, dropped }
}

/// FIFO with RED in byte mode (Floyd & Jacobson; paper §6.1 parameters): buffer of 0.5 s at the
/// service rate, min_th = 0.475·Q, max_th = 0.95·Q, w_q = 0.002, max_p = 1/50, with the idle
/// correction and the count mechanism. Fills `ts_r_ns`; returns the drops.
fn red_queue<R: Rng>(packets: &mut [TracePacket], c: f64, propagation_ns: u64, rng: &mut R) -> u64 {
    let q_cap = 0.5e9 * c;
    let (min_th, max_th, w_q, max_p) = (0.475 * q_cap, 0.95 * q_cap, 0.002f64, 1.0 / 50.0);
    let mean_tx_ns = 730.0 / c;
    let mut in_queue: VecDeque<(f64, f64)> = VecDeque::new(); // (departure, bytes)
    let mut q_bytes = 0.0;
    let mut avg = 0.0f64;
    let mut count: i64 = -1;
    let mut last_dep = 0.0f64;
    let mut idle_since: Option<f64> = Some(0.0);
    let mut dropped = 0;
    for p in packets.iter_mut() {
        let t = p.ts_s_ns as f64;
        while let Some(&(dep, bytes)) = in_queue.front() {
            if dep > t {
                break;
            }
            in_queue.pop_front();
            q_bytes -= bytes;
            if in_queue.is_empty() {
                idle_since = Some(dep);
            }
        }
        avg = match idle_since.take().filter(|_| in_queue.is_empty()) {
            Some(since) => avg * (1.0 - w_q).powf(((t - since) / mean_tx_ns).max(0.0)),
            None => (1.0 - w_q) * avg + w_q * q_bytes,
        };
        let size = p.size as f64;
        let drop = if q_bytes + size > q_cap || avg >= max_th {
            true
        } else if avg >= min_th {
            count += 1;
            let pb = max_p * (avg - min_th) / (max_th - min_th);
            let pa = if (count as f64) * pb >= 1.0 { 1.0 } else { pb / (1.0 - count as f64 * pb) };
            rng.random::<f64>() < pa
        } else {
            count = -1;
            false
        };
        if drop {
            count = 0;
            dropped += 1;
            if in_queue.is_empty() {
                idle_since = Some(t);
            }
            continue;
        }
        let dep = t.max(last_dep) + size / c;
        last_dep = dep;
        in_queue.push_back((dep, size));
        q_bytes += size;
        p.ts_r_ns = Some(dep.ceil() as u64 + propagation_ns);
    }
    dropped
}

/// Exact per-flow quantities in ticks, as the points record them: timestamp sums at S and R,
/// and the latency moments of the delivered packets (spec §1).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FlowTruth {
    /// Delivered packets p_f.
    pub packets: u64,
    /// t_{f,S}.
    pub t_s: u128,
    /// t_{f,R}.
    pub t_r: u128,
    /// Σ d (ticks).
    pub sum_d: f64,
    /// Σ d² (ticks²).
    pub sum_d2: f64,
    /// First and last S timestamp (ns).
    pub first_s_ns: u64,
    /// See `first_s_ns`.
    pub last_s_ns: u64,
}

impl FlowTruth {
    /// μ_f (ticks).
    pub fn mean(&self) -> f64 {
        self.sum_d / self.packets as f64
    }
    /// σ_f, population (Eq 5; ticks).
    pub fn std_dev(&self) -> f64 {
        let m = self.mean();
        (self.sum_d2 / self.packets as f64 - m * m).max(0.0).sqrt()
    }
}

/// Per-flow truth of the delivered packets for a timescale (origin and tick in ns).
pub fn truth(trace: &Trace, origin_ns: u64, tick_ns: u64) -> Vec<FlowTruth> {
    let mut t = vec![FlowTruth { first_s_ns: u64::MAX, ..FlowTruth::default() }; trace.keys.len()];
    let ticks = |ns: u64| (ns - origin_ns) / tick_ns;
    for p in &trace.packets {
        let Some(r) = p.ts_r_ns else { continue };
        let Some(ft) = t.get_mut(p.flow as usize) else { continue };
        let (us, ur) = (ticks(p.ts_s_ns), ticks(r));
        let d = ur as f64 - us as f64;
        ft.packets += 1;
        ft.t_s += us as u128;
        ft.t_r += ur as u128;
        ft.sum_d += d;
        ft.sum_d2 += d * d;
        ft.first_s_ns = ft.first_s_ns.min(p.ts_s_ns);
        ft.last_s_ns = ft.last_s_ns.max(p.ts_s_ns);
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_is_seeded_ordered_and_causal() {
        let cfg = TraceConfig::new(1, 2_000, 10_000_000_000, 30.0);
        let a = generate(&cfg);
        let b = generate(&cfg);
        assert_eq!(a.packets, b.packets);
        assert!(a.packets.windows(2).all(|w| w[0].ts_s_ns <= w[1].ts_s_ns));
        for p in &a.packets {
            if let Some(r) = p.ts_r_ns {
                assert!(r >= p.ts_s_ns);
            }
        }
        // FIFO: departures keep the arrival order.
        let deps: Vec<u64> = a.packets.iter().filter_map(|p| p.ts_r_ns).collect();
        assert!(deps.windows(2).all(|w| w[0] <= w[1]));
        // ρ = 0.7 with paced flows leaves RED idle (avg far below min_th = 0.24 s of traffic).
        assert_eq!(a.dropped, 0);
        assert!(a.packets.iter().all(|p| p.ts_s_ns < 10_000_000_000));
        let ids: std::collections::HashSet<u64> = a.packets.iter().map(|p| p.identity).collect();
        assert_eq!(ids.len(), a.packets.len());
    }

    #[test]
    fn overload_makes_red_drop() {
        let cfg = TraceConfig { utilisation: 3.0, ..TraceConfig::new(2, 500, 2_000_000_000, 40.0) };
        let t = generate(&cfg);
        assert!(t.dropped > 0);
    }

    #[test]
    fn truth_adds_up() {
        let cfg = TraceConfig::new(3, 300, 1_000_000_000, 20.0);
        let tr = generate(&cfg);
        let t = truth(&tr, 0, 1_000);
        let total: u64 = t.iter().map(|f| f.packets).sum();
        assert_eq!(total as usize, tr.packets.len());
        for f in t.iter().filter(|f| f.packets > 1) {
            assert!(f.mean() >= 0.0 && f.std_dev() >= 0.0);
            assert!((f.t_r as f64 - f.t_s as f64 - f.sum_d).abs() < 1e-6 * f.sum_d.abs().max(1.0));
        }
    }
}
