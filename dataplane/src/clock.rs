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
//! **Every process on a host maps the TSC alike** (issue 18: two points on one host read a
//! 16–126 µs delay as 257–1086 µs). A (counter, wall clock) pair read back to back is only as
//! good as the time between the two reads, and on a loaded host a thread can be descheduled
//! between them for a millisecond; the calibration then chased each process's own bad pairs.
//! Now every pair is a [`Pair`] read by [`read_pair`]: the counter between two wall-clock
//! reads, the narrowest of several tries kept and paired with the midpoint, and refused when
//! even the narrowest is wider than [`MAX_PAIR_WIDTH_NS`]. [`Calibrator::measured`] starts from
//! a rate measured against the wall clock over [`START_BASELINE`] (not DPDK's nominal TSC
//! rate, which may be tens of ppm off, nor one pair at the process's own start); re-anchoring
//! takes the rate over the last [`RATE_WINDOW`] pairs. So the anchor of every process is the
//! host's CLOCK_REALTIME itself, read within tens of ns, and two processes differ only by
//! their pairs' midpoint errors and one interval's rate error (≈ 0.1 ppm): well under 1 µs
//! (`dataplane/tests/clock_processes.rs` runs two processes and checks it).
//! CLOCK_REALTIME rather than CLOCK_MONOTONIC_RAW: the records are in wall-clock time, both
//! are read through the vDSO from the same kernel data, and a slewed REALTIME is followed by
//! the slew logic above; MONOTONIC_RAW would add a second pair per anchor for nothing.
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

/// Widest accepted [`Pair`]: the wall-clock reads either side of the counter further apart
/// than this mean the thread was interrupted or descheduled in between (a vDSO
/// `clock_gettime` takes 20–50 ns); such a pair is refused rather than trusted.
pub const MAX_PAIR_WIDTH_NS: u64 = 2_000;

/// How far a measured rate may be from the nominal one before [`Calibrator::measured`]
/// refuses it (a broken counter or a stepped wall clock). DPDK's own Linux estimate of the TSC
/// rate is rounded to 10 MHz (up to ≈ 2000 ppm at 2.5 GHz), so this is wider than that.
pub const MAX_NOMINAL_ERROR: f64 = 0.01;

/// Tries [`read_pair`] makes; the narrowest is kept.
pub const PAIR_TRIES: u32 = 32;

/// How far apart the two pairs [`Calibrator::measured`] starts from are read (the first rate's
/// baseline: a midpoint error of e ns gives a rate error of about 2e / 100 ms, 1 ppm at 50 ns).
pub const START_BASELINE: std::time::Duration = std::time::Duration::from_millis(100);

/// Pairs the re-anchoring's rate is measured over (the oldest to the newest): a longer baseline
/// divides the pairs' midpoint errors, while the wall clock's own rate (NTP) changes slowly.
pub const RATE_WINDOW: usize = 8;

/// A raw counter value and the wall-clock time it was read at, read so that the two are close:
/// the counter between two wall-clock reads `width_ns` apart, paired with their midpoint (so
/// the pairing error is at most `width_ns / 2`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pair {
    /// The counter.
    pub raw: u64,
    /// Wall-clock ns at the counter read (the midpoint of the two reads around it).
    pub wall_ns: u64,
    /// ns between the two wall-clock reads.
    pub width_ns: u64,
}

/// Reads `tries` (wall, counter, wall) triplets back to back and returns the narrowest as a
/// [`Pair`], or `None` when even that one is wider than [`MAX_PAIR_WIDTH_NS`] (or the wall
/// clock went backwards in every try). Control thread only: it spins for a few µs.
pub fn read_pair(tries: u32, mut raw: impl FnMut() -> u64, mut wall_ns: impl FnMut() -> u64) -> Option<Pair> {
    let mut best: Option<Pair> = None;
    for _ in 0..tries.max(1) {
        let w0 = wall_ns();
        let r = raw();
        let w1 = wall_ns();
        let Some(width_ns) = w1.checked_sub(w0) else { continue };
        if best.is_none_or(|b| width_ns < b.width_ns) {
            best = Some(Pair { raw: r, wall_ns: w0 + width_ns / 2, width_ns });
        }
    }
    best.filter(|b| b.width_ns <= MAX_PAIR_WIDTH_NS)
}

/// The host's TSC and CLOCK_REALTIME as a [`Pair`] ([`read_pair`] with [`PAIR_TRIES`]).
pub fn host_tsc_pair() -> Option<Pair> {
    read_pair(PAIR_TRIES, crate::cpu::rdtsc, wall_clock_ns)
}

