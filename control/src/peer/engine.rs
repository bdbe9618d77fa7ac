//! The peer's engine: one thread that pairs the points' epoch synopses into groups, decides
//! when a group is complete, runs the estimators, writes the records and acknowledges what it
//! consumed.
//!
//! A group is (segment, synopsis, epochs) for the two-point synopses — one epoch for LDA, LDS
//! and RDA, `[colate] windows` epochs for COLATE — or (point, fridge, `[report]
//! fridge_epochs` epochs). It is complete when, for each of its points, every epoch of the
//! group has arrived or the point's watermark has passed the group's last epoch: a point that
//! reported "every epoch below w is delivered" and sent nothing for epoch k < w had no packets
//! there, so its side is taken as empty (a segment with 100 % loss is reported, not waited for
//! forever).
//!
//! De-duplication is by (point, segment, epoch, synopsis) within a group, and across restarts
//! by the commit log of the records ([`RecordSink`]): a synopsis whose group was already
//! emitted is acknowledged at once and counted as a duplicate. Acknowledgements go out only
//! after the group's records are committed, so a crash of the peer loses nothing the points
//! still hold. The ones exceptions are deliberate: LDS synopses are acknowledged only once the
//! COLATE group of their window has used their flow census (when both are on), and a COLATE
//! archive's open counter epoch lives in memory until it closes (see README).
//!
//! This file holds the engine's state, its event loop and the step from a ready group to
//! committed records and acknowledgements ([`Engine::resolve`], [`Engine::finish`]). Around it:
//! `groups` (which group a synopsis joins and when a group is ready), `handlers` (each
//! synopsis's group turned into an [`Outcome`]) and `archive` (the peer's COLATE archives).

use super::config::{PeerConfig, SegmentInfo};
use super::estimate::{Decoded, FlowCensus, Outcome, Sides};
use super::net::Points;
use super::rda::{RdaJob, RdaResult};
use crate::control_side;
use crate::report::line::Side;
use crate::report::metrics::{self, Metrics};
use crate::report::records::{GroupKey, RecordSink, Scope};
use crate::wire::{GiveUp, MessageKey};
use crossbeam::channel::{Receiver, RecvTimeoutError, Sender};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};
use wirelat_dataplane::synopsis::SynopsisKind;

mod archive;
mod groups;
mod handlers;
#[cfg(test)]
mod tests;

use archive::Archive;
use handlers::error_line;
pub(crate) use handlers::rda_worker;

/// What the engine is told.
pub(crate) enum Event {
    /// A point connected; its hello's watermark.
    Connected { point: u32, conn: u64, watermark: u64 },
    /// A point's connection ended.
    Disconnected { point: u32, conn: u64 },
    /// An epoch synopsis (or why it could not be decoded), and its encoded size (what the
    /// pending-bytes budget counts).
    Epoch { key: MessageKey, complete: bool, epoch_len_ns: u64, bytes: u64, decoded: Result<Decoded, String> },
    /// A point's watermark and give-up counters, read on connection `conn`.
    Progress { point: u32, conn: u64, watermark: u64, given_up: Vec<(GiveUp, u64)> },
    /// An RDA reconciliation finished.
    RdaDone { group: GroupKey, result: Box<RdaResult> },
    /// Stop (pending groups stay unacknowledged: the points resend them to the next run).
    Stop,
}

pub(crate) struct Part {
    key: MessageKey,
    complete: bool,
    decoded: Result<Decoded, String>,
}

#[derive(Default)]
pub(crate) struct Group {
    parts: BTreeMap<(u32, u64), Part>,
    /// Encoded bytes of the parts (counted against `max_pending_bytes`).
    bytes: u64,
}

/// A ready group handed to its synopsis's `PeerSide::handle_group` (`crate::control_side`).
pub(crate) struct GroupCall<'a> {
    /// The group.
    pub g: GroupKey,
    /// Its parts, by (point, epoch).
    pub group: &'a Group,
    /// Whether every part was complete and which expected sides no part came from.
    pub sides: Sides<'a>,
    /// False when the group's records were already written (a resent group: acknowledge only).
    pub emit: bool,
    /// The parts' keys, acknowledged when the group is done.
    pub keys: Vec<MessageKey>,
}

