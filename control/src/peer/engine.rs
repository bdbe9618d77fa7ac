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

use super::config::{PeerConfig, SegmentInfo};
use super::estimate::{self, Decoded, FlowCensus, Outcome, Sides};
use super::memory;
use super::net::Points;
use super::rda::{self, RdaJob, RdaResult};
use crate::colate_archive::{ArchiveHeader, ArchiveReader, ArchiveWriter};
use crate::report::line::{EpochSummary, GroupFailure, Line, ScopeId, SegmentResult};
use crate::report::metrics::{self, Metrics};
use crate::report::records::{GroupKey, RecordSink, Scope};
use crate::wire::{GiveUp, MessageKey};
use crossbeam::channel::{Receiver, RecvTimeoutError, Sender};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};
use wirelat_dataplane::synopsis::colate::{Colate, EpochAccumulator, LatencyFloor, QueryOptions};
use wirelat_dataplane::synopsis::fridge::FridgeSynopsis;
use wirelat_dataplane::synopsis::lda::Lda;
use wirelat_dataplane::synopsis::lds::Lds;
use wirelat_dataplane::synopsis::{Synopsis, SynopsisKind};

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

struct Part {
    key: MessageKey,
    complete: bool,
    decoded: Result<Decoded, String>,
}

#[derive(Default)]
struct Group {
    parts: BTreeMap<(u32, u64), Part>,
    /// Encoded bytes of the parts (counted against `max_pending_bytes`).
    bytes: u64,
}

struct InFlight {
    keys: Vec<MessageKey>,
    seg: SegmentInfo,
    complete: bool,
    absent: Vec<&'static str>,
    emit: bool,
}

/// A window's LDS flow census, waiting for the COLATE group of that window.
struct Census {
    flows: FlowCensus,
    held: Vec<MessageKey>,
}

/// A point's COLATE archive on one segment.
struct Archive {
    acc: EpochAccumulator,
    writer: ArchiveWriter,
    /// Windows up to here are in the archive (or in its open epoch).
    last_window: Option<u64>,
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

    fn group_of(&self, key: &MessageKey) -> GroupKey {
        let span = match key.kind {
            SynopsisKind::Fridge => self.cfg.report.fridge_epochs,
            SynopsisKind::Colate => self.cfg.colate.windows,
            _ => 1,
        }
        .max(1);
        let first = key.epoch - key.epoch % span;
        let scope = if key.kind == SynopsisKind::Fridge {
            Scope::Point(key.point)
        } else {
            Scope::Segment(key.segment)
        };
        GroupKey { scope, kind: key.kind, first, last: first.saturating_add(span - 1) }
    }

    fn expected(&self, g: &GroupKey) -> Vec<u32> {
        match g.scope {
            Scope::Point(p) => vec![p],
            Scope::Segment(s) => {
                self.cfg.segment(s).map(|s| vec![s.upstream, s.downstream]).unwrap_or_default()
            }
        }
    }

    fn both_on(&self, a: SynopsisKind, b: SynopsisKind) -> bool {
        self.cfg.synopses.enables(a) && self.cfg.synopses.enables(b)
    }

    /// An LDS group already emitted whose census a COLATE group still needs.
    fn needs_census(&self, g: &GroupKey) -> bool {
        let Scope::Segment(s) = g.scope else { return false };
        if g.kind != SynopsisKind::Lds || !self.both_on(SynopsisKind::Lds, SynopsisKind::Colate) {
            return false;
        }
        let ck =
            self.group_of(&MessageKey { point: 0, segment: s, epoch: g.first, kind: SynopsisKind::Colate });
        !self.sink.is_emitted(&ck) && !self.census.contains_key(&(s, g.first))
    }

    fn duplicate(&self, key: &MessageKey) {
        self.metrics.inc(
            metrics::DUPLICATES,
            &[("point", &key.point.to_string()), ("synopsis", k(key.kind))],
            1,
        );
    }

    fn on_epoch(&mut self, key: MessageKey, complete: bool, bytes: u64, decoded: Result<Decoded, String>) {
        self.newest_epoch = self.newest_epoch.max(key.epoch);
        self.metrics.inc(metrics::EPOCHS, &[("point", &key.point.to_string()), ("synopsis", k(key.kind))], 1);
        if key.kind != SynopsisKind::Fridge
            && !self
                .cfg
                .segment(key.segment)
                .is_some_and(|s| s.upstream == key.point || s.downstream == key.point)
        {
            // Not owned for this point: refused, counted and logged by the connection
            // (`wirelat_peer_unowned_epochs_total`); dropped for good, and kept out of the
            // segment's group, which pairs its two configured points only.
            self.points.ack(&key);
            return;
        }
        let g = self.group_of(&key);
        if self.held.contains(&key) || self.in_flight.contains_key(&g) {
            self.duplicate(&key);
            return;
        }
        if self.sink.is_emitted(&g) && !self.needs_census(&g) {
            self.duplicate(&key);
            self.points.ack(&key);
            return;
        }
        if self.pending.get(&g).is_some_and(|group| group.parts.contains_key(&(key.point, key.epoch))) {
            self.duplicate(&key);
            return;
        }
        let group = self.open(g);
        group.parts.insert((key.point, key.epoch), Part { key, complete, decoded });
        group.bytes += bytes;
        self.pending_bytes += bytes;
        // A synopsis that completes its group frees memory: resolve before counting.
        self.resolve_ready(BTreeSet::from([g]));
        let (max_groups, max_bytes) =
            (self.cfg.collector.max_pending_groups, self.cfg.collector.max_pending_bytes);
        while self.pending.len() > max_groups || self.pending_bytes > max_bytes {
            // Bytes are shed (the points resend them); the group count keeps its give-up rule.
            if self.pending_bytes > max_bytes && self.shed() {
                break;
            }
            let Some(old) = self.pending.keys().next().copied() else { break };
            let Some(group) = self.close(&old) else { break };
            tracing::warn!(
                group = %old,
                pending_groups = self.pending.len() + 1,
                pending_bytes = self.pending_bytes + group.bytes,
                "too many groups or bytes waiting (max_pending_groups, max_pending_bytes): giving up the oldest (its synopses are dropped)"
            );
            self.metrics.inc(metrics::PEER_GIVEN_UP, &[("reason", "pending_overflow")], 1);
            for p in group.parts.values() {
                self.points.ack(&p.key);
            }
            if let Some(c) = self.unblocked_by(&old) {
                self.resolve_ready(BTreeSet::from([c]));
            }
        }
        self.resolve_ready(BTreeSet::from([g]));
    }

