//! Shipping a point's epoch synopses to the peer: [`NetworkSink`], the network
//! [`EpochSink`].
//!
//! The control thread calls [`EpochSink::deliver`]; the sink encodes the frame and queues it
//! ([`queue`]) without blocking on the network. A shipper thread (pinned with core_affinity to
//! `[ship] core` when given, away from the workers) connects to the peer over TCP, runs the
//! authenticated handshake ([`crate::conn`]), sends every unacknowledged frame in order, then
//! a progress watermark, and reconnects with exponential backoff when the connection fails;
//! after a reconnect everything unacknowledged is sent again. Frames are dropped only when the
//! peer acknowledges them, or given up with a counted, logged reason (queue full without
//! spill, spill failure, too old, unacknowledged at close). A reader thread per connection
//! takes the peer's acknowledgements and answers its RDA look-ups and bind requests from the
//! retained caches ([`retain`]).
//!
//! Why a queue behind a mutex and a condition variable, not the crossbeam channel the W8 work
//! item names for the control thread → shipper hand-off: what sits between the two is not a
//! stream of messages consumed once but the set of unacknowledged frames. The shipper sends
//! from it and sends it all again after a reconnect; the reader thread removes what the peer
//! acknowledges; with `spill_all` a frame must be on disk before [`EpochSink::deliver`]
//! returns, so that a crash right after the hand-off loses nothing; and `close` waits on it to
//! drain. A channel would hand each frame over once and need this same shared set behind it.
//! The lock is taken once per epoch and per acknowledgement, never on the data path, and the
//! control thread never waits on the network while holding it.

mod config;
mod counters;
pub mod queue;
pub mod retain;
mod shipper;

pub use config::{MAX_MS, MAX_QUEUE_MESSAGES, MIN_BODY_BYTES, MIN_QUEUE_BYTES, ShipConfig};
pub use counters::{ConnectionCounts, FrameCounts, QueueCounts, ShipCounters};

use crate::auth::PreSharedKey;
use crate::conn::FrameWriter;
use crate::sink::{EpochMessage, EpochSink, RdaPairs};
use crate::synopses::SynopsesConfig;
use crate::wire::{GiveUp, MessageKey, encode_epoch};
use counters::{SharedConnectionCounts, SharedFrameCounts};
use queue::{GiveUpCounters, Offer, Queue, QueueLimits, SetAside};
use retain::RetainedCaches;
use shipper::shipper_main;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use thiserror::Error;
use wirelat_dataplane::packet::PacketConfig;

