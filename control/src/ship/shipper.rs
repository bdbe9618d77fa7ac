//! The shipper thread of a [`super::NetworkSink`] and the reader thread of each of its
//! connections: connect to the peer (with backoff), run the handshake, send every
//! unacknowledged frame and the progress watermark within the window, and take the peer's
//! acknowledgements and answer its RDA look-ups and bind requests.

use super::queue::FrameSource;
use crate::conn::{self, ConnError, FrameReader, FrameWriter};
use crate::wire::{GiveUp, Hello, Message};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use wirelat_dataplane::synopsis::SynopsisKind;

use super::{Shared, lock};

fn resolve(peer: &str) -> std::io::Result<SocketAddr> {
    peer.to_socket_addrs()?.next().ok_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::NotFound, format!("{peer} resolves to no address"))
    })
}

/// Sleeps up to `d`, waking early when the sink stops.
fn pause(s: &Shared, d: Duration) {
    let deadline = Instant::now() + d;
    let mut q = lock(&s.queue);
    while !s.stop.load(Ordering::SeqCst) {
        let now = Instant::now();
        if now >= deadline {
            break;
        }
        q = s.wake.wait_timeout(q, deadline - now).map(|(g, _)| g).unwrap_or_else(|p| p.into_inner().0);
    }
}

/// The shipper thread: connects, runs a session, and backs off and reconnects until the sink
/// stops.
pub(super) fn shipper_main(s: &Arc<Shared>) {
    if let Some(core) = s.cfg.core {
        pin_to(core);
    }
    let initial = Duration::from_millis(s.cfg.backoff_initial_ms);
    let max = Duration::from_millis(s.cfg.backoff_max_ms);
    let mut backoff = initial;
    let mut failures_in_a_row = 0u64;
    while !s.stop.load(Ordering::SeqCst) {
        match session(s) {
            Ok(()) => {
                backoff = initial;
                failures_in_a_row = 0;
            }
            Err((established, e)) => {
                if established {
                    backoff = initial;
                    failures_in_a_row = 0;
                } else {
                    s.connections.connect_failures.fetch_add(1, Ordering::Relaxed);
                    failures_in_a_row += 1;
                }
                if !s.stop.load(Ordering::SeqCst) {
                    // Log the first failure and then every 10th, so a long outage stays readable.
                    if failures_in_a_row <= 1 || failures_in_a_row.is_multiple_of(10) {
                        tracing::warn!(peer = %s.cfg.peer, error = %e, retry_in_ms = backoff.as_millis() as u64, failures = failures_in_a_row, "connection to the peer failed");
                    }
                    pause(s, backoff);
                    if !established {
                        backoff = (backoff * 2).min(max);
                    }
                }
            }
        }
    }
}

fn pin_to(core: usize) {
    let ids = core_affinity::get_core_ids().unwrap_or_default();
    match ids.into_iter().find(|c| c.id == core) {
        Some(id) if core_affinity::set_for_current(id) => {}
        _ => tracing::warn!(core, "cannot pin the shipper thread to this core; it runs unpinned"),
    }
}

/// One connection: handshake, then ship until it fails or the sink stops. The error says
/// whether the handshake had succeeded.
fn session(s: &Arc<Shared>) -> Result<(), (bool, ConnError)> {
    let timeout = Duration::from_millis(s.cfg.io_timeout_ms.max(1));
    let addr = resolve(&s.cfg.peer).map_err(|e| (false, e.into()))?;
    let stream = TcpStream::connect_timeout(&addr, timeout).map_err(|e| (false, e.into()))?;
    // Not the full watermark: what is unacknowledged below it is only about to be resent.
    let watermark = lock(&s.queue).safe_watermark();
    let hello = Hello {
        point: s.point,
        watermark,
        packet_identity: s.packet_identity,
        fingerprints: s.fingerprints.clone(),
    };
    let (reader, writer) = conn::client_handshake(stream, &s.psk, &hello, s.cfg.max_body_bytes, timeout)
        .map_err(|e| (false, e))?;
    let writer = Arc::new(Mutex::new(writer));
    let _ = lock(&writer).set_timeout(Some(timeout));
    *lock(&s.live) = Some(writer.clone());
    let gone = Arc::new(AtomicBool::new(false));
    let rejected = Arc::new(Mutex::new(None::<String>));
    let rd = {
        let (s, w, gone, rejected) = (s.clone(), writer.clone(), gone.clone(), rejected.clone());
        std::thread::Builder::new()
            .name("wirelat-ship-rx".into())
            .spawn(move || reader_main(&s, reader, &w, &gone, &rejected))
            .map_err(|e| (false, e.into()))?
    };
    s.connections.connections.fetch_add(1, Ordering::Relaxed);
    tracing::info!(peer = %s.cfg.peer, point = s.point, "connected to the peer");
    // Only what an earlier connection sent counts as resent: synopses queued before the first
    // connection (a collector slow to accept) go out for the first time.
    let resend = lock(&s.queue).mark_all_unsent();
    let result = ship_loop(s, &writer, &gone, resend);
    lock(&writer).shutdown();
    let _ = rd.join();
    *lock(&s.live) = None;
    if let Some(reason) = lock(&rejected).take() {
        s.connections.rejected_by_peer.fetch_add(1, Ordering::Relaxed);
        tracing::error!(peer = %s.cfg.peer, %reason, "the peer refused this point");
        return Err((false, ConnError::Rejected(reason)));
    }
    result.map_err(|e| (true, e))
}

