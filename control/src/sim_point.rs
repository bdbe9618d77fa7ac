//! Synthetic measurement points, for tests and demos of the shipping path: seeded two-point
//! traffic run through the real synopses, epoch by epoch, into the [`EpochMessage`]s and RDA
//! caches both points' control threads would hand their sinks — and `wirelat sim-point`,
//! which ships one point's epochs through a [`NetworkSink`] as an appliance would.
//!
//! The traffic: `packets_per_epoch` packets per direction and epoch over `flows` flows (skewed
//! sizes), Weibull one-way delays, uniform loss, optional epochs in which the forward direction
//! loses everything, and DNS exchanges for the fridge. Point "a" is upstream of the forward
//! segment, "b" of the reverse one. The same seed gives the same epochs in every process, so
//! a test can compute the expected estimates directly from [`simulate`]'s output.
//!
//! Not on any hot path; no packet parsing (flow keys and identities are drawn directly).

use crate::ship::{NetworkSink, ShipConfig};
use crate::sink::{EpochMessage, EpochSink, LOCAL_SEGMENT, RdaPairs};
use crate::synopses::{SynopsesConfig, peer_fingerprint_of};
use rand::Rng;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;
use std::time::{Duration, Instant};
use wirelat_dataplane::packet::{Exchange, ExchangeKind, FlowKey, PacketConfig, Role};
use wirelat_dataplane::sim::{DelayModel, rng};
use wirelat_dataplane::synopsis::colate::Colate;
use wirelat_dataplane::synopsis::fridge::FridgeSynopsis;
use wirelat_dataplane::synopsis::hash::mix64;
use wirelat_dataplane::synopsis::lda::Lda;
use wirelat_dataplane::synopsis::lds::Lds;
use wirelat_dataplane::synopsis::rda::{Rda, TimestampCache};
use wirelat_dataplane::synopsis::{Observation, Synopsis, SynopsisConfig};

/// `[sim]`: the traffic.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimTraffic {
    /// Seed of everything.
    pub seed: u64,
    /// Epochs simulated.
    pub epochs: u64,
    /// E, ns.
    pub epoch_len_ns: u64,
    /// Number of the first epoch (the clock starts at `first_epoch · E`).
    #[serde(default = "default_first")]
    pub first_epoch: u64,
    /// Packets per direction and epoch.
    pub packets_per_epoch: u64,
    /// Flows per direction.
    pub flows: u32,
    /// Mean one-way delay (Weibull, shape 0.8), ns.
    pub mean_delay_ns: f64,
    /// Loss probability per packet.
    #[serde(default)]
    pub loss: f64,
    /// Epochs (relative to `first_epoch`) in which the downstream point sees no forward packet
    /// (sent or arriving in them): 100 % loss, and no synopsis from that point.
    #[serde(default)]
    pub blackout_epochs: Vec<u64>,
    /// DNS exchanges per epoch (both points see them; the fridge measures them).
    #[serde(default)]
    pub dns_per_epoch: u64,
}

fn default_first() -> u64 {
    1000
}

/// `[point]` of a simulated point.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimPoint {
    /// Its id.
    pub id: u32,
    /// "a" (client side, upstream of forward) or "b".
    pub role: String,
}

/// `[segments]`: the segment ids of the two directions (the same numbers at both points).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimSegments {
    /// Client → server (a → b).
    pub forward: u32,
    /// Server → client (b → a).
    pub reverse: u32,
}

/// The whole `wirelat sim-point` file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimPointConfig {
    /// This point.
    pub point: SimPoint,
    /// The id of the other point.
    pub other_point: u32,
    /// Segment ids.
    pub segments: SimSegments,
    /// Where to ship.
    pub ship: ShipConfig,
    /// Traffic.
    pub sim: SimTraffic,
    /// Synopses (the same tables as the collector's).
    #[serde(default)]
    pub synopses: SynopsesConfig,
    /// Packet settings (the same `[packet]` as the collector's). Only their fingerprint is
    /// used: the simulated identities are drawn, not hashed.
    #[serde(default)]
    pub packet: PacketConfig,
}

/// What one point's control thread hands its sinks for one epoch.
#[derive(Clone, Debug)]
pub struct Harvest {
    /// The epoch.
    pub epoch: u64,
    /// One message per (synopsis, segment) with packets.
    pub messages: Vec<EpochMessage>,
    /// RDA caches to retain: (segment, cache).
    pub rda_caches: Vec<(u32, TimestampCache)>,
}

/// One packet as one point sees it.
#[derive(Clone, Copy)]
struct Seen {
    ts_ns: u64,
    segment: u32,
    flow: FlowKey,
    flow_hash: u64,
    identity: u64,
    exchange: Option<Exchange>,
}

