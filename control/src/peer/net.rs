//! The peer's network side: the listener, one thread per point connection (handshake, checks,
//! decoding, routing), and the registry of connected points through which the engine sends
//! acknowledgements and the RDA worker its look-ups ([`Points`]).
//!
//! Every refusal is logged with the remote address, the point (when known) and the reason,
//! counted by reason, and ends only that connection: a bad connection never takes the peer
//! down. Checks, in order: handshake (wrong key: `bad_mac`), hello (unknown point,
//! `fingerprint_mismatch`), then per frame: header (`bad_magic`, `unknown_version`,
//! `oversized_length`, …), tag (`bad_mac`), checksum (`bad_checksum`), body
//! (`malformed_body`), and for epoch synopses the fingerprint, epoch length and segment.

use super::admission::{Cut, Handshakes};
use super::config::PeerConfig;
use super::engine::Event;
use super::estimate::{self, Decoded};
use super::rda::CacheService;
use crate::auth::PreSharedKey;
use crate::conn::{self, ConnError, FrameWriter};
use crate::report::metrics::{self, Metrics};
use crate::ship::queue::Queue;
use crate::ship::retain::RetainedCaches;
use crate::sink::LOCAL_SEGMENT;
use crate::wire::{CacheRef, EpochFrame, Hello, LookupStatus, Message, MessageKey};
use crossbeam::channel::{Sender, bounded};
use std::collections::HashMap;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The refusal reason of an epoch synopsis whose segment the collector does not own.
const UNKNOWN_SEGMENT: &str = "unknown_segment";

/// Most authenticated connections at once (connections in their handshake have their own
/// budget: [`super::admission`]).
const MAX_CONNECTIONS: usize = 64;

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A poisoned lock means another thread panicked mid-update; the data stays usable.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A connected point.
struct Link {
    conn: u64,
    writer: Mutex<FrameWriter>,
    pending: Mutex<HashMap<u64, Sender<Message>>>,
}

/// A point that runs inside this process (the appliance's own peer).
pub(crate) struct LocalPoint {
    pub(crate) caches: Arc<Mutex<RetainedCaches>>,
    /// Its unacknowledged synopses, on disk (only with a spill directory).
    pub(crate) queue: Option<Arc<Mutex<Queue>>>,
}

/// The points the peer can talk to.
#[derive(Default)]
pub(crate) struct Points {
    links: Mutex<HashMap<u32, Arc<Link>>>,
    local: Mutex<HashMap<u32, Arc<LocalPoint>>>,
    next_request: AtomicU64,
    next_conn: AtomicU64,
    /// Encoded synopsis bytes the engine's waiting groups hold (the engine sets it).
    engine_bytes: AtomicU64,
    /// The points the oldest waiting group waits for (the engine sets it).
    wanted: Mutex<Vec<u32>>,
}

impl Points {
    /// Sends the acknowledgement of `key` to its point, if connected (a lost acknowledgement
    /// only means a resend, which is de-duplicated).
    pub(crate) fn ack(&self, key: &MessageKey) {
        if let Some(l) = lock(&self.local).get(&key.point).cloned() {
            if let Some(q) = &l.queue {
                lock(q).ack(key);
            }
            return;
        }
        let link = lock(&self.links).get(&key.point).cloned();
        if let Some(link) = link
            && lock(&link.writer).send(&Message::Ack(*key)).is_err()
        {
            lock(&link.writer).shutdown();
        }
    }

    /// True when some point runs in this process (its synopses cannot be resent on demand).
    pub(crate) fn has_local(&self) -> bool {
        !lock(&self.local).is_empty()
    }

    /// Cuts every point's connection: each reconnects and resends everything unacknowledged.
    pub(crate) fn cut_all(&self) {
        for (_, link) in lock(&self.links).drain() {
            lock(&link.writer).shutdown();
        }
    }

    pub(crate) fn add_local(&self, point: u32, lp: Arc<LocalPoint>) {
        lock(&self.local).insert(point, lp);
    }

    /// The engine's waiting groups now hold `bytes`.
    pub(crate) fn set_engine_bytes(&self, bytes: u64) {
        self.engine_bytes.store(bytes, Ordering::Relaxed);
    }

    /// The engine's oldest waiting group waits for these points.
    pub(crate) fn set_wanted(&self, points: Vec<u32>) {
        *lock(&self.wanted) = points;
    }