    /// Over the budget with every point remote: drops every waiting synopsis *unacknowledged*
    /// and cuts the connections, so the points (their queues and spill directories) hold the
    /// backlog and resend it, in order, when they reconnect. Nothing is lost; the memory is
    /// freed. False (nothing done) when a point runs in this process.
    fn shed(&mut self) -> bool {
        if self.points.has_local() {
            return false;
        }
        let groups: Vec<GroupKey> = self.pending.keys().copied().collect();
        let bytes = self.pending_bytes;
        for g in &groups {
            self.close(g);
        }
        // Until each point's hello, no watermark may resolve a group whose synopses were
        // dropped here (it would be taken for empty).
        self.awaiting_hello = self.cfg.points.iter().map(|p| p.id).collect();
        self.watermark.clear();
        self.points.cut_all();
        tracing::warn!(
            groups = groups.len(),
            bytes,
            "waiting synopses over max_pending_bytes: dropped unacknowledged and connections cut; the points resend them"
        );
        true
    }

    /// The pending group `g`, created (and indexed) if new.
    fn open(&mut self, g: GroupKey) -> &mut Group {
        if !self.pending.contains_key(&g) {
            self.by_last.insert((g.last, g));
            match (g.kind, g.scope) {
                (SynopsisKind::Colate, scope) => {
                    self.colate_open.insert((scope, g.first));
                }
                (SynopsisKind::Lds, Scope::Segment(s)) => {
                    self.lds_open.insert((s, g.first));
                }
                _ => {}
            }
        }
        self.pending.entry(g).or_default()
    }

    /// Takes the pending group `g` out (and out of the indexes).
    fn close(&mut self, g: &GroupKey) -> Option<Group> {
        let group = self.pending.remove(g)?;
        self.pending_bytes -= group.bytes;
        self.by_last.remove(&(g.last, *g));
        self.rda_blocked.remove(g);
        match (g.kind, g.scope) {
            (SynopsisKind::Colate, scope) => {
                self.colate_open.remove(&(scope, g.first));
            }
            (SynopsisKind::Lds, Scope::Segment(s)) => {
                self.lds_open.remove(&(s, g.first));
            }
            _ => {}
        }
        Some(group)
    }

    /// The points the oldest waiting group (RDA groups waiting for a reconciliation slot
    /// aside) still needs a watermark from: what backpressure keeps reading. Every point when
    /// no reconciliation is there to drain what waits (never a stall).
    fn wanted(&self) -> Vec<u32> {
        let oldest = self.by_last.iter().find(|(_, g)| !self.rda_blocked.contains(g));
        let wanted: Vec<u32> = oldest.map_or_else(Vec::new, |(_, g)| {
            self.expected(g)
                .into_iter()
                .filter(|p| self.watermark.get(p).is_none_or(|&w| w <= g.last))
                .collect()
        });
        if wanted.is_empty() && self.rda_blocked.is_empty() && self.in_flight.is_empty() {
            return self.cfg.points.iter().map(|p| p.id).collect();
        }
        wanted
    }

    /// A point's watermark went from `old` to `new`: the groups it passed may be ready.
    fn watermark_moved(&mut self, old: u64, new: u64) {
        if new <= old {
            return;
        }
        let lo = (old, GroupKey { scope: Scope::Segment(0), kind: SynopsisKind::Fridge, first: 0, last: 0 });
        let passed: BTreeSet<GroupKey> =
            self.by_last.range(lo..).take_while(|(last, _)| *last < new).map(|(_, g)| *g).collect();
        self.resolve_ready(passed);
    }

    fn is_ready(&mut self, g: &GroupKey) -> bool {
        self.checks += 1;
        let Some(group) = self.pending.get(g) else { return false };
        for p in self.expected(g) {
            let passed = self.watermark.get(&p).is_some_and(|&w| w > g.last);
            let all = (g.first..=g.last).all(|e| group.parts.contains_key(&(p, e)));
            if !(passed || all) {
                return false;
            }
        }
        if g.kind == SynopsisKind::Colate {
            let Scope::Segment(s) = g.scope else { return false };
            // Archives take windows in order: earlier COLATE groups of the segment first.
            if self.colate_open.range((g.scope, 0)..(g.scope, g.first)).next().is_some() {
                return false;
            }
            if self.both_on(SynopsisKind::Lds, SynopsisKind::Colate) {
                // The flow list comes from LDS: every point's LDS synopses of these windows
                // must have arrived (watermark passed) and been processed.
                let lds_done =
                    self.expected(g).iter().all(|p| self.watermark.get(p).is_some_and(|&w| w > g.last));
                let lds_pending = self.lds_open.range((s, g.first)..=(s, g.last)).next().is_some();
                if !lds_done || lds_pending {
                    return false;
                }
            }
        }
        true
    }

