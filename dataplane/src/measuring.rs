//! The burst hook that measures: stamps each packet with the configured clock and runs the
//! [`Pipeline`] over the burst, then the worker forwards the burst unchanged.
//!
//! Per burst, one pass: timestamp and inspect every packet into a [`StagedBurst`] (a fixed
//! array), locate the staged packets in the synopses and prefetch the cache lines they will
//! touch at random (RDA's cache slots, LDS's cells and flow-log slots, COLATE's counters),
//! apply the staged packets to the epoch buffer. No allocation, lock, syscall or log per packet; the
//! clock costs one TSC read per burst (TSC), one field read per packet (trace, NIC, kernel, and
//! TSC where the stamping delay is measured).
//!
//! Clocks ([`PacketClock`]):
//! - trace: the pcap device's rx timestamp field, in µs on DPDK 22.11, × 1000. Idle workers
//!   follow the latest trace time of all workers ([`TraceTime`]).
//! - TSC: read once per burst, converted with the control thread's calibrated [`ClockMap`].
//!   Where the port also carries the kernel's receive time (DPDK's pcap device on a live
//!   interface), the hook measures each packet's stamping delay (TSC stamp − kernel time) into
//!   a [`StampDelay`] and publishes it with the counters.
//! - kernel: the kernel's receive time that DPDK's pcap device on a live interface writes into
//!   the rx timestamp field (µs on DPDK 22.11, × 1000; CLOCK_REALTIME like the TSC map). Idle
//!   ticks come from the TSC map held back by a guard, since a packet may still sit in
//!   libpcap's ring, unseen, with an older kernel time.
//! - NIC: the rx timestamp field in device clock units, converted with that port's map (the
//!   control thread calibrates it with `rte_eth_read_clock`); idle ticks come from the TSC map,
//!   held back by a guard so a NIC clock that lags the TSC does not make packets late.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::clock::{ClockMap, TraceTime};
use crate::dpdk::{self, MbufBurst, RxTimestampField};
use crate::pipeline::{Pipeline, SharedCounters, StagedBurst};
use crate::stamp_delay::{SharedStampDelay, StampDelay};
use crate::worker::{BurstHook, PathInfo};

/// Largest frame the hook copies out of a chained mbuf: libpcap's largest record, so that
/// `run` inspects every byte of a chained frame as `offline` does (with a smaller buffer the
/// two measured different packets: a frame cut at 16 KiB fails its IP length check).
pub const MAX_COPIED_FRAME: usize = 256 * 1024;

/// Publish the counters every this many bursts (and when idle, and at the end).
const PUBLISH_EVERY_BURSTS: u32 = 64;

/// Publish the counters every this many idle polls.
const PUBLISH_EVERY_IDLES: u32 = 1024;

/// Where packet timestamps come from.
pub enum PacketClock<'a> {
    /// The pcap record time in the rx timestamp field (µs); `time` is shared by the workers.
    Trace {
        /// The registered rx timestamp field.
        field: RxTimestampField,
        /// Latest trace time of each worker.
        time: &'a TraceTime,
        /// This worker's slot in `time`.
        worker: usize,
    },
    /// The TSC once per burst.
    Tsc {
        /// TSC → wall-clock ns.
        map: &'a ClockMap,
        /// The rx timestamp field, when some port may carry the kernel's receive time (µs):
        /// then the stamping delay is measured on the packets that have it.
        kernel_field: Option<RxTimestampField>,
    },
    /// The kernel's receive time per packet (µs in the rx timestamp field).
    Kernel {
        /// The registered rx timestamp field.
        field: RxTimestampField,
        /// TSC → ns, for idle ticks.
        tsc: &'a ClockMap,
        /// Idle ticks stay this far behind the TSC time.
        idle_guard_ns: u64,
    },
    /// The NIC's rx timestamp per packet.
    Nic {
        /// The registered rx timestamp field.
        field: RxTimestampField,
        /// Device clock → ns, per port of arrival.
        ports: [&'a ClockMap; 2],
        /// TSC → ns, for idle ticks.
        tsc: &'a ClockMap,
        /// Idle ticks stay this far behind the TSC time.
        idle_guard_ns: u64,
    },
}

/// The measuring hook of one worker.
pub struct MeasuringHook<'a> {
    pipeline: Pipeline,
    clock: PacketClock<'a>,
    staged: StagedBurst,
    scratch: Box<[u8]>,
    shared: &'a SharedCounters,
    abort: &'a AtomicBool,
    /// The stamping delay (TSC clock with a kernel time field), and where it is published.
    stamp_delay: StampDelay,
    shared_stamp_delay: Option<&'a SharedStampDelay>,
    bursts: u32,
    idles: u32,
    finished: bool,
}

impl<'a> MeasuringHook<'a> {
    /// A hook running `pipeline` with `clock`; publishes counters into `shared`. `abort` ends
    /// any wait for the control thread (policy `wait`) when set. Allocates its scratch buffer
    /// here, once.
    pub fn new(
        pipeline: Pipeline,
        clock: PacketClock<'a>,
        shared: &'a SharedCounters,
        abort: &'a AtomicBool,
    ) -> Self {
        Self {
            pipeline,
            clock,
            staged: StagedBurst::new(),
            scratch: vec![0u8; MAX_COPIED_FRAME].into_boxed_slice(),
            shared,
            abort,
            stamp_delay: StampDelay::default(),
            shared_stamp_delay: None,
            bursts: 0,
            idles: 0,
            finished: false,
        }
    }

