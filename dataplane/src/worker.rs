//! The poll-mode worker loop of the bump in the wire, and the counters it publishes.
//!
//! Steering: worker `q` owns rx/tx queue `q` of BOTH ports and forwards port 0 → port 1 and
//! port 1 → port 0 on that queue index. With a symmetric RSS key both directions of a flow land
//! on queue `q` of their ingress ports, so request and response meet on one core (the fridge
//! needs that). One worker per queue index, each on its own EAL lcore; the main lcore runs the
//! control/statistics loop and only reads the counters.
//!
//! Per burst: rx burst → [`FrameScreen`] (frames cut short, with broken mbuf chains or too
//! long for the egress are freed and counted by reason) → [`BurstHook::on_burst`]
//! (measurement; a no-op when only forwarding) → tx burst, retried a bounded number of times
//! while the tx ring is full → what is still unsent is freed and counted as dropped, never
//! silently. The screen is a second pass over the burst's mbuf headers (first cache line, which
//! rx just wrote), a departure from "one pass per burst": it must run before the hook so that
//! nothing is measured that is not forwarded, and the hook must not depend on egress limits.
//! Paths whose ports need no check skip it.
//!
//! Must never: allocate, lock, log or make a syscall inside [`run`] (idle mode's sleep after a
//! quiet spell, off by default, is the one exception); reorder frames.
//!
//! Monitor mode ([`WorkerSettings::monitor`]): the same loop with the transmit replaced by a
//! free, for mirror ports and taps; each port's frames are one direction.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use crossbeam::utils::CachePadded;

use crate::dpdk::{MbufBurst, MbufView, PortInfo, RxQueue, RxTimestampField, TxQueue};

pub use crate::direction::Direction;

/// What a hook needs to know about the burst it is given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathInfo {
    /// Which way the frames go.
    pub direction: Direction,
    /// Queue index (= worker index).
    pub queue: u16,
    /// Where the rx port's driver puts rx timestamps, if any driver registered the field.
    pub rx_timestamp: Option<RxTimestampField>,
}

/// Work done on every received burst between rx and tx: parsing and synopsis updates in the
/// measuring build, nothing in the forward-only build. Implementations must not keep, modify
/// or free the mbufs, and follow the hot-path rules (no allocation, lock, log or syscall).
pub trait BurstHook {
    /// Called once per non-empty rx burst, before it is transmitted.
    fn on_burst(&mut self, path: &PathInfo, burst: &MbufBurst);

    /// Called with packets `range` of a burst, in trace-ordered replay ([`run_trace_ordered`]),
    /// which hands the hook the two directions' packets interleaved by timestamp. Every packet
    /// of a burst is given exactly once, in order, before the burst is transmitted.
    #[inline]
    fn on_slice(&mut self, _path: &PathInfo, _burst: &MbufBurst, _range: std::ops::Range<usize>) {}

    /// Called after a poll of both directions that received nothing (idle time: e.g. to move
    /// to the next epoch on the clock when no packet does).
    #[inline]
    fn on_idle(&mut self) {}

    /// Called once when the loop ends, after the last burst (e.g. to hand over the last epoch).
    fn on_stop(&mut self) {}
}

/// The forward-only hook: does nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct ForwardOnly;

impl BurstHook for ForwardOnly {
    #[inline(always)]
    fn on_burst(&mut self, _path: &PathInfo, _burst: &MbufBurst) {}
}

/// One direction of a worker: where it receives and where it sends.
pub struct Path<'p> {
    /// Rx queue `q` of the ingress port.
    pub rx: RxQueue<'p>,
    /// Tx queue `q` of the egress port.
    pub tx: TxQueue<'p>,
    /// Passed to the hook.
    pub info: PathInfo,
    /// What is checked on every received frame before the hook sees it and the egress sends
    /// it (nothing when [`FrameScreen::is_active`] is false).
    pub screen: FrameScreen,
}