impl<'a> GroupCall<'a> {
    /// The point of a one-point group.
    pub(crate) fn point(&self) -> Option<u32> {
        match self.g.scope {
            Scope::Point(p) => Some(p),
            Scope::Segment(_) => None,
        }
    }

    /// The segment of a two-point group as configured here, with its upstream and downstream
    /// parts (`None` where that point sent nothing); `None` for a one-point group or a segment
    /// the collector does not know.
    pub(crate) fn segment(&self, e: &Engine) -> Option<(SegmentInfo, Option<&'a Part>, Option<&'a Part>)> {
        let Scope::Segment(s) = self.g.scope else { return None };
        let seg = e.cfg.segment(s)?;
        let (up, down) = (side(self.group, seg.upstream), side(self.group, seg.downstream));
        Some((seg, up, down))
    }
}

struct InFlight {
    keys: Vec<MessageKey>,
    seg: SegmentInfo,
    complete: bool,
    absent: Vec<Side>,
    emit: bool,
}

/// A window's LDS flow census, waiting for the COLATE group of that window.
struct Census {
    flows: FlowCensus,
    held: Vec<MessageKey>,
}

pub(crate) struct Engine {
    cfg: Arc<PeerConfig>,
    points: Arc<Points>,
    metrics: Arc<Metrics>,
    sink: RecordSink,
    rda_jobs: Sender<(GroupKey, RdaJob)>,
    watermark: HashMap<u32, u64>,
    pending: BTreeMap<GroupKey, Group>,
    /// The pending groups by last epoch: a point's watermark passing `last` is what may make a
    /// group ready, so a watermark advance looks only at the groups it passed.
    by_last: BTreeSet<(u64, GroupKey)>,
    /// Pending COLATE groups by (scope, first): archives take windows in order.
    colate_open: BTreeSet<(Scope, u64)>,
    /// Pending LDS groups by (segment, epoch): a COLATE group waits for its windows' census.
    lds_open: BTreeSet<(u32, u64)>,
    /// Readiness checks made (each O(log n)); a diagnostic for tests of the index.
    checks: u64,
    /// Encoded bytes of every pending group's synopses.
    pending_bytes: u64,
    /// RDA groups ready but waiting for a reconciliation slot ([`memory::RDA_IN_FLIGHT`]).
    rda_blocked: BTreeSet<GroupKey>,
    /// Points whose waiting synopses were shed: their progress is ignored until they connect
    /// again (what the old connection reported delivered was dropped here).
    awaiting_hello: HashSet<u32>,
    /// Each point's current connection (its latest hello): progress read on an older one is
    /// stale (see `Event::Progress` in `handle`).
    conns: HashMap<u32, u64>,
    in_flight: HashMap<GroupKey, InFlight>,
    census: HashMap<(u32, u64), Census>,
    held: HashSet<MessageKey>,
    archives: HashMap<(u32, u32), Archive>,
    epoch_len_ns: u64,
    /// The highest epoch any synopsis arrived for (bounds the pruning floor: a finished
    /// point's watermark is u64::MAX).
    newest_epoch: u64,
}

/// Label of a kind.
fn k(kind: SynopsisKind) -> &'static str {
    kind.name()
}

impl Engine {
    pub(crate) fn new(
        cfg: Arc<PeerConfig>,
        points: Arc<Points>,
        metrics: Arc<Metrics>,
        sink: RecordSink,
        rda_jobs: Sender<(GroupKey, RdaJob)>,
    ) -> Self {
        Self {
            cfg,
            points,
            metrics,
            sink,
            rda_jobs,
            watermark: HashMap::new(),
            pending: BTreeMap::new(),
            by_last: BTreeSet::new(),
            colate_open: BTreeSet::new(),
            lds_open: BTreeSet::new(),
            checks: 0,
            pending_bytes: 0,
            rda_blocked: BTreeSet::new(),
            awaiting_hello: HashSet::new(),
            conns: HashMap::new(),
            in_flight: HashMap::new(),
            census: HashMap::new(),
            held: HashSet::new(),
            archives: HashMap::new(),
            epoch_len_ns: 0,
            newest_epoch: 0,
        }
    }

