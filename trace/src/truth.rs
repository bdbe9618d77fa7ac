//! The ground truth of a trace pair (`truth.json`): its schema and how it is computed from the
//! exact timestamps written to the four pcaps.
//!
//! # Definitions (schema version 1)
//!
//! - **Observed delay** of a delivered packet = timestamp at the downstream tap − timestamp at
//!   the upstream tap, both as written in the pcaps (after quantisation and B's clock offset).
//!   Forward: `b_port0 − a_port0` = true delay + offset; reverse: `a_port1 − b_port1` = true
//!   delay − offset. This is what the two-point synopses estimate; with a clock offset that is a
//!   multiple of the resolution, subtracting `clock_offset_ns` (forward) or adding it (reverse)
//!   gives the true delay's statistics exactly.
//! - **Measured packets**: IP (v4/v6) frames that are not fragments. Other frames are forwarded
//!   and counted as `unmeasured`, never in a statistic.
//! - **Epoch** k = [k·E, (k+1)·E) of a timestamp in ns since 1970, E = `epoch_len_ns`. A packet's
//!   epoch is that of its **upstream** timestamp: A's for forward traffic (A's clock is true time,
//!   so this is the true time at A, quantised), B's written timestamp for reverse traffic. Each
//!   point assigns epochs by its own clock, so a delivered packet may land in another epoch at the
//!   downstream point: `crossing_out` counts those per sending epoch, `crossing_in` the packets
//!   received in an epoch that were sent in another, and `same_epoch` gives the delay statistics
//!   of the packets both points put in the same epoch (what a synopsis that treats crossing
//!   packets as lost estimates).
//! - **Std-dev** is the population standard deviation (divide by n). Empty statistics have
//!   count 0, mean 0 and std-dev 0.
//! - **Flows**: the directional 5-tuple (ports 0 without ports); one entry per (flow, direction),
//!   with per-epoch entries (same epoch rule) unless disabled.
//! - **Fridge**: per point and exchange kind, the delays an ideal fridge (infinite memory, p = 1)
//!   reports at that point: the point's packets from both its ports are processed in timestamp
//!   order (ties: port 0 first, then file order); a request stores its timestamp under its
//!   pairing key, overwriting an earlier copy (spec P6: the latest copy counts); a response
//!   takes and erases the stored request (spec P7: duplicate or unmatched responses give
//!   nothing). Only pairs whose response is in the trace exist (spec P12). Samples are listed in
//!   response order with the response timestamp (a sample belongs to its response's epoch). At A
//!   a TCP handshake sample is client-side time (both segment crossings plus server think time);
//!   at B it is server-side time.

use crate::parse::{self, ExchangeKey};
use crate::record::FlowId;
use crate::topology::{Direction, DirectionTaps, Point};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap, HashSet};
use wirelat_dataplane::packet::{ExchangeKind, FlowKey, Role};

/// The `schema` field of every truth file.
pub const TRUTH_SCHEMA: &str = "wirelat-truth";
/// The schema version this crate writes and reads.
pub const TRUTH_VERSION: u32 = 1;

/// Timestamp resolution of the written pcaps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Resolution {
    /// Nanoseconds.
    #[default]
    Ns,
    /// Microseconds (floored; what DPDK 22.11's pcap device delivers).
    Us,
}

impl Resolution {
    /// `t` floored to this resolution.
    pub fn quantise(self, t_ns: u64) -> u64 {
        match self {
            Resolution::Ns => t_ns,
            Resolution::Us => t_ns - t_ns % 1000,
        }
    }
}

/// Count, mean and population std-dev of a set of delays (ns).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize, Default)]
pub struct Stats {
    /// Number of delays.
    pub count: u64,
    /// Mean, ns.
    pub mean_ns: f64,
    /// Population standard deviation, ns.
    pub std_dev_ns: f64,
}