fn ip(a: u8, b: u8, c: u8, d: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(a, b, c, d))
}

/// The seeded traffic, generated one epoch at a time, so that a long simulation holds only
/// the packets not yet harvested (a streaming `sim-point` keeps a flat RSS).
struct Traffic<'a> {
    t: &'a SimTraffic,
    seg: SimSegments,
    sampler: wirelat_dataplane::sim::DelaySampler,
    r: wirelat_dataplane::sim::SimRng,
    id_seed: u64,
    counter: u64,
    /// Next relative epoch to generate.
    next: u64,
}

impl<'a> Traffic<'a> {
    fn new(t: &'a SimTraffic, seg: SimSegments) -> Result<Self, String> {
        if t.epoch_len_ns == 0 || t.flows == 0 {
            return Err("[sim] epoch_len_ns and flows must be positive".into());
        }
        let sampler = DelayModel::Weibull { shape: 0.8, mean: t.mean_delay_ns }
            .sampler()
            .ok_or("[sim] mean_delay_ns must be positive")?;
        Ok(Self {
            t,
            seg,
            sampler,
            r: rng(t.seed),
            id_seed: mix64(t.seed ^ 0x5157_7061_636b_6574),
            counter: 0,
            next: 0,
        })
    }

    /// Appends the packets sent in the next epoch to `seen` (`[a, b]`, unsorted: a packet may
    /// arrive in a later epoch). Every packet generated later has a timestamp at or after the
    /// start of the epoch after this one. False when every epoch was generated.
    fn next_epoch(&mut self, seen: &mut [Vec<Seen>; 2]) -> bool {
        let (t, i) = (self.t, self.next);
        if i >= t.epochs {
            return false;
        }
        self.next += 1;
        let r = &mut self.r;
        let start = (t.first_epoch + i) * t.epoch_len_ns;
        let blackout = t.blackout_epochs.contains(&i);
        for forward in [true, false] {
            let (up, down, segment) =
                if forward { (0, 1, self.seg.forward) } else { (1, 0, self.seg.reverse) };
            for _ in 0..t.packets_per_epoch {
                let u: f64 = r.random();
                let f = ((u * u) * f64::from(t.flows)) as u32;
                let client = ip(10, 1, (f >> 8) as u8, f as u8);
                let server = ip(192, 0, 2, 1);
                let port = 10_000 + (f % 50_000) as u16;
                let flow = if forward {
                    FlowKey::new(client, server, port, 443, 6)
                } else {
                    FlowKey::new(server, client, 443, port, 6)
                };
                self.counter += 1;
                let identity = mix64(self.counter ^ self.id_seed);
                let ts_up = start + r.random_range(0..t.epoch_len_ns);
                let ts_down = ts_up + self.sampler.sample(r).max(0.0) as u64;
                // A blackout is the downstream tap seeing no forward packet in that epoch at
                // all: sent in it, or arriving in it.
                let arrival = (ts_down / t.epoch_len_ns).saturating_sub(t.first_epoch);
                let dark = forward && (blackout || t.blackout_epochs.contains(&arrival));
                let lost = r.random::<f64>() < t.loss || dark;
                let s = Seen {
                    ts_ns: ts_up,
                    segment,
                    flow,
                    flow_hash: flow.hash(t.seed),
                    identity,
                    exchange: None,
                };
                seen[up].push(s);
                if !lost {
                    seen[down].push(Seen { ts_ns: ts_down, ..s });
                }
            }
        }
        for _ in 0..t.dns_per_epoch {
            self.counter += 1;
            let id = mix64(self.counter ^ self.id_seed);
            let client = ip(10, 2, (id >> 8) as u8, id as u8);
            let resolver = ip(198, 51, 100, 53);
            let q = FlowKey::new(client, resolver, 20_000 + (id % 40_000) as u16, 53, 17);
            let t0 = start + r.random_range(0..t.epoch_len_ns);
            let (d1, d2) = (self.sampler.sample(r) as u64, self.sampler.sample(r) as u64);
            let service = 20_000 + r.random_range(0..200_000u64);
            let ex = |role| Some(Exchange { kind: ExchangeKind::Dns, role, id });
            let req = Seen {
                ts_ns: t0,
                segment: LOCAL_SEGMENT,
                flow: q,
                flow_hash: q.hash(t.seed),
                identity: id,
                exchange: ex(Role::Request),
            };
            let resp = Seen { flow: q.reversed(), identity: id ^ 1, exchange: ex(Role::Response), ..req };
            // A sees the query, then the answer a full round trip later; B sits closer to
            // the resolver.
            seen[0].push(req);
            seen[0].push(Seen { ts_ns: t0 + d1 + service + d2, ..resp });
            seen[1].push(Seen { ts_ns: t0 + d1, ..req });
            seen[1].push(Seen { ts_ns: t0 + d1 + service, ..resp });
        }
        true
    }

