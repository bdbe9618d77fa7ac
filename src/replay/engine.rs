//! The DPDK side of `wirelat replay`: brings up the EAL, one mbuf pool and one port per stream,
//! then runs the pacing loop on the main lcore and tears everything down in order (queues,
//! ports, pool, EAL), so the pcap driver flushes and closes its output files.
//!
//! The loop, per burst: read the TSC; if the next frame is not due yet, wait (spin with
//! `pause`, or, when `[replay] sleep_above_us` is set and the wait is longer, sleep and wake
//! [`SLEEP_MARGIN_NS`] early); then copy every due frame of the same stream (up to the burst
//! size) into mbufs and hand them to that stream's tx queue. A full tx ring is retried until it
//! takes the frames (counted as `tx_retries`); nothing is dropped unless a signal stops the
//! run mid-burst, and then it is counted as `unsent`. Lateness (the TSC just before the burst is
//! handed to the driver, minus the frame's due time) is recorded per sent frame.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, bail};
use tracing::{info, warn};
use wirelat_dataplane::dpdk::{
    Eal, MbufBurst, Mempool, MempoolSettings, Port, PortSettings, PortStats, PushError, TxQueue, spin_pause,
    tsc_now,
};

use super::config::{MEMPOOL_CACHE, RX_DESCRIPTORS, ReplayConfig};
use super::schedule::{Lateness, Schedule, StreamFrames};

/// A sleeping wait wakes this long before the deadline and spins the rest: enough for the
/// scheduler's wake-up latency on an ordinary, not overloaded kernel.
pub const SLEEP_MARGIN_NS: u64 = 1_000_000;
/// Longest single sleep, so a signal is noticed promptly.
const MAX_SLEEP_NS: u64 = 50_000_000;
/// Default data room: the largest frame plus headroom, between DPDK's default and this cap;
/// longer frames are chained.
const MAX_DEFAULT_DATA_ROOM: usize = 10_240;
const MIN_DEFAULT_DATA_ROOM: usize = 2048 + 128;
/// Time given to tx rings to drain before the ports stop.
const TX_DRAIN: Duration = Duration::from_millis(20);

/// Why the replay ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// Every pass was sent.
    Finished,
    /// SIGINT or SIGTERM.
    Signal,
}

/// Counters of one stream.
#[derive(Debug, Clone, Default)]
pub struct StreamTotals {
    /// The device's ethdev name.
    pub device: String,
    /// Frames handed to the driver.
    pub frames: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Frames that needed a chain of mbufs.
    pub chained: u64,
    /// Extra tx calls because the ring was full.
    pub tx_retries: u64,
    /// Frames freed unsent because a signal stopped the run while the ring was full.
    pub unsent: u64,
    /// The device's own counters after the run.
    pub device_stats: PortStats,
}

/// The outcome of a replay.
#[derive(Debug, Clone)]
pub struct ReplaySummary {
    /// Why it stopped.
    pub reason: StopReason,
    /// Passes completed.
    pub passes: u64,
    /// Per stream.
    pub streams: Vec<StreamTotals>,
    /// From the first frame handed to the driver to the last, ns.
    pub elapsed_ns: u64,
    /// Lateness of paced frames (empty when sending as fast as possible).
    pub lateness: Lateness,
    /// Times the loop found the mbuf pool empty and waited for the devices to free mbufs.
    pub pool_waits: u64,
}

