//! What the measured segment (the network between the two points) does to the packets of one
//! direction: a per-packet delay (an i.i.d. [`DelayModel`] or a FIFO queue driven by the traffic
//! itself), loss ([`LossModel`]), optional forced FIFO order, and optional explicit reordering.
//!
//! Deterministic: every random choice comes from a stream seeded from the generator's seed and
//! the direction, drawn in the order packets enter the segment. No I/O, no clock.

use crate::error::{Result, TraceError};
use rand::Rng;
use serde::{Deserialize, Serialize};
use wirelat_dataplane::sim::{self, DelayModel, DelaySampler, LossModel, LossProcess, SimRng};
use wirelat_dataplane::synopsis::hash::derive;

/// Bytes a frame occupies on the wire besides its captured bytes: FCS 4, preamble and start
/// delimiter 8, inter-frame gap 12.
pub const WIRE_OVERHEAD_BYTES: u64 = 24;

/// A FIFO single-server queue in front of a link of `service_rate_bps`, fed by the trace's own
/// packets: delay = waiting + serialisation of (frame + [`WIRE_OVERHEAD_BYTES`]) + a constant
/// `propagation_ns`. Delays are correlated and the queue never reorders. With offered load
/// R bits/s, the utilisation is ρ = R / `service_rate_bps`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "model", rename_all = "snake_case")]
pub enum QueueModel {
    /// The queue (the only variant; the tag keeps the JSON form flat like [`DelayModel`]).
    Queue {
        /// Link rate, bits per second.
        service_rate_bps: f64,
        /// Constant delay added after the queue, ns.
        propagation_ns: u64,
    },
}

/// A segment's delay model, in ns: an i.i.d. model from `wirelat_dataplane::sim` or the
/// traffic-driven queue. JSON: `{"model": "weibull", "shape": 0.6, "mean": 20000}` or
/// `{"model": "queue", "service_rate_bps": 1e9, "propagation_ns": 50000}`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum DelaySpec {
    /// FIFO queue driven by the traffic.
    Queue(QueueModel),
    /// Independent per-packet delays.
    Iid(DelayModel),
}

impl DelaySpec {
    /// A delay a packet would typically see, used to time what an endpoint does after a packet
    /// that was lost (the model's mean, or propagation plus one MTU's serialisation for a queue).
    pub fn nominal_ns(&self) -> u64 {
        match self {
            DelaySpec::Iid(m) => to_ns(m.mean()),
            DelaySpec::Queue(QueueModel::Queue { service_rate_bps, propagation_ns }) => {
                propagation_ns + to_ns(1538.0 * 8.0 * 1e9 / service_rate_bps)
            }
        }
    }
}

/// Extra delay for a fraction of packets, so they arrive after packets sent later.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReorderSpec {
    /// Fraction of packets held back.
    pub fraction: f64,
    /// The extra delay they get, ns.
    pub extra: DelayModel,
}

/// A path flows can be pinned to (ECMP-like): a flow hashes to one path, chosen with
/// probability proportional to `weight`, and each of its packets gets `extra_delay_ns` on top of
/// the delay model. Flows then differ in mean delay, which per-flow synopses must resolve (the
/// LDS spec's two-class delays, §11.1); different paths may reorder packets of different flows.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct PathClass {
    /// Relative share of flows.
    pub weight: f64,
    /// Extra delay of every packet on this path, ns.
    pub extra_delay_ns: u64,
}

/// Everything one direction of the segment does.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SegmentConfig {
    /// Per-packet delay.
    pub delay: DelaySpec,
    /// Loss.
    pub loss: LossModel,
    /// Force FIFO order: a packet never leaves before the one that entered before it
    /// (delay = max(d, previous departure − entry)).
    #[serde(default)]
    pub fifo: bool,
    /// Explicit reordering, applied after `fifo`.
    #[serde(default)]
    pub reorder: Option<ReorderSpec>,
    /// Per-flow paths (empty: one path, no extra delay). Applied before `fifo`.
    #[serde(default)]
    pub paths: Vec<PathClass>,
}

