//! Hash helpers shared by the synopses.
//!
//! Every index, sign, bank and sampling decision a synopsis takes is a pure function of the
//! packet identity (or flow hash) and a configured seed, so the two measurement points take the
//! same decision for the same packet on any CPU and build. Nothing here is randomly keyed.

/// The 64-bit finaliser of MurmurHash3 (`fmix64`): a bijection with full avalanche.
#[inline(always)]
pub const fn mix64(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^= x >> 33;
    x
}

/// An independent 64-bit stream derived from `x` for `seed`: different seeds give unrelated
/// outputs for the same `x` (used for per-row / per-bank / per-purpose hashes).
#[inline(always)]
pub const fn derive(x: u64, seed: u64) -> u64 {
    mix64(x ^ mix64(seed ^ 0x9e37_79b9_7f4a_7c15))
}

/// Maps a uniform 64-bit value onto `0..n` without division (Lemire's multiply-shift).
#[inline(always)]
pub const fn reduce(h: u64, n: u64) -> u64 {
    ((h as u128 * n as u128) >> 64) as u64
}

/// A sampling decision with probability `p`, taken on a uniform 64-bit value: exact for any
/// `p` in [0, 1] (`p = 1` accepts everything, which a plain `u < p·2^64` cannot express).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Coin {
    threshold: u64,
    always: bool,
}

impl Coin {
    /// A coin that accepts a uniform value with probability `p` (clamped to [0, 1]; NaN is 0).
    pub fn new(p: f64) -> Self {
        if p >= 1.0 {
            return Self { threshold: u64::MAX, always: true };
        }
        if p.is_nan() || p <= 0.0 {
            return Self { threshold: 0, always: false };
        }
        // 2^64 · p, rounded down; exact for dyadic p.
        let t = (p * 18_446_744_073_709_551_616.0) as u64;
        Self { threshold: t, always: false }
    }

    /// True when the uniform value `u` falls in the accepted part.
    #[inline(always)]
    pub fn accepts(&self, u: u64) -> bool {
        self.always || u < self.threshold
    }

    /// The exact acceptance probability of this coin.
    pub fn probability(&self) -> f64 {
        if self.always { 1.0 } else { self.threshold as f64 / 18_446_744_073_709_551_616.0 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mix64_is_pinned() {
        // Both points must compute identical values: pin a few outputs.
        assert_eq!(mix64(0), 0);
        assert_eq!(mix64(1), 0xb456_bcfc_34c2_cb2c);
        assert_ne!(derive(1, 1), derive(1, 2));
    }

    #[test]
    fn reduce_stays_in_range() {
        for n in [1u64, 2, 3, 1000, u64::MAX] {
            assert!(reduce(u64::MAX, n) < n);
            assert_eq!(reduce(0, n), 0);
        }
    }

    #[test]
    fn coin_edges() {
        assert!(Coin::new(1.0).accepts(u64::MAX));
        assert!(!Coin::new(0.0).accepts(0));
        assert!(!Coin::new(f64::NAN).accepts(0));
        let half = Coin::new(0.5);
        assert!(half.accepts((1 << 63) - 1));
        assert!(!half.accepts(1 << 63));
        assert_eq!(half.probability(), 0.5);
    }
}