/// The checks a path applies to each received frame, so that nothing leaves cut short,
/// corrupt or at a length the egress would cut, and nothing is measured that is not forwarded.
/// Frames that fail are freed before the hook and counted by reason. Built from the two ports'
/// `PortInfo` (ingress limits, egress limits); costs one look at each mbuf, so a path whose
/// ports need none of it skips the pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameScreen {
    /// Verify each mbuf's segment chain (`MbufView::chain_is_whole`): set when the ingress may
    /// deliver chained mbufs. Broken chains count as [`PathCounters::truncated_dropped`].
    pub check_chains: bool,
    /// Frames this long or longer may have been cut by the ingress (a kernel ring frame filled
    /// to its end hands over its first bytes only): counted as
    /// [`PathCounters::truncated_dropped`]. `u32::MAX` when the ingress never cuts frames.
    pub rx_cut_at: u32,
    /// Longest frame the egress transmits whole: longer frames count as
    /// [`PathCounters::oversize_dropped`]. `u32::MAX`: any length.
    pub tx_max: u32,
    /// Longest chained (multi-segment) frame the egress transmits whole: longer chained frames
    /// count as [`PathCounters::oversize_dropped`]. 0: none; `u32::MAX`: any length.
    pub tx_chained_max: u32,
}

impl FrameScreen {
    /// No check at all: every frame is forwarded as received.
    pub const NONE: FrameScreen =
        FrameScreen { check_chains: false, rx_cut_at: u32::MAX, tx_max: u32::MAX, tx_chained_max: u32::MAX };

    /// The checks a path from `rx` to `tx` needs (`monitor`: nothing is transmitted, so no
    /// egress limit applies). The egress's limit on chained frames applies only where the
    /// ingress can deliver chains: a NIC without rx scatter delivers none, and a path between
    /// two such NICs of one MTU then skips the pass (which costs about 7 ns per 64-B frame when
    /// only forwarding; BENCHMARKS.md, W17 fourth session).
    pub fn for_ports(rx: &PortInfo, tx: &PortInfo, monitor: bool) -> FrameScreen {
        let chains = rx.may_receive_chained_mbufs();
        FrameScreen {
            check_chains: chains,
            rx_cut_at: rx.rx_cut_at,
            tx_max: if monitor { u32::MAX } else { tx.tx_max_frame },
            tx_chained_max: if monitor || !chains { u32::MAX } else { tx.tx_chained_max },
        }
    }

    /// Some check applies, so the path must look at every frame.
    pub fn is_active(&self) -> bool {
        *self != Self::NONE
    }

    /// Why a frame must not be forwarded, if it must not.
    #[inline(always)]
    pub fn reject(&self, m: &MbufView<'_>) -> Option<Rejection> {
        if self.check_chains && !m.chain_is_whole() {
            return Some(Rejection::Truncated);
        }
        let len = m.pkt_len();
        if len >= self.rx_cut_at {
            return Some(Rejection::Truncated);
        }
        if len > self.tx_max || (m.segments() > 1 && len > self.tx_chained_max) {
            return Some(Rejection::Oversize);
        }
        None
    }
}

/// Why [`FrameScreen`] held a frame back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rejection {
    /// The frame arrived cut or with a broken segment chain.
    Truncated,
    /// The egress cannot transmit a frame this long whole.
    Oversize,
}

/// Per-worker tuning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkerSettings {
    /// Mbufs per rx burst (1..=[`crate::dpdk::MAX_BURST`]).
    pub burst_size: u16,
    /// Extra tx bursts tried while the tx ring is full before the rest is dropped.
    pub tx_retry_limit: u32,
    /// Monitor mode: received frames are measured and freed, never transmitted (mirror ports,
    /// taps). Counted in [`PathCounters::rx_packets`] only.
    pub monitor: bool,
    /// Idle mode: after this many TSC cycles without a received frame the worker sleeps
    /// `idle_sleep` between polls. 0: never (busy polling).
    pub idle_after_cycles: u64,
    /// Length of each idle pause.
    pub idle_sleep: std::time::Duration,
}

