//! Log-spaced delay bins: which bin a delay falls in, and each bin's edges.
//!
//! Bin 0 holds delays below `min` (a power of two); bins 1..=octaves·bpo split each octave
//! [min·2^o, min·2^(o+1)) into `bpo` bins of equal log width, with integer lower edges
//! ⌊min·2^((b−1)/bpo)⌋; the last bin holds everything from min·2^octaves up. Finding a bin is
//! integer work (leading zeros, a 256-entry table and at most a couple of edge compares) so
//! the per-sample path has no logarithm. Never allocates after construction.

use super::config::HistogramConfig;

/// Bin layout for one histogram configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct LogBins {
    min_log2: u32,
    octaves: u32,
    bpo: u32,
    /// Lower edge of every bin (bin 0: 0), plus the upper edge of the last regular bin.
    edges: Vec<u64>,
    /// For the 8 fraction bits after a delay's leading one: a sub-bin index that is never
    /// above the true one.
    sub_floor: [u8; 256],
}

impl LogBins {
    /// The bins for a validated histogram config.
    pub fn new(cfg: &HistogramConfig) -> Self {
        let min_log2 = cfg.min_delay_ns.trailing_zeros();
        let (octaves, bpo) = (cfg.octaves, cfg.bins_per_octave.max(1));
        let regular = (octaves * bpo) as usize;
        let mut edges = Vec::with_capacity(regular + 2);
        edges.push(0);
        for b in 0..regular {
            let o = b as u32 / bpo;
            let j = b as u32 % bpo;
            let base = 1u64 << (min_log2 + o);
            edges.push((base as f64 * (f64::from(j) / f64::from(bpo)).exp2()).floor() as u64);
        }
        edges.push(1u64 << (min_log2 + octaves));
        let mut sub_floor = [0u8; 256];
        for (f, s) in sub_floor.iter_mut().enumerate() {
            // log2 of the smallest mantissa with these 8 fraction bits, minus a safety margin;
            // the edge compares in `bin_of` correct any shortfall.
            let m = 1.0 + f as f64 / 256.0;
            let j = (m.log2() * f64::from(bpo) - 1e-9).floor().max(0.0);
            *s = (j as u32).min(bpo - 1) as u8;
        }
        Self { min_log2, octaves, bpo, edges, sub_floor }
    }

    /// Number of bins, underflow and overflow included.
    #[inline]
    pub fn len(&self) -> usize {
        self.edges.len()
    }

    /// Always false (there are at least three bins).
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Bins per octave.
    pub fn bins_per_octave(&self) -> u32 {
        self.bpo
    }

    /// Index of the overflow bin.
    #[inline]
    pub fn overflow(&self) -> usize {
        self.edges.len() - 1
    }

    /// The bin of `delay_ns`.
    #[inline]
    pub fn bin_of(&self, delay_ns: u64) -> usize {
        if delay_ns < (1u64 << self.min_log2) {
            return 0;
        }
        let e = 63 - delay_ns.leading_zeros();
        let o = e - self.min_log2;
        if o >= self.octaves {
            return self.overflow();
        }
        let frac8 = ((delay_ns << delay_ns.leading_zeros()) >> 55) as usize & 0xff;
        let mut b = 1 + (o * self.bpo) as usize + usize::from(self.sub_floor[frac8]);
        // Fix the table's conservative guess against the exact integer edges.
        while b > 1 && delay_ns < self.edges[b] {
            b -= 1;
        }
        while b + 1 < self.overflow() && delay_ns >= self.edges[b + 1] {
            b += 1;
        }
        b
    }

    /// Lower edge of bin `b` in ns.
    pub fn low_ns(&self, b: usize) -> u64 {
        self.edges.get(b).copied().unwrap_or(u64::MAX)
    }

    /// Upper edge of bin `b` in ns; `None` for the overflow bin.
    pub fn high_ns(&self, b: usize) -> Option<u64> {
        if b >= self.overflow() { None } else { self.edges.get(b + 1).copied() }
    }

    /// A representative delay of bin `b`: 0 for the underflow bin, the geometric middle of a
    /// regular bin, the lower edge of the overflow bin.
    pub fn representative_ns(&self, b: usize) -> f64 {
        match (b, self.high_ns(b)) {
            (0, _) => 0.0,
            (_, Some(hi)) => (self.low_ns(b) as f64 * hi as f64).sqrt(),
            (_, None) => self.low_ns(b) as f64,
        }
    }