    /// Backpressure: when the waiting groups hold more than `soft` bytes, only the points the
    /// oldest waiting group waits for are read; the others wait before their next frame (TCP
    /// holds them back, and their queues and spill directories, not the collector's memory,
    /// take the backlog). When nothing waits for a point (the RDA reconciliations are behind),
    /// every point waits while the reconciliations, whose look-up answers are exempt (see
    /// `read_loop`), drain what is pending.
    pub(crate) fn should_pause(&self, point: u32, soft: u64) -> bool {
        self.engine_bytes.load(Ordering::Relaxed) > soft && !lock(&self.wanted).contains(&point)
    }

    pub(crate) fn connected(&self) -> usize {
        lock(&self.links).len() + lock(&self.local).len()
    }

    fn request(
        &self,
        point: u32,
        build: &dyn Fn(u64) -> Message,
        deadline: Instant,
    ) -> Result<Message, String> {
        loop {
            let now = Instant::now();
            if now >= deadline {
                return Err(format!("point {point} did not answer within the look-up timeout"));
            }
            let Some(link) = lock(&self.links).get(&point).cloned() else {
                // Not connected (yet): it keeps its caches for the retention time; wait.
                std::thread::sleep(Duration::from_millis(20));
                continue;
            };
            let id = self.next_request.fetch_add(1, Ordering::Relaxed);
            let (tx, rx) = bounded(1);
            lock(&link.pending).insert(id, tx);
            if lock(&link.writer).send(&build(id)).is_err() {
                lock(&link.pending).remove(&id);
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
            let wait = (deadline - now).min(Duration::from_secs(5));
            match rx.recv_timeout(wait) {
                Ok(m) => return Ok(m),
                Err(_) => {
                    lock(&link.pending).remove(&id);
                }
            }
        }
    }
}

impl CacheService for Points {
    fn lookup(
        &self,
        at: CacheRef,
        ids: &[u64],
        deadline: Instant,
    ) -> Result<(LookupStatus, Vec<Option<u64>>), String> {
        if let Some(l) = lock(&self.local).get(&at.point).cloned() {
            return Ok(lock(&l.caches).lookup(&at, ids));
        }
        let ids = ids.to_vec();
        let build = move |request_id| Message::LookupRequest { request_id, cache: at, ids: ids.clone() };
        match self.request(at.point, &build, deadline)? {
            Message::LookupResponse { status, timestamps, .. } => Ok((status, timestamps)),
            other => Err(format!("point {} answered a look-up with {}", at.point, other.msg_type().name())),
        }
    }

    fn bind(&self, at: CacheRef, m: u32, deadline: Instant) -> Result<(LookupStatus, Vec<u8>), String> {
        if let Some(l) = lock(&self.local).get(&at.point).cloned() {
            return Ok(lock(&l.caches).bind(&at, m));
        }
        let build = move |request_id| Message::BindRequest { request_id, cache: at, buckets_per_bank: m };
        match self.request(at.point, &build, deadline)? {
            Message::BindResponse { status, banks, .. } => Ok((status, banks)),
            other => Err(format!("point {} answered a bind with {}", at.point, other.msg_type().name())),
        }
    }
}

/// What the connection threads share.
pub(crate) struct NetCtx {
    pub(crate) cfg: Arc<PeerConfig>,
    pub(crate) psk: PreSharedKey,
    pub(crate) points: Arc<Points>,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) events: Sender<Event>,
    pub(crate) stop: Arc<AtomicBool>,
    /// E, once known (0 until the first epoch or the configured value).
    pub(crate) epoch_len_ns: AtomicU64,
    /// Authenticated connections open.
    open: AtomicUsize,
    /// Connections in their handshake.
    handshakes: Mutex<Handshakes>,
    /// (point, segment) pairs whose unowned epochs were already logged: a misrouted point
    /// would otherwise log every epoch, and an operator needs the first line, not the flood.
    unowned_logged: Mutex<std::collections::BTreeSet<(u32, u32)>>,
}

impl NetCtx {
    pub(crate) fn new(
        cfg: Arc<PeerConfig>,
        psk: PreSharedKey,
        points: Arc<Points>,
        metrics: Arc<Metrics>,
        events: Sender<Event>,
        stop: Arc<AtomicBool>,
    ) -> Self {
        let e = cfg.collector.epoch_len_ns.unwrap_or(0);
        Self {
            cfg,
            psk,
            points,
            metrics,
            events,
            stop,
            epoch_len_ns: AtomicU64::new(e),
            open: AtomicUsize::new(0),
            handshakes: Mutex::new(Handshakes::default()),
            unowned_logged: Mutex::new(std::collections::BTreeSet::new()),
        }
    }

    fn reject(&self, reason: &str) {
        self.metrics.inc(metrics::REJECTED, &[("reason", reason)], 1);
    }