impl Stats {
    /// Pools disjoint sets (exact up to f64 rounding: combines counts, means and M2 = n·sd²).
    pub fn pool<'a>(parts: impl IntoIterator<Item = &'a Stats>) -> Stats {
        let (mut n, mut mean, mut m2) = (0u64, 0.0f64, 0.0f64);
        for p in parts {
            if p.count == 0 {
                continue;
            }
            let nb = p.count as f64;
            let na = n as f64;
            let d = p.mean_ns - mean;
            let tot = na + nb;
            mean += d * nb / tot;
            m2 += p.std_dev_ns * p.std_dev_ns * nb + d * d * na * nb / tot;
            n += p.count;
        }
        if n == 0 {
            Stats::default()
        } else {
            Stats { count: n, mean_ns: mean, std_dev_ns: (m2 / n as f64).sqrt() }
        }
    }
}

/// Accumulates [`Stats`]: an exact integer sum for the mean, Welford's update for the variance.
#[derive(Clone, Copy, Debug, Default)]
pub struct StatsAcc {
    n: u64,
    sum: i128,
    mean: f64,
    m2: f64,
}

impl StatsAcc {
    /// Adds one delay.
    pub fn push(&mut self, x_ns: i64) {
        self.n += 1;
        self.sum += i128::from(x_ns);
        let x = x_ns as f64;
        let d = x - self.mean;
        self.mean += d / self.n as f64;
        self.m2 += d * (x - self.mean);
    }

    /// The statistics so far.
    pub fn stats(&self) -> Stats {
        if self.n == 0 {
            return Stats::default();
        }
        Stats {
            count: self.n,
            mean_ns: self.sum as f64 / self.n as f64,
            std_dev_ns: (self.m2.max(0.0) / self.n as f64).sqrt(),
        }
    }
}

/// One epoch of one direction.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EpochTruth {
    /// Epoch number k (covers [k·E, (k+1)·E)).
    pub epoch: u64,
    /// Measured packets whose upstream timestamp is in this epoch.
    pub sent: u64,
    /// Of those, delivered.
    pub delivered: u64,
    /// Of those, lost.
    pub lost: u64,
    /// Observed delays of the delivered ones.
    pub delay: Stats,
    /// Measured packets whose downstream timestamp is in this epoch.
    pub received: u64,
    /// Delivered packets sent in this epoch and received in another.
    pub crossing_out: u64,
    /// Packets received in this epoch that were sent in another.
    pub crossing_in: u64,
    /// Observed delays of the packets sent and received in this epoch.
    pub same_epoch: Stats,
}

/// Whole-trace totals of one direction.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DirectionTotals {
    /// Measured packets sent.
    pub sent: u64,
    /// Delivered.
    pub delivered: u64,
    /// Lost.
    pub lost: u64,
    /// Observed delays of all delivered packets.
    pub delay: Stats,
    /// Frames forwarded but not measured (non-IP, fragments); also crossed the segment.
    pub unmeasured: u64,
    /// Delivered packets that reached the downstream tap before a packet sent earlier
    /// (strictly earlier downstream timestamp than the latest one so far in sending order).
    pub reordered: u64,
    /// Measured packets whose invariant bytes equal those of an earlier packet of this
    /// direction (0 for synthetic traffic; real base captures may have some).
    pub duplicate_identities: u64,
}

/// Ground truth of one direction.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DirectionTruth {
    /// The direction.
    pub direction: Direction,
    /// Upstream tap file stem (`a_port0` or `b_port1`).
    pub upstream: String,
    /// Downstream tap file stem (`b_port0` or `a_port1`).
    pub downstream: String,
    /// Totals.
    pub total: DirectionTotals,
    /// Every epoch that has a sent or received packet, ascending.
    pub epochs: Vec<EpochTruth>,
}