crate::counter_set! {
    /// A plain copy of [`PathCounters`].
    pub struct PathSnapshot;
    /// Counters of one direction of one worker. Written only by that worker (relaxed load+store,
    /// no atomic read-modify-write), read by the main lcore with relaxed loads.
    pub atomic struct PathCounters;
    {
        /// Frames received on the ingress port's queue.
        rx_packets => rx_packets,
        /// Frames the egress port's queue accepted.
        tx_packets => tx_packets,
        /// Extra tx bursts issued because the egress ring was full.
        tx_retries => tx_retries,
        /// Frames freed because the egress ring stayed full after every retry.
        tx_dropped => tx_dropped,
        /// Multi-segment frames freed because the egress port cannot transmit them whole.
        oversize_dropped => oversize_dropped,
        /// Frames freed because they arrived cut short (longer than the ingress's ring frames)
        /// or with a broken mbuf chain: never forwarded as if whole, never measured.
        truncated_dropped => truncated_dropped,
    }
}

/// Everything one worker publishes, on its own cache lines.
#[derive(Debug, Default)]
pub struct WorkerCounters {
    /// Indexed by [`Direction`].
    pub paths: [PathCounters; 2],
    /// Polls in which no queue of the worker returned a frame. The main lcore counts a run as
    /// idle only while these advance: a worker that is not scheduled, or busy with frames it
    /// already holds (a replayed burst spanning many epochs, waiting for epoch buffers), makes
    /// none, and is not an exhausted trace.
    pub empty_polls: AtomicU64,
}

/// The counters of one worker, padded so that workers never share a cache line.
pub type SharedWorkerCounters = CachePadded<WorkerCounters>;

/// Adds `n` to a counter only this thread writes: a plain load and store, no locked instruction.
#[inline(always)]
fn bump(counter: &AtomicU64, n: u64) {
    counter.store(counter.load(Ordering::Relaxed).wrapping_add(n), Ordering::Relaxed);
}