impl SegmentConfig {
    /// Checks every parameter.
    pub fn validate(&self) -> Result<()> {
        match self.delay {
            DelaySpec::Iid(m) => {
                m.sampler().ok_or_else(|| TraceError::Config(format!("delay model out of range: {m:?}")))?;
            }
            DelaySpec::Queue(QueueModel::Queue { service_rate_bps, .. }) => {
                if !(service_rate_bps.is_finite() && service_rate_bps >= 1e3) {
                    return Err(TraceError::Config(format!(
                        "queue service rate {service_rate_bps} b/s (need at least 1000)"
                    )));
                }
            }
        }
        match self.loss {
            LossModel::None => {}
            LossModel::Uniform { rate } => check_prob("loss rate", rate)?,
            LossModel::Bursty { rate, mean_burst } => {
                check_prob("loss rate", rate)?;
                if rate >= 1.0 || !(mean_burst.is_finite() && mean_burst >= 1.0) {
                    return Err(TraceError::Config(format!(
                        "bursty loss: rate {rate} < 1, mean_burst {mean_burst} >= 1"
                    )));
                }
            }
        }
        if !self.paths.is_empty() {
            let ok = self.paths.iter().all(|p| p.weight.is_finite() && p.weight >= 0.0)
                && self.paths.iter().map(|p| p.weight).sum::<f64>() > 0.0;
            if !ok {
                return Err(TraceError::Config(
                    "path weights must be non-negative with a positive sum".into(),
                ));
            }
        }
        if let Some(r) = self.reorder {
            check_prob("reorder fraction", r.fraction)?;
            r.extra.sampler().ok_or_else(|| {
                TraceError::Config(format!("reorder delay model out of range: {:?}", r.extra))
            })?;
        }
        Ok(())
    }
}

fn check_prob(what: &str, p: f64) -> Result<()> {
    if (0.0..=1.0).contains(&p) {
        Ok(())
    } else {
        Err(TraceError::Config(format!("{what} {p} not in [0, 1]")))
    }
}

/// A delay in model units (ns) as an integer number of ns, rounded; NaN or negative gives 0 and
/// values past ~11.6 days are clamped.
pub fn to_ns(x: f64) -> u64 {
    if x.is_finite() && x > 0.0 { x.round().min(1e15) as u64 } else { 0 }
}

/// What happened to one packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transit {
    /// True if the segment dropped it.
    pub lost: bool,
    /// Its delay in ns (0 for a lost packet).
    pub delay_ns: u64,
}

enum DelayState {
    Iid(DelaySampler),
    Queue { service_rate_bps: f64, propagation_ns: u64, busy_until_ns: u64 },
}

/// One direction of the segment, fed packets in the order they enter it.
pub struct Segment {
    delay: DelayState,
    loss: LossProcess,
    fifo: bool,
    reorder: Option<(f64, DelaySampler)>,
    paths: Vec<PathClass>,
    path_seed: u64,
    last_departure_ns: u64,
    rng_delay: SimRng,
    rng_loss: SimRng,
    rng_reorder: SimRng,
}

impl Segment {
    /// A segment for `cfg`, its random streams derived from `seed`.
    pub fn new(cfg: &SegmentConfig, seed: u64) -> Result<Self> {
        cfg.validate()?;
        let delay = match cfg.delay {
            DelaySpec::Iid(m) => DelayState::Iid(
                m.sampler().ok_or_else(|| TraceError::Config(format!("delay model out of range: {m:?}")))?,
            ),
            DelaySpec::Queue(QueueModel::Queue { service_rate_bps, propagation_ns }) => {
                DelayState::Queue { service_rate_bps, propagation_ns, busy_until_ns: 0 }
            }
        };
        let reorder = match cfg.reorder {
            Some(r) => Some((
                r.fraction,
                r.extra
                    .sampler()
                    .ok_or_else(|| TraceError::Config("reorder delay model out of range".into()))?,
            )),
            None => None,
        };
        Ok(Self {
            delay,
            loss: LossProcess::new(cfg.loss),
            fifo: cfg.fifo,
            reorder,
            paths: cfg.paths.clone(),
            path_seed: derive(4, seed),
            last_departure_ns: 0,
            rng_delay: sim::rng(derive(1, seed)),
            rng_loss: sim::rng(derive(2, seed)),
            rng_reorder: sim::rng(derive(3, seed)),
        })
    }