/// One epoch of one flow.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FlowEpoch {
    /// Epoch number (of the upstream timestamp).
    pub epoch: u64,
    /// Packets sent in this epoch.
    pub sent: u64,
    /// Of those, delivered.
    pub delivered: u64,
    /// Their observed delays.
    pub delay: Stats,
    /// Observed delays of those received in the same epoch.
    pub same_epoch: Stats,
}

/// Ground truth of one directional flow.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FlowTruth {
    /// The direction its packets take.
    pub direction: Direction,
    /// The directional 5-tuple.
    pub flow: FlowId,
    /// Packets sent.
    pub sent: u64,
    /// Delivered.
    pub delivered: u64,
    /// Observed delays of the delivered packets.
    pub delay: Stats,
    /// Per epoch (empty if disabled), ascending.
    pub epochs: Vec<FlowEpoch>,
}

/// The ideal fridge's samples at one point for one exchange kind.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FridgeTruth {
    /// The point.
    pub point: Point,
    /// TCP handshake or DNS.
    pub kind: ExchangeKind,
    /// Requests seen (all copies).
    pub requests: u64,
    /// Requests that overwrote an outstanding copy with the same key.
    pub duplicate_requests: u64,
    /// Responses seen.
    pub responses: u64,
    /// Responses without an outstanding request (duplicates, or request not in the trace).
    pub unmatched_responses: u64,
    /// Requests still outstanding at the end of the trace.
    pub unanswered_requests: u64,
    /// Response timestamps of the samples, ns, ascending.
    pub response_ts_ns: Vec<u64>,
    /// The samples' delays (response − request timestamp at this point), ns.
    pub delay_ns: Vec<u64>,
}

/// A pcap of the pair.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TapFile {
    /// `a_port0` etc.
    pub tap: String,
    /// File name in the output directory.
    pub file: String,
    /// Frames it holds.
    pub frames: u64,
}

/// The whole ground-truth file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Truth {
    /// Always [`TRUTH_SCHEMA`].
    pub schema: String,
    /// [`TRUTH_VERSION`].
    pub version: u32,
    /// The generator's seed.
    pub seed: u64,
    /// Epoch length E, ns.
    pub epoch_len_ns: u64,
    /// B's clock minus true time, ns (A's clock is true time).
    pub clock_offset_ns: i64,
    /// Resolution of the written timestamps.
    pub resolution: Resolution,
    /// Earliest written timestamp over the four pcaps, ns.
    pub first_ts_ns: u64,
    /// Latest written timestamp, ns.
    pub last_ts_ns: u64,
    /// The four pcaps.
    pub files: Vec<TapFile>,
    /// Forward and reverse.
    pub directions: Vec<DirectionTruth>,
    /// Per directional flow, sorted by (direction, flow).
    pub flows: Vec<FlowTruth>,
    /// Per point and kind: A then B, handshake then DNS.
    pub fridge: Vec<FridgeTruth>,
    /// The generator configuration, for provenance.
    pub config: serde_json::Value,
}

impl Truth {
    /// The truth of `direction`.
    pub fn direction(&self, direction: Direction) -> Option<&DirectionTruth> {
        self.directions.iter().find(|d| d.direction == direction)
    }

    /// Reads and checks a truth file.
    pub fn read(path: &std::path::Path) -> crate::error::Result<Truth> {
        let text = std::fs::read_to_string(path).map_err(|e| crate::error::TraceError::io(path, e))?;
        let t: Truth = serde_json::from_str(&text)
            .map_err(|e| crate::error::TraceError::Json { context: path.display().to_string(), source: e })?;
        if t.schema != TRUTH_SCHEMA || t.version != TRUTH_VERSION {
            return Err(crate::error::TraceError::Config(format!(
                "{}: schema {} version {} (this build reads {TRUTH_SCHEMA} version {TRUTH_VERSION})",
                path.display(),
                t.schema,
                t.version
            )));
        }
        Ok(t)
    }
}