fn ship_loop(
    s: &Shared,
    writer: &Mutex<FrameWriter>,
    gone: &AtomicBool,
    mut resend: u64,
) -> Result<(), ConnError> {
    let max_age = (s.cfg.max_age_ms > 0).then(|| Duration::from_millis(s.cfg.max_age_ms));
    let mut last_given_up = u64::MAX;
    let mut announced = 0u64;
    loop {
        if s.stop.load(Ordering::SeqCst) {
            return Ok(());
        }
        if gone.load(Ordering::SeqCst) {
            return Err(ConnError::Closed);
        }
        let work = {
            let mut q = lock(&s.queue);
            if let Some(age) = max_age {
                for key in q.expire(age) {
                    s.give_up(&key, GiveUp::TooOld);
                }
            }
            if !q.has_work(s.cfg.window_bytes) && s.given_up.total() == last_given_up {
                q = s
                    .wake
                    .wait_timeout(q, Duration::from_millis(200))
                    .map(|(g, _)| g)
                    .unwrap_or_else(|p| p.into_inner().0);
            }
            q.next_work(64, s.cfg.window_bytes)
        };
        lock(&s.retained).expire();
        for (key, src) in work.items {
            let frame = match src {
                FrameSource::Memory(f) => f,
                FrameSource::Disk(p) => match std::fs::read(&p) {
                    Ok(b) => Arc::new(b),
                    Err(e) => {
                        tracing::warn!(file = %p.display(), error = %e, "cannot read a spilled epoch synopsis");
                        if lock(&s.queue).give_up(&key) {
                            s.give_up(&key, GiveUp::SpillFailed);
                        }
                        continue;
                    }
                },
            };
            lock(writer).send_frame(&frame)?;
            s.frames.sent.fetch_add(1, Ordering::Relaxed);
            if resend > 0 {
                resend -= 1;
                s.frames.resent.fetch_add(1, Ordering::Relaxed);
            }
        }
        // A new give-up count goes out with the last watermark already announced: a newer one
        // only after everything queued before it was sent.
        let total = s.given_up.total();
        if let Some(watermark) = work.progress.or((total != last_given_up).then_some(announced)) {
            let given_up = s.given_up.snapshot();
            lock(writer).send(&Message::Progress { point: s.point, watermark, given_up })?;
            announced = watermark;
            last_given_up = total;
        }
        s.wake.notify_all();
    }
}

fn reader_main(
    s: &Shared,
    mut reader: FrameReader,
    writer: &Mutex<FrameWriter>,
    gone: &AtomicBool,
    rejected: &Mutex<Option<String>>,
) {
    if let Some(core) = s.cfg.core {
        pin_to(core);
    }
    loop {
        let m = match reader.read() {
            Ok(m) => m,
            Err(e) => {
                if !s.stop.load(Ordering::SeqCst) && !matches!(e, ConnError::Closed) {
                    tracing::warn!(error = %e, "connection to the peer lost");
                }
                break;
            }
        };
        let reply = match m {
            Message::Ack(key) => {
                if key.kind == SynopsisKind::Rda && key.point == s.point {
                    // Committed at the peer: no look-up for this epoch's cache can follow.
                    lock(&s.retained).release(key.segment, key.epoch);
                }
                if lock(&s.queue).ack(&key) {
                    s.frames.acked.fetch_add(1, Ordering::Relaxed);
                    s.wake.notify_all();
                }
                None
            }
            Message::LookupRequest { request_id, cache, ids } => {
                let (status, timestamps) = lock(&s.retained).lookup(&cache, &ids);
                Some(Message::LookupResponse { request_id, status, timestamps })
            }
            Message::BindRequest { request_id, cache, buckets_per_bank } => {
                let (status, banks) = lock(&s.retained).bind(&cache, buckets_per_bank);
                Some(Message::BindResponse { request_id, status, banks })
            }
            Message::Reject { reason } => {
                *lock(rejected) = Some(reason);
                break;
            }
            other => {
                tracing::warn!(
                    message = other.msg_type().name(),
                    "unexpected message from the peer; reconnecting"
                );
                break;
            }
        };
        if let Some(r) = reply
            && lock(writer).send(&r).is_err()
        {
            break;
        }
    }
    gone.store(true, Ordering::SeqCst);
    lock(writer).shutdown();
    s.wake.notify_all();
}