/// CLOCK_REALTIME in ns since the Unix epoch (0 before 1970; saturating in 2554).
pub fn wall_clock_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// What [`Calibrator::measured`] found at start, for the log.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct StartCheck {
    /// The counter's rate measured against the wall clock, Hz.
    pub measured_hz: f64,
    /// The nominal rate it was checked against, Hz.
    pub nominal_hz: f64,
    /// The first segment at a fresh pair minus that pair's wall time, ns (how far the mapping
    /// is from CLOCK_REALTIME right after start).
    pub disagreement_ns: i64,
    /// The fresh pair's width, ns (its own uncertainty).
    pub pair_width_ns: u64,
}

/// Why [`Calibrator::measured`] could not start.
#[derive(Clone, Copy, Debug, PartialEq, thiserror::Error)]
pub enum CalibrationError {
    /// No pair narrower than [`MAX_PAIR_WIDTH_NS`] in [`PAIR_TRIES`] tries.
    #[error("no counter/wall-clock pair narrower than {MAX_PAIR_WIDTH_NS} ns in {PAIR_TRIES} tries")]
    NoPair,
    /// The measured rate is further than [`MAX_NOMINAL_ERROR`] from the nominal one.
    #[error("counter rate {measured_hz} Hz measured against the wall clock, nominal {nominal_hz} Hz")]
    Rate {
        /// Measured, Hz.
        measured_hz: f64,
        /// Nominal, Hz.
        nominal_hz: f64,
    },
}

/// The control thread's calibration of one [`ClockMap`] against wall-clock time.
#[derive(Debug, Clone)]
pub struct Calibrator {
    nominal_hz: f64,
    /// The latest accepted pairs, oldest first (at most [`RATE_WINDOW`]).
    history: Vec<(u64, u64)>,
    interval_ns: u64,
}

impl Calibrator {
    /// Starts the mapping at the pair (`raw`, `wall_ns`) read back to back, with the counter's
    /// nominal rate (e.g. DPDK's TSC calibration); returns the calibrator and the first segment.
    /// [`Calibrator::measured`] is the better start where pairs can be read at will.
    pub fn start(raw: u64, wall_ns: u64, nominal_hz: f64, interval_ns: u64) -> (Self, ClockSegment) {
        let seg = ClockSegment::at_rate(raw, wall_ns, nominal_hz);
        let mut history = Vec::with_capacity(RATE_WINDOW);
        history.push((raw, wall_ns));
        (Self { nominal_hz, history, interval_ns: interval_ns.max(1) }, seg)
    }

    /// Starts from two narrow pairs [`START_BASELINE`] apart (`pair` reads one, e.g.
    /// [`host_tsc_pair`]; `sleep` waits): the rate is measured, not taken from `nominal_hz`,
    /// which only bounds it (± [`MAX_NOMINAL_ERROR`]); the measured rate then stands in for
    /// the nominal one (the centre of the re-anchoring's ± [`MAX_SLEW_PPM`] clamp). A third
    /// pair checks the first segment
    /// against the wall clock ([`StartCheck`]). Every process doing this on one host maps the
    /// counter to the same CLOCK_REALTIME within its pairs' errors.
    pub fn measured(
        nominal_hz: f64,
        interval_ns: u64,
        mut pair: impl FnMut() -> Option<Pair>,
        sleep: impl FnOnce(std::time::Duration),
    ) -> Result<(Self, ClockSegment, StartCheck), CalibrationError> {
        let p0 = pair().ok_or(CalibrationError::NoPair)?;
        sleep(START_BASELINE);
        let p1 = pair().ok_or(CalibrationError::NoPair)?;
        let measured_hz = rate_hz((p0.raw, p0.wall_ns), (p1.raw, p1.wall_ns)).unwrap_or(0.0);
        // Written so that a NaN rate (no pair moved forward) is refused too.
        let plausible = (measured_hz / nominal_hz - 1.0).abs() <= MAX_NOMINAL_ERROR;
        if !plausible {
            return Err(CalibrationError::Rate { measured_hz, nominal_hz });
        }
        let (mut cal, seg) = Self::start(p1.raw, p1.wall_ns, measured_hz, interval_ns);
        cal.history.insert(0, (p0.raw, p0.wall_ns));
        let p2 = pair().ok_or(CalibrationError::NoPair)?;
        let check = StartCheck {
            measured_hz,
            nominal_hz,
            disagreement_ns: seg.to_ns(p2.raw) as i64 - p2.wall_ns as i64,
            pair_width_ns: p2.width_ns,
        };
        Ok((cal, seg, check))
    }

    /// [`Calibrator::reanchor`] on a [`Pair`]; `None` (keep `current`) for a missing pair.
    pub fn reanchor_pair(&mut self, current: &ClockSegment, pair: Option<Pair>) -> Option<ClockSegment> {
        pair.map(|p| self.reanchor(current, p.raw, p.wall_ns))
    }