    /// The group of bin `b` when regular bins are merged `group` at a time (for IVW on coarser
    /// bins); underflow and overflow stay groups of their own.
    pub fn group_of(&self, b: usize, group: usize) -> usize {
        let group = group.max(1);
        if b == 0 {
            0
        } else if b >= self.overflow() {
            1 + (self.overflow() - 2) / group + 1
        } else {
            1 + (b - 1) / group
        }
    }

    /// Number of groups for [`Self::group_of`].
    pub fn group_count(&self, group: usize) -> usize {
        self.group_of(self.overflow(), group) + 1
    }

    /// Delay at fraction `frac` ∈ [0, 1] of bin `b`: linear in the underflow bin, log-linear in
    /// regular bins, the lower edge for the overflow bin.
    pub fn interpolate(&self, b: usize, frac: f64) -> f64 {
        let frac = frac.clamp(0.0, 1.0);
        let lo = self.low_ns(b) as f64;
        match self.high_ns(b) {
            None => lo,
            Some(hi) if b == 0 => frac * hi as f64,
            Some(hi) => lo * (hi as f64 / lo).powf(frac),
        }
    }

    /// Fraction of bin `b` below `t_ns` (inverse of [`Self::interpolate`]).
    pub fn fraction_below(&self, b: usize, t_ns: f64) -> f64 {
        let lo = self.low_ns(b) as f64;
        let f = match self.high_ns(b) {
            None => {
                if t_ns > lo {
                    1.0
                } else {
                    0.0
                }
            }
            Some(hi) if b == 0 => t_ns / hi as f64,
            Some(hi) => {
                if t_ns <= lo {
                    0.0
                } else {
                    (t_ns / lo).ln() / (hi as f64 / lo).ln()
                }
            }
        };
        f.clamp(0.0, 1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bins(bpo: u32) -> LogBins {
        LogBins::new(&HistogramConfig { min_delay_ns: 1024, octaves: 26, bins_per_octave: bpo })
    }

    /// Reference: the bin by a linear scan of the edges.
    fn slow(b: &LogBins, d: u64) -> usize {
        (0..b.len()).rev().find(|&i| d >= b.low_ns(i)).unwrap_or(0)
    }

    #[test]
    fn bin_of_matches_the_edges_exactly() {
        for bpo in [1, 3, 4, 16, 64] {
            let b = bins(bpo);
            assert_eq!(b.len(), 26 * bpo as usize + 2);
            let mut r = crate::sim::rng(u64::from(bpo));
            for _ in 0..20_000 {
                use rand::Rng;
                let d = r.random::<u64>() >> r.random_range(0..64);
                assert_eq!(b.bin_of(d), slow(&b, d), "bpo {bpo} d {d}");
            }
            for i in 1..b.len() {
                let e = b.low_ns(i);
                assert_eq!(b.bin_of(e), i, "edge of bin {i}");
                assert_eq!(b.bin_of(e - 1), i - 1, "below edge of bin {i}");
            }
            assert_eq!(b.bin_of(0), 0);
            assert_eq!(b.bin_of(u64::MAX), b.overflow());
        }
    }

    #[test]
    fn edges_are_log_spaced() {
        let b = bins(4);
        assert_eq!(b.low_ns(1), 1024);
        assert_eq!(b.low_ns(5), 2048);
        assert_eq!(b.low_ns(3), (1024.0 * 2f64.sqrt()) as u64);
        assert_eq!(b.high_ns(b.overflow()), None);
        assert_eq!(b.low_ns(b.overflow()), 1 << 36);
        let mid = b.interpolate(3, 0.5);
        assert!((b.fraction_below(3, mid) - 0.5).abs() < 1e-12);
        assert_eq!(b.group_of(0, 4), 0);
        assert_eq!(b.group_of(1, 4), 1);
        assert_eq!(b.group_of(4, 4), 1);
        assert_eq!(b.group_of(5, 4), 2);
        assert_eq!(b.group_count(4), 1 + 26 + 1);
        assert_eq!(b.group_of(b.overflow(), 4), 27);
    }
}