/// One packet's fate as written: its direction, timestamps and upstream bytes.
#[derive(Clone, Copy, Debug)]
pub struct Observed<'a> {
    /// Direction.
    pub direction: Direction,
    /// Upstream written timestamp, ns.
    pub up_ts_ns: u64,
    /// Downstream written timestamp, `None` if lost.
    pub down_ts_ns: Option<u64>,
    /// The frame at the upstream tap.
    pub frame: &'a [u8],
}

#[derive(Default)]
struct EpochAcc {
    sent: u64,
    delivered: u64,
    received: u64,
    crossing_out: u64,
    crossing_in: u64,
    delay: StatsAcc,
    same: StatsAcc,
}

#[derive(Default)]
struct FlowAcc {
    sent: u64,
    delivered: u64,
    delay: StatsAcc,
    epochs: BTreeMap<u64, (u64, u64, StatsAcc, StatsAcc)>,
}

/// Two-point truth of both directions and of every flow. `packets` must hold, per direction,
/// the packets in the order they entered the segment.
pub fn two_point(
    packets: &[Observed<'_>],
    epoch_len_ns: u64,
    flow_epochs: bool,
) -> (Vec<DirectionTruth>, Vec<FlowTruth>) {
    let e = epoch_len_ns.max(1);
    let mut dirs = Vec::new();
    let mut flows: BTreeMap<(Direction, FlowKey), FlowAcc> = BTreeMap::new();
    for dir in Direction::BOTH {
        let mut epochs: BTreeMap<u64, EpochAcc> = BTreeMap::new();
        let mut total = StatsAcc::default();
        let (mut sent, mut delivered, mut unmeasured, mut reordered, mut dups) =
            (0u64, 0u64, 0u64, 0u64, 0u64);
        let mut latest_down: Option<u64> = None;
        let mut seen: HashSet<u64> = HashSet::new();
        for p in packets.iter().filter(|p| p.direction == dir) {
            let view = parse::parse(p.frame);
            let Some(key) = view.flow_key() else {
                unmeasured += 1;
                continue;
            };
            if let Some(d) = parse::invariant_digest(p.frame)
                && !seen.insert(d)
            {
                dups += 1;
            }
            sent += 1;
            let ke = p.up_ts_ns / e;
            let fa = flows.entry((dir, key)).or_default();
            fa.sent += 1;
            let fe = fa.epochs.entry(ke).or_default();
            fe.0 += 1;
            let ea = epochs.entry(ke).or_default();
            ea.sent += 1;
            let Some(down) = p.down_ts_ns else { continue };
            delivered += 1;
            let delay = down as i64 - p.up_ts_ns as i64;
            total.push(delay);
            if latest_down.is_some_and(|l| down < l) {
                reordered += 1;
            }
            latest_down = Some(latest_down.map_or(down, |l| l.max(down)));
            ea.delivered += 1;
            ea.delay.push(delay);
            fa.delivered += 1;
            fa.delay.push(delay);
            fe.1 += 1;
            fe.2.push(delay);
            let kd = down / e;
            if kd == ke {
                ea.same.push(delay);
                fe.3.push(delay);
                ea.received += 1;
            } else {
                ea.crossing_out += 1;
                let r = epochs.entry(kd).or_default();
                r.received += 1;
                r.crossing_in += 1;
            }
        }
        let epochs = epochs
            .into_iter()
            .map(|(k, a)| EpochTruth {
                epoch: k,
                sent: a.sent,
                delivered: a.delivered,
                lost: a.sent - a.delivered,
                delay: a.delay.stats(),
                received: a.received,
                crossing_out: a.crossing_out,
                crossing_in: a.crossing_in,
                same_epoch: a.same.stats(),
            })
            .collect();
        dirs.push(DirectionTruth {
            direction: dir,
            upstream: dir.upstream().name(),
            downstream: dir.downstream().name(),
            total: DirectionTotals {
                sent,
                delivered,
                lost: sent - delivered,
                delay: total.stats(),
                unmeasured,
                reordered,
                duplicate_identities: dups,
            },
            epochs,
        });
    }
    let flows = flows
        .into_iter()
        .map(|((direction, key), a)| FlowTruth {
            direction,
            flow: FlowId::from(key),
            sent: a.sent,
            delivered: a.delivered,
            delay: a.delay.stats(),
            epochs: if flow_epochs {
                a.epochs
                    .into_iter()
                    .map(|(k, (s, d, st, same))| FlowEpoch {
                        epoch: k,
                        sent: s,
                        delivered: d,
                        delay: st.stats(),
                        same_epoch: same.stats(),
                    })
                    .collect()
            } else {
                Vec::new()
            },
        })
        .collect();
    (dirs, flows)
}

/// The ideal fridge at `point` over its packets `stream` (timestamp, frame) in processing order
/// (see the module docs). Returns the TCP-handshake entry, then the DNS entry.
pub fn fridge<'a>(point: Point, stream: impl IntoIterator<Item = (u64, &'a [u8])>) -> Vec<FridgeTruth> {
    let kinds = [ExchangeKind::TcpHandshake, ExchangeKind::Dns];
    let mut out: Vec<FridgeTruth> = kinds
        .iter()
        .map(|k| FridgeTruth {
            point,
            kind: *k,
            requests: 0,
            duplicate_requests: 0,
            responses: 0,
            unmatched_responses: 0,
            unanswered_requests: 0,
            response_ts_ns: Vec::new(),
            delay_ns: Vec::new(),
        })
        .collect();
    let mut pending: [HashMap<ExchangeKey, u64>; 2] = [HashMap::new(), HashMap::new()];
    for (ts, frame) in stream {
        let Some(x) = parse::exchange(frame) else { continue };
        let i = match x.kind {
            ExchangeKind::TcpHandshake => 0,
            ExchangeKind::Dns => 1,
            ExchangeKind::TcpData => continue,
        };
        match x.role {
            Role::Request => {
                out[i].requests += 1;
                if pending[i].insert(x.key, ts).is_some() {
                    out[i].duplicate_requests += 1;
                }
            }
            Role::Response => {
                out[i].responses += 1;
                match pending[i].remove(&x.key) {
                    Some(t0) => {
                        out[i].response_ts_ns.push(ts);
                        out[i].delay_ns.push(ts.saturating_sub(t0));
                    }
                    None => out[i].unmatched_responses += 1,
                }
            }
        }
    }
    for (o, p) in out.iter_mut().zip(&pending) {
        o.unanswered_requests = p.len() as u64;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pooling_equals_direct_computation() {
        let xs: Vec<i64> = (0..1000).map(|i| (i * i % 977) as i64 - 300).collect();
        let mut all = StatsAcc::default();
        let mut parts = [StatsAcc::default(); 3];
        for (i, x) in xs.iter().enumerate() {
            all.push(*x);
            parts[i % 3].push(*x);
        }
        let pooled = Stats::pool(parts.iter().map(|p| p.stats()).collect::<Vec<_>>().iter());
        let direct = all.stats();
        assert_eq!(pooled.count, direct.count);
        assert!((pooled.mean_ns - direct.mean_ns).abs() < 1e-9);
        assert!((pooled.std_dev_ns - direct.std_dev_ns).abs() < 1e-9);
        // Two-pass population std-dev as the reference.
        let m = xs.iter().sum::<i64>() as f64 / xs.len() as f64;
        let sd = (xs.iter().map(|x| (*x as f64 - m).powi(2)).sum::<f64>() / xs.len() as f64).sqrt();
        assert!((direct.std_dev_ns - sd).abs() < 1e-9);
        assert_eq!(Stats::pool([].iter()), Stats::default());
    }

    #[test]
    fn quantise_floors_to_microseconds() {
        assert_eq!(Resolution::Us.quantise(1_999), 1_000);
        assert_eq!(Resolution::Ns.quantise(1_999), 1_999);
    }
}
