//! How a flow query is asked: its options and why two points' epochs cannot be queried together.

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// How the paper's Σ_z d_z² is evaluated from the deviation vectors (Eq 9–10).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum Repetitions {
    /// γ random pairings from a seeded generator: the paper's "virtual repetitions".
    Random {
        /// γ, the number of pairings averaged.
        gamma: u32,
        /// Seed of the pairings (mixed with the flow hash).
        seed: u64,
    },
    /// Their exact γ → ∞ limit, m/(m − 1)·Σ_j (D_j − D̄)² (spec §4.6): averaging over every
    /// pairing gives this closed form, so no repetition count can beat it. The default.
    Exact,
}

/// Options of a flow query.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueryOptions {
    /// Coverage of the confidence intervals (e.g. the required reliability α).
    pub level: f64,
    /// How the paper's std-dev evaluates its pairings.
    pub repetitions: Repetitions,
    /// The required confidence interval β, to report whether the estimate meets it.
    pub beta: Option<f64>,
    /// t^min from the sizing: flows below it are outside the paper's guarantee (spec §8 P12).
    pub t_min_ticks: Option<f64>,
    /// A mean is flagged `reliable` only when its interval's half-width is at most this
    /// fraction of the estimate (and it was not clipped at the floor).
    #[serde(default = "default_reliable_half_width")]
    pub reliable_half_width: f64,
}

/// See [`QueryOptions::reliable_half_width`].
pub const DEFAULT_RELIABLE_HALF_WIDTH: f64 = 0.25;

fn default_reliable_half_width() -> f64 {
    DEFAULT_RELIABLE_HALF_WIDTH
}

impl Default for QueryOptions {
    fn default() -> Self {
        Self {
            level: 0.95,
            repetitions: Repetitions::Exact,
            beta: None,
            t_min_ticks: None,
            reliable_half_width: DEFAULT_RELIABLE_HALF_WIDTH,
        }
    }
}

/// Why two points' epochs cannot be queried together.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum QueryError {
    /// Different configurations (another seed, n, m, tick, origin …): their cells do not
    /// correspond, and the estimate would be garbage (spec §8 P3), so it is refused.
    #[error("configuration fingerprints differ: {what} ({ours:#018x} vs {theirs:#018x})")]
    ConfigMismatch {
        /// Which epochs disagree.
        what: String,
        /// The first configuration's fingerprint.
        ours: u64,
        /// The disagreeing one.
        theirs: u64,
    },
    /// One side has no epoch.
    #[error("no counter epoch at point {side}")]
    NoEpochs {
        /// "S" or "R".
        side: &'static str,
    },
}
