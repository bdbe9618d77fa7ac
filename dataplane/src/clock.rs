//! Packet clocks, all to u64 nanoseconds since the Unix epoch: the shared raw → ns mapping for
//! counters that tick on their own (TSC, a NIC's clock), its calibration against wall-clock
//! time, and the latest trace time for replays.
//!
//! - [`ClockMap`]: `ns = anchor_ns + (raw − anchor_raw) · slope`, published by the control thread
//!   through a sequence lock (writers once a second, readers once per burst: a few loads, no
//!   lock, no syscall). Workers only read.
//! - [`Calibrator`]: the control thread's side. It re-anchors the map every interval on
//!   (raw, wall-clock) pairs. The new segment starts where the old one is at that instant (the
//!   packet clock never jumps, and never goes backwards), and its slope is the measured rate
//!   corrected so that the remaining offset to wall-clock time is worked off over the next
//!   interval (like NTP's slew), the correction capped at ±[`MAX_SLEW_PPM`]. So the TSC's
//!   calibration error (ppm) and drift do not accumulate, and a wall-clock step (an NTP jump)
//!   is followed gradually, without a discontinuity in packet timestamps.
//! - [`TraceTime`]: in trace replay, each worker's latest packet time, per worker on its own
//!   cache line; a worker whose queues are exhausted advances its epochs to the maximum, so the
//!   harvest is not held up by an idle queue.
//!
//! Reading a clock source itself (the TSC, a NIC clock) is DPDK's business (`dpdk` module).

use std::sync::atomic::{AtomicU64, Ordering, fence};

use crossbeam::utils::CachePadded;

/// Largest rate correction a re-anchoring applies, in parts per million.
pub const MAX_SLEW_PPM: f64 = 500.0;

/// Fixed-point shift of [`ClockMap`]'s slope (ns per raw tick × 2^32).
const SLOPE_SHIFT: u32 = 32;

/// A raw counter → ns mapping shared by the control thread (writer) and workers (readers).
#[derive(Debug, Default)]
pub struct ClockMap {
    seq: AtomicU64,
    anchor_raw: AtomicU64,
    anchor_ns: AtomicU64,
    slope: AtomicU64,
}

/// One segment of the mapping, as read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClockSegment {
    /// Raw counter value at the anchor.
    pub anchor_raw: u64,
    /// Nanoseconds at the anchor.
    pub anchor_ns: u64,
    /// ns per raw tick, fixed point (× 2^32).
    pub slope: u64,
}

impl ClockSegment {
    /// The segment for a counter of `hz` ticks per second anchored at (`raw`, `ns`).
    pub fn at_rate(raw: u64, ns: u64, hz: f64) -> Self {
        let slope = if hz > 0.0 { 1e9 / hz * (1u64 << SLOPE_SHIFT) as f64 } else { 0.0 };
        Self { anchor_raw: raw, anchor_ns: ns, slope: slope.round() as u64 }
    }

    /// `raw` in ns (raw values before the anchor map backwards; saturating at 0 and u64::MAX).
    #[inline(always)]
    pub fn to_ns(&self, raw: u64) -> u64 {
        let delta = raw.wrapping_sub(self.anchor_raw) as i64 as i128;
        let ns = self.anchor_ns as i128 + ((delta * self.slope as i128) >> SLOPE_SHIFT);
        ns.clamp(0, u64::MAX as i128) as u64
    }
}

impl ClockMap {
    /// A map starting with `segment`.
    pub fn new(segment: ClockSegment) -> Self {
        let m = Self::default();
        m.publish(segment);
        m
    }