    /// Timestamps below this are final: every packet still to be generated is at or after it.
    fn settled_before(&self) -> u64 {
        if self.next >= self.t.epochs {
            return u64::MAX;
        }
        (self.t.first_epoch + self.next) * self.t.epoch_len_ns
    }
}

/// The packets each point sees: `[a, b]`, each sorted by time.
#[cfg(test)]
fn traffic(t: &SimTraffic, seg: SimSegments) -> Result<[Vec<Seen>; 2], String> {
    let mut tr = Traffic::new(t, seg)?;
    let mut seen: [Vec<Seen>; 2] = [Vec::new(), Vec::new()];
    while tr.next_epoch(&mut seen) {}
    for s in &mut seen {
        s.sort_by_key(|p| p.ts_ns);
    }
    Ok(seen)
}

/// Per (segment, epoch) synopses of one point.
#[derive(Default)]
struct Shard {
    lda: Option<Lda>,
    lds: Option<Lds>,
    rda: Option<Rda>,
    colate: Option<Colate>,
}

/// Folds `obs` into the synopsis in `slot`, creating it on first use (when enabled).
fn feed<S: Synopsis<Carry = ()>>(
    slot: &mut Option<S>,
    cfg: Option<&S::Config>,
    obs: &Observation<'_>,
) -> Result<(), String> {
    let Some(cfg) = cfg else { return Ok(()) };
    if slot.is_none() {
        *slot = Some(S::new(cfg).map_err(|e| e.to_string())?);
    }
    if let Some(s) = slot {
        s.update(&mut (), obs);
    }
    Ok(())
}

/// The message a point's publisher would make of `s` (fingerprinted with `packet`).
fn message<S: Synopsis>(
    point: u32,
    segment: u32,
    epoch: u64,
    e: u64,
    s: &S,
    packet: &PacketConfig,
) -> EpochMessage {
    EpochMessage {
        point,
        segment,
        epoch,
        epoch_len_ns: e,
        kind: S::Config::KIND,
        fingerprint: peer_fingerprint_of(s, packet),
        complete: true,
        body: s.encode(),
        summary: crate::sink::Summary::Simulated { simulated: true },
    }
}

/// One point's side of a streaming simulation: the packets it saw that are not harvested
/// yet, and its fridge's carry (exchanges span epochs).
struct PointHarvester {
    point: u32,
    pending: Vec<Seen>,
    carry: Option<<FridgeSynopsis as Synopsis>::Carry>,
}

impl PointHarvester {
    /// The harvests of every epoch whose packets all have timestamps below `settled` (epochs
    /// ascending, only epochs with packets); later packets stay pending.
    fn harvest(
        &mut self,
        settled: u64,
        e: u64,
        syn: &SynopsesConfig,
        packet: &PacketConfig,
    ) -> Result<Vec<Harvest>, String> {
        // Stable: packets with equal timestamps keep their generation order, as in one sort of
        // the whole run.
        self.pending.sort_by_key(|p| p.ts_ns);
        let n = self.pending.partition_point(|p| p.ts_ns < settled);
        let point = self.point;
        let mut shards: BTreeMap<(u64, u32), Shard> = BTreeMap::new();
        let mut fridges: BTreeMap<u64, FridgeSynopsis> = BTreeMap::new();
        for p in self.pending.drain(..n) {
            let epoch = p.ts_ns / e;
            let obs = Observation {
                ts_ns: p.ts_ns,
                flow: &p.flow,
                flow_hash: p.flow_hash,
                identity: p.identity,
                exchange: p.exchange,
                encap: wirelat_dataplane::packet::Encap::NONE,
            };
            if p.exchange.is_some() {
                if let (Some(cfg), Some(c)) = (&syn.fridge, self.carry.as_mut()) {
                    let f = match fridges.entry(epoch) {
                        std::collections::btree_map::Entry::Occupied(o) => o.into_mut(),
                        std::collections::btree_map::Entry::Vacant(v) => {
                            v.insert(FridgeSynopsis::new(cfg).map_err(|e| e.to_string())?)
                        }
                    };
                    f.update(c, &obs);
                }
                continue;
            }
            let sh = shards.entry((epoch, p.segment)).or_default();
            feed(&mut sh.lda, syn.lda.as_ref(), &obs)?;
            feed(&mut sh.lds, syn.lds.as_ref(), &obs)?;
            feed(&mut sh.rda, syn.rda.as_ref(), &obs)?;
            feed(&mut sh.colate, syn.colate.as_ref(), &obs)?;
        }
        let mut by_epoch: BTreeMap<u64, Harvest> = BTreeMap::new();
        fn at(by_epoch: &mut BTreeMap<u64, Harvest>, epoch: u64) -> &mut Harvest {
            by_epoch.entry(epoch).or_insert_with(|| Harvest { epoch, messages: vec![], rda_caches: vec![] })
        }
        for ((epoch, segment), sh) in shards {
            let h = at(&mut by_epoch, epoch);
            if let Some(s) = sh.lda {
                h.messages.push(message(point, segment, epoch, e, &s, packet));
            }
            if let Some(s) = sh.lds {
                h.messages.push(message(point, segment, epoch, e, &s, packet));
            }
            if let Some(mut s) = sh.rda {
                h.messages.push(message(point, segment, epoch, e, &s, packet));
                h.rda_caches.push((segment, s.take_cache()));
            }
            if let Some(s) = sh.colate {
                h.messages.push(message(point, segment, epoch, e, &s, packet));
            }
        }
        for (epoch, f) in fridges {
            at(&mut by_epoch, epoch).messages.push(message(point, LOCAL_SEGMENT, epoch, e, &f, packet));
        }
        Ok(by_epoch.into_values().collect())
    }
}

