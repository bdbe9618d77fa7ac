//! The stamping delay: how long a packet waited between its arrival and the worker's stamp.
//!
//! In TSC mode the worker stamps a whole burst with one TSC read when the burst comes back
//! from the port, so a packet's stamp is late by the time it spent in the port's ring (and in
//! libpcap's buffer) before the poll that took it; on a shared core that includes the time the
//! worker was descheduled. Where the port also delivers the kernel's receive time (DPDK's pcap
//! device on a live interface, see `[clock] source = "kernel"`), the worker measures per packet
//! `tsc_stamp_ns − kernel_ns` and keeps count, sum, maximum and a log2 histogram here: a few
//! additions per packet, no allocation, no syscall, no log.
//!
//! The kernel's time reaches DPDK 22.11 in whole µs (truncated), so each sample reads up to
//! 1 µs high (0.5 µs on average): the delay resolution is 1 µs.

use std::sync::atomic::{AtomicU64, Ordering};

/// Histogram buckets: bucket `i` holds delays in `[2^i, 2^(i+1))` ns (bucket 0 also holds 0);
/// the last one everything from 2^31 ns (≈ 2.1 s) up.
pub const BUCKETS: usize = 32;

/// One worker's stamping-delay statistics (plain, the worker's own copy).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StampDelay {
    /// Packets with both a stamp and a port time.
    pub count: u64,
    /// Sum of the non-negative delays, ns.
    pub sum_ns: u64,
    /// Largest delay, ns.
    pub max_ns: u64,
    /// Packets stamped before their port time (the TSC mapping behind the kernel's clock by
    /// more than the µs truncation); not in `sum_ns` nor in the buckets.
    pub negative: u64,
    /// Largest such shortfall, ns.
    pub max_negative_ns: u64,
    /// Log2 histogram of the non-negative delays (see [`BUCKETS`]).
    pub buckets: [u64; BUCKETS],
}

impl StampDelay {
    /// Records one packet stamped at `stamp_ns` that the port says arrived at `port_ns`.
    #[inline(always)]
    pub fn record(&mut self, stamp_ns: u64, port_ns: u64) {
        self.count += 1;
        if stamp_ns >= port_ns {
            let d = stamp_ns - port_ns;
            self.sum_ns = self.sum_ns.wrapping_add(d);
            self.max_ns = self.max_ns.max(d);
            self.buckets[bucket(d)] += 1;
        } else {
            self.negative += 1;
            self.max_negative_ns = self.max_negative_ns.max(port_ns - stamp_ns);
        }
    }

    /// Adds another worker's statistics.
    pub fn add(&mut self, o: &StampDelay) {
        self.count += o.count;
        self.sum_ns = self.sum_ns.wrapping_add(o.sum_ns);
        self.max_ns = self.max_ns.max(o.max_ns);
        self.negative += o.negative;
        self.max_negative_ns = self.max_negative_ns.max(o.max_negative_ns);
        for (a, b) in self.buckets.iter_mut().zip(&o.buckets) {
            *a += b;
        }
    }

    /// Mean of the non-negative delays, ns (`None` without any).
    pub fn mean_ns(&self) -> Option<f64> {
        let n = self.count - self.negative;
        (n > 0).then(|| self.sum_ns as f64 / n as f64)
    }

    /// An upper bound of the `q`-quantile of the non-negative delays: the upper edge of the
    /// bucket holding it (so within a factor 2 above the true quantile), ns.
    pub fn quantile_upper_ns(&self, q: f64) -> Option<u64> {
        let n: u64 = self.buckets.iter().sum();
        if n == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * n as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, &b) in self.buckets.iter().enumerate() {
            seen += b;
            if seen >= rank {
                return Some(upper_edge(i));
            }
        }
        Some(upper_edge(BUCKETS - 1))
    }
}

/// The bucket of delay `d` ns.
#[inline(always)]
pub fn bucket(d: u64) -> usize {
    (63 - (d | 1).leading_zeros() as usize).min(BUCKETS - 1)
}

/// The exclusive upper edge of bucket `i`, ns (`u64::MAX` for the last).
pub fn upper_edge(i: usize) -> u64 {
    if i + 1 >= BUCKETS { u64::MAX } else { 1u64 << (i + 1) }
}

/// [`StampDelay`] shared with the control thread: the worker stores its copy every so often
/// (relaxed stores of its own totals; the reader may see a mix of two publishes, which only
/// matters within one publish interval).
#[derive(Debug, Default)]
pub struct SharedStampDelay {
    count: AtomicU64,
    sum_ns: AtomicU64,
    max_ns: AtomicU64,
    negative: AtomicU64,
    max_negative_ns: AtomicU64,
    buckets: [AtomicU64; BUCKETS],
}

impl SharedStampDelay {
    /// Stores the worker's totals.
    pub fn publish(&self, s: &StampDelay) {
        let st = |a: &AtomicU64, v: u64| a.store(v, Ordering::Relaxed);
        st(&self.count, s.count);
        st(&self.sum_ns, s.sum_ns);
        st(&self.max_ns, s.max_ns);
        st(&self.negative, s.negative);
        st(&self.max_negative_ns, s.max_negative_ns);
        for (a, &v) in self.buckets.iter().zip(&s.buckets) {
            st(a, v);
        }
    }

    /// The totals last stored.
    pub fn snapshot(&self) -> StampDelay {
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let mut s = StampDelay {
            count: l(&self.count),
            sum_ns: l(&self.sum_ns),
            max_ns: l(&self.max_ns),
            negative: l(&self.negative),
            max_negative_ns: l(&self.max_negative_ns),
            buckets: [0; BUCKETS],
        };
        for (b, a) in s.buckets.iter_mut().zip(&self.buckets) {
            *b = l(a);
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_powers_of_two() {
        assert_eq!(bucket(0), 0);
        assert_eq!(bucket(1), 0);
        assert_eq!(bucket(2), 1);
        assert_eq!(bucket(3), 1);
        assert_eq!(bucket(1023), 9);
        assert_eq!(bucket(1024), 10);
        assert_eq!(bucket(u64::MAX), BUCKETS - 1);
        for d in [5u64, 999, 1 << 20, (1 << 31) - 1] {
            let i = bucket(d);
            assert!(d < upper_edge(i) && (i == 0 || d >= upper_edge(i - 1)), "{d} in {i}");
        }
    }

    #[test]
    fn record_counts_sums_and_separates_negative_delays() {
        let mut s = StampDelay::default();
        for d in 1..=1000u64 {
            s.record(10_000 + d * 1000, 10_000);
        }
        s.record(5, 700);
        assert_eq!(s.count, 1001);
        assert_eq!(s.negative, 1);
        assert_eq!(s.max_negative_ns, 695);
        assert_eq!(s.max_ns, 1_000_000);
        assert_eq!(s.sum_ns, 1000 * 1001 / 2 * 1000);
        assert_eq!(s.mean_ns(), Some(500_500.0));
        // The median, 500 µs, lies in [2^18, 2^19) ns; the maximum, 1 ms, in [2^19, 2^20).
        assert_eq!(s.quantile_upper_ns(0.5), Some(1 << 19));
        assert_eq!(s.quantile_upper_ns(1.0), Some(1 << 20));
        let mut t = s;
        t.add(&s);
        assert_eq!(t.count, 2002);
        assert_eq!(t.quantile_upper_ns(0.5), Some(1 << 19));
        let shared = SharedStampDelay::default();
        shared.publish(&t);
        assert_eq!(shared.snapshot(), t);
    }
}