    /// Resolves the `candidates` that are ready, in group order, and then the groups each
    /// resolution may have unblocked (a COLATE group waits for its windows' LDS groups and for
    /// the segment's earlier COLATE group). Each check is O(log n): no rescan of what waits.
    fn resolve_ready(&mut self, mut candidates: BTreeSet<GroupKey>) {
        while let Some(g) = candidates.pop_first() {
            if !self.is_ready(&g) {
                continue;
            }
            if g.kind == SynopsisKind::Rda && self.in_flight.len() >= memory::RDA_IN_FLIGHT {
                // Reconciliations hold both synopses: a bounded number at a time; this one
                // goes when a slot frees (`Event::RdaDone`).
                self.rda_blocked.insert(g);
                continue;
            }
            self.resolve(g);
            candidates.extend(self.unblocked_by(&g));
        }
    }

    /// The pending group that `g`'s leaving may have unblocked: the COLATE group of an LDS
    /// group's window, or the segment's next COLATE group.
    fn unblocked_by(&self, g: &GroupKey) -> Option<GroupKey> {
        let (scope, first) = match (g.kind, g.scope) {
            (SynopsisKind::Lds, Scope::Segment(s)) => {
                let c = MessageKey { point: 0, segment: s, epoch: g.first, kind: SynopsisKind::Colate };
                (g.scope, self.group_of(&c).first)
            }
            (SynopsisKind::Colate, scope) => {
                *self.colate_open.range((scope, g.first)..).next().filter(|(o, _)| *o == scope)?
            }
            _ => return None,
        };
        self.colate_key(scope, first)
    }

    /// The pending COLATE group of `scope` starting at `first`, if any.
    fn colate_key(&self, scope: Scope, first: u64) -> Option<GroupKey> {
        let span = self.cfg.colate.windows.max(1);
        let g = GroupKey { scope, kind: SynopsisKind::Colate, first, last: first.saturating_add(span - 1) };
        self.pending.contains_key(&g).then_some(g)
    }

    /// Forgets emitted groups far behind every point (bounded memory).
    fn prune(&mut self) {
        let points: Vec<u32> = self.cfg.points.iter().map(|p| p.id).collect();
        let Some(min) = points.iter().map(|p| self.watermark.get(p).copied()).collect::<Option<Vec<u64>>>()
        else {
            return;
        };
        let passed = min.into_iter().min().unwrap_or(0).min(self.newest_epoch);
        // Never past a group still open (waiting or reconciling): forgetting
        // it would make it count as emitted, and its records would never be written.
        let open = self
            .pending
            .keys()
            .next()
            .map(|g| g.first)
            .into_iter()
            .chain(self.in_flight.keys().map(|g| g.first))
            .min()
            .unwrap_or(u64::MAX);
        let floor = passed.saturating_sub(self.cfg.report.dedupe_epochs).min(open);
        if floor > 0 {
            self.sink.forget_before(floor);
        }
        self.drop_orphan_census();
    }

    /// Drops the LDS census of windows whose COLATE group can no longer come, and acknowledges
    /// the LDS synopses it held: no COLATE synopsis of the group is waiting and every point's
    /// watermark passed its last epoch
    /// (a point sends an epoch's synopses before the progress that passes it, so none is on
    /// its way). Without this a census whose COLATE group never arrived (a point that sent LDS
    /// but no COLATE for those windows) stayed for the whole run and its LDS synopses were
    /// never acknowledged. With it the census holds at most one entry per segment and window
    /// not yet passed by every point's watermark.
    fn drop_orphan_census(&mut self) {
        if self.census.is_empty() {
            return;
        }
        let orphans: Vec<(u32, u64)> = self
            .census
            .keys()
            .copied()
            .filter(|&(s, w)| {
                let ck =
                    self.group_of(&MessageKey { point: 0, segment: s, epoch: w, kind: SynopsisKind::Colate });
                !self.pending.contains_key(&ck)
                    && !self.in_flight.contains_key(&ck)
                    && self
                        .expected(&ck)
                        .iter()
                        .all(|p| self.watermark.get(p).is_some_and(|&wm| wm > ck.last))
            })
            .collect();
        for k in orphans {
            let Some(c) = self.census.remove(&k) else { continue };
            tracing::warn!(
                segment = k.0,
                window = k.1,
                "no COLATE synopsis came for this window: its LDS flow census is dropped"
            );
            for key in &c.held {
                self.held.remove(key);
            }
            self.ack_all(&c.held);
        }
    }

