//! The peer that estimates: accepts the points' authenticated connections, pairs the upstream
//! and downstream epochs of each segment, runs the estimators of LDA, LDS, RDA (timestamp
//! look-ups answered by the points over the same connections) and COLATE, collects each
//! point's fridge distributions, and writes JSON-lines records and Prometheus metrics.
//!
//! It runs as `wirelat collect` ([`run_until_signal`]) or inside the downstream appliance:
//! [`start`] returns a [`PeerHandle`], and [`PeerHandle::local_sink`] gives an [`EpochSink`]
//! that feeds the appliance's own epochs to the same engine without a socket.
//!
//! Threads: a listener, one per connection (handshake, checks, decoding; `net`), the engine
//! (pairing, estimating, writing; `engine`), an RDA worker (reconciliations that wait for
//! look-ups; [`rda`]) and the metrics responder. Nothing here sees a packet.

pub mod admission;
pub mod config;
pub(crate) mod engine;
pub mod estimate;
pub mod memory;
pub(crate) mod net;
pub mod rda;

use crate::auth::{KeyError, PreSharedKey};
use crate::report::metrics::{self, Metrics};
use crate::report::records::RecordSink;
use crate::ship::queue::{Queue, QueueLimits};
use crate::ship::retain::RetainedCaches;
use crate::sink::{EpochMessage, EpochSink, RdaPairs};
use crate::wire::{DEFAULT_MAX_BODY_BYTES, EpochFrame, Message, MessageKey, encode_epoch};
pub use config::{PeerConfig, PeerConfigError, SegmentInfo};
use crossbeam::channel::{Sender, bounded, unbounded};
use engine::{Engine, Event};
use net::{LocalPoint, NetCtx, Points, lock};
use std::net::{SocketAddr, TcpListener};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;
use thiserror::Error;

/// The connection id of a point running in this process (remote connections count from 0).
const LOCAL_CONN: u64 = u64::MAX;