    /// Publishes the stamping delay into `shared` (TSC clock only: it is measured only there,
    /// on the packets whose port gave the kernel's receive time).
    pub fn with_stamp_delay(mut self, shared: &'a SharedStampDelay) -> Self {
        self.shared_stamp_delay = Some(shared);
        self
    }

    fn publish(&self) {
        self.pipeline.publish(self.shared);
        if let Some(s) = self.shared_stamp_delay {
            s.publish(&self.stamp_delay);
        }
    }

    #[inline(always)]
    fn measure(&mut self, path: &PathInfo, burst: &MbufBurst, range: std::ops::Range<usize>) {
        let port = path.direction.rx_port_index();
        let burst_ns = match &self.clock {
            PacketClock::Tsc { map, .. } => map.to_ns(dpdk::rdtsc()),
            _ => 0,
        };
        let delay_field = match &self.clock {
            PacketClock::Tsc { kernel_field, .. } if self.shared_stamp_delay.is_some() => *kernel_field,
            _ => None,
        };
        self.staged.clear();
        let mut last_ts = 0;
        for i in range {
            let Some(m) = burst.get(i) else { break };
            let ts = match &self.clock {
                PacketClock::Trace { field, .. } => m.rx_timestamp(field).map(|us| us.saturating_mul(1000)),
                PacketClock::Tsc { .. } => {
                    if let Some(us) = delay_field.as_ref().and_then(|f| m.rx_timestamp(f)) {
                        self.stamp_delay.record(burst_ns, us.saturating_mul(1000));
                    }
                    Some(burst_ns)
                }
                PacketClock::Kernel { field, .. } => m.rx_timestamp(field).map(|us| us.saturating_mul(1000)),
                PacketClock::Nic { field, ports, .. } => {
                    m.rx_timestamp(field).map(|raw| ports[port & 1].to_ns(raw))
                }
            };
            let Some(ts) = ts else {
                self.pipeline.count_untimed();
                continue;
            };
            last_ts = ts;
            let frame = if m.segments() <= 1 {
                m.data()
            } else {
                let n = m.copy_frame(&mut self.scratch);
                self.scratch.get(..n).unwrap_or(&[])
            };
            self.pipeline.stage(&mut self.staged, frame, ts, port, &mut dpdk::prefetch);
        }
        let abort = self.abort;
        let trace = match &self.clock {
            PacketClock::Trace { time, worker, .. } => Some((*time, *worker)),
            _ => None,
        };
        self.pipeline.apply(port, &self.staged, &mut |ts| {
            // Idle workers follow the latest trace time. A worker waiting for a buffer tells them
            // how far it has got, or they would never close the epochs it waits on: with another
            // worker's queue exhausted, the replay stalled until `[stop]` ended it.
            if let Some((time, w)) = trace {
                time.publish(w, ts);
            }
            std::hint::spin_loop();
            !abort.load(Ordering::Relaxed)
        });
        if let PacketClock::Trace { time, worker, .. } = &self.clock {
            time.publish(*worker, last_ts);
        }
        self.bursts = self.bursts.wrapping_add(1);
        if self.bursts.is_multiple_of(PUBLISH_EVERY_BURSTS) {
            self.publish();
        }
    }
}

impl BurstHook for MeasuringHook<'_> {
    #[inline]
    fn on_burst(&mut self, path: &PathInfo, burst: &MbufBurst) {
        self.measure(path, burst, 0..burst.len());
    }

    #[inline]
    fn on_slice(&mut self, path: &PathInfo, burst: &MbufBurst, range: std::ops::Range<usize>) {
        self.measure(path, burst, range);
    }

    fn on_idle(&mut self) {
        let now = match &self.clock {
            PacketClock::Trace { time, .. } => time.latest(),
            PacketClock::Tsc { map, .. } => map.to_ns(dpdk::rdtsc()),
            PacketClock::Nic { tsc, idle_guard_ns, .. } | PacketClock::Kernel { tsc, idle_guard_ns, .. } => {
                tsc.to_ns(dpdk::rdtsc()).saturating_sub(*idle_guard_ns)
            }
        };
        self.pipeline.tick(now);
        // One chunk of a filing the control thread shared, if one is open (issue 24), only when
        // both rx queues were empty: a chunk stalls this loop for about 1/64 of an epoch's
        // filing (≈ 130 µs at a million pairs), longer than an rx ring of a busy port holds. A
        // worker without idle polls leaves its share to the control thread, as before.
        self.pipeline.help_filing();
        self.idles = self.idles.wrapping_add(1);
        if self.idles.is_multiple_of(PUBLISH_EVERY_IDLES) {
            self.publish();
        }
    }

    fn on_stop(&mut self) {
        if !self.finished {
            self.finished = true;
            self.pipeline.finish();
            self.publish();
        }
    }
}

impl Drop for MeasuringHook<'_> {
    /// A worker that ends abnormally (a caught panic) still tells the control thread it is done,
    /// so the harvest can finish.
    fn drop(&mut self) {
        self.on_stop();
    }
}