    /// An epoch synopsis of a segment this collector does not own for `point` (not a
    /// `[[segment]]` here, or one the point is not an end of): it is acknowledged and dropped,
    /// so the point will not resend it. Counted per point, segment and synopsis, and logged
    /// once per (point, segment) so a misrouted point is seen without a line per epoch.
    fn unowned(&self, point: u32, key: &MessageKey, text: &str) {
        let (p, s) = (point.to_string(), key.segment.to_string());
        self.metrics.inc(
            metrics::UNOWNED,
            &[("point", &p), ("segment", &s), ("synopsis", key.kind.name())],
            1,
        );
        if lock(&self.unowned_logged).insert((point, key.segment)) {
            tracing::error!(
                point,
                segment = key.segment,
                "{text}: its epochs are acknowledged and dropped (check the point's [segments] \
                 and [[route]] tables and this collector's [[segment]]s); counted in \
                 wirelat_peer_unowned_epochs_total, logged once per point and segment"
            );
        }
    }

    /// Checks a point's hello against the collector's configuration.
    fn check_hello(&self, h: &Hello) -> Result<(), (&'static str, String)> {
        if self.cfg.point(h.point).is_none() {
            return Err(("unknown_point", format!("point {} is not configured at the collector", h.point)));
        }
        let ours = self.cfg.synopses.fingerprints(&self.cfg.packet);
        let identity = self.cfg.packet.identity_fingerprint();
        let two_point = h.fingerprints.iter().any(|(k, _)| k.is_two_point());
        if two_point && h.packet_identity != identity {
            return Err((
                "fingerprint_mismatch",
                format!(
                    "the point's packet identity settings (identity_seed, payload_prefix_bytes; \
                     fingerprint {:#018x}) differ from the collector's [packet] ({identity:#018x}): \
                     its two-point synopses could not pair with the other point's",
                    h.packet_identity
                ),
            ));
        }
        for (kind, fp) in &h.fingerprints {
            match ours.iter().find(|(k, _)| k == kind) {
                None => {
                    return Err((
                        "fingerprint_mismatch",
                        format!("the point runs {kind}, which the collector's [synopses] does not enable"),
                    ));
                }
                Some((_, f)) if f != fp => {
                    return Err((
                        "fingerprint_mismatch",
                        format!(
                            "{kind} configuration fingerprint {fp:#018x} differs from the collector's \
                             {f:#018x}: the [synopses.{kind}] tables differ"
                        ),
                    ));
                }
                Some(_) => {}
            }
        }
        // Two-point synopses must be on at both points (an absent one would read as 100 % loss).
        for (kind, _) in ours.iter().filter(|(k, _)| k.is_two_point()) {
            if !h.fingerprints.iter().any(|(k, _)| k == kind) {
                return Err((
                    "fingerprint_mismatch",
                    format!("the collector expects {kind} from every point, and this point does not run it"),
                ));
            }
        }
        Ok(())
    }

    /// Checks one epoch synopsis from `point` and decodes it. `Err((reason, text, fatal))`:
    /// a fatal error ends the connection; a non-fatal one drops this synopsis only.
    pub(crate) fn check_epoch(
        &self,
        point: u32,
        f: &EpochFrame,
    ) -> Result<Decoded, (&'static str, String, bool)> {
        let k = &f.key;
        if k.point != point {
            return Err(("protocol", format!("point {point} sent a synopsis of point {}", k.point), true));
        }
        match self.cfg.synopses.fingerprint_of(k.kind, &self.cfg.packet) {
            None => {
                return Err((
                    "fingerprint_mismatch",
                    format!("{} is not enabled at the collector", k.kind),
                    true,
                ));
            }
            Some(fp) if fp != f.fingerprint => {
                return Err((
                    "fingerprint_mismatch",
                    format!(
                        "{} fingerprint {:#018x} differs from the collector's {fp:#018x} \
                         (its [synopses.{}] table or, for a two-point synopsis, the [packet] \
                         identity settings differ)",
                        k.kind, f.fingerprint, k.kind
                    ),
                    true,
                ));
            }
            Some(_) => {}
        }
        let e = f.epoch_len_ns;
        if let Err(known) = self.epoch_len_ns.compare_exchange(0, e, Ordering::SeqCst, Ordering::SeqCst)
            && known != e
        {
            return Err((
                "epoch_len_mismatch",
                format!("epoch length {e} ns, the collector uses {known} ns"),
                true,
            ));
        }
        let segment_ok = if !k.kind.is_two_point() {
            k.segment == LOCAL_SEGMENT
        } else {
            self.cfg.segment(k.segment).is_some_and(|s| s.upstream == point || s.downstream == point)
        };
        if !segment_ok {
            return Err((
                UNKNOWN_SEGMENT,
                format!("{}: segment {} is not a configured segment of point {point}", k.kind, k.segment),
                false,
            ));
        }
        estimate::decode(&self.cfg.synopses, k.kind, &f.synopsis)
            .map_err(|e| ("malformed_synopsis", e, false))
    }
}