/// A seeded two-point simulation that yields its harvests as the traffic advances, holding
/// only the packets of the epochs not yet complete: memory does not grow with `[sim] epochs`.
pub struct Simulation<'a> {
    traffic: Traffic<'a>,
    syn: &'a SynopsesConfig,
    packet: &'a PacketConfig,
    /// `[a, b]`; `None` for a point whose harvests are not wanted (its packets are dropped).
    points: [Option<PointHarvester>; 2],
    done: bool,
}

impl<'a> Simulation<'a> {
    /// A simulation of both points (`ids = [a, b]`), or only of `only` (0 = a, 1 = b): the
    /// other's synopses are then not computed, its packets still drawn (same seed, same
    /// traffic). `packet` only enters the messages' fingerprints, as at a real point.
    pub fn new(
        t: &'a SimTraffic,
        syn: &'a SynopsesConfig,
        packet: &'a PacketConfig,
        seg: SimSegments,
        ids: [u32; 2],
        only: Option<usize>,
    ) -> Result<Self, String> {
        syn.validate().map_err(|e| e.to_string())?;
        let traffic = Traffic::new(t, seg)?;
        let side = |which: usize| {
            only.is_none_or(|o| o == which).then(|| PointHarvester {
                point: ids[which],
                pending: Vec::new(),
                carry: syn.fridge.as_ref().map(FridgeSynopsis::new_carry),
            })
        };
        Ok(Self { traffic, syn, packet, points: [side(0), side(1)], done: false })
    }

    /// The next epochs that became complete (`[a, b]`, each ascending; possibly empty), or
    /// `None` once everything was harvested.
    pub fn step(&mut self) -> Option<Result<[Vec<Harvest>; 2], String>> {
        if self.done {
            return None;
        }
        let mut fresh: [Vec<Seen>; 2] = [Vec::new(), Vec::new()];
        if !self.traffic.next_epoch(&mut fresh) {
            self.done = true;
        }
        let settled = self.traffic.settled_before();
        let e = self.traffic.t.epoch_len_ns;
        let mut out: [Vec<Harvest>; 2] = [Vec::new(), Vec::new()];
        for (which, new) in fresh.into_iter().enumerate() {
            let Some(h) = &mut self.points[which] else { continue };
            h.pending.extend(new);
            match h.harvest(settled, e, self.syn, self.packet) {
                Ok(v) => out[which] = v,
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            }
        }
        Some(Ok(out))
    }
}

/// Both points' harvests (`[a, b]`, epochs ascending; only epochs with packets), for point ids
/// `ids = [a, b]`. `packet` only enters the messages' fingerprints, as at a real point.
pub fn simulate(
    t: &SimTraffic,
    syn: &SynopsesConfig,
    packet: &PacketConfig,
    seg: SimSegments,
    ids: [u32; 2],
) -> Result<[Vec<Harvest>; 2], String> {
    let mut sim = Simulation::new(t, syn, packet, seg, ids, None)?;
    let mut out: [Vec<Harvest>; 2] = [Vec::new(), Vec::new()];
    while let Some(step) = sim.step() {
        let [a, b] = step?;
        out[0].extend(a);
        out[1].extend(b);
    }
    Ok(out)
}

