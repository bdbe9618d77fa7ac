//! Group assembly: which group a synopsis joins, the indexes of what waits, when a group is
//! ready (watermarks, and for COLATE its windows' LDS census and the segment's earlier
//! groups), the limits on what waits (shedding, giving up) and forgetting emitted groups.

use super::{Engine, Group, Part, k};
use crate::peer::estimate::Decoded;
use crate::peer::memory;
use crate::report::metrics;
use crate::report::records::{GroupKey, Scope};
use crate::wire::MessageKey;
use std::collections::BTreeSet;
use wirelat_dataplane::synopsis::SynopsisKind;

impl Engine {
    pub(super) fn group_of(&self, key: &MessageKey) -> GroupKey {
        let span = match key.kind {
            SynopsisKind::Fridge => self.cfg.report.fridge_epochs,
            SynopsisKind::Colate => self.cfg.colate.windows,
            _ => 1,
        }
        .max(1);
        let first = key.epoch - key.epoch % span;
        let scope =
            if !key.kind.is_two_point() { Scope::Point(key.point) } else { Scope::Segment(key.segment) };
        GroupKey { scope, kind: key.kind, first, last: first.saturating_add(span - 1) }
    }

    pub(super) fn expected(&self, g: &GroupKey) -> Vec<u32> {
        match g.scope {
            Scope::Point(p) => vec![p],
            Scope::Segment(s) => {
                self.cfg.segment(s).map(|s| vec![s.upstream, s.downstream]).unwrap_or_default()
            }
        }
    }

    pub(super) fn both_on(&self, a: SynopsisKind, b: SynopsisKind) -> bool {
        self.cfg.synopses.enables(a) && self.cfg.synopses.enables(b)
    }

    /// An LDS group already emitted whose census a COLATE group still needs.
    pub(super) fn needs_census(&self, g: &GroupKey) -> bool {
        let Scope::Segment(s) = g.scope else { return false };
        if g.kind != SynopsisKind::Lds || !self.both_on(SynopsisKind::Lds, SynopsisKind::Colate) {
            return false;
        }
        let ck =
            self.group_of(&MessageKey { point: 0, segment: s, epoch: g.first, kind: SynopsisKind::Colate });
        !self.sink.is_emitted(&ck) && !self.census.contains_key(&(s, g.first))
    }

    pub(super) fn duplicate(&self, key: &MessageKey) {
        self.metrics.inc(
            metrics::DUPLICATES,
            &[("point", &key.point.to_string()), ("synopsis", k(key.kind))],
            1,
        );
    }

    pub(super) fn on_epoch(
        &mut self,
        key: MessageKey,
        complete: bool,
        bytes: u64,
        decoded: Result<Decoded, String>,
    ) {
        self.newest_epoch = self.newest_epoch.max(key.epoch);
        self.metrics.inc(metrics::EPOCHS, &[("point", &key.point.to_string()), ("synopsis", k(key.kind))], 1);
        if key.kind.is_two_point()
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
    pub(super) fn shed(&mut self) -> bool {
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
    pub(super) fn open(&mut self, g: GroupKey) -> &mut Group {
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
    pub(super) fn close(&mut self, g: &GroupKey) -> Option<Group> {
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
    pub(super) fn wanted(&self) -> Vec<u32> {
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
    pub(super) fn watermark_moved(&mut self, old: u64, new: u64) {
        if new <= old {
            return;
        }
        let lo = (old, GroupKey { scope: Scope::Segment(0), kind: SynopsisKind::Fridge, first: 0, last: 0 });
        let passed: BTreeSet<GroupKey> =
            self.by_last.range(lo..).take_while(|(last, _)| *last < new).map(|(_, g)| *g).collect();
        self.resolve_ready(passed);
    }

    pub(super) fn is_ready(&mut self, g: &GroupKey) -> bool {
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
    pub(super) fn resolve_ready(&mut self, mut candidates: BTreeSet<GroupKey>) {
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
    pub(super) fn unblocked_by(&self, g: &GroupKey) -> Option<GroupKey> {
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
    pub(super) fn colate_key(&self, scope: Scope, first: u64) -> Option<GroupKey> {
        let span = self.cfg.colate.windows.max(1);
        let g = GroupKey { scope, kind: SynopsisKind::Colate, first, last: first.saturating_add(span - 1) };
        self.pending.contains_key(&g).then_some(g)
    }

    /// Forgets emitted groups far behind every point (bounded memory).
    pub(super) fn prune(&mut self) {
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
    pub(super) fn drop_orphan_census(&mut self) {
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
}