/// Accepts connections until `stop`; cuts handshakes past their deadline or over budget.
pub(crate) fn listen(listener: TcpListener, ctx: Arc<NetCtx>) -> std::io::Result<JoinHandle<()>> {
    listener.set_nonblocking(true)?;
    let deadline = Duration::from_millis(ctx.cfg.collector.handshake_timeout_ms.max(1));
    std::thread::Builder::new().name("wirelat-peer-listen".into()).spawn(move || {
        while !ctx.stop.load(Ordering::SeqCst) {
            for addr in lock(&ctx.handshakes).reap(deadline) {
                tracing::warn!(%addr, "cut a connection whose handshake took longer than handshake_timeout_ms");
                ctx.reject(Cut::Deadline.name());
            }
            match listener.accept() {
                Ok((stream, addr)) => admit(&ctx, stream, addr),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        }
    })
}

/// Gives a new connection a handshake slot (evicting an older handshake if the budget is full)
/// and its thread.
fn admit(ctx: &Arc<NetCtx>, stream: TcpStream, addr: SocketAddr) {
    let Ok(clone) = stream.try_clone() else { return };
    let (id, cut) = lock(&ctx.handshakes).admit(addr.ip(), clone);
    for (evicted, why) in cut {
        tracing::warn!(addr = %evicted, reason = why.name(), "cut a connection still in its handshake to admit a newer one");
        ctx.reject(why.name());
    }
    let c = ctx.clone();
    let spawned = std::thread::Builder::new().name("wirelat-peer-conn".into()).spawn(move || {
        serve(stream, addr, id, &c);
    });
    if let Err(e) = spawned {
        lock(&ctx.handshakes).done(id);
        tracing::error!(error = %e, "cannot start a connection thread");
    }
}

/// One connection: the handshake (in slot `handshake`), then the point's frames.
fn serve(stream: TcpStream, addr: SocketAddr, handshake: u64, ctx: &NetCtx) {
    let shaken = stream.set_nonblocking(false).map_err(ConnError::from).and_then(|()| {
        let timeout = Duration::from_millis(ctx.cfg.collector.handshake_timeout_ms.max(1));
        conn::server_handshake(stream, &ctx.psk, ctx.cfg.collector.max_body_bytes, timeout)
    });
    lock(&ctx.handshakes).done(handshake);
    let (hello, mut reader, writer) = match shaken {
        Ok(x) => x,
        Err(e) => {
            tracing::warn!(%addr, reason = e.reason(), error = %e, "rejected a connection during the handshake");
            ctx.reject(e.reason());
            return;
        }
    };
    if ctx.open.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
        ctx.open.fetch_sub(1, Ordering::SeqCst);
        tracing::warn!(%addr, "refusing a connection: too many open connections");
        ctx.reject("too_many_connections");
        return;
    }
    serve_point(hello, &mut reader, writer, addr, ctx);
    ctx.open.fetch_sub(1, Ordering::SeqCst);
}

fn serve_point(
    hello: Hello,
    reader: &mut conn::FrameReader,
    writer: FrameWriter,
    addr: SocketAddr,
    ctx: &NetCtx,
) {
    let point = hello.point;
    let _ = writer.set_timeout(Some(Duration::from_secs(10)));
    let mut writer = writer;
    if let Err((reason, text)) = ctx.check_hello(&hello) {
        tracing::error!(%addr, point, reason, "refused point: {text}");
        ctx.reject(reason);
        let _ = writer.send(&Message::Reject { reason: text });
        writer.shutdown();
        return;
    }
    let conn = ctx.points.next_conn.fetch_add(1, Ordering::Relaxed);
    let link = Arc::new(Link { conn, writer: Mutex::new(writer), pending: Mutex::new(HashMap::new()) });
    if let Some(old) = lock(&ctx.points.links).insert(point, link.clone()) {
        tracing::info!(point, "a new connection replaces the point's previous one");
        lock(&old.writer).shutdown();
    }
    ctx.metrics.inc(metrics::CONNECTIONS, &[("point", &point.to_string())], 1);
    tracing::info!(%addr, point, watermark = hello.watermark, "point connected");
    let _ = ctx.events.send(Event::Connected { point, conn, watermark: hello.watermark });
    let end = read_loop(point, reader, &link, ctx);
    match &end {
        Ok(()) => tracing::info!(%addr, point, "point disconnected"),
        Err((reason, text)) => {
            tracing::warn!(%addr, point, reason, "closing the point's connection: {text}");
            ctx.reject(reason);
            let _ = lock(&link.writer).send(&Message::Reject { reason: text.clone() });
        }
    }
    lock(&link.writer).shutdown();
    {
        let mut links = lock(&ctx.points.links);
        if links.get(&point).is_some_and(|l| l.conn == conn) {
            links.remove(&point);
        }
    }
    lock(&link.pending).clear();
    let _ = ctx.events.send(Event::Disconnected { point, conn });
}