    /// Runs until `Event::Stop` (or every sender is gone).
    pub(crate) fn run(mut self, events: &Receiver<Event>) {
        let mut last_trim = Instant::now();
        loop {
            match events.recv_timeout(Duration::from_millis(250)) {
                Ok(Event::Stop) | Err(RecvTimeoutError::Disconnected) => break,
                Ok(e) => self.handle(e),
                Err(RecvTimeoutError::Timeout) => {
                    // Idle: what the last backlog held goes back to the OS.
                    release_freed_memory();
                    last_trim = Instant::now();
                }
            }
            self.points.set_engine_bytes(self.pending_bytes);
            if self.pending_bytes > self.cfg.collector.max_pending_bytes / 2 {
                self.points.set_wanted(self.wanted());
            }
            if last_trim.elapsed() > TRIM_EVERY {
                release_freed_memory();
                last_trim = Instant::now();
            }
            self.metrics.set(metrics::PENDING, &[], (self.pending.len() + self.in_flight.len()) as f64);
            self.metrics.set(metrics::CONNECTED, &[], self.points.connected() as f64);
        }
        self.close_archives();
        let left = self.pending.len() + self.in_flight.len();
        if left > 0 {
            tracing::info!(
                groups = left,
                "stopping with groups still waiting; their points resend them to the next run"
            );
        }
    }

    fn handle(&mut self, e: Event) {
        match e {
            Event::Connected { point, conn, watermark } => {
                tracing::debug!(point, conn, watermark, "engine: point connected");
                // The hello's watermark is the point's truth now (a restarted point starts over).
                self.awaiting_hello.remove(&point);
                self.conns.insert(point, conn);
                let old = self.watermark.insert(point, watermark).unwrap_or(0);
                self.metrics.set(metrics::WATERMARK, &[("point", &point.to_string())], watermark as f64);
                self.watermark_moved(old, watermark);
            }
            Event::Disconnected { point, conn } => tracing::debug!(point, conn, "engine: point disconnected"),
            Event::Progress { point, conn, watermark, given_up } => {
                // A replaced connection's thread may still hand in a progress it read before
                // the cut, after the new hello: taking its watermark would pass the epochs the
                // point is about to resend (the ones shedding dropped), resolve their groups
                // with a side taken for empty, and move the forgetting floor past them, so
                // that their resent synopses were acknowledged as already emitted and never
                // written (the `dedupe_epochs = 1000` loss of issue 21).
                if self.awaiting_hello.contains(&point) || self.conns.get(&point).is_some_and(|&c| c != conn)
                {
                    tracing::debug!(point, conn, watermark, "engine: stale progress ignored");
                    return;
                }
                let w = self.watermark.entry(point).or_insert(0);
                let old = *w;
                *w = (*w).max(watermark);
                let w = *w;
                let p = point.to_string();
                self.metrics.set(metrics::WATERMARK, &[("point", &p)], w as f64);
                for (g, n) in given_up {
                    self.metrics.set(
                        metrics::POINT_GIVEN_UP,
                        &[("point", &p), ("reason", g.name())],
                        n as f64,
                    );
                }
                self.watermark_moved(old, w);
                self.prune();
            }
            Event::Epoch { key, complete, epoch_len_ns, bytes, decoded } => {
                self.epoch_len_ns = epoch_len_ns;
                self.on_epoch(key, complete, bytes, decoded);
            }
            Event::RdaDone { group, result } => {
                self.finish_rda(group, *result);
                // A reconciliation slot is free: the oldest RDA group waiting for one.
                if let Some(g) = self.rda_blocked.pop_first() {
                    self.resolve_ready(BTreeSet::from([g]));
                }
            }
            Event::Stop => {}
        }
    }