/// The poll loop of one worker: runs until `stop` is set, then frees anything it still holds.
pub fn run<H: BurstHook>(
    paths: &mut [Path<'_>; 2],
    settings: &WorkerSettings,
    counters: &WorkerCounters,
    stop: &AtomicBool,
    hook: &mut H,
) {
    // Port 1's burst, polled before port 0's and processed after it.
    let mut reverse = MbufBurst::new();
    let mut burst = MbufBurst::new();
    let mut empty_polls: u64 = 0;
    // TSC of the first empty poll of the current quiet spell (idle mode only).
    let mut quiet_since: Option<u64> = None;

    while !stop.load(Ordering::Relaxed) {
        let mut received: u16 = 0;
        // Port 1 is polled first and processed second. A response in port 1's burst was handed
        // to the kernel before this poll and its request (port 0) earlier still, so port 0's
        // poll, made after, already holds the request: an exchange whose request arrives on
        // port 0 is processed in order even when the worker is descheduled between its polls
        // (the fridge then pairs it; polled port 0 first, it saw the response first, one
        // iteration before its request). Requests arriving on port 1 keep a window as before:
        // no single order serves both directions (tests/moongen.rs). Port 1's frames wait for
        // port 0's processing in either order, and are stamped when processed.
        let reverse_received = paths[1].rx.recv(&mut reverse, settings.burst_size);

        for (i, (path, c)) in paths.iter_mut().zip(&counters.paths).enumerate() {
            let n = if i == 0 {
                path.rx.recv(&mut burst, settings.burst_size)
            } else {
                // `burst` is empty here (freed or sent); take port 1's.
                std::mem::swap(&mut burst, &mut reverse);
                reverse_received
            };
            if n == 0 {
                continue;
            }
            received += n;
            bump(&c.rx_packets, u64::from(n));
            screen(&path.screen, &mut burst, c);
            if burst.is_empty() {
                continue;
            }

            hook.on_burst(&path.info, &burst);
            if settings.monitor {
                burst.free_all();
            } else {
                transmit(&mut path.tx, &mut burst, settings.tx_retry_limit, c);
            }
        }

        if received == 0 {
            empty_polls += 1;
            counters.empty_polls.store(empty_polls, Ordering::Relaxed);
            hook.on_idle();
            if settings.idle_after_cycles > 0 {
                let now = crate::dpdk::rdtsc();
                let since = *quiet_since.get_or_insert(now);
                if now.wrapping_sub(since) >= settings.idle_after_cycles {
                    // Idle mode (off by default): the one syscall of the loop, made only
                    // after a quiet spell, so that a shared core is given back.
                    std::thread::sleep(settings.idle_sleep);
                }
            }
        } else {
            quiet_since = None;
        }
    }
    hook.on_stop();
}

/// The poll loop for trace replay: like [`run`], but the hook sees the two directions' packets
/// merged by rx timestamp (equal timestamps: port 0 first), as the offline runner merges two
/// pcaps. Each direction keeps one received burst pending; the hook is given the run of packets
/// of one burst that come before the other burst's next packet; a burst is transmitted, whole
/// and in order, once all its packets were given. A queue that returns nothing is taken as
/// exhausted for the merge (DPDK's pcap device returns nothing only at the end of its file).
/// Forwarding order per direction is unchanged; frames wait at most until the other direction's
/// next burst is read. Packets without an rx timestamp sort as time 0.
pub fn run_trace_ordered<H: BurstHook>(
    paths: &mut [Path<'_>; 2],
    settings: &WorkerSettings,
    counters: &WorkerCounters,
    stop: &AtomicBool,
    hook: &mut H,
    timestamps: RxTimestampField,
) {
    let mut bursts = [MbufBurst::new(), MbufBurst::new()];
    let mut next = [0usize; 2];
    let mut empty_polls: u64 = 0;
    let ts = |b: &MbufBurst, i: usize| b.get(i).and_then(|m| m.rx_timestamp(&timestamps)).unwrap_or(0);

    loop {
        let stopping = stop.load(Ordering::Relaxed);
        // Every burst whose packets were all given to the hook leaves; its queue is read again.
        for (d, ((path, c), burst)) in
            paths.iter_mut().zip(&counters.paths).zip(bursts.iter_mut()).enumerate()
        {
            if next[d] < burst.len() {
                continue;
            }
            finish_burst(path, burst, settings, c);
            next[d] = 0;
            if stopping {
                continue;
            }
            let n = path.rx.recv(burst, settings.burst_size);
            if n > 0 {
                bump(&c.rx_packets, u64::from(n));
                screen(&path.screen, burst, c);
            }
        }
        let pending = [next[0] < bursts[0].len(), next[1] < bursts[1].len()];
        let d = match pending {
            [false, false] => {
                if stopping {
                    break;
                }
                hook.on_idle();
                empty_polls += 1;
                counters.empty_polls.store(empty_polls, Ordering::Relaxed);
                continue;
            }
            [true, false] => 0,
            [false, true] => 1,
            [true, true] => usize::from(ts(&bursts[0], next[0]) > ts(&bursts[1], next[1])),
        };
        let o = 1 - d;
        let start = next[d];
        let len = bursts[d].len();
        let end = if pending[o] {
            // Direction 0 goes up to and including the other's head time; direction 1 strictly
            // before it (ties: port 0 first).
            let other = ts(&bursts[o], next[o]);
            let mut j = start + 1;
            while j < len && (ts(&bursts[d], j) < other || (d == 0 && ts(&bursts[d], j) == other)) {
                j += 1;
            }
            j
        } else {
            len
        };
        hook.on_slice(&paths[d].info, &bursts[d], start..end);
        next[d] = end;
    }
    hook.on_stop();
}

/// Frees and counts, by reason, the frames of a just-received burst that `screen` rejects.
#[inline(always)]
fn screen(screen: &FrameScreen, burst: &mut MbufBurst, c: &PathCounters) {
    if !screen.is_active() {
        return;
    }
    let (mut truncated, mut oversize) = (0u64, 0u64);
    burst.retain(|m| match screen.reject(m) {
        None => true,
        Some(Rejection::Truncated) => {
            truncated += 1;
            false
        }
        Some(Rejection::Oversize) => {
            oversize += 1;
            false
        }
    });
    if truncated > 0 {
        bump(&c.truncated_dropped, truncated);
    }
    if oversize > 0 {
        bump(&c.oversize_dropped, oversize);
    }
}

/// Sends a fully handled burst (already screened on receipt).
#[inline(always)]
fn finish_burst(path: &mut Path<'_>, burst: &mut MbufBurst, settings: &WorkerSettings, c: &PathCounters) {
    if burst.is_empty() {
        return;
    }
    if settings.monitor {
        burst.free_all();
        return;
    }
    transmit(&mut path.tx, burst, settings.tx_retry_limit, c);
}

/// Sends the whole burst in order, retrying while the ring is full, then frees and counts
/// whatever is left.
#[inline(always)]
fn transmit(tx: &mut TxQueue<'_>, burst: &mut MbufBurst, retry_limit: u32, c: &PathCounters) {
    let mut sent = u64::from(tx.send(burst));
    let mut retries: u32 = 0;
    while !burst.is_empty() && retries < retry_limit {
        retries += 1;
        sent += u64::from(tx.send(burst));
    }
    bump(&c.tx_packets, sent);
    if retries > 0 {
        bump(&c.tx_retries, u64::from(retries));
    }
    if !burst.is_empty() {
        bump(&c.tx_dropped, burst.free_all() as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A started port of `driver` on `bus` that sends chained frames up to `tx_chained_max`
    /// bytes (0: none; 22.11's pcap device: 16 128).
    fn port(driver: &str, bus: &str, rx_scatter: bool, tx_chained_max: u32) -> PortInfo {
        PortInfo {
            id: 0,
            name: driver.to_owned(),
            driver: driver.to_owned(),
            bus: bus.to_owned(),
            rx_queues: 1,
            tx_queues: 1,
            rx_descriptors: 1024,
            tx_descriptors: 1024,
            symmetric_rss: false,
            rx_timestamp_offload: false,
            rx_scatter,
            tx_multi_segment: false,
            mtu: 1500,
            promiscuous: true,
            rx_cut_at: u32::MAX,
            tx_max_frame: u32::MAX,
            tx_chained_max,
        }
    }

    #[test]
    fn a_path_between_nics_that_cannot_chain_skips_the_screen() {
        let nic = port("net_ixgbe", "pci", false, 0);
        let screen = FrameScreen::for_ports(&nic, &nic, false);
        assert_eq!(
            screen,
            FrameScreen::NONE,
            "no chain can arrive, so the egress's chain limit never applies"
        );
        assert!(!screen.is_active());
    }

    #[test]
    fn chains_are_checked_and_limited_where_the_ingress_can_deliver_them() {
        let scatter = port("net_ixgbe", "pci", true, 0);
        let nic = port("net_ixgbe", "pci", false, 0);
        let s = FrameScreen::for_ports(&scatter, &nic, false);
        assert!(s.check_chains && s.tx_chained_max == 0, "{s:?}");
        let pcap = port("net_pcap", "vdev", false, 16_128);
        let s = FrameScreen::for_ports(&pcap, &pcap, false);
        assert!(s.check_chains && s.tx_chained_max == 16_128, "{s:?}");
        let s = FrameScreen::for_ports(&pcap, &nic, true);
        assert_eq!((s.tx_max, s.tx_chained_max), (u32::MAX, u32::MAX), "a monitor sends nothing");
        assert!(s.check_chains);
    }

    #[test]
    fn kernel_ports_keep_their_cut_and_egress_limits() {
        let mut af = port("net_af_packet", "vdev", false, u32::MAX);
        af.rx_cut_at = 2048;
        af.tx_max_frame = 1518;
        let nic = port("net_ixgbe", "pci", false, 0);
        let into_kernel = FrameScreen::for_ports(&nic, &af, false);
        assert_eq!(into_kernel.tx_max, 1518);
        assert!(into_kernel.is_active());
        let from_kernel = FrameScreen::for_ports(&af, &nic, false);
        assert_eq!(from_kernel.rx_cut_at, 2048);
        assert!(from_kernel.is_active());
    }
}