/// A network sink could not be set up.
#[derive(Debug, Error)]
pub enum ShipError {
    /// The key file.
    #[error("[ship] key_file: {0}")]
    Key(#[from] crate::auth::KeyError),
    /// A bad setting (the message names the key).
    #[error("{0}")]
    Config(String),
    /// The spill directory.
    #[error("[ship] spill_dir {}: {source}", path.display())]
    Spill {
        /// The directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The shipper thread.
    #[error("cannot start the shipper thread: {0}")]
    Thread(std::io::Error),
}

struct Shared {
    point: u32,
    cfg: ShipConfig,
    psk: PreSharedKey,
    fingerprints: Vec<(wirelat_dataplane::synopsis::SynopsisKind, u64)>,
    /// `PacketConfig::identity_fingerprint` of the point, for the hello.
    packet_identity: u64,
    queue: Mutex<Queue>,
    wake: Condvar,
    stop: AtomicBool,
    given_up: GiveUpCounters,
    frames: SharedFrameCounts,
    connections: SharedConnectionCounts,
    /// Entries loaded from the spill directory at start-up (set once, before the threads).
    loaded_from_spill: u64,
    retained: Mutex<RetainedCaches>,
    /// The spill directory's lock, held as long as the sink lives.
    _spill_lock: Option<std::fs::File>,
    /// The writer of the live connection, so `close` can cut it.
    live: Mutex<Option<Arc<Mutex<FrameWriter>>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A poisoned lock only means another thread panicked mid-update; the state stays usable.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Shared {
    fn give_up(&self, key: &MessageKey, reason: GiveUp) {
        self.given_up.add(reason);
        tracing::warn!(%key, reason = reason.name(), "epoch synopsis given up: it will not reach the peer");
    }
}

/// The network [`EpochSink`]: queues every epoch synopsis and ships it to the peer.
pub struct NetworkSink {
    shared: Arc<Shared>,
    shipper: Option<JoinHandle<()>>,
    closed: bool,
    /// Wait for room instead of giving up when the queue is full ([`Self::with_backpressure`]).
    backpressure: bool,
    /// With backpressure: the acknowledgement count at which a wait for room last ran out of
    /// patience. Until the peer acknowledges something more, a full queue gives up at once
    /// rather than stalling every epoch for another `close_timeout_ms`.
    stalled_at: Option<u64>,
}

impl NetworkSink {
    /// Stops the shipper after waiting up to `wait` for the peer's acknowledgements; what is
    /// still unacknowledged goes to the spill directory, or is given up without one.
    fn shut(&mut self, wait: Duration) {
        if self.closed {
            return;
        }
        self.closed = true;
        let s = &self.shared;
        lock(&s.queue).advance_watermark(u64::MAX);
        s.wake.notify_all();
        let mut deadline = Instant::now() + wait;
        let mut acked = s.frames.acked.load(Ordering::Relaxed);
        loop {
            // With backpressure `wait` is how long to go without an acknowledgement.
            let now_acked = s.frames.acked.load(Ordering::Relaxed);
            if self.backpressure && now_acked != acked {
                acked = now_acked;
                deadline = Instant::now() + wait;
            }
            let connected = lock(&s.live).is_some();
            let q = lock(&s.queue);
            // Done when everything was acknowledged and the final watermark announced (or
            // there is no connection to announce it on).
            if q.is_empty() && (!q.has_work(s.cfg.window_bytes) || !connected) {
                break;
            }
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            let wait = (deadline - now).min(Duration::from_millis(50));
            drop(s.wake.wait_timeout(q, wait).map(|(g, _)| g).unwrap_or_else(|p| p.into_inner().0));
        }
        s.stop.store(true, Ordering::SeqCst);
        if let Some(w) = lock(&s.live).take() {
            lock(&w).shutdown();
        }
        s.wake.notify_all();
        if let Some(h) = self.shipper.take() {
            let _ = h.join();
        }
        let lost = lock(&s.queue).spill_remaining();
        for key in &lost {
            s.give_up(key, GiveUp::UnackedAtClose);
        }
        let c = snapshot(s);
        if c.queue.queued > 0 {
            tracing::warn!(
                left = c.queue.queued,
                "closing with unacknowledged epoch synopses in the spill directory; the next start resends them"
            );
        }
        tracing::info!(
            delivered = c.frames.delivered,
            acked = c.frames.acked,
            sent = c.frames.sent,
            resent = c.frames.resent,
            given_up = s.given_up.total(),
            not_crash_safe = c.queue.not_crash_safe,
            connections = c.connections.connections,
            rda_caches_retained = c.rda.rda_caches_retained,
            rda_runs_moved = c.rda.rda_runs_moved,
            "network sink closed"
        );
    }
}

impl NetworkSink {
    /// A sink for `point` that ships to `cfg.peer`. `synopses` and `packet` are the point's
    /// synopsis and packet configuration: their fingerprints go into the hello, and RDA late
    /// binding needs the former.
    /// Loads the spill directory (resending what a previous run left unacknowledged) and
    /// starts the shipper thread.
    pub fn new(
        point: u32,
        synopses: &SynopsesConfig,
        packet: &PacketConfig,
        cfg: ShipConfig,
    ) -> Result<Self, ShipError> {
        cfg.validate().map_err(|(_, e)| ShipError::Config(e))?;
        let psk = PreSharedKey::load(&cfg.key_file)?;
        let spill_lock = match &cfg.spill_dir {
            Some(dir) => Some(lock_spill_dir(dir)?),
            None => None,
        };
        let mut queue = Queue::new(QueueLimits {
            memory_messages: cfg.queue_messages,
            memory_bytes: cfg.queue_bytes,
            spill_dir: cfg.spill_dir.clone(),
            spill_bytes: cfg.spill_bytes,
            spill_all: cfg.spill_all,
        });
        let given_up = GiveUpCounters::default();
        let fingerprints = synopses.fingerprints(packet);
        let spilled = queue
            .load_spill(point, cfg.max_body_bytes, |e| fingerprints.contains(&(e.key.kind, e.fingerprint)));
        for (why, path) in &spilled.set_aside {
            // Another point's file is not this point's loss; a corrupt or stale one of ours is.
            let lost = match why {
                SetAside::Corrupt => Some(GiveUp::SpillCorrupt),
                SetAside::ConfigChanged => Some(GiveUp::ConfigChanged),
                SetAside::ForeignPoint => None,
            };
            if let Some(g) = lost {
                given_up.add(g);
            }
            tracing::warn!(
                file = %path.display(),
                reason = why.name(),
                point,
                "spill file set aside, not sent: {}",
                match why {
                    SetAside::Corrupt => "unreadable or corrupt",
                    SetAside::ConfigChanged => "written under another configuration (synopsis tables or packet identity settings), which the peer would refuse",
                    SetAside::ForeignPoint => "it holds another point's epoch synopsis (a shared spill_dir, or a changed [point] id)",
                }
            );
        }
        let loaded = spilled.loaded;
        if loaded > 0 {
            tracing::info!(loaded, "resending epoch synopses left unacknowledged by a previous run");
        }
        let retained = RetainedCaches::new(
            point,
            synopses.rda.clone(),
            Duration::from_millis(cfg.rda_retention_ms),
            cfg.rda_retention_bytes,
        );
        let shared = Arc::new(Shared {
            point,
            fingerprints,
            packet_identity: packet.identity_fingerprint(),
            psk,
            queue: Mutex::new(queue),
            wake: Condvar::new(),
            stop: AtomicBool::new(false),
            given_up,
            frames: SharedFrameCounts::default(),
            connections: SharedConnectionCounts::default(),
            loaded_from_spill: loaded as u64,
            retained: Mutex::new(retained),
            live: Mutex::new(None),
            _spill_lock: spill_lock,
            cfg,
        });
        let s = shared.clone();
        let shipper = std::thread::Builder::new()
            .name("wirelat-ship".into())
            .spawn(move || shipper_main(&s))
            .map_err(ShipError::Thread)?;
        Ok(Self { shared, shipper: Some(shipper), closed: false, backpressure: false, stalled_at: None })
    }

    /// Backpressure, for a producer that can wait (`wirelat offline`, whose input is a file):
    /// when the queue is full, [`EpochSink::deliver`] waits until the peer acknowledges enough
    /// to make room, and `close` keeps waiting as long as acknowledgements keep coming. Either
    /// gives up (counted) only after `close_timeout_ms` without a single acknowledgement. The
    /// appliance must not use it: its control thread would hold the workers' buffers.
    pub fn with_backpressure(mut self) -> Self {
        self.backpressure = true;
        self
    }

    /// With backpressure: waits until an entry of `bytes` fits in the queue, the sink stops,
    /// or the peer has acknowledged nothing for `close_timeout_ms`.
    fn wait_for_room(&mut self, bytes: u64) {
        let s = &self.shared;
        let patience = Duration::from_millis(s.cfg.close_timeout_ms);
        let acked = || s.frames.acked.load(Ordering::Relaxed);
        let (mut seen, mut since) = (acked(), Instant::now());
        let mut q = lock(&s.queue);
        let mut waited = false;
        while !q.has_room(bytes) && !s.stop.load(Ordering::SeqCst) {
            let now = acked();
            if self.stalled_at == Some(now) {
                return;
            }
            if now != seen {
                (seen, since) = (now, Instant::now());
            }
            if since.elapsed() >= patience {
                self.stalled_at = Some(now);
                tracing::warn!(
                    peer = %s.cfg.peer,
                    waited_ms = patience.as_millis() as u64,
                    "the queue to the peer is full and the peer acknowledged nothing for close_timeout_ms; giving up epochs until it does"
                );
                return;
            }
            if !waited {
                waited = true;
                tracing::debug!("queue to the peer full: waiting for acknowledgements");
            }
            q = s
                .wake
                .wait_timeout(q, Duration::from_millis(50))
                .map(|(g, _)| g)
                .unwrap_or_else(|p| p.into_inner().0);
        }
    }

    /// A snapshot of the counters.
    pub fn counters(&self) -> ShipCounters {
        snapshot(&self.shared)
    }

    /// Raises the watermark explicitly: every epoch below `passed_epoch` has been delivered
    /// (the runtime may call this when epochs pass without traffic).
    pub fn advance(&self, passed_epoch: u64) {
        lock(&self.shared.queue).advance_watermark(passed_epoch);
        self.shared.wake.notify_all();
    }
}

fn snapshot(s: &Shared) -> ShipCounters {
    let queue = {
        let q = lock(&s.queue);
        QueueCounts {
            queued: q.len() as u64,
            spilled: q.spilled() as u64,
            loaded_from_spill: s.loaded_from_spill,
            not_crash_safe: q.not_crash_safe(),
        }
    };
    ShipCounters {
        frames: s.frames.snapshot(),
        given_up: s.given_up.snapshot().into_iter().map(|(g, n)| (g.name(), n)).collect(),
        queue,
        connections: s.connections.snapshot(),
        rda: lock(&s.retained).counters,
    }
}

impl EpochSink for NetworkSink {
    fn deliver(&mut self, msg: &EpochMessage) {
        let s = &self.shared;
        s.frames.delivered.fetch_add(1, Ordering::Relaxed);
        let key = MessageKey { point: msg.point, segment: msg.segment, epoch: msg.epoch, kind: msg.kind };
        // Framed from the borrowed body: the queue owns the frame, so it is the one copy.
        let frame = encode_epoch(&key, msg.fingerprint, msg.complete, msg.epoch_len_ns, &msg.body);
        if self.backpressure {
            self.wait_for_room(frame.len() as u64);
        }
        let s = &self.shared;
        let offer = {
            let mut q = lock(&s.queue);
            // The harvest emits epochs in order: everything below this one is delivered.
            q.advance_watermark(msg.epoch);
            q.offer(key, frame)
        };
        match offer {
            Offer::Queued => {}
            Offer::Duplicate => {
                s.frames.duplicate_deliveries.fetch_add(1, Ordering::Relaxed);
            }
            Offer::GivenUp(reason) => s.give_up(&key, reason),
        }
        s.wake.notify_all();
    }

    fn retain_rda_cache(&mut self, segment: u32, epoch: u64, pairs: RdaPairs<'_>) {
        lock(&self.shared.retained).retain(segment, epoch, pairs);
    }

    fn spare_rda_run(&mut self, _segment: u32, min_pairs: usize) -> Option<Vec<(u64, u64)>> {
        lock(&self.shared.retained).spare_run(min_pairs)
    }

    fn progress(&mut self, passed_epoch: u64) {
        self.advance(passed_epoch);
    }

    fn close(&mut self) {
        let wait = Duration::from_millis(self.shared.cfg.close_timeout_ms);
        self.shut(wait);
    }

    fn ship_counters(&self) -> Option<ShipCounters> {
        Some(snapshot(&self.shared))
    }

    fn losses(&self) -> Vec<(&'static str, u64)> {
        self.shared
            .given_up
            .snapshot()
            .into_iter()
            .filter(|(_, n)| *n > 0)
            .map(|(g, n)| (g.name(), n))
            .collect()
    }
}

impl Drop for NetworkSink {
    fn drop(&mut self) {
        // Without an explicit close, stop at once (no waiting for acknowledgements).
        self.shut(Duration::ZERO);
    }
}

/// Creates the spill directory and locks it for this process (`<dir>/.lock`, an advisory
/// lock the OS releases when the process ends, even by a crash): two running points sharing a
/// directory would load, send and delete each other's epochs.
fn lock_spill_dir(dir: &std::path::Path) -> Result<std::fs::File, ShipError> {
    let io = |source| ShipError::Spill { path: dir.to_owned(), source };
    std::fs::create_dir_all(dir).map_err(io)?;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir.join(".lock"))
        .map_err(io)?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => Err(ShipError::Config(format!(
            "[ship] spill_dir {} is in use by another running point; give each point its own",
            dir.display()
        ))),
        Err(std::fs::TryLockError::Error(e)) => Err(io(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{EpochFrame, Message};
    use wirelat_dataplane::synopsis::SynopsisKind;
    use wirelat_dataplane::synopsis::lda::LdaConfig;

    /// An epoch synopsis frame of point 1 with `fingerprint`.
    fn frame(epoch: u64, fingerprint: u64) -> (MessageKey, Vec<u8>) {
        let key = MessageKey { point: 1, segment: 3, epoch, kind: SynopsisKind::Lda };
        let f = EpochFrame { key, fingerprint, complete: true, epoch_len_ns: 1_000, synopsis: vec![0; 8] };
        (key, Message::Epoch(f).encode())
    }

    #[test]
    fn spilled_epochs_of_another_configuration_are_given_up_at_start() {
        let dir = tempfile::tempdir().unwrap();
        let spill = dir.path().join("spill");
        std::fs::create_dir_all(&spill).unwrap();
        let key_file = dir.path().join("peer.key");
        std::fs::write(&key_file, "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff")
            .unwrap();
        let synopses =
            SynopsesConfig { lda: Some(LdaConfig::single_bank(64, 1.0, 7)), ..SynopsesConfig::default() };
        let packet = PacketConfig::default();
        let ours = synopses.fingerprint_of(SynopsisKind::Lda, &packet).unwrap();
        let other_packet = PacketConfig { identity_seed: 9, ..PacketConfig::default() };
        let theirs = synopses.fingerprint_of(SynopsisKind::Lda, &other_packet).unwrap();
        // A previous run left three epochs on disk: two under this configuration, one under
        // other packet settings.
        let mut q = Queue::new(QueueLimits {
            memory_messages: 8,
            memory_bytes: 1 << 20,
            spill_dir: Some(spill.clone()),
            spill_bytes: 1 << 20,
            spill_all: true,
        });
        for (epoch, fp) in [(1, ours), (2, theirs), (3, ours)] {
            let (k, bytes) = frame(epoch, fp);
            q.offer(k, bytes);
        }
        drop(q);
        assert_eq!(std::fs::read_dir(&spill).unwrap().count(), 3);
        let mut cfg = ShipConfig::new("127.0.0.1:1", &key_file);
        cfg.spill_dir = Some(spill.clone());
        cfg.close_timeout_ms = 50;
        let mut sink = NetworkSink::new(1, &synopses, &packet, cfg).unwrap();
        let c = sink.counters();
        assert!(c.given_up.contains(&("config_changed", 1)), "{c:?}");
        assert!(c.given_up.contains(&("spill_corrupt", 0)), "{c:?}");
        assert_eq!(c.queue.queued, 2, "{c:?}");
        // A second sink (another point, or the same one started twice) cannot share the
        // directory while this one runs.
        let mut again = ShipConfig::new("127.0.0.1:1", &key_file);
        again.spill_dir = Some(spill.clone());
        let e = NetworkSink::new(2, &synopses, &packet, again).err().expect("the directory is locked");
        assert!(e.to_string().contains("in use by another running point"), "{e}");
        sink.close();
        // The refused file is set aside; the two kept ones stay for the next run (nothing acked).
        let wlq = std::fs::read_dir(&spill)
            .unwrap()
            .flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == "wlq"))
            .count();
        assert_eq!(wlq, 2);
        assert!(spill.join("set-aside/p1-s3-e2-k2.wlq.config_changed").exists());
    }
}