    /// Re-anchors with a new pair read back to back. `current` is the segment in force.
    /// Returns the next segment: continuous with `current` at `raw`, with the rate measured
    /// over the last [`RATE_WINDOW`] pairs corrected to work off the offset to `wall_ns` over
    /// one interval. A pair that moved backwards (counter reset, wall clock stepped back a
    /// lot) restarts the window and keeps the nominal rate.
    pub fn reanchor(&mut self, current: &ClockSegment, raw: u64, wall_ns: u64) -> ClockSegment {
        let oldest = self.history.first().copied().unwrap_or((raw, wall_ns));
        let measured_hz = match rate_hz(oldest, (raw, wall_ns)) {
            Some(hz) => hz,
            None => {
                self.history.clear();
                self.nominal_hz
            }
        };
        if self.history.len() >= RATE_WINDOW {
            self.history.remove(0);
        }
        self.history.push((raw, wall_ns));
        let now_ns = current.to_ns(raw);
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

/// Ticks per second between two (raw, wall ns) pairs; `None` unless both moved forward.
fn rate_hz((raw0, wall0): (u64, u64), (raw1, wall1): (u64, u64)) -> Option<f64> {
    (raw1 > raw0 && wall1 > wall0).then(|| (raw1 - raw0) as f64 * 1e9 / (wall1 - wall0) as f64)
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

    /// A simulated host: a counter at `hz` and a wall clock, read in turn; every `every`-th
    /// read of the wall clock comes `stall_ns` late (a thread descheduled between two reads).
    struct Host {
        t: std::cell::Cell<u64>,
        reads: std::cell::Cell<u64>,
        hz: f64,
        every: u64,
        stall_ns: u64,
    }

    impl Host {
        fn raw(&self) -> u64 {
            self.t.set(self.t.get() + 15);
            (self.t.get() as f64 * self.hz / 1e9) as u64
        }
        fn wall(&self) -> u64 {
            let n = self.reads.get() + 1;
            self.reads.set(n);
            let stall = if n.is_multiple_of(self.every) { self.stall_ns } else { 0 };
            self.t.set(self.t.get() + 25 + stall);
            1_700_000_000_000_000_000 + self.t.get()
        }
    }

    #[test]
    fn the_narrowest_pair_wins_and_a_stalled_one_is_refused() {
        let h = Host { t: 0.into(), reads: 0.into(), hz: 2.6e9, every: 3, stall_ns: 1_000_000 };
        let p = read_pair(8, || h.raw(), || h.wall()).unwrap();
        // An unstalled try: wall, the counter 15 ns later, wall 25 ns after that: 40 ns wide.
        assert_eq!(p.width_ns, 40);
        let at = (p.raw as f64 * 1e9 / 2.6e9) as i64;
        assert!((1_700_000_000_000_000_000 + at - p.wall_ns as i64).abs() <= 25, "midpoint pairing");
        // Every read stalled: refused.
        let h = Host { t: 0.into(), reads: 0.into(), hz: 2.6e9, every: 1, stall_ns: 1_000_000 };
        assert_eq!(read_pair(8, || h.raw(), || h.wall()), None);
    }

    /// The start measures the rate (the nominal one is 2000 ppm off, as DPDK's 10-MHz rounding
    /// can be) and lands on the wall clock; stalled reads do not move it.
    #[test]
    fn a_measured_start_follows_the_wall_clock_not_the_nominal_rate() {
        let h = Host { t: 0.into(), reads: 0.into(), hz: 2_599_998_000.0, every: 5, stall_ns: 700_000 };
        let sleep = |d: std::time::Duration| h.t.set(h.t.get() + d.as_nanos() as u64);
        let (mut cal, seg, check) = Calibrator::measured(
            2.605e9,
            1_000_000_000,
            || read_pair(PAIR_TRIES, || h.raw(), || h.wall()),
            sleep,
        )
        .unwrap();
        // Pairs are ±20 ns: over 100 ms the rate is within 0.4 ppm (≈ 1 kHz).
        assert!((check.measured_hz - h.hz).abs() < 1_000.0, "{check:?}");
        assert!(check.disagreement_ns.abs() < 50, "{check:?}");
        // A second later the mapping is still within a rate error's worth (0.4 µs) of the wall.
        h.t.set(h.t.get() + 1_000_000_000);
        let p = read_pair(PAIR_TRIES, || h.raw(), || h.wall()).unwrap();
        assert!((seg.to_ns(p.raw) as i64 - p.wall_ns as i64).abs() < 500);
        let next = cal.reanchor_pair(&seg, Some(p)).unwrap();
        assert_eq!(next.to_ns(p.raw), seg.to_ns(p.raw), "continuous");
        assert_eq!(cal.reanchor_pair(&next, None), None, "no pair: the segment in force stays");
        // A nominal rate 2 % off is refused.
        let bad = Calibrator::measured(2.65e9, 1, || read_pair(PAIR_TRIES, || h.raw(), || h.wall()), |_| {});
        assert!(matches!(bad, Err(CalibrationError::Rate { .. })));
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
