//! The Lossy Difference Aggregator (Kompella, Levchenko, Snoeren, Varghese, "Router Support for
//! Fine-Grained Latency Measurements", IEEE/ACM ToN 2012; spec `lda.md`): mean and standard
//! deviation of the one-way delay of a segment between a sender point A and a receiver point B,
//! and its loss, from a few kilobytes of state per point and interval.
//!
//! # The algorithm
//!
//! Both points keep the same array of cells, n banks × m_j rows, each cell a timestamp sum T
//! and a packet count S. Per packet ([`Lda::update_raw`], paper §III-C):
//!
//! ```text
//! j ← g(x)        bank: j with probability p_j, or "not sampled" (the banks' sets are disjoint)
//! i ← h(x)        row, uniform in bank j; its low bit is the sign s(x) of the std-dev estimator
//! T[i,j] += τ     the local timestamp, wrapping at ts_bits
//! S[i,j] += 1     wrapping at count_bits
//! ```
//!
//! At the end of an interval A's synopsis travels to B, and [`estimate`] (paper §III-D, §III-E)
//! keeps the cells where both points counted the same packets (no sampled packet of the cell
//! was lost): D = Σ (T_B − T_A) / Σ S over those cells is the exact mean delay of the S
//! packets they hold. Pairs of rows with opposite signs give the AMS second-moment estimate F,
//! and σ̂² = F − D².
//!
//! # Where this implementation departs from the paper
//!
//! Each point is the spec's decision (lda.md §8) unless marked; details in the module that
//! implements it.
//! - Bank selection: exact cumulative thresholds on a uniform u64 by default; the paper's
//!   leading-zero trick as an option, with its nested (not nominal) probabilities ([`config`],
//!   `placement`).
//! - Bank and row hashes are two independent streams derived from the identity and the seed
//!   (the paper takes high and low bits of one hash; both are allowed by §8.13).
//! - Estimation: all banks combined, σ̂² clamped at 0 with a flag, a bucket usable only if both
//!   its rows are, S_B > S_A counted as an anomaly ([`estimator`]); so is a count-matched cell
//!   whose delay sum is below −count·`max_negative_delay_ns` (an epoch-boundary slip hidden by
//!   a second slip into the same cell; **our guard**, beyond spec §8.21). Per-cell differences are
//!   read as signed W-bit numbers (**our choice**; the spec reads them as non-negative) so a
//!   negative clock offset gives a negative mean rather than a value near 2^W.
//! - An unsampled total packet counter per point gives exact loss (§8.16; not in the paper).
//! - The mean's interval is the paper's eq. 1 with σ̂ in place of the unknown σ ([`sizing`]).
//!
//! # How the runtime uses it
//!
//! Per core and epoch one [`Lda`] shard: `update` per packet, then at the boundary the control
//! thread `merge`s the shards (cell-wise wrapping sums, exact), `encode`s, ships and `reset`s.
//! The peer decodes the two points' synopses of the same segment and epoch and calls
//! [`estimate`] (or hands the bytes to [`estimate_encoded`]). No I/O and no logging here.

pub mod config;
mod encoding;
pub mod estimator;
mod placement;
#[cfg(any(test, feature = "sim"))]
pub mod segment;
pub mod sizing;
mod state;

#[cfg(test)]
mod slip_tests;
#[cfg(test)]
mod spec_tests;
#[cfg(test)]
mod stat_tests;

pub use config::{
    BankConfig, BankSelect, BankTarget, DEFAULT_ALPHA, DEFAULT_DIGEST_BITS, DEFAULT_MAX_NEGATIVE_DELAY_NS,
    LdaConfig, MAX_BANKS, MAX_CELLS,
};
pub use encoding::body_len;
pub use estimator::{
    BankReport, DEFAULT_CONFIDENCE, LdaEstimateError, LdaReport, estimate, estimate_encoded,
    estimate_with_confidence,
};
pub use placement::CellIndex;
pub use state::{Cell, Lda};
