//! The query side: a [`ColateStore`] opens the archives of several points and answers a
//! [`FlowQuery`] between any two of them from the epochs that overlap the flow.

use super::*;

/// One flow query between two points.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FlowQuery {
    /// The flow's hash as the packet layer computes it (`FlowKey::hash(identity_seed)`) with the
    /// archives' identity seed ([`ColateStore::check_packet`] checks a caller's settings).
    pub flow_hash: u64,
    /// p_f, from NetFlow or a packet counter.
    pub packets: u64,
    /// The point the flow passes first (S).
    pub sender: u32,
    /// The point it passes second (R).
    pub receiver: u32,
    /// The flow's first packet time at S (ns, common clock).
    pub start_ns: u64,
    /// Its last packet time at S (ns).
    pub end_ns: u64,
    /// The largest latency expected from S to R (ns): widens the receiver's time window.
    pub max_latency_ns: u64,
    /// Estimator options.
    pub options: QueryOptions,
    /// The latency floor: [`LatencyFloor::Derived`] (the default, as the collector's) or the
    /// operator's `[colate] latency_floor_ns`.
    pub latency_floor: LatencyFloor,
}

/// The archives of several points, answering per-flow queries between any two of them.
#[derive(Debug, Default)]
pub struct ColateStore {
    archives: Vec<ArchiveReader>,
}

impl ColateStore {
    /// Opens the archives at `paths` (one per point; a point twice is an error).
    pub fn open(paths: &[PathBuf]) -> Result<Self, ArchiveError> {
        let mut store = Self::default();
        for p in paths {
            let a = ArchiveReader::open(p)?;
            if store.archive(a.header.point).is_ok() {
                return Err(ArchiveError::Mismatch {
                    path: p.clone(),
                    reason: format!("second archive of point {}", a.header.point),
                });
            }
            store.archives.push(a);
        }
        Ok(store)
    }

    /// Checks that every archive whose header records its packet identity was written under
    /// `packet`'s identity settings: the ones a caller must compute [`FlowQuery::flow_hash`]
    /// with (`FlowKey::hash(packet.identity_seed)`), or its queries read other flows' cells.
    pub fn check_packet(&self, packet: &PacketConfig) -> Result<(), ArchiveError> {
        let ours = packet.identity_fingerprint();
        for a in &self.archives {
            if let Some(theirs) = a.header.packet_identity
                && theirs != ours
            {
                return Err(ArchiveError::Query(QueryError::ConfigMismatch {
                    what: format!(
                        "packet identity settings (identity_seed, payload_prefix_bytes) of the caller and of point {}'s archive",
                        a.header.point
                    ),
                    ours,
                    theirs,
                }));
            }
        }
        Ok(())
    }

    /// The archive of `point`.
    pub fn archive(&self, point: u32) -> Result<&ArchiveReader, ArchiveError> {
        self.archives.iter().find(|a| a.header.point == point).ok_or(ArchiveError::UnknownPoint { point })
    }

    /// The epochs of `point` whose first..last packet time overlaps [t0_ns, t1_ns] (the paper's
    /// selection, spec §4.1), decoded.
    pub fn epochs_overlapping(
        &self,
        point: u32,
        t0_ns: u64,
        t1_ns: u64,
    ) -> Result<Vec<CounterEpoch>, ArchiveError> {
        let a = self.archive(point)?;
        let (t0, t1) = ticks_window(&a.header.config, t0_ns, t1_ns);
        epochs_overlapping(&a.metas(), t0, t1).into_iter().map(|i| a.epoch(i)).collect()
    }

    /// Estimates the flow's latency from `sender` to `receiver`: overlap selection at both
    /// points grown to a common window range ([`select_aligned`]), then
    /// [`Segment::query`]. Archives of different configurations, window lengths or packet
    /// identity settings are refused (an unknown identity, in a version-2 archive, is not
    /// checked).
    pub fn query_flow(&self, q: &FlowQuery) -> Result<FlowLatencyReport, ArchiveError> {
        let (s, r) = (self.archive(q.sender)?, self.archive(q.receiver)?);
        if s.header.config != r.header.config || s.header.window_len_ns != r.header.window_len_ns {
            return Err(ArchiveError::Query(QueryError::ConfigMismatch {
                what: format!("archives of points {} and {}", q.sender, q.receiver),
                ours: s.header.config.fingerprint(),
                theirs: r.header.config.fingerprint(),
            }));
        }
        if let (Some(ours), Some(theirs)) = (s.header.packet_identity, r.header.packet_identity)
            && ours != theirs
        {
            return Err(ArchiveError::Query(QueryError::ConfigMismatch {
                what: format!(
                    "packet identity settings (identity_seed, payload_prefix_bytes) of points {} and {}",
                    q.sender, q.receiver
                ),
                ours,
                theirs,
            }));
        }
        let cfg = &s.header.config;
        let (t0, t1) = ticks_window(cfg, q.start_ns, q.end_ns);
        let lag = q.max_latency_ns.div_ceil(cfg.tick_ns.max(1));
        let sel = select_aligned(&s.metas(), &r.metas(), t0, t1, lag)
            .ok_or(ArchiveError::NoOverlap { sender: q.sender, receiver: q.receiver })?;
        let es: Vec<CounterEpoch> = sel.s.iter().map(|&i| s.epoch(i)).collect::<Result<_, _>>()?;
        let er: Vec<CounterEpoch> = sel.r.iter().map(|&i| r.epoch(i)).collect::<Result<_, _>>()?;
        let seg = Segment::with_latency_floor(es.iter().collect(), er.iter().collect(), q.latency_floor)?;
        Ok(seg.query(q.flow_hash, q.packets, &q.options))
    }
}

/// A time window in ns as ticks of `cfg` (times before the origin map to tick 0).
fn ticks_window(cfg: &ColateConfig, t0_ns: u64, t1_ns: u64) -> (u64, u64) {
    (cfg.ticks_of(t0_ns).unwrap_or(0), cfg.ticks_of(t1_ns).unwrap_or(0))
}