    /// The path of a flow with hash `flow_hash` (index into the configured paths; 0 without
    /// paths or without a flow).
    pub fn path_of(&self, flow_hash: Option<u64>) -> usize {
        let Some(h) = flow_hash.filter(|_| self.paths.len() > 1) else { return 0 };
        let total: f64 = self.paths.iter().map(|p| p.weight).sum();
        let mut u = (derive(h, self.path_seed) >> 11) as f64 / (1u64 << 53) as f64 * total;
        for (i, p) in self.paths.iter().enumerate() {
            if u < p.weight {
                return i;
            }
            u -= p.weight;
        }
        self.paths.len() - 1
    }

    /// The fate of the next packet, which enters at `entry_ns` (not before the previous one)
    /// with `frame_len` captured bytes and belongs to the flow with hash `flow_hash` (`None` for
    /// frames that are not IP). Lost packets are dropped before the queue: they neither wait
    /// nor occupy it.
    pub fn transit(&mut self, entry_ns: u64, frame_len: usize, flow_hash: Option<u64>) -> Transit {
        if self.loss.next_lost(&mut self.rng_loss) {
            return Transit { lost: true, delay_ns: 0 };
        }
        let mut delay_ns = match &mut self.delay {
            DelayState::Iid(s) => to_ns(s.sample(&mut self.rng_delay)),
            DelayState::Queue { service_rate_bps, propagation_ns, busy_until_ns } => {
                let bits = (frame_len as u64 + WIRE_OVERHEAD_BYTES) * 8;
                let service_ns = to_ns(bits as f64 * 1e9 / *service_rate_bps).max(1);
                let start = entry_ns.max(*busy_until_ns);
                *busy_until_ns = start + service_ns;
                *busy_until_ns - entry_ns + *propagation_ns
            }
        };
        if let Some(p) = self.paths.get(self.path_of(flow_hash)) {
            delay_ns += p.extra_delay_ns;
        }
        if self.fifo {
            delay_ns = delay_ns.max(self.last_departure_ns.saturating_sub(entry_ns));
        }
        self.last_departure_ns = self.last_departure_ns.max(entry_ns + delay_ns);
        if let Some((fraction, extra)) = &self.reorder
            && self.rng_reorder.random::<f64>() < *fraction
        {
            delay_ns += to_ns(extra.sample(&mut self.rng_reorder));
        }
        Transit { lost: false, delay_ns }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(delay: DelaySpec) -> SegmentConfig {
        SegmentConfig { delay, loss: LossModel::None, fifo: false, reorder: None, paths: vec![] }
    }

    #[test]
    fn json_forms_are_flat() {
        let q: DelaySpec =
            serde_json::from_str(r#"{"model":"queue","service_rate_bps":1e9,"propagation_ns":5}"#).unwrap();
        assert!(matches!(q, DelaySpec::Queue(_)));
        let w: DelaySpec = serde_json::from_str(r#"{"model":"weibull","shape":0.6,"mean":200}"#).unwrap();
        assert_eq!(w, DelaySpec::Iid(DelayModel::Weibull { shape: 0.6, mean: 200.0 }));
        assert!(serde_json::from_str::<DelaySpec>(r#"{"model":"nope"}"#).is_err());
    }

    #[test]
    fn fifo_never_reorders() {
        let mut c = cfg(DelaySpec::Iid(DelayModel::Uniform { low: 0.0, high: 10_000.0 }));
        c.fifo = true;
        let mut s = Segment::new(&c, 1).unwrap();
        let mut last = 0;
        for i in 0..10_000u64 {
            let t = s.transit(i * 100, 100, None);
            assert!(i * 100 + t.delay_ns >= last);
            last = i * 100 + t.delay_ns;
        }
    }

    #[test]
    fn explicit_reordering_hits_the_configured_fraction() {
        let mut c = cfg(DelaySpec::Iid(DelayModel::Constant { delay: 1000.0 }));
        c.reorder = Some(ReorderSpec { fraction: 0.1, extra: DelayModel::Constant { delay: 5000.0 } });
        let mut s = Segment::new(&c, 2).unwrap();
        let n = 100_000;
        let held = (0..n).filter(|i| s.transit(i * 100, 100, None).delay_ns == 6000).count();
        // Binomial: sd = sqrt(n p (1-p)) ≈ 94.9; allow 5 sd.
        let sd = (n as f64 * 0.1 * 0.9).sqrt();
        assert!((held as f64 - 10_000.0).abs() < 5.0 * sd, "{held}");
    }

    #[test]
    fn queue_matches_md1_mean_wait() {
        // Poisson arrivals at rate λ, fixed service S: M/D/1 mean wait Wq = ρ S / (2 (1 − ρ)).
        // Frame 101 B + 24 B overhead = 1000 bits at 1 Gb/s → S = 1000 ns; λ = 0.5/µs → ρ = 0.5,
        // Wq = 500 ns, mean delay = Wq + S + propagation = 1500 + 100.
        let c = cfg(DelaySpec::Queue(QueueModel::Queue { service_rate_bps: 1e9, propagation_ns: 100 }));
        let mut s = Segment::new(&c, 3).unwrap();
        let mut r = sim::rng(9);
        let exp = rand_distr::Exp::new(1.0 / 2000.0).unwrap();
        let mut t = 0.0f64;
        let n = 400_000usize;
        let mut delays = Vec::with_capacity(n);
        let mut last_departure = 0;
        for _ in 0..n {
            t += rand_distr::Distribution::sample(&exp, &mut r);
            let entry = t as u64;
            let d = s.transit(entry, 101, None).delay_ns;
            assert!(d >= 1100);
            assert!(entry + d >= last_departure, "a queue never reorders");
            last_departure = entry + d;
            delays.push(d as f64);
        }
        // Delays are autocorrelated: the standard error comes from batch means (100 batches of
        // 4000 packets, each far longer than a busy period at ρ = 0.5); allow 5 of them.
        let mean = delays.iter().sum::<f64>() / n as f64;
        let batch_means: Vec<f64> =
            delays.chunks(4000).map(|c| c.iter().sum::<f64>() / c.len() as f64).collect();
        let k = batch_means.len() as f64;
        let var_b = batch_means.iter().map(|m| (m - mean).powi(2)).sum::<f64>() / (k - 1.0);
        let se = (var_b / k).sqrt();
        assert!((mean - 1600.0).abs() < 5.0 * se + 1.0, "mean {mean}, se {se}");
    }

    #[test]
    fn bad_configs_are_refused() {
        assert!(Segment::new(&cfg(DelaySpec::Iid(DelayModel::Pareto { shape: 0.5, mean: 1.0 })), 0).is_err());
        let mut c = cfg(DelaySpec::Iid(DelayModel::Constant { delay: 1.0 }));
        c.loss = LossModel::Uniform { rate: 1.5 };
        assert!(Segment::new(&c, 0).is_err());
        let q = cfg(DelaySpec::Queue(QueueModel::Queue { service_rate_bps: 0.0, propagation_ns: 0 }));
        assert!(Segment::new(&q, 0).is_err());
    }
}