fn read_loop(
    point: u32,
    reader: &mut conn::FrameReader,
    link: &Link,
    ctx: &NetCtx,
) -> Result<(), (&'static str, String)> {
    let soft = ctx.cfg.collector.max_pending_bytes / 2;
    loop {
        // Backpressure (`Points::should_pause`), except while an RDA look-up waits for this
        // point's answer on this very stream.
        while ctx.points.should_pause(point, soft)
            && lock(&link.pending).is_empty()
            && !ctx.stop.load(Ordering::SeqCst)
        {
            if lock(&ctx.points.links).get(&point).is_none_or(|l| l.conn != link.conn) {
                return Ok(()); // replaced by a newer connection, or cut
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let m = match reader.read() {
            Ok(m) => m,
            Err(ConnError::Closed) => return Ok(()),
            // Shut down by the peer itself (stop, or a replacing connection).
            Err(_) if ctx.stop.load(Ordering::SeqCst) => return Ok(()),
            Err(ConnError::Io(e)) if e.kind() != std::io::ErrorKind::UnexpectedEof => {
                tracing::debug!(point, error = %e, "connection ended");
                return Ok(());
            }
            Err(e) => return Err((e.reason(), e.to_string())),
        };
        ctx.metrics.inc(metrics::FRAMES, &[("type", m.msg_type().name())], 1);
        if lock(&ctx.points.links).get(&point).is_none_or(|l| l.conn != link.conn) {
            // Cut (load shedding) or replaced: the point resends on its new connection.
            return Ok(());
        }
        match m {
            Message::Epoch(f) => match ctx.check_epoch(point, &f) {
                Ok(decoded) => {
                    let _ = ctx.events.send(Event::Epoch {
                        key: f.key,
                        complete: f.complete,
                        epoch_len_ns: f.epoch_len_ns,
                        bytes: estimate::held_bytes(f.synopsis.len(), &decoded),
                        decoded: Ok(decoded),
                    });
                }
                Err((reason, text, true)) => return Err((reason, text)),
                Err((reason, text, false)) => {
                    if reason == UNKNOWN_SEGMENT {
                        ctx.unowned(point, &f.key, &text);
                    } else {
                        tracing::warn!(point, key = %f.key, reason, "refused an epoch synopsis: {text}");
                    }
                    ctx.reject(reason);
                    let _ = ctx.events.send(Event::Epoch {
                        key: f.key,
                        complete: f.complete,
                        epoch_len_ns: f.epoch_len_ns,
                        bytes: 0,
                        decoded: Err(text),
                    });
                }
            },
            Message::Progress { point: p, watermark, given_up } => {
                if p != point {
                    return Err(("protocol", format!("point {point} sent progress for point {p}")));
                }
                let _ = ctx.events.send(Event::Progress { point, conn: link.conn, watermark, given_up });
            }
            Message::LookupResponse { request_id, .. } | Message::BindResponse { request_id, .. } => {
                if let Some(tx) = lock(&link.pending).remove(&request_id) {
                    let _ = tx.send(m);
                }
            }
            Message::Reject { reason } => return Err(("rejected_by_point", reason)),
            other => {
                return Err(("protocol", format!("unexpected {} from a point", other.msg_type().name())));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn over_the_soft_limit_only_the_points_waited_for_are_read() {
        let p = Points::default();
        p.set_wanted(vec![2]);
        p.set_engine_bytes(100);
        assert!(!p.should_pause(1, 100), "at the limit nobody waits");
        p.set_engine_bytes(101);
        assert!(p.should_pause(1, 100), "nothing waits for point 1");
        assert!(!p.should_pause(2, 100), "the oldest group waits for point 2");
        p.set_wanted(vec![]);
        assert!(p.should_pause(2, 100), "only reconciliations are behind: everyone waits");
    }
}
