//! The per-synopsis group handlers: a ready group's synopses handed to the estimators
//! ([`super::estimate`]) and the [`Outcome`] passed to [`Engine::finish`]; RDA's
//! reconciliations go to the RDA worker and come back as [`Event::RdaDone`].

use super::{Census, Engine, Event, Group, InFlight, Part};
use crate::control_side::RdaSegment;
use crate::peer::config::SegmentInfo;
use crate::peer::estimate::{
    self, ColateEvidence, Decoded, Outcome, Pair, PointContext, PointEstimate, Reconciled, SegmentContext,
    SegmentEstimate, Sides,
};
use crate::peer::net::Points;
use crate::peer::rda::{self, RdaJob, RdaResult};
use crate::report::line::{EpochSummary, GroupFailure, Line, ScopeId, SegmentResult, Side};
use crate::report::metrics;
use crate::report::records::{GroupKey, Scope};
use crate::wire::MessageKey;
use crossbeam::channel::{Receiver, Sender};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use wirelat_dataplane::synopsis::colate::{Colate, LatencyFloor, QueryOptions};
use wirelat_dataplane::synopsis::fridge::FridgeSynopsis;
use wirelat_dataplane::synopsis::lds::Lds;
use wirelat_dataplane::synopsis::rda::Rda;
use wirelat_dataplane::synopsis::{Registered, Synopsis, SynopsisKind};

impl Engine {
    /// The group's upstream and downstream synopses of kind `S`: each point's decoded copy, or
    /// an empty one of the collector's configuration where a point had no packets. `None` when
    /// `S` is off here.
    pub(super) fn pair<S: Registered + Clone>(
        &self,
        up: Option<&Part>,
        down: Option<&Part>,
    ) -> Option<(S, S)> {
        let cfg = S::config_in(&self.cfg.synopses)?;
        let get = |p: Option<&Part>| match p.and_then(|p| p.decoded.as_ref().ok()).and_then(S::from_any) {
            Some(s) => Some(s.clone()),
            None => S::new(cfg).ok(),
        };
        Some((get(up)?, get(down)?))
    }

    /// [`SegmentEstimate::estimate_segment`] of the group's two synopses of kind `S`, for a
    /// synopsis whose evidence is the [`Pair`] of one epoch.
    pub(crate) fn estimate_pair<S>(
        &self,
        cx: &SegmentContext<'_>,
        up: Option<&Part>,
        down: Option<&Part>,
    ) -> Outcome
    where
        S: Clone + for<'e> SegmentEstimate<Evidence<'e> = Pair<'e, S>>,
    {
        match self.pair::<S>(up, down) {
            Some((a, b)) => S::estimate_segment(cx, Pair { up: &a, down: &b }),
            None => Outcome::default(),
        }
    }

    /// The context of segment group `g`.
    pub(crate) fn segment_context<'a>(
        &self,
        g: &GroupKey,
        seg: &'a SegmentInfo,
        sides: Sides<'a>,
    ) -> SegmentContext<'a> {
        SegmentContext { seg, first: g.first, last: g.last, sides, top_flows: self.cfg.report.top_flows }
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn lds(
        &mut self,
        g: GroupKey,
        seg: &SegmentInfo,
        up: Option<&Part>,
        down: Option<&Part>,
        sides: Sides<'_>,
        emit: bool,
        keys: Vec<MessageKey>,
    ) {
        let Some((a, b)) = self.pair::<Lds>(up, down) else { return self.ack_all(&keys) };
        let out = if emit {
            Lds::estimate_segment(&self.segment_context(&g, seg, sides), Pair { up: &a, down: &b })
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
    pub(crate) fn start_rda(
        &mut self,
        g: GroupKey,
        seg: SegmentInfo,
        up: Option<&Part>,
        down: Option<&Part>,
        complete: bool,
        absent: Vec<Side>,
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

    pub(super) fn finish_rda(&mut self, g: GroupKey, r: RdaResult) {
        let Some(f) = self.in_flight.remove(&g) else { return };
        let ok = if r.failure.is_some() { "failed" } else { "ok" };
        self.metrics.inc(metrics::RDA_LOOKUPS, &[("outcome", ok)], r.lookups_ok);
        self.metrics.inc(metrics::RDA_LOOKUPS, &[("outcome", "no_cache")], r.lookups_no_cache);
        self.metrics.inc(metrics::RDA_ROUNDS, &[], r.rounds);
        if let Some(fail) = &r.failure {
            tracing::warn!(group = %g, "RDA timestamp look-ups failed: {fail}");
        }
        let cx = self.segment_context(&g, &f.seg, Sides { complete: f.complete, absent: &f.absent });
        let evidence = Reconciled { report: &r.report, process: r.process, failure: r.failure.as_deref() };
        let mut out = Rda::estimate_segment(&cx, evidence);
        if !r.missing_caches.is_empty() {
            tracing::warn!(group = %g, points = ?r.missing_caches, "RDA record incomplete: a point's timestamp cache was missing");
            mark_missing_caches(&mut out, &r.missing_caches);
        }
        self.finish(g, f.emit, out, &f.keys);
    }

    pub(crate) fn fridge(&self, g: &GroupKey, point: u32, group: &Group) -> Outcome {
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
            Some(m) => FridgeSynopsis::estimate_point(
                &PointContext { point: name, point_id: point, first: g.first, last: g.last },
                &m,
            ),
            None => Outcome::default(),
        }
    }

    /// The COLATE group's records, and the LDS synopses its census released.
    pub(crate) fn colate(
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
                let evidence = ColateEvidence { upstream: s, downstream: r, census: c, query: &query };
                Colate::estimate_segment(&self.segment_context(g, seg, sides), evidence)
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
}

/// A line for a group that could not be estimated at all.
pub(super) fn error_line(g: &GroupKey, seg: Option<&SegmentInfo>, error: &str) -> Line {
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
pub(super) fn mark_missing_caches(out: &mut Outcome, points: &[u32]) {
    let missing: Vec<String> = points.iter().map(|p| format!("timestamp_cache:point {p}")).collect();
    for line in &mut out.lines {
        if let Line::Segment(s) = line {
            s.sides.complete = false;
            s.missing = Some(missing.clone());
            if let SegmentResult::Rda(RdaSegment { loss, .. }) = &mut s.result {
                loss.lost = None;
                loss.rate = None;
            }
        }
    }
    if let Some(l) = &mut out.latest {
        l.loss_rate = None;
    }
}