/// Why the peer could not start.
#[derive(Debug, Error)]
pub enum PeerError {
    /// The configuration.
    #[error(transparent)]
    Config(#[from] PeerConfigError),
    /// The key file.
    #[error("[collector] key_file: {0}")]
    Key(#[from] KeyError),
    /// A socket could not be bound.
    #[error("[collector] cannot listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: String,
        /// Why.
        source: std::io::Error,
    },
    /// The records file or its commit log (the OS error is the source: `{:#}` prints it once).
    #[error("cannot open the records {path}")]
    Records {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The peer gave up groups while it ran (their records were never written): the summary.
    #[error("{0}")]
    Lost(String),
    /// A thread could not be started.
    #[error("cannot start a peer thread: {0}")]
    Thread(std::io::Error),
    /// The configuration's memory bound ([`memory::estimate`]) exceeds what the machine has.
    #[error("{0}")]
    Memory(String),
    /// A local sink for a point that is not configured, or given twice.
    #[error("point {0}: {1}")]
    LocalPoint(u32, String),
}

/// A running peer.
pub struct PeerHandle {
    addr: SocketAddr,
    metrics_addr: Option<SocketAddr>,
    ctx: Arc<NetCtx>,
    events: Sender<Event>,
    metrics: Arc<Metrics>,
    stop: Arc<AtomicBool>,
    engine: Option<JoinHandle<()>>,
    listener: Option<JoinHandle<()>>,
    metrics_server: Option<JoinHandle<()>>,
}

/// Starts a peer: binds its sockets, opens its records (recovering what a previous run
/// emitted), and starts its threads.
pub fn start(cfg: PeerConfig) -> Result<PeerHandle, PeerError> {
    let need = memory::check(&cfg, memory::available_bytes()).map_err(PeerError::Memory)?;
    tracing::info!(bound = %need.describe(), "collector memory bound");
    let psk = PreSharedKey::load(&cfg.collector.key_file)?;
    let listener = TcpListener::bind(&cfg.collector.listen)
        .map_err(|source| PeerError::Listen { addr: cfg.collector.listen.clone(), source })?;
    let addr = listener
        .local_addr()
        .map_err(|source| PeerError::Listen { addr: cfg.collector.listen.clone(), source })?;
    let metrics_listener = match &cfg.collector.metrics_listen {
        Some(a) => {
            Some(TcpListener::bind(a).map_err(|source| PeerError::Listen { addr: a.clone(), source })?)
        }
        None => None,
    };
    let sink = RecordSink::open(&cfg.collector.records, cfg.commit_log_path().as_deref())
        .map_err(|source| PeerError::Records { path: cfg.collector.records.clone(), source })?;
    let cfg = Arc::new(cfg);
    let metrics = Arc::new(Metrics::default());
    metrics.delay().declare(&declared_series(&cfg));
    let points = Arc::new(Points::default());
    let stop = Arc::new(AtomicBool::new(false));
    // Each event may carry a decoded synopsis: the inbox's depth is part of the memory bound
    // (`memory::estimate`); a full inbox holds the connections back (TCP backpressure).
    let (events, events_rx) = bounded::<Event>(memory::ENGINE_INBOX);
    let (jobs, jobs_rx) = unbounded();
    let ctx = Arc::new(NetCtx::new(
        cfg.clone(),
        psk,
        points.clone(),
        metrics.clone(),
        events.clone(),
        stop.clone(),
    ));
    let engine = Engine::new(cfg.clone(), points.clone(), metrics.clone(), sink, jobs);
    let engine = std::thread::Builder::new()
        .name("wirelat-peer".into())
        .spawn(move || engine.run(&events_rx))
        .map_err(PeerError::Thread)?;
    {
        let (svc, ev) = (points.clone(), events.clone());
        std::thread::Builder::new()
            .name("wirelat-peer-rda".into())
            .spawn(move || engine::rda_worker(jobs_rx, svc, ev))
            .map_err(PeerError::Thread)?;
    }
    let listener = net::listen(listener, ctx.clone()).map_err(PeerError::Thread)?;
    let (metrics_addr, metrics_server) = match metrics_listener {
        Some(l) => {
            let a = l.local_addr().ok();
            (a, Some(metrics::serve(l, metrics.clone(), stop.clone()).map_err(PeerError::Thread)?))
        }
        None => (None, None),
    };
    tracing::info!(%addr, metrics = ?metrics_addr, records = %cfg.collector.records, "peer started");
    Ok(PeerHandle {
        addr,
        metrics_addr,
        ctx,
        events,
        metrics,
        stop,
        engine: Some(engine),
        listener: Some(listener),
        metrics_server,
    })
}

/// The delay series `cfg` announces, created at zero at start ([`DelayMetrics::declare`]
/// says why): the fridge's per point, kind and subset, and per segment those of every synopsis
/// that writes `segment` records.
///
/// [`DelayMetrics::declare`]: crate::report::delay::DelayMetrics::declare
fn declared_series(cfg: &PeerConfig) -> crate::report::delay::Declared {
    use wirelat_dataplane::synopsis::SynopsisKind;
    use wirelat_dataplane::synopsis::fridge::{SubsetMatcher, SubsetRule};
    let mut d = crate::report::delay::Declared::default();
    if let Some(f) = &cfg.synopses.fridge {
        d.points = cfg.points.iter().map(|p| (p.name.name().to_owned(), p.id.to_string())).collect();
        d.fridge_kinds = f
            .kinds
            .iter()
            .filter_map(|k| serde_json::to_value(k.kind).ok()?.as_str().map(str::to_owned))
            .collect();
        if f.subsets != SubsetRule::None {
            let m = SubsetMatcher::new(&f.subsets);
            d.fridge_subsets = (0..m.buckets()).map(|b| m.name(b)).collect();
        }
    }
    for s in &cfg.segments {
        for k in [SynopsisKind::Lda, SynopsisKind::Lds, SynopsisKind::Rda] {
            if cfg.synopses.enables(k) {
                d.segments.push((s.id.to_string(), k.name().to_owned()));
            }
        }
    }
    d
}

impl PeerHandle {
    /// Where points connect.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Where the metrics are served, if they are.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_addr
    }

    /// The counters and latest estimates.
    pub fn metrics(&self) -> Arc<Metrics> {
        self.metrics.clone()
    }

    /// An [`EpochSink`] that feeds the epochs of `point` (running in this process) straight to
    /// the engine, keeps its RDA caches for the look-ups (`retention`), and, with `spill_dir`,
    /// keeps each synopsis on disk until the engine has consumed it (a restart resends it).
    pub fn local_sink(
        &self,
        point: u32,
        retention: Duration,
        spill_dir: Option<PathBuf>,
    ) -> Result<LocalPeerSink, PeerError> {
        if self.ctx.cfg.point(point).is_none() {
            return Err(PeerError::LocalPoint(point, "not a [[point]] of the collector".into()));
        }
        let queue = match &spill_dir {
            Some(dir) => {
                std::fs::create_dir_all(dir)
                    .map_err(|e| PeerError::LocalPoint(point, format!("spill_dir: {e}")))?;
                Some(Arc::new(Mutex::new(Queue::new(QueueLimits {
                    memory_messages: 0,
                    memory_bytes: 0,
                    spill_dir: Some(dir.clone()),
                    spill_bytes: u64::MAX,
                    spill_all: true,
                }))))
            }
            None => None,
        };
        let caches = Arc::new(Mutex::new(RetainedCaches::new(
            point,
            self.ctx.cfg.synopses.rda.clone(),
            retention,
            u64::MAX,
        )));
        let lp = Arc::new(LocalPoint { caches, queue });
        self.ctx.points.add_local(point, lp.clone());
        let _ = self.events.send(Event::Connected { point, conn: LOCAL_CONN, watermark: 0 });
        let mut sink = LocalPeerSink {
            point,
            ctx: self.ctx.clone(),
            local: lp,
            events: self.events.clone(),
            closed: false,
        };
        sink.replay_spill();
        Ok(sink)
    }

    /// Stops the peer: no new connections, the engine finishes the events it has, COLATE
    /// archives are flushed. Groups still waiting stay unacknowledged (resent next time).
    pub fn shutdown(mut self) {
        self.stop_now();
    }

    fn stop_now(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = self.events.send(Event::Stop);
        if let Some(h) = self.engine.take() {
            let _ = h.join();
        }
        if let Some(h) = self.listener.take() {
            let _ = h.join();
        }
        if let Some(h) = self.metrics_server.take() {
            let _ = h.join();
        }
        tracing::info!("peer stopped");
    }
}

impl Drop for PeerHandle {
    fn drop(&mut self) {
        if self.engine.is_some() {
            self.stop_now();
        }
    }
}

/// The in-process [`EpochSink`] of a point whose appliance runs the peer itself.
pub struct LocalPeerSink {
    point: u32,
    ctx: Arc<NetCtx>,
    local: Arc<LocalPoint>,
    events: Sender<Event>,
    closed: bool,
}

impl LocalPeerSink {
    fn feed(&self, frame: &EpochFrame) {
        let decoded = self.ctx.check_epoch(self.point, frame).map_err(|(reason, text, _)| {
            tracing::warn!(key = %frame.key, reason, "refused a local epoch synopsis: {text}");
            self.ctx.metrics.inc(metrics::REJECTED, &[("reason", reason)], 1);
            text
        });
        self.ctx.metrics.inc(metrics::FRAMES, &[("type", "epoch")], 1);
        let _ = self.events.send(Event::Epoch {
            key: frame.key,
            complete: frame.complete,
            epoch_len_ns: frame.epoch_len_ns,
            bytes: decoded.as_ref().map_or(0, |d| estimate::held_bytes(frame.synopsis.len(), d)),
            decoded,
        });
    }