/// Runs the replay of `schedule` (over `frames`, one entry per configured stream).
pub fn run(
    cfg: &ReplayConfig,
    frames: &[StreamFrames],
    schedule: &Schedule,
) -> anyhow::Result<ReplaySummary> {
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&stop))
            .context("cannot install the signal handler")?;
    }
    let eal = Eal::init(cfg.full_eal_args())?;
    let max_frame = frames.iter().map(|f| f.max_frame).max().unwrap_or(0);
    let data_room = match cfg.data_room_bytes {
        Some(d) => d,
        None => {
            let want = (max_frame + 128).clamp(MIN_DEFAULT_DATA_ROOM, MAX_DEFAULT_DATA_ROOM);
            u16::try_from(want).unwrap_or(u16::MAX)
        }
    };
    let pool = Mempool::new(
        &eal,
        &MempoolSettings {
            name: "wirelat_replay".to_owned(),
            mbufs: cfg.mempool_mbufs(),
            cache_size: MEMPOOL_CACHE,
            data_room_bytes: data_room,
            socket: Some(eal.lcore_socket(eal.main_lcore())),
        },
    )?;
    let mut ports = Vec::with_capacity(cfg.streams.len());
    for (s, f) in cfg.streams.iter().zip(frames) {
        let settings = PortSettings {
            rx_queues: 1,
            tx_queues: 1,
            rx_descriptors: RX_DESCRIPTORS as u16,
            tx_descriptors: s.tx_descriptors,
            promiscuous: false,
            rx_timestamp: false,
            // The MTU the largest frame needs (at least 1500, at most 9000 as before): a port
            // refuses an MTU it cannot apply, and a kernel port (af_packet) applies 1500 with
            // its default ring but not 9000.
            mtu: u16::try_from(f.max_frame.saturating_sub(14).clamp(1500, 9000)).unwrap_or(9000),
            rx_cut_at: u32::MAX,
            kernel_iface: None,
            mtu_explicit: false,
        };
        let port = Port::open(&eal, &s.device_name(), &pool, &settings)?;
        let room = usize::from(data_room).saturating_sub(128);
        if f.max_frame > room && !port.info().transmits_chained_mbufs() {
            bail!(
                "{}: a frame of {} bytes needs a chain of mbufs, which device {} cannot transmit; \
                 set [mempool] data_room_bytes to at least {}",
                s.pcap.display(),
                f.max_frame,
                port.info().name,
                f.max_frame + 128
            );
        }
        info!(stream = ports.len(), device = %port.info().name, driver = %port.info().driver,
              tx_descriptors = port.info().tx_descriptors, "port started");
        ports.push(port);
    }
    wait_for_links(&ports, cfg.link_wait_ms);
    info!(tsc_hz = eal.tsc_hz(), rate_multiplier = cfg.rate_multiplier, loops = cfg.loops, "replaying");

    let outcome = {
        let mut queues = Vec::with_capacity(ports.len());
        for p in &ports {
            queues.push(p.tx_queue(0)?);
        }
        pace(cfg, frames, schedule, &pool, &mut queues, eal.tsc_hz(), &stop)
    };
    std::thread::sleep(TX_DRAIN);
    let mut summary = outcome;
    for (t, p) in summary.streams.iter_mut().zip(&ports) {
        t.device = p.info().name.clone();
        t.device_stats = p.stats().unwrap_or_default();
    }
    info!(mbufs_in_use = pool.in_use(), "replay stopped");
    drop(ports); // stop + close: the pcap driver flushes and closes its files
    drop(pool);
    eal.cleanup()?;
    Ok(summary)
}

