//! The generator: traffic (synthetic or a base capture) through the two directions of the
//! segment, written as the four pcaps of a two-point deployment plus their ground truth.
//!
//! Timestamps: the simulation runs in true time (ns). A's written timestamp of a packet is its
//! true time at A, B's is its true time at B plus `clock_offset_ns`; both are then floored to
//! the configured resolution. The truth is computed from exactly these written values. Each
//! pcap is sorted by written timestamp (ties by true time, then by the order packets entered
//! the segment). The copy a packet has at its downstream tap differs from its upstream copy in
//! what a router changes ([`crate::frame::rewrite_in_flight`]); invariant bytes are identical.

use crate::base::{self, Timing};
use crate::error::{Result, TraceError};
use crate::frame::{self, InFlight};
use crate::pcap_io;
use crate::segment::{Segment, SegmentConfig};
use crate::topology::{Direction, DirectionTaps, Point, Tap};
use crate::traffic::{self, Network, TrafficConfig};
use crate::truth::{self, Observed, Resolution, TRUTH_SCHEMA, TRUTH_VERSION, TapFile, Truth};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use wirelat_dataplane::synopsis::hash::derive;

/// The bundled base capture: a few hundred packets of TCP handshakes, data, DNS over UDP and
/// TCP, UDP, ICMP and ARP as seen at one point, produced by [`make_bundled_base`].
pub const BUNDLED_BASE_PCAP: &[u8] = include_bytes!("../data/base.pcap");

/// Where the traffic comes from.
// One per generator configuration, made once: boxing the synthetic parameters (grown past the
// lint's limit by the log-normal mixture delay model) would only complicate every caller.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Source {
    /// Synthetic conversations.
    Synthetic {
        /// Their parameters.
        traffic: TrafficConfig,
    },
    /// A base capture: `path`, or the bundled one when `None`.
    Base {
        /// The pcap; `None` = [`BUNDLED_BASE_PCAP`].
        path: Option<PathBuf>,
        /// Rebase the first packet to the generator's `start_ns` (else keep base times).
        rebase: bool,
        /// Multiply the gaps between base packets by this factor.
        time_scale: f64,
    },
}

/// What the network does to packets besides delaying and dropping them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct InFlightConfig {
    /// Decrement TTL / hop limit (and recompute the IPv4 checksum).
    pub decrement_ttl: bool,
    /// Rewrite DSCP to this value.
    pub dscp: Option<u8>,
}

impl Default for InFlightConfig {
    fn default() -> Self {
        InFlightConfig { decrement_ttl: true, dscp: None }
    }
}

/// Everything that defines a trace pair; with the seed, it names one exact set of bytes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GenConfig {
    /// Seed of every random choice.
    pub seed: u64,
    /// Traffic source.
    pub source: Source,
    /// Segment model of the forward direction (A → B).
    pub forward: SegmentConfig,
    /// Segment model of the reverse direction (B → A).
    pub reverse: SegmentConfig,
    /// B's clock minus true time, ns.
    pub clock_offset_ns: i64,
    /// Timestamp resolution of the written pcaps.
    pub resolution: Resolution,
    /// Epoch length of the ground truth, ns.
    pub epoch_len_ns: u64,
    /// True time of the start of synthetic traffic (and of a rebased base capture), ns since
    /// 1970.
    pub start_ns: u64,
    /// Router rewrites.
    pub in_flight: InFlightConfig,
    /// Per-epoch entries in the flows' truth.
    pub flow_epochs: bool,
}

impl GenConfig {
    /// A synthetic configuration with the given segment model in both directions.
    pub fn synthetic(seed: u64, traffic: TrafficConfig, segment: SegmentConfig) -> Self {
        GenConfig {
            seed,
            source: Source::Synthetic { traffic },
            forward: segment.clone(),
            reverse: segment,
            clock_offset_ns: 0,
            resolution: Resolution::Ns,
            epoch_len_ns: 100_000_000,
            start_ns: 1_700_000_000_000_000_000,
            in_flight: InFlightConfig::default(),
            flow_epochs: true,
        }
    }

    /// Checks the parameters that are not checked where they are used.
    pub fn validate(&self) -> Result<()> {
        if self.epoch_len_ns == 0 {
            return Err(TraceError::Config("epoch length must be positive".into()));
        }
        self.forward.validate()?;
        self.reverse.validate()?;
        if let Some(d) = self.in_flight.dscp
            && d > 63
        {
            return Err(TraceError::Config(format!("DSCP {d} is not 6 bits")));
        }
        Ok(())
    }
}

/// One frame of a capture.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Captured {
    /// Written timestamp, ns.
    pub ts_ns: u64,
    /// The frame.
    pub frame: Vec<u8>,
}