    /// Feeds what a previous run left on disk.
    fn replay_spill(&mut self) {
        let Some(q) = &self.local.queue else { return };
        // Every spilled epoch goes back through the collector's own checks in `feed`, which
        // refuse a mismatched one without holding anything else back.
        let spilled = lock(q).load_spill(self.point, DEFAULT_MAX_BODY_BYTES, |_| true);
        let n = spilled.loaded;
        for (why, p) in spilled.set_aside {
            tracing::warn!(file = %p.display(), reason = why.name(), "local spill file set aside, not fed");
        }
        if n == 0 {
            return;
        }
        let work = lock(q).next_work(usize::MAX, u64::MAX);
        for (_, src) in work.items {
            let bytes = match src {
                crate::ship::queue::FrameSource::Memory(f) => Some((*f).clone()),
                crate::ship::queue::FrameSource::Disk(p) => std::fs::read(p).ok(),
            };
            if let Some(Ok(Message::Epoch(f))) = bytes.map(|b| Message::decode(&b, u32::MAX)) {
                self.feed(&f);
            }
        }
        tracing::info!(point = self.point, resent = n, "local epoch synopses of a previous run fed again");
    }
}

impl EpochSink for LocalPeerSink {
    fn deliver(&mut self, msg: &EpochMessage) {
        let frame = EpochFrame {
            key: MessageKey { point: msg.point, segment: msg.segment, epoch: msg.epoch, kind: msg.kind },
            fingerprint: msg.fingerprint,
            complete: msg.complete,
            epoch_len_ns: msg.epoch_len_ns,
            synopsis: msg.body.clone(),
        };
        if let Some(q) = &self.local.queue {
            // Framed from the borrowed body, not from a clone of the frame (`wire::encode_epoch`).
            let bytes =
                encode_epoch(&frame.key, frame.fingerprint, frame.complete, frame.epoch_len_ns, &msg.body);
            let _ = lock(q).offer(frame.key, bytes);
        }
        self.feed(&frame);
        let _ = self.events.send(Event::Progress {
            point: self.point,
            conn: LOCAL_CONN,
            watermark: msg.epoch,
            given_up: Vec::new(),
        });
    }