/// How `wirelat sim-point` runs.
#[derive(Clone, Copy, Debug, Default)]
pub struct RunOptions {
    /// One epoch per `pace`, on a schedule from the start (as a real point's epochs follow the
    /// wall clock): a point that fell behind catches up instead of drifting. With a pause
    /// after each epoch instead, two points drifted apart for the whole run, and the one
    /// ahead held an ever longer backlog of unacknowledged epochs (its synopses wait at the
    /// collector for the other point's): the W14 soaks' linear RSS growth of one point.
    pub pace: Duration,
    /// Skip the epochs before this one (relative index): a point restarted mid-run.
    pub from_epoch: u64,
    /// Exit abruptly (no close, exit code 3) after delivering this relative epoch: a crash.
    pub crash_after: Option<u64>,
}

/// `wirelat sim-point`: simulates, then ships this point's epochs to the peer and closes
/// (waiting for the acknowledgements). Prints the sink's counters as JSON on stdout.
pub fn run(config: &Path, opts: RunOptions) -> Result<(), String> {
    let text = std::fs::read_to_string(config).map_err(|e| format!("{}: {e}", config.display()))?;
    let cfg: SimPointConfig = toml::from_str(&text).map_err(|e| format!("{}: {e}", config.display()))?;
    cfg.packet.validate().map_err(|e| format!("{}: {e}", config.display()))?;
    let which = match cfg.point.role.as_str() {
        "a" => 0,
        "b" => 1,
        other => return Err(format!("[point] role {other:?}: use \"a\" or \"b\"")),
    };
    let mut ids = [cfg.point.id, cfg.other_point];
    if which == 1 {
        ids.swap(0, 1);
    }
    // Streamed: each epoch is shipped as soon as its packets are all drawn, so the process
    // holds a few epochs, not the run.
    let mut sim = Simulation::new(&cfg.sim, &cfg.synopses, &cfg.packet, cfg.segments, ids, Some(which))?;
    // The sink (its shipper connects at once, and answers the peer's look-ups) starts only once
    // the skipped epochs are simulated and their caches held: a restarted point connected
    // first, and under load the peer's pending look-ups for the epochs around the crash reached
    // it before it had rebuilt those caches. It answered "no cache", and those epochs' RDA
    // records were written with a mean missing one point's timestamps.
    let mut held: Vec<(u32, u64, TimestampCache)> = Vec::new();
    let start_sink = |held: &mut Vec<(u32, u64, TimestampCache)>| -> Result<NetworkSink, String> {
        let mut s = NetworkSink::new(cfg.point.id, &cfg.synopses, &cfg.packet, cfg.ship.clone())
            .map_err(|e| e.to_string())?;
        for (segment, epoch, cache) in held.drain(..) {
            s.retain_rda_cache(segment, epoch, RdaPairs::Cache(&cache));
        }
        Ok(s)
    };
    let mut sink: Option<NetworkSink> = None;
    let base = cfg.sim.first_epoch;
    let start = Instant::now();
    let mut paced: u32 = 0;
    while let Some(step) = sim.step() {
        for h in step?.into_iter().nth(which).unwrap_or_default() {
            let rel = h.epoch.saturating_sub(base);
            // Caches of skipped epochs are retained too: a replay rebuilds them (trace mode).
            if rel < opts.from_epoch && sink.is_none() {
                held.extend(h.rda_caches.into_iter().map(|(segment, cache)| (segment, h.epoch, cache)));
                continue;
            }
            let sink = match &mut sink {
                Some(s) => s,
                None => sink.insert(start_sink(&mut held)?),
            };
            for (segment, cache) in &h.rda_caches {
                sink.retain_rda_cache(*segment, h.epoch, RdaPairs::Cache(cache));
            }
            if rel < opts.from_epoch {
                continue;
            }
            for m in &h.messages {
                sink.deliver(m);
            }
            if opts.crash_after == Some(rel) {
                // Give the shipper a moment to put the frames on the wire, then die without
                // closing.
                std::thread::sleep(Duration::from_millis(50));
                std::process::exit(3);
            }
            paced = paced.saturating_add(1);
            let due = start + opts.pace.saturating_mul(paced);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
        }
    }
    // Every epoch was skipped: still connect, hand over what is held and close.
    let mut sink = match sink {
        Some(s) => s,
        None => start_sink(&mut held)?,
    };
    sink.close();
    let c = sink.counters();
    println!("{}", serde_json::to_string(&c).unwrap_or_default());
    match crate::sink::loss_summary(&sink.losses()) {
        Some(lost) => Err(lost),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests;