    /// Replaces the segment (control thread only: one writer).
    pub fn publish(&self, s: ClockSegment) {
        let seq = self.seq.load(Ordering::Relaxed);
        self.seq.store(seq.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        self.anchor_raw.store(s.anchor_raw, Ordering::Relaxed);
        self.anchor_ns.store(s.anchor_ns, Ordering::Relaxed);
        self.slope.store(s.slope, Ordering::Relaxed);
        self.seq.store(seq.wrapping_add(2), Ordering::Release);
    }

    /// The current segment (retries while the writer is mid-update: a few ns, once a second).
    #[inline]
    pub fn segment(&self) -> ClockSegment {
        loop {
            let s1 = self.seq.load(Ordering::Acquire);
            let seg = ClockSegment {
                anchor_raw: self.anchor_raw.load(Ordering::Relaxed),
                anchor_ns: self.anchor_ns.load(Ordering::Relaxed),
                slope: self.slope.load(Ordering::Relaxed),
            };
            fence(Ordering::Acquire);
            let s2 = self.seq.load(Ordering::Relaxed);
            if s1 == s2 && s1.is_multiple_of(2) {
                return seg;
            }
            std::hint::spin_loop();
        }
    }

    /// `raw` in ns with the current segment.
    #[inline]
    pub fn to_ns(&self, raw: u64) -> u64 {
        self.segment().to_ns(raw)
    }
}

/// The control thread's calibration of one [`ClockMap`] against wall-clock time.
#[derive(Debug, Clone)]
pub struct Calibrator {
    nominal_hz: f64,
    last: (u64, u64),
    interval_ns: u64,
}

impl Calibrator {
    /// Starts the mapping at the pair (`raw`, `wall_ns`) read back to back, with the counter's
    /// nominal rate (e.g. DPDK's TSC calibration); returns the calibrator and the first segment.
    pub fn start(raw: u64, wall_ns: u64, nominal_hz: f64, interval_ns: u64) -> (Self, ClockSegment) {
        let seg = ClockSegment::at_rate(raw, wall_ns, nominal_hz);
        (Self { nominal_hz, last: (raw, wall_ns), interval_ns: interval_ns.max(1) }, seg)
    }

    /// Re-anchors with a new pair read back to back. `current` is the segment in force.
    /// Returns the next segment: continuous with `current` at `raw`, with the measured rate
    /// corrected to work off the offset to `wall_ns` over one interval. A pair that moved
    /// backwards (counter reset, wall clock stepped back a lot) keeps the nominal rate.
    pub fn reanchor(&mut self, current: &ClockSegment, raw: u64, wall_ns: u64) -> ClockSegment {
        let (raw0, wall0) = self.last;
        self.last = (raw, wall_ns);
        let now_ns = current.to_ns(raw);
        let measured_hz = if raw > raw0 && wall_ns > wall0 {
            (raw - raw0) as f64 * 1e9 / (wall_ns - wall0) as f64
        } else {
            self.nominal_hz
        };
        // Rate within ±MAX_SLEW_PPM of nominal: a wild pair (a preempted read) cannot derail it.
        let rate = measured_hz.clamp(
            self.nominal_hz * (1.0 - MAX_SLEW_PPM * 1e-6),
            self.nominal_hz * (1.0 + MAX_SLEW_PPM * 1e-6),
        );
        let offset_ns = wall_ns as f64 - now_ns as f64;
        let slew = (offset_ns / self.interval_ns as f64).clamp(-MAX_SLEW_PPM * 1e-6, MAX_SLEW_PPM * 1e-6);
        let ns_per_tick = 1e9 / rate * (1.0 + slew);
        ClockSegment {
            anchor_raw: raw,
            anchor_ns: now_ns,
            slope: (ns_per_tick * (1u64 << SLOPE_SHIFT) as f64).round() as u64,
        }
    }
}

/// The latest packet time of each worker in trace replay (ns), each on its own cache line.
#[derive(Debug)]
pub struct TraceTime {
    slots: Vec<CachePadded<AtomicU64>>,
}

impl TraceTime {
    /// Slots for `workers` workers, all at 0.
    pub fn new(workers: usize) -> Self {
        Self { slots: (0..workers).map(|_| CachePadded::new(AtomicU64::new(0))).collect() }
    }

    /// Worker `w` has processed a packet stamped `ts_ns` (a plain store: only `w` writes it).
    #[inline]
    pub fn publish(&self, w: usize, ts_ns: u64) {
        if let Some(s) = self.slots.get(w)
            && ts_ns > s.load(Ordering::Relaxed)
        {
            s.store(ts_ns, Ordering::Relaxed);
        }
    }