/// The generated pair: four captures (indexed by [`Tap::index`]) and the truth.
#[derive(Clone, Debug)]
pub struct TracePair {
    /// Captures in [`Tap::ALL`] order.
    pub captures: [Vec<Captured>; 4],
    /// Ground truth.
    pub truth: Truth,
}

impl TracePair {
    /// The capture of `tap`.
    pub fn capture(&self, tap: Tap) -> &[Captured] {
        &self.captures[tap.index()]
    }

    /// Writes `a_port0.pcap`, `a_port1.pcap`, `b_port0.pcap`, `b_port1.pcap` and `truth.json`
    /// into `dir` (created if missing).
    pub fn write_dir(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).map_err(|e| TraceError::io(dir, e))?;
        for tap in Tap::ALL {
            let path = dir.join(format!("{}.pcap", tap.name()));
            pcap_io::write_file(&path, self.capture(tap).iter().map(|c| (c.ts_ns, c.frame.as_slice())))?;
        }
        let path = dir.join("truth.json");
        let json = serde_json::to_vec_pretty(&self.truth)
            .map_err(|e| TraceError::Json { context: path.display().to_string(), source: e })?;
        std::fs::write(&path, json).map_err(|e| TraceError::io(&path, e))
    }
}

struct Sent {
    dir: Direction,
    up_true_ns: u64,
    down_true_ns: Option<u64>,
    frame: Vec<u8>,
}

struct Engine {
    segments: [Segment; 2],
    nominal_ns: [u64; 2],
    sent: Vec<Sent>,
}

impl Network for Engine {
    fn send(&mut self, dir: Direction, t_ns: u64, frame: Vec<u8>) -> Option<u64> {
        let flow_hash = crate::parse::parse(&frame).flow_key().map(|k| k.hash(0));
        let tr = self.segments[dir.index()].transit(t_ns, frame.len(), flow_hash);
        let down = (!tr.lost).then(|| t_ns.saturating_add(tr.delay_ns));
        self.sent.push(Sent { dir, up_true_ns: t_ns, down_true_ns: down, frame });
        down
    }

    fn nominal_delay_ns(&self, dir: Direction) -> u64 {
        self.nominal_ns[dir.index()]
    }
}

fn written(t_true_ns: u64, point: Point, cfg: &GenConfig) -> Result<u64> {
    let off = if point == Point::B { cfg.clock_offset_ns } else { 0 };
    let t = i128::from(t_true_ns) + i128::from(off);
    let t = u64::try_from(t).map_err(|_| {
        TraceError::Time(format!("true time {t_true_ns} ns with clock offset {off} ns is before 1970"))
    })?;
    Ok(cfg.resolution.quantise(t))
}

/// Generates the trace pair `cfg` describes.
pub fn generate(cfg: &GenConfig) -> Result<TracePair> {
    cfg.validate()?;
    let mut engine = Engine {
        segments: [
            Segment::new(&cfg.forward, derive(21, cfg.seed))?,
            Segment::new(&cfg.reverse, derive(22, cfg.seed))?,
        ],
        nominal_ns: [cfg.forward.delay.nominal_ns(), cfg.reverse.delay.nominal_ns()],
        sent: Vec::new(),
    };
    match &cfg.source {
        Source::Synthetic { traffic } => traffic::simulate(traffic, cfg.seed, cfg.start_ns, &mut engine)?,
        Source::Base { path, rebase, time_scale } => {
            let records = match path {
                Some(p) => pcap_io::read_file(p)?,
                None => pcap_io::read(BUNDLED_BASE_PCAP, Path::new("bundled base.pcap"))?,
            };
            let timing = Timing { start_ns: rebase.then_some(cfg.start_ns), time_scale: *time_scale };
            for d in base::directed(records, timing)? {
                engine.send(d.direction, d.t_ns, d.frame);
            }
        }
    }
    materialise(engine.sent, cfg)
}

/// A frame on its way into a capture, with its sort key.
struct Pending {
    ts_ns: u64,
    true_ns: u64,
    order: usize,
    frame: Vec<u8>,
}