fn wait_for_links(ports: &[Port<'_>], wait_ms: u64) {
    let deadline = std::time::Instant::now() + Duration::from_millis(wait_ms);
    for p in ports {
        loop {
            match p.link() {
                Ok(l) if l.up => {
                    info!(device = %p.info().name, speed_mbps = l.speed_mbps, "link up");
                    break;
                }
                Ok(_) if std::time::Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                Ok(_) => {
                    warn!(device = %p.info().name, wait_ms, "link still down; sending anyway");
                    break;
                }
                Err(e) => {
                    warn!(device = %p.info().name, error = %e, "cannot read the link state; sending anyway");
                    break;
                }
            }
        }
    }
}

/// Converts between TSC ticks and trace time.
struct Clock {
    hz: u64,
    ns_per_tick: f64,
}

impl Clock {
    fn ticks_to_ns(&self, ticks: u64) -> u64 {
        (ticks as f64 * self.ns_per_tick) as u64
    }

    fn ns_to_ticks(&self, ns: u64) -> u64 {
        ((ns as u128 * u128::from(self.hz)) / 1_000_000_000) as u64
    }
}

/// Waits until the TSC reaches `due`, sleeping through waits longer than `sleep_above_ns`
/// (0: always spin); false if a signal came first.
fn wait_until(due: u64, clock: &Clock, sleep_above_ns: u64, stop: &AtomicBool) -> bool {
    loop {
        let now = tsc_now();
        if now >= due {
            return true;
        }
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        let left_ns = clock.ticks_to_ns(due - now);
        if sleep_above_ns > 0 && left_ns > sleep_above_ns.max(SLEEP_MARGIN_NS) {
            std::thread::sleep(Duration::from_nanos((left_ns - SLEEP_MARGIN_NS).min(MAX_SLEEP_NS)));
        } else {
            spin_pause();
        }
    }
}

/// The pacing loop (runs on the main lcore).
fn pace(
    cfg: &ReplayConfig,
    frames: &[StreamFrames],
    schedule: &Schedule,
    pool: &Mempool<'_>,
    queues: &mut [TxQueue<'_>],
    hz: u64,
    stop: &AtomicBool,
) -> ReplaySummary {
    let clock = Clock { hz, ns_per_tick: 1e9 / hz.max(1) as f64 };
    let paced = cfg.rate_multiplier > 0.0;
    // Deadlines within a pass, in ticks from the pass's start.
    let ticks_per_trace_ns = if paced { hz as f64 / 1e9 / cfg.rate_multiplier } else { 0.0 };
    let offsets: Vec<u64> =
        schedule.slots.iter().map(|s| (s.offset_ns as f64 * ticks_per_trace_ns).round() as u64).collect();
    let period_ticks = schedule.period_ns as f64 * ticks_per_trace_ns;

    let mut totals: Vec<StreamTotals> = vec![StreamTotals::default(); queues.len()];
    let mut lateness = Lateness::default();
    let mut pool_waits = 0u64;
    let mut burst = MbufBurst::new();
    let burst_size = usize::from(cfg.burst_size);
    let sleep_above_ns = cfg.sleep_above_us.saturating_mul(1000);
    let log_every = clock.ns_to_ticks(cfg.stats_interval_ms.saturating_mul(1_000_000));

    let start = tsc_now();
    let mut next_log = start.saturating_add(log_every);
    let mut last_sent_tick = start;
    let mut pass = 0u64;
    let mut pass_start = start;
    let mut next = 0usize;
    let reason = loop {
        if stop.load(Ordering::Relaxed) {
            break StopReason::Signal;
        }
        if next >= schedule.slots.len() {
            pass += 1;
            if cfg.loops != 0 && pass >= cfg.loops {
                break StopReason::Finished;
            }
            next = 0;
            pass_start = start.saturating_add((pass as f64 * period_ticks) as u64);
        }
        let (Some(slot), Some(&offset)) = (schedule.slots.get(next), offsets.get(next)) else {
            break StopReason::Finished;
        };
        let due = pass_start.saturating_add(offset);
        if paced && !wait_until(due, &clock, sleep_above_ns, stop) {
            break StopReason::Signal;
        }
        let now = tsc_now();
        let stream = usize::from(slot.stream);
        let (Some(queue), Some(stream_frames), Some(t)) =
            (queues.get_mut(stream), frames.get(stream), totals.get_mut(stream))
        else {
            break StopReason::Finished;
        };
        // Every due frame of this stream, in order, up to the burst size.
        let mut lens = [0u32; wirelat_dataplane::dpdk::MAX_BURST];
        let mut dues = [0u64; wirelat_dataplane::dpdk::MAX_BURST];
        while burst.len() < burst_size {
            let (Some(s), Some(&off)) = (schedule.slots.get(next), offsets.get(next)) else { break };
            let due = pass_start.saturating_add(off);
            if usize::from(s.stream) != stream || (paced && due > now) {
                break;
            }
            let frame = stream_frames.frame(s.frame as usize);
            match burst.push_copy(pool, frame) {
                Ok(pushed) => {
                    if pushed.segments > 1 {
                        t.chained += 1;
                    }
                    let slot = burst.len() - 1;
                    if let (Some(l), Some(d)) = (lens.get_mut(slot), dues.get_mut(slot)) {
                        // Loaded frames are below 4 GiB (their pcap length field is 32 bits).
                        *l = frame.len() as u32;
                        *d = due;
                    }
                    next += 1;
                }
                Err(PushError::PoolEmpty) => {
                    pool_waits += 1;
                    break;
                }
                Err(PushError::BurstFull) => break,
                Err(e @ (PushError::Empty | PushError::TooLong { .. })) => {
                    // Cannot happen for loaded frames (non-empty, below 4 GiB); skip, never loop.
                    warn!(stream, frame = s.frame, error = %e, "frame skipped");
                    next += 1;
                }
            }
        }
        let handed = burst.len();
        let handed_at = tsc_now();
        let mut sent = 0usize;
        while sent < handed {
            sent += usize::from(queue.send(&mut burst));
            if sent >= handed {
                break;
            }
            t.tx_retries += 1;
            if stop.load(Ordering::Relaxed) {
                t.unsent += burst.free_all() as u64;
                break;
            }
            spin_pause();
        }
        t.frames += sent as u64;
        t.bytes += lens.iter().take(sent).map(|&l| u64::from(l)).sum::<u64>();
        if paced {
            for &due in dues.iter().take(sent) {
                lateness.record(clock.ticks_to_ns(handed_at.saturating_sub(due)));
            }
        }
        if sent > 0 {
            last_sent_tick = tsc_now();
        }
        if sent < handed {
            break StopReason::Signal;
        }
        if handed == 0 {
            // The pool was empty: the devices still hold every mbuf. Let them drain.
            spin_pause();
        }
        if log_every > 0 && last_sent_tick >= next_log {
            next_log = last_sent_tick.saturating_add(log_every);
            let sent: u64 = totals.iter().map(|t| t.frames).sum();
            info!(sent, pass, "replay progress");
        }
    };
    ReplaySummary {
        reason,
        passes: pass,
        streams: totals,
        elapsed_ns: clock.ticks_to_ns(last_sent_tick.saturating_sub(start)),
        lateness,
        pool_waits,
    }
}