    /// The latest packet time over all workers.
    #[inline]
    pub fn latest(&self) -> u64 {
        self.slots.iter().map(|s| s.load(Ordering::Relaxed)).max().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_segment_maps_raw_ticks_to_ns() {
        let s = ClockSegment::at_rate(1_000, 5_000_000_000, 2.5e9);
        assert_eq!(s.to_ns(1_000), 5_000_000_000);
        // 2.5e9 ticks = 1 s; rounding of the fixed-point slope stays below 1 ns per second.
        assert!(s.to_ns(1_000 + 2_500_000_000).abs_diff(6_000_000_000) <= 1);
        // Before the anchor: backwards.
        assert!(s.to_ns(1_000 - 250).abs_diff(5_000_000_000 - 100) <= 1);
        let m = ClockMap::new(s);
        assert_eq!(m.segment(), s);
        assert_eq!(m.to_ns(1_000), 5_000_000_000);
    }

    /// A counter whose nominal rate is off by 40 ppm: without re-anchoring the error would grow
    /// by 40 µs per second; with it, it stays below the slew bound after the first intervals.
    #[test]
    fn reanchoring_tracks_wall_time_continuously() {
        let true_hz = 2.6e9 * (1.0 + 40e-6);
        let nominal = 2.6e9;
        let interval = 1_000_000_000u64;
        let wall0 = 1_700_000_000_000_000_000u64;
        let raw_at = |wall: u64| ((wall - wall0) as f64 * true_hz / 1e9) as u64 + 12_345;
        let (mut cal, mut seg) = Calibrator::start(raw_at(wall0), wall0, nominal, interval);
        let mut worst_late = 0u64;
        for k in 1..=30u64 {
            let wall = wall0 + k * interval;
            let raw = raw_at(wall);
            let before = seg.to_ns(raw);
            let next = cal.reanchor(&seg, raw, wall);
            // Continuous: the new segment starts where the old one is.
            assert_eq!(next.to_ns(raw), before);
            seg = next;
            if k >= 3 {
                worst_late = worst_late.max(seg.to_ns(raw).abs_diff(wall));
            }
        }
        // Uncorrected error after 30 s: 40 ppm · 30 s = 1.2 ms. Corrected: the residue of one
        // interval's rate error (≤ 40 µs) plus rounding.
        assert!(worst_late < 50_000, "{worst_late} ns");
        // Monotonic across segments.
        let raw = raw_at(wall0 + 30 * interval);
        assert!(seg.to_ns(raw + 1) >= seg.to_ns(raw));
    }

    #[test]
    fn a_wall_clock_step_is_slewed_not_jumped() {
        let (mut cal, seg) = Calibrator::start(0, 1_000_000_000_000, 1e9, 1_000_000_000);
        // Wall clock jumps forward by 1 s at raw = 1e9 (one interval later).
        let next = cal.reanchor(&seg, 1_000_000_000, 1_000_000_000_000 + 2_000_000_000);
        assert_eq!(next.to_ns(1_000_000_000), seg.to_ns(1_000_000_000));
        // The measured rate (half the nominal here) is clamped to nominal·(1 − s), s =
        // MAX_SLEW_PPM·1e-6, and the slew adds at most a factor (1 + s): per 1e9 ticks at most
        // 1e9·(1 + s)/(1 − s) ns (= 1 001 000 500.25), plus 1 ns of fixed-point rounding.
        let s = MAX_SLEW_PPM * 1e-6;
        let bound = (1e9 * (1.0 + s) / (1.0 - s)).ceil() as u64 + 1;
        let gained = next.to_ns(2_000_000_000) - next.to_ns(1_000_000_000);
        assert!(gained <= bound, "{gained} > {bound}");
        assert!(gained > 1_000_000_000);
    }

    #[test]
    fn trace_time_is_the_maximum_of_the_workers() {
        let t = TraceTime::new(3);
        assert_eq!(t.latest(), 0);
        t.publish(0, 50);
        t.publish(2, 70);
        t.publish(2, 60);
        t.publish(9, 1_000);
        assert_eq!(t.latest(), 70);
    }
}