fn materialise(sent: Vec<Sent>, cfg: &GenConfig) -> Result<TracePair> {
    let mut taps: [Vec<Pending>; 4] = Default::default();
    // Per packet: direction, upstream ts, downstream ts, index in its upstream tap.
    let mut fates: Vec<(Direction, u64, Option<u64>, usize)> = Vec::with_capacity(sent.len());
    for (i, s) in sent.into_iter().enumerate() {
        let (up, down) = (s.dir.upstream(), s.dir.downstream());
        let up_ts = written(s.up_true_ns, up.point, cfg)?;
        let down_ts = match s.down_true_ns {
            Some(t) => {
                let ts = written(t, down.point, cfg)?;
                let rw = InFlight {
                    macs: down.macs(),
                    decrement_ttl: cfg.in_flight.decrement_ttl,
                    dscp: cfg.in_flight.dscp,
                };
                taps[down.index()].push(Pending {
                    ts_ns: ts,
                    true_ns: t,
                    order: i,
                    frame: frame::rewrite_in_flight(&s.frame, &rw),
                });
                Some(ts)
            }
            None => None,
        };
        fates.push((s.dir, up_ts, down_ts, taps[up.index()].len()));
        taps[up.index()].push(Pending { ts_ns: up_ts, true_ns: s.up_true_ns, order: i, frame: s.frame });
    }
    // Upstream taps are in order already (packets enter the segment in time order and flooring
    // keeps that order; `fates` indexes them); downstream taps need sorting.
    for dir in Direction::BOTH {
        taps[dir.downstream().index()].sort_by_key(|p| (p.ts_ns, p.true_ns, p.order));
    }
    let captures: [Vec<Captured>; 4] =
        taps.map(|v| v.into_iter().map(|p| Captured { ts_ns: p.ts_ns, frame: p.frame }).collect());

    let observed: Vec<Observed<'_>> = fates
        .iter()
        .map(|(dir, up_ts, down_ts, idx)| Observed {
            direction: *dir,
            up_ts_ns: *up_ts,
            down_ts_ns: *down_ts,
            frame: captures[dir.upstream().index()].get(*idx).map(|c| c.frame.as_slice()).unwrap_or(&[]),
        })
        .collect();
    let (directions, flows) = truth::two_point(&observed, cfg.epoch_len_ns, cfg.flow_epochs);
    let mut fridge = Vec::new();
    for point in [Point::A, Point::B] {
        fridge.extend(truth::fridge(point, point_stream(&captures, point)));
    }
    let all_ts = captures.iter().flat_map(|c| c.iter().map(|x| x.ts_ns));
    let (first, last) = all_ts.fold((u64::MAX, 0), |(a, b), t| (a.min(t), b.max(t)));
    let truth = Truth {
        schema: TRUTH_SCHEMA.into(),
        version: TRUTH_VERSION,
        seed: cfg.seed,
        epoch_len_ns: cfg.epoch_len_ns,
        clock_offset_ns: cfg.clock_offset_ns,
        resolution: cfg.resolution,
        first_ts_ns: if first == u64::MAX { 0 } else { first },
        last_ts_ns: last,
        files: Tap::ALL
            .iter()
            .map(|t| TapFile {
                tap: t.name(),
                file: format!("{}.pcap", t.name()),
                frames: captures[t.index()].len() as u64,
            })
            .collect(),
        directions,
        flows,
        fridge,
        config: serde_json::to_value(cfg).unwrap_or(serde_json::Value::Null),
    };
    Ok(TracePair { captures, truth })
}

/// A point's packets from both its ports in processing order: timestamp, then port 0 before
/// port 1, then file order.
pub fn point_stream(captures: &[Vec<Captured>; 4], point: Point) -> Vec<(u64, &[u8])> {
    let mut v: Vec<(u64, u8, usize, &[u8])> = Vec::new();
    for port in 0..2u8 {
        let tap = Tap { point, port };
        for (i, c) in captures[tap.index()].iter().enumerate() {
            v.push((c.ts_ns, port, i, c.frame.as_slice()));
        }
    }
    v.sort_by_key(|(ts, port, i, _)| (*ts, *port, *i));
    v.into_iter().map(|(ts, _, _, f)| (ts, f)).collect()
}

/// The configuration behind the bundled base capture: small synthetic traffic (short flows so
/// handshakes and DNS dominate) with a short constant delay and no loss.
pub fn bundled_base_config() -> GenConfig {
    use wirelat_dataplane::sim::{DelayModel, LossModel};
    let traffic = TrafficConfig {
        packet_rate_pps: 2_000.0,
        duration_ns: 200_000_000,
        flow_packets: traffic::FlowSize::Pareto { shape: 1.5, min: 8.0 },
        max_flow_packets: 40,
        arp_interval_ns: 40_000_000,
        ..TrafficConfig::default()
    };
    let seg = SegmentConfig {
        delay: crate::segment::DelaySpec::Iid(DelayModel::Constant { delay: 20_000.0 }),
        loss: LossModel::None,
        fifo: false,
        reorder: None,
        paths: vec![],
    };
    GenConfig::synthetic(20_240_601, traffic, seg)
}

/// The bytes of the bundled base capture: point A's view (both ports merged in processing
/// order) of [`bundled_base_config`]'s trace.
pub fn make_bundled_base() -> Result<Vec<u8>> {
    let pair = generate(&bundled_base_config())?;
    let stream = point_stream(&pair.captures, Point::A);
    pcap_io::write(Vec::new(), stream, Path::new("bundled base.pcap"))
}