    fn resolve(&mut self, g: GroupKey) {
        let Some(group) = self.close(&g) else { return };
        // Only a commit of this very group counts here, not the forgetting floor: the group was
        // not emitted when its first synopsis arrived, or it would not be waiting.
        let emit = !self.sink.committed(&g);
        let expected = self.expected(&g);
        let absent: Vec<Side> = expected
            .iter()
            .enumerate()
            .filter(|(_, p)| !group.parts.keys().any(|(q, _)| q == *p))
            .map(|(i, _)| if i == 0 { Side::Upstream } else { Side::Downstream })
            .collect();
        let complete = group.parts.values().all(|p| p.complete);
        let keys: Vec<MessageKey> = group.parts.values().map(|p| p.key).collect();
        self.metrics.inc(
            metrics::PAIRS,
            &[("synopsis", k(g.kind)), ("absent_side", absent.first().map_or("none", |s| s.name()))],
            1,
        );
        if let Some((p, e)) =
            group.parts.values().find_map(|p| p.decoded.as_ref().err().map(|e| (p.key, e.clone())))
        {
            let lines = vec![error_line(
                &g,
                self.cfg.segment(p.segment).as_ref(),
                &format!("point {}'s synopsis could not be used: {e}", p.point),
            )];
            self.finish(
                g,
                emit,
                Outcome { lines, latest: None, estimate: "malformed", ..Outcome::default() },
                &keys,
            );
            return;
        }
        let sides = Sides { complete, absent: &absent };
        control_side::handle_group(self, GroupCall { g, group: &group, sides, emit, keys });
    }

    /// Acknowledges `keys` to their points (except those held for a COLATE census).
    pub(crate) fn ack_all(&mut self, keys: &[MessageKey]) {
        for key in keys {
            if !self.held.contains(key) {
                self.points.ack(key);
            }
        }
    }

    /// Writes the records (when not emitted before), updates the metrics, acknowledges.
    pub(crate) fn finish(&mut self, g: GroupKey, emit: bool, out: Outcome, keys: &[MessageKey]) {
        if emit {
            if let Err(e) = self.sink.emit(&g, &out.lines) {
                // Not acknowledged: the points keep the synopses and resend them later.
                tracing::error!(group = %g, error = %e, "cannot write records");
                self.metrics.inc(metrics::PEER_GIVEN_UP, &[("reason", "write_failed")], 1);
                return;
            }
            self.metrics.inc(metrics::RECORDS, &[], out.lines.len() as u64);
            self.metrics.inc(metrics::ESTIMATES, &[("synopsis", k(g.kind)), ("outcome", out.estimate)], 1);
            self.metrics.delay().observe_records(&out.lines);
            self.latest(&g, &out);
        }
        self.ack_all(keys);
    }

    fn latest(&self, g: &GroupKey, out: &Outcome) {
        let (scope_label, id) = match g.scope {
            Scope::Segment(s) => ("segment", s),
            Scope::Point(p) => ("point", p),
        };
        let id = id.to_string();
        let labels = [(scope_label, id.as_str()), ("synopsis", k(g.kind))];
        self.metrics.set(metrics::LATEST_EPOCH, &labels, g.last as f64);
        if let Some(l) = out.latest {
            let set = |f, v: Option<f64>| {
                if let Some(v) = v {
                    self.metrics.set(f, &labels, v);
                }
            };
            set(metrics::LATEST_MEAN, l.mean_ns);
            set(metrics::LATEST_STD, l.std_dev_ns);
            set(metrics::LATEST_LOSS, l.loss_rate);
            set(metrics::LATEST_SAMPLES, l.samples.map(|s| s as f64));
        }
        for (kind, quantiles) in &out.quantiles {
            for q in quantiles {
                let qs = q.q.to_string();
                self.metrics.set(
                    metrics::LATEST_QUANTILE,
                    &[("point", &id), ("kind", kind.name()), ("q", &qs)],
                    q.delay_ns,
                );
            }
        }
    }
}

fn side(group: &Group, point: u32) -> Option<&Part> {
    group.parts.iter().find(|((p, _), _)| *p == point).map(|(_, part)| part)
}

/// How often a busy engine returns freed memory to the OS.
const TRIM_EVERY: Duration = Duration::from_secs(10);

/// Returns freed heap memory to the OS. glibc keeps freed blocks in its arenas (one per thread
/// that allocated: the connection threads decode, the engine frees), so without this the RSS
/// of a cleared backlog stays at its peak. Elsewhere a no-op.
#[allow(unsafe_code)]
fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks and trims the allocator's own arenas; it takes no pointer.
    unsafe {
        libc::malloc_trim(0);
    }
}