    fn resolve(&mut self, g: GroupKey) {
        let Some(group) = self.close(&g) else { return };
        // Only a commit of this very group counts here, not the forgetting floor: the group was
        // not emitted when its first synopsis arrived, or it would not be waiting.
        let emit = !self.sink.committed(&g);
        let expected = self.expected(&g);
        let absent: Vec<&'static str> = expected
            .iter()
            .enumerate()
            .filter(|(_, p)| !group.parts.keys().any(|(q, _)| q == *p))
            .map(|(i, _)| if i == 0 { "upstream" } else { "downstream" })
            .collect();
        let complete = group.parts.values().all(|p| p.complete);
        let keys: Vec<MessageKey> = group.parts.values().map(|p| p.key).collect();
        self.metrics.inc(
            metrics::PAIRS,
            &[("synopsis", k(g.kind)), ("absent_side", if absent.is_empty() { "none" } else { absent[0] })],
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
        let sides_absent = absent.clone();
        let sides = Sides { complete, absent: &sides_absent };
        match (g.kind, g.scope) {
            (SynopsisKind::Fridge, Scope::Point(p)) => {
                let out = self.fridge(&g, p, &group);
                self.finish(g, emit, out, &keys);
            }
            (kind, Scope::Segment(s)) => {
                let Some(seg) = self.cfg.segment(s) else {
                    self.ack_all(&keys);
                    return;
                };
                let (up, down) = (side(&group, seg.upstream), side(&group, seg.downstream));
                match kind {
                    SynopsisKind::Lda => {
                        let out = self.lda(&seg, g.first, up, down, sides);
                        self.finish(g, emit, out, &keys);
                    }
                    SynopsisKind::Lds => self.lds(g, &seg, up, down, sides, emit, keys),
                    SynopsisKind::Rda => self.start_rda(g, seg, up, down, complete, absent, emit, keys),
                    SynopsisKind::Colate => {
                        let (out, released) = self.colate(&g, &seg, &group, sides, emit);
                        // The LDS synopses whose census this group used go with it, after the
                        // commit: a crash before it leaves them to be resent with the census.
                        let mut keys = keys;
                        keys.extend(released);
                        self.finish(g, emit, out, &keys);
                    }
                    SynopsisKind::Fridge => self.ack_all(&keys),
                }
            }
            _ => self.ack_all(&keys),
        }
    }

    fn ack_all(&mut self, keys: &[MessageKey]) {
        for key in keys {
            if !self.held.contains(key) {
                self.points.ack(key);
            }
        }
    }

    /// Writes the records (when not emitted before), updates the metrics, acknowledges.
    fn finish(&mut self, g: GroupKey, emit: bool, out: Outcome, keys: &[MessageKey]) {
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

    fn lda(
        &self,
        seg: &SegmentInfo,
        epoch: u64,
        up: Option<&Part>,
        down: Option<&Part>,
        sides: Sides<'_>,
    ) -> Outcome {
        let Some(cfg) = &self.cfg.synopses.lda else { return Outcome::default() };
        let empty = || Lda::new(cfg).ok();
        let get = |p: Option<&Part>| match p.map(|p| &p.decoded) {
            Some(Ok(Decoded::Lda(x))) => Some((**x).clone()),
            _ => empty(),
        };
        match (get(up), get(down)) {
            (Some(a), Some(b)) => estimate::lda_group(seg, epoch, &a, &b, sides),
            _ => Outcome::default(),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn lds(
        &mut self,
        g: GroupKey,
        seg: &SegmentInfo,
        up: Option<&Part>,
        down: Option<&Part>,
        sides: Sides<'_>,
        emit: bool,
        keys: Vec<MessageKey>,
    ) {
        let Some(cfg) = self.cfg.synopses.lds.clone() else { return self.ack_all(&keys) };
        let get = |p: Option<&Part>| match p.map(|p| &p.decoded) {
            Some(Ok(Decoded::Lds(x))) => Some((**x).clone()),
            _ => Lds::new(&cfg).ok(),
        };
        let (Some(a), Some(b)) = (get(up), get(down)) else { return self.ack_all(&keys) };
        let out = if emit {
            estimate::lds_group(seg, g.first, &a, &b, self.cfg.report.top_flows, sides)
        } else {
            Outcome::default()
        };
        if self.both_on(SynopsisKind::Lds, SynopsisKind::Colate)
            && !self.census.contains_key(&(seg.id, g.first))
        {
            let ck = self.group_of(&MessageKey {
                point: 0,
                segment: seg.id,
                epoch: g.first,
                kind: SynopsisKind::Colate,
            });
            if !self.sink.is_emitted(&ck) {
                self.census.insert(
                    (seg.id, g.first),
                    Census { flows: estimate::lds_census(&a, &b), held: keys.clone() },
                );
                self.held.extend(keys.iter().copied());
            }
        }
        self.finish(g, emit, out, &keys);
    }

    #[allow(clippy::too_many_arguments)]
    fn start_rda(
        &mut self,
        g: GroupKey,
        seg: SegmentInfo,
        up: Option<&Part>,
        down: Option<&Part>,
        complete: bool,
        absent: Vec<&'static str>,
        emit: bool,
        keys: Vec<MessageKey>,
    ) {
        if !emit {
            return self.ack_all(&keys);
        }
        let Some(cfg) = &self.cfg.synopses.rda else { return self.ack_all(&keys) };
        let get = |p: Option<&Part>| match p.map(|p| &p.decoded) {
            Some(Ok(Decoded::Rda(x))) => Ok((**x).clone()),
            _ => rda::empty_value(cfg),
        };
        let (a, b) = match (get(up), get(down)) {
            (Ok(a), Ok(b)) => (a, b),
            (Err(e), _) | (_, Err(e)) => {
                let lines = vec![error_line(&g, Some(&seg), &e)];
                return self.finish(
                    g,
                    emit,
                    Outcome { lines, latest: None, estimate: "other", ..Outcome::default() },
                    &keys,
                );
            }
        };
        let job = RdaJob {
            seg,
            epoch: g.first,
            sender: a,
            receiver: b,
            absent: [up.is_none(), down.is_none()],
            guards: self.cfg.rda.guards,
            timeout: Duration::from_millis(self.cfg.collector.lookup_timeout_ms),
        };
        self.in_flight.insert(g, InFlight { keys, seg, complete, absent, emit });
        if self.rda_jobs.send((g, job)).is_err()
            && let Some(f) = self.in_flight.remove(&g)
        {
            tracing::error!(group = %g, "the RDA worker is gone");
            drop(f);
        }
    }

    fn finish_rda(&mut self, g: GroupKey, r: RdaResult) {
        let Some(f) = self.in_flight.remove(&g) else { return };
        let ok = if r.failure.is_some() { "failed" } else { "ok" };
        self.metrics.inc(metrics::RDA_LOOKUPS, &[("outcome", ok)], r.lookups_ok);
        self.metrics.inc(metrics::RDA_LOOKUPS, &[("outcome", "no_cache")], r.lookups_no_cache);
        self.metrics.inc(metrics::RDA_ROUNDS, &[], r.rounds);
        if let Some(fail) = &r.failure {
            tracing::warn!(group = %g, "RDA timestamp look-ups failed: {fail}");
        }
        let mut out = estimate::rda_group(
            &f.seg,
            g.first,
            &r.report,
            Sides { complete: f.complete, absent: &f.absent },
            r.process,
            r.failure.as_deref(),
        );
        if !r.missing_caches.is_empty() {
            tracing::warn!(group = %g, points = ?r.missing_caches, "RDA record incomplete: a point's timestamp cache was missing");
            mark_missing_caches(&mut out, &r.missing_caches);
        }
        self.finish(g, f.emit, out, &f.keys);
    }

    fn fridge(&self, g: &GroupKey, point: u32, group: &Group) -> Outcome {
        let Some(name) = self.cfg.point(point).map(|p| p.name) else { return Outcome::default() };
        let mut merged: Option<FridgeSynopsis> = None;
        for p in group.parts.values() {
            if let Ok(Decoded::Fridge(f)) = &p.decoded {
                match &mut merged {
                    None => merged = Some((**f).clone()),
                    Some(m) => {
                        if let Err(e) = m.merge(f) {
                            return Outcome {
                                lines: vec![error_line(g, None, &e.to_string())],
                                latest: None,
                                estimate: "other",
                                ..Outcome::default()
                            };
                        }
                    }
                }
            }
        }
        match merged {
            Some(m) => estimate::fridge_group(name, point, g.first, g.last, &m),
            None => Outcome::default(),
        }
    }

    /// The COLATE group's records, and the LDS synopses its census released.
    fn colate(
        &mut self,
        g: &GroupKey,
        seg: &SegmentInfo,
        group: &Group,
        sides: Sides<'_>,
        emit: bool,
    ) -> (Outcome, Vec<MessageKey>) {
        let Some(cfg) = self.cfg.synopses.colate.clone() else { return (Outcome::default(), Vec::new()) };
        let windows = |p: u32| -> Vec<(u64, &Colate)> {
            group
                .parts
                .iter()
                .filter(|((q, _), _)| *q == p)
                .filter_map(|((_, e), part)| match &part.decoded {
                    Ok(Decoded::Colate(c)) => Some((*e, &**c)),
                    _ => None,
                })
                .collect()
        };
        let (ws, wr) = (windows(seg.upstream), windows(seg.downstream));
        let s = estimate::colate_epoch(
            &cfg,
            seg.upstream,
            g.first,
            g.last,
            &ws.iter().map(|(_, c)| *c).collect::<Vec<_>>(),
        );
        let r = estimate::colate_epoch(
            &cfg,
            seg.downstream,
            g.first,
            g.last,
            &wr.iter().map(|(_, c)| *c).collect::<Vec<_>>(),
        );
        // The census of these windows (LDS), summed per flow; its LDS synopses are released.
        let mut flows: BTreeMap<
            (u64, wirelat_dataplane::packet::FlowKey),
            (wirelat_dataplane::synopsis::lds::FlowEntry, u64, wirelat_records::FlowEncap),
        > = BTreeMap::new();
        let mut have_census = false;
        let mut released = Vec::new();
        for w in g.first..=g.last {
            if let Some(c) = self.census.remove(&(seg.id, w)) {
                have_census = true;
                for (e, n, encap) in c.flows.flows {
                    // The first window that logged the flow at a point names its encapsulation.
                    let slot = flows.entry((e.flow_hash, e.key)).or_insert((e, 0, encap));
                    slot.1 = slot.1.saturating_add(n);
                    slot.2.upstream = slot.2.upstream.or(encap.upstream);
                    slot.2.downstream = slot.2.downstream.or(encap.downstream);
                }
                for key in c.held {
                    self.held.remove(&key);
                    released.push(key);
                }
            }
        }
        let census: Vec<_> = flows.into_values().collect();
        let lds_on = self.both_on(SynopsisKind::Lds, SynopsisKind::Colate);
        let out = match (&s, &r) {
            (Ok(s), Ok(r)) if emit => {
                let opts = QueryOptions {
                    level: self.cfg.colate.level,
                    repetitions: self.cfg.colate.repetitions,
                    beta: None,
                    t_min_ticks: None,
                    reliable_half_width: self.cfg.colate.reliable_half_width,
                };
                let c = (lds_on || have_census).then_some(census.as_slice());
                let latency_floor =
                    self.cfg.colate.latency_floor_ns.map_or(LatencyFloor::Derived, LatencyFloor::Fixed);
                let query = estimate::ColateQuery { opts, latency_floor };
                estimate::colate_group(
                    seg,
                    g.first,
                    g.last,
                    s,
                    r,
                    c,
                    self.cfg.report.top_flows,
                    &query,
                    sides,
                )
            }
            (Err(e), _) | (_, Err(e)) if emit => Outcome {
                lines: vec![error_line(g, Some(seg), e)],
                latest: None,
                estimate: "other",
                ..Outcome::default()
            },
            _ => Outcome::default(),
        };
        if self.cfg.colate.archive_dir.is_some() {
            for (p, w) in [(seg.upstream, &ws), (seg.downstream, &wr)] {
                self.archive(seg.id, p, g.first, g.last, w, &cfg);
            }
        }
        (out, released)
    }

    /// Adds one point's windows `first..=last` to its archive (empty windows included, so its
    /// epochs cover contiguous windows).
    fn archive(
        &mut self,
        segment: u32,
        point: u32,
        first: u64,
        last: u64,
        windows: &[(u64, &Colate)],
        cfg: &wirelat_dataplane::synopsis::colate::ColateConfig,
    ) {
        let Some(dir) = self.cfg.colate.archive_dir.clone() else { return };
        let key = (segment, point);
        if !self.archives.contains_key(&key) {
            let path = dir.join(format!("s{segment}-p{point}.colate"));
            let window_len_ns = self.cfg.collector.epoch_len_ns.unwrap_or(self.epoch_len_ns);
            // The epochs passed the fingerprint check, which covers the collector's packet
            // identity settings: they were measured under these.
            let header = ArchiveHeader {
                point,
                window_len_ns,
                config: cfg.clone(),
                packet_identity: Some(self.cfg.packet.identity_fingerprint()),
            };
            let opened = std::fs::create_dir_all(&dir)
                .map_err(|e| e.to_string())
                .and_then(|()| ArchiveWriter::open_or_create(&path, header).map_err(|e| e.to_string()))
                .and_then(|w| {
                    let last_window =
                        ArchiveReader::open(&path).ok().and_then(|r| r.metas().last().map(|m| m.last_window));
                    EpochAccumulator::new(cfg, point, w.next_seq())
                        .map(|acc| Archive { acc, writer: w, last_window })
                        .map_err(|e| e.to_string())
                });
            match opened {
                Ok(a) => {
                    self.archives.insert(key, a);
                }
                Err(e) => {
                    tracing::error!(path = %path.display(), error = %e, "cannot open the COLATE archive");
                    self.metrics.inc(metrics::PEER_GIVEN_UP, &[("reason", "archive_failed")], 1);
                    return;
                }
            }
        }
        let Some(a) = self.archives.get_mut(&key) else { return };
        let Ok(empty) = Colate::new(cfg) else { return };
        for w in first..=last {
            if a.last_window.is_some_and(|l| w <= l) {
                continue;
            }
            let v = windows.iter().find(|(e, _)| *e == w).map_or(&empty, |(_, c)| *c);
            match a.acc.push_window(w, v) {
                Ok(Some(closed)) => {
                    if let Err(e) = a.writer.append(&closed) {
                        tracing::error!(error = %e, "cannot append to the COLATE archive");
                        self.metrics.inc(metrics::PEER_GIVEN_UP, &[("reason", "archive_failed")], 1);
                    }
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(segment, point, window = w, error = %e, "COLATE window not archived")
                }
            }
            a.last_window = Some(w);
        }
    }

    fn close_archives(&mut self) {
        for ((segment, point), a) in &mut self.archives {
            if let Some(e) = a.acc.flush()
                && let Err(err) = a.writer.append(&e)
            {
                tracing::error!(segment, point, error = %err, "cannot flush the COLATE archive");
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

/// A line for a group that could not be estimated at all.
fn error_line(g: &GroupKey, seg: Option<&SegmentInfo>, error: &str) -> Line {
    Line::EpochSummary(EpochSummary::Failed(GroupFailure {
        synopsis: g.kind,
        scope: match g.scope {
            Scope::Segment(s) => ScopeId::Segment(s),
            Scope::Point(p) => ScopeId::PointId(p),
        },
        direction: seg.map(|s| s.direction),
        epoch_first: g.first,
        epoch_last: g.last,
        error: error.to_owned(),
    }))
}

/// The RDA worker: runs reconciliations one after the other, posting results to the engine.
pub(crate) fn rda_worker(jobs: Receiver<(GroupKey, RdaJob)>, svc: Arc<Points>, events: Sender<Event>) {
    for (group, job) in jobs {
        let started = Instant::now();
        let result = rda::run(&job, &*svc);
        tracing::debug!(group = %group, ms = started.elapsed().as_millis() as u64, rounds = result.rounds, "RDA reconciled");
        if events.send(Event::RdaDone { group, result: Box::new(result) }).is_err() {
            break;
        }
    }
}

/// An RDA record reconciled without some points' timestamp caches: says which (`"missing"`),
/// and withholds the loss, which was not measured (the ids of a point without a cache count as
/// unseen, so "lost" would be a guess, often 0), so that no reader takes it for a measurement.
fn mark_missing_caches(out: &mut Outcome, points: &[u32]) {
    let missing: Vec<String> = points.iter().map(|p| format!("timestamp_cache:point {p}")).collect();
    for line in &mut out.lines {
        if let Line::Segment(s) = line {
            s.sides.complete = false;
            s.missing = Some(missing.clone());
            if let SegmentResult::Rda { loss, .. } = &mut s.result {
                loss.lost = None;
                loss.rate = None;
            }
        }
    }
    if let Some(l) = &mut out.latest {
        l.loss_rate = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirelat_dataplane::synopsis::estimate::NoEstimate;
    use wirelat_dataplane::synopsis::rda::RdaReport;

    #[test]
    fn an_rda_record_without_a_points_cache_is_incomplete_and_reports_no_loss() {
        let seg = SegmentInfo {
            id: 10,
            upstream: 1,
            downstream: 2,
            direction: wirelat_records::Direction::Forward,
        };
        let report = RdaReport::unavailable(NoEstimate::NoPackets);
        let sides = Sides { complete: true, absent: &[] };
        let mut out = estimate::rda_group(&seg, 7, &report, sides, None, None);
        let line = out.lines[0].to_json();
        assert_eq!(line["complete"], true, "{line}");
        assert!(line.get("missing").is_none(), "{line}");
        mark_missing_caches(&mut out, &[1]);
        let line = out.lines[0].to_json();
        assert_eq!(line["complete"], false, "{line}");
        assert_eq!(line["missing"], serde_json::json!(["timestamp_cache:point 1"]), "{line}");
        assert!(line["loss"]["lost"].is_null() && line["loss"]["rate"].is_null(), "{line}");
        assert!(out.latest.as_ref().is_none_or(|l| l.loss_rate.is_none()));
    }

    /// An engine over a two-point LDA collector (segment 10: 1 → 2) writing to `dir`.
    fn lda_engine(dir: &std::path::Path, extra: &str) -> (Engine, Arc<PeerConfig>) {
        engine_with(dir, extra, "[synopses.lda]\nbanks = [{ rows = 16, p = 1.0 }]\nseed = 7\n")
    }

    /// The same with the `synopses` tables given.
    fn engine_with(dir: &std::path::Path, extra: &str, synopses: &str) -> (Engine, Arc<PeerConfig>) {
        let text = format!(
            r#"
[collector]
listen = "127.0.0.1:0"
key_file = "k"
records = "{records}"
{extra}
[[point]]
id = 1
name = "a"
[[point]]
id = 2
name = "b"
[[segment]]
id = 10
upstream = 1
downstream = 2
{synopses}
"#,
            records = dir.join("r.jsonl").display()
        );
        let cfg = Arc::new(PeerConfig::parse(&text, std::path::Path::new("c.toml")).unwrap());
        let sink = RecordSink::open(dir.join("r.jsonl").to_str().unwrap(), cfg.commit_log_path().as_deref())
            .unwrap();
        let (jobs, _) = crossbeam::channel::unbounded();
        let engine =
            Engine::new(cfg.clone(), Arc::new(Points::default()), Arc::new(Metrics::default()), sink, jobs);
        (engine, cfg)
    }

    fn lda_epoch(cfg: &PeerConfig, point: u32, epoch: u64) -> Event {
        let lda = Lda::new(cfg.synopses.lda.as_ref().unwrap()).unwrap();
        Event::Epoch {
            key: MessageKey { point, segment: 10, epoch, kind: SynopsisKind::Lda },
            complete: true,
            epoch_len_ns: 1_000_000,
            bytes: 300 << 10,
            decoded: Ok(Decoded::Lda(Box::new(lda))),
        }
    }

    /// Progress of `point` on the connection the tests' hellos give it (`point`).
    fn progress(point: u32, watermark: u64) -> Event {
        progress_on(point, point as u64, watermark)
    }

    fn progress_on(point: u32, conn: u64, watermark: u64) -> Event {
        Event::Progress { point, conn, watermark, given_up: Vec::new() }
    }

    #[test]
    fn a_watermark_advance_checks_only_the_groups_it_passed() {
        // Point 1 delivers N epochs; point 2 (silent) passes them one at a time. Each advance
        // may make one group ready: a rescan of everything waiting per event would make
        // N²/2 checks, the index makes about one per advance.
        const N: u64 = 2_000;
        let dir = tempfile::tempdir().unwrap();
        let (mut e, cfg) = lda_engine(dir.path(), "");
        e.handle(Event::Connected { point: 1, conn: 1, watermark: 0 });
        e.handle(Event::Connected { point: 2, conn: 2, watermark: 0 });
        for epoch in 0..N {
            e.handle(lda_epoch(&cfg, 1, epoch));
        }
        e.handle(progress(1, N));
        assert_eq!(e.pending.len() as u64, N, "every group waits for point 2");
        let before = e.checks;
        for w in 1..=N {
            e.handle(progress(2, w));
            assert_eq!(e.pending.len() as u64, N - w, "the passed group resolved at once");
        }
        let checks = e.checks - before;
        assert!(checks <= 2 * N, "{checks} readiness checks for {N} advances");
        assert_eq!(e.sink.records_written(), N);
        assert!(e.by_last.is_empty() && e.colate_open.is_empty() && e.lds_open.is_empty());
    }

    #[test]
    fn forgetting_never_passes_a_group_still_waiting() {
        // dedupe_epochs = 1: a group that waits while both watermarks are far past it (here an
        // RDA reconciliation in flight stands for any reason to wait) must still be emitted,
        // and its resent synopses must not be taken for already-emitted ones.
        let dir = tempfile::tempdir().unwrap();
        let (mut e, cfg) = lda_engine(dir.path(), "[report]\ndedupe_epochs = 1");
        e.handle(Event::Connected { point: 1, conn: 1, watermark: 0 });
        e.handle(Event::Connected { point: 2, conn: 2, watermark: 0 });
        let g = e.group_of(&MessageKey { point: 1, segment: 10, epoch: 3, kind: SynopsisKind::Lda });
        // Group 3 held open: take it out of the ready path by parking it as in flight.
        e.in_flight.insert(
            g,
            InFlight {
                keys: vec![],
                seg: cfg.segment(10).unwrap(),
                complete: true,
                absent: vec![],
                emit: true,
            },
        );
        for epoch in 0..20 {
            e.handle(lda_epoch(&cfg, 1, epoch));
            e.handle(lda_epoch(&cfg, 2, epoch));
        }
        e.handle(progress(1, 20));
        e.handle(progress(2, 20));
        assert!(!e.sink.is_emitted(&g), "the floor passed a group still in flight");
    }

    #[test]
    fn waiting_groups_never_hold_more_than_max_pending_bytes_and_nothing_is_given_up() {
        // 300 KiB per synopsis, a 1 MiB budget: the fourth waiting group sheds everything
        // waiting, unacknowledged (the points resend it), instead of giving a group up.
        let dir = tempfile::tempdir().unwrap();
        let (mut e, cfg) = lda_engine(dir.path(), "max_pending_bytes = 1048576");
        e.handle(Event::Connected { point: 1, conn: 1, watermark: 0 });
        e.handle(Event::Connected { point: 2, conn: 2, watermark: 0 });
        for epoch in 0..10 {
            e.handle(lda_epoch(&cfg, 1, epoch));
            assert!(e.pending_bytes <= 1 << 20, "{} bytes pending", e.pending_bytes);
        }
        assert_eq!(e.metrics.get(metrics::PEER_GIVEN_UP, &[("reason", "pending_overflow")]), 0.0);
        // The old connections' progress no longer counts: nothing resolves with a side taken
        // for empty whose synopses were dropped.
        e.handle(progress(2, 10));
        assert_eq!(e.sink.records_written(), 0);
        // The points reconnect and resend: every group is emitted once.
        e.handle(Event::Connected { point: 1, conn: 3, watermark: 0 });
        e.handle(Event::Connected { point: 2, conn: 4, watermark: 0 });
        for epoch in 0..10 {
            e.handle(lda_epoch(&cfg, 1, epoch));
            e.handle(lda_epoch(&cfg, 2, epoch));
            assert!(e.pending_bytes <= 1 << 20);
        }
        assert_eq!(e.sink.records_written(), 10);
        assert_eq!((e.pending.len(), e.pending_bytes), (0, 0));
    }

    #[test]
    fn a_stale_progress_after_shedding_neither_resolves_nor_forgets_the_resent_epochs() {
        // Issue 21's `dedupe_epochs = 1000` loss, made deterministic: shedding drops what waits
        // and cuts both points; each reconnects (a new hello) and resends from its safe
        // watermark, but a progress its old connection read before the cut is handed in after
        // the hello. Taken, it said "every epoch below 10 delivered": the resent epochs' groups
        // resolved with the other side taken for empty, and the forgetting floor
        // (dedupe_epochs = 1) passed them, so their synopses were acknowledged as duplicates
        // and never written.
        let dir = tempfile::tempdir().unwrap();
        let (mut e, cfg) = lda_engine(dir.path(), "max_pending_bytes = 1048576\n[report]\ndedupe_epochs = 1");
        e.handle(Event::Connected { point: 1, conn: 1, watermark: 0 });
        e.handle(Event::Connected { point: 2, conn: 2, watermark: 0 });
        for epoch in 0..10 {
            e.handle(lda_epoch(&cfg, 1, epoch));
        }
        assert!(e.pending.len() < 4 && !e.awaiting_hello.is_empty(), "shed");
        e.handle(Event::Connected { point: 1, conn: 3, watermark: 0 });
        e.handle(Event::Connected { point: 2, conn: 4, watermark: 0 });
        e.handle(progress_on(1, 1, 10));
        e.handle(progress_on(2, 2, 10));
        for epoch in 0..10 {
            e.handle(lda_epoch(&cfg, 1, epoch));
            e.handle(lda_epoch(&cfg, 2, epoch));
        }
        e.handle(progress_on(1, 3, 10));
        e.handle(progress_on(2, 4, 10));
        assert_eq!(e.sink.records_written(), 10, "one record per epoch");
        let text = std::fs::read_to_string(dir.path().join("r.jsonl")).unwrap();
        let both = text.lines().filter(|l| l.contains(r#""absent":[]"#)).count();
        assert_eq!(both, 10, "every record has both sides:\n{text}");
    }

    #[test]
    fn an_lds_census_whose_colate_group_never_comes_is_dropped_and_its_synopses_acknowledged() {
        // LDS and COLATE on; both points send LDS for 50 epochs and no COLATE at all. Each LDS
        // group keeps its flow census for the COLATE group of its window (and holds its LDS
        // synopses unacknowledged); once every watermark passed a window with no COLATE
        // synopsis waiting, that group cannot come: the census must go, or it grows with
        // every epoch (the leak the issue's last note names).
        let dir = tempfile::tempdir().unwrap();
        let synopses = "[synopses.lds]\nrows = 2\nwidth = 64\nvlda_len = 2\nflow_capacity = 64\nseed = 9\n\
                        [synopses.colate]\ncounters = 101\ncells_per_flow = 4\ncounter_bits = 48\n\
                        epoch_threshold_ticks = 100000000000000\npacket_counts = true\ntick_ns = 100\n\
                        origin_ns = 1000000000\n";
        let (mut e, cfg) = engine_with(dir.path(), "", synopses);
        e.handle(Event::Connected { point: 1, conn: 1, watermark: 0 });
        e.handle(Event::Connected { point: 2, conn: 2, watermark: 0 });
        let lds = |point: u32, epoch: u64| Event::Epoch {
            key: MessageKey { point, segment: 10, epoch, kind: SynopsisKind::Lds },
            complete: true,
            epoch_len_ns: 1_000_000,
            bytes: 1000,
            decoded: Ok(Decoded::Lds(Box::new(Lds::new(cfg.synopses.lds.as_ref().unwrap()).unwrap()))),
        };
        for epoch in 0..50 {
            e.handle(lds(1, epoch));
            e.handle(lds(2, epoch));
        }
        assert_eq!(e.census.len(), 50, "each window's census waits while no watermark passed it");
        e.handle(progress(1, 30));
        e.handle(progress(2, 30));
        assert_eq!(e.census.len(), 20, "windows 0..30 were passed by both points with no COLATE waiting");
        assert_eq!(e.held.len(), 40);
        e.handle(progress(1, 50));
        e.handle(progress(2, 50));
        assert!(e.census.is_empty() && e.held.is_empty());
        let g = e.group_of(&MessageKey { point: 1, segment: 10, epoch: 49, kind: SynopsisKind::Lds });
        assert!(e.pending.is_empty() && e.sink.committed(&g), "the LDS groups themselves were emitted");
    }

    #[test]
    fn rda_reconciliations_in_flight_are_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let (mut e, _) = lda_engine(dir.path(), "");
        let g = |epoch| GroupKey {
            scope: Scope::Segment(10),
            kind: SynopsisKind::Rda,
            first: epoch,
            last: epoch,
        };
        e.handle(Event::Connected { point: 1, conn: 1, watermark: 0 });
        e.handle(Event::Connected { point: 2, conn: 2, watermark: 0 });
        // RDA groups with nothing to reconcile still go through the slot rule: park 16 as in
        // flight, then one more ready group must wait for a slot.
        for epoch in 0..memory::RDA_IN_FLIGHT as u64 {
            e.in_flight.insert(
                g(epoch),
                InFlight {
                    keys: vec![],
                    seg: e.cfg.segment(10).unwrap(),
                    complete: true,
                    absent: vec![],
                    emit: true,
                },
            );
        }
        e.open(g(100));
        e.handle(progress(1, 200));
        e.handle(progress(2, 200));
        assert!(e.rda_blocked.contains(&g(100)) && e.pending.contains_key(&g(100)), "waits for a slot");
    }
}