    fn retain_rda_cache(&mut self, segment: u32, epoch: u64, pairs: RdaPairs<'_>) {
        lock(&self.local.caches).retain(segment, epoch, pairs);
    }

    fn spare_rda_run(&mut self, _segment: u32, min_pairs: usize) -> Option<Vec<(u64, u64)>> {
        lock(&self.local.caches).spare_run(min_pairs)
    }

    fn progress(&mut self, passed_epoch: u64) {
        let _ = self.events.send(Event::Progress {
            point: self.point,
            conn: LOCAL_CONN,
            watermark: passed_epoch,
            given_up: Vec::new(),
        });
    }

    fn close(&mut self) {
        if !self.closed {
            self.closed = true;
            let _ = self.events.send(Event::Progress {
                point: self.point,
                conn: LOCAL_CONN,
                watermark: u64::MAX,
                given_up: Vec::new(),
            });
        }
    }
}

/// `wirelat collect`: runs the peer until SIGINT or SIGTERM. Prints the bound addresses on
/// stderr (`wirelat collect: listening on …`).
pub fn run_until_signal(cfg: PeerConfig) -> Result<(), PeerError> {
    let term = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, term.clone()).map_err(PeerError::Thread)?;
    }
    let handle = start(cfg)?;
    eprintln!("wirelat collect: listening on {}", handle.local_addr());
    if let Some(m) = handle.metrics_addr() {
        eprintln!("wirelat collect: metrics on http://{m}/metrics");
    }
    while !term.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(100));
    }
    tracing::info!("signal received: stopping");
    let metrics = handle.metrics.clone();
    handle.shutdown();
    // One rule for every process: what was given up is reported and the exit is non-zero.
    let lost: Vec<(&str, u64)> = GROUP_GIVE_UPS
        .into_iter()
        .map(|r| (r, metrics.get(metrics::PEER_GIVEN_UP, &[("reason", r)]) as u64))
        .filter(|(_, n)| *n > 0)
        .collect();
    if lost.is_empty() {
        return Ok(());
    }
    let total: u64 = lost.iter().map(|(_, n)| n).sum();
    let reasons: Vec<String> = lost.iter().map(|(r, n)| format!("{r} {n}")).collect();
    let summary = format!("{total} groups were given up without records ({})", reasons.join(", "));
    tracing::error!(summary = %summary, "groups lost");
    Err(PeerError::Lost(summary))
}

/// The reasons the engine gives a group up for (`wirelat_peer_given_up_total{reason}`).
const GROUP_GIVE_UPS: [&str; 3] = ["pending_overflow", "write_failed", "archive_failed"];
