//! The LDS configuration: sketch shape, hash seeds, per-row sampling, the weight policy, the
//! flow-key log and the estimator's cell-selection settings.
//!
//! Everything here is shared by both measurement points and covered by the fingerprint, so two
//! points that disagree on any of it refuse each other's sketches instead of diffing garbage.
//! Never holds state and never touches a packet.

use super::weights::WeightPolicy;
use crate::synopsis::{ConfigError, SynopsisConfig, SynopsisKind};
use serde::{Deserialize, Serialize};

/// Most rows a sketch may have.
pub const MAX_ROWS: u32 = 64;
/// Longest virtual LDA (cells per flow per row).
pub const MAX_VLDA_LEN: u32 = 1024;
/// Most cells a sketch may hold (2^26 cells = 1 GiB at 16 bytes per cell).
pub const MAX_CELLS: u64 = 1 << 26;
/// Most flow keys the per-epoch flow log may hold.
pub const MAX_FLOW_CAPACITY: u32 = 1 << 24;

/// How the estimator ranks a flow's usable cells before the α window (spec §6.2, §6.3).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum SelectionRule {
    /// The paper's rule: key = n / p_r (counts inverted by the row's sampling rate). With one
    /// sampling rate this is plain minimum-count selection.
    PaperScaled,
    /// Noise-aware upper confidence key (spec §6.3): key = (n + c·√(n·(1−p_r))) / p_r, so a
    /// cell with one or two sampled packets in a p = 0.01 row no longer looks cleanest.
    Ucb {
        /// Width of the bound in standard deviations (spec: 2).
        c: f64,
    },
    /// Only the cells of the rows with the highest sampling rate that still have a usable cell
    /// for the flow compete, then the α rule among them (spec §6.3).
    HighestRateFirst,
}

/// How the offset inside a flow's vLDA is drawn (spec §12 P6).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OffsetMode {
    /// One offset per packet for every row (paper Fig. 5): a lost packet spoils the same
    /// offset o in every row.
    Shared,
    /// An independent offset per row, from its own hash stream (paper §2.3.4 text).
    PerRow,
}

/// The estimator's cell-selection settings.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EstimatorConfig {
    /// Interference tolerance α: cells whose key is within (1 + α)·key_min are averaged
    /// (paper: 0.1; spec §11.3 finds α = 0 better when k = 1). May be +∞ (every usable cell).
    pub alpha: f64,
    /// Fig. 6's strict `key < (1+α)·key_min` instead of the text's "at most" (`<=`, default).
    /// The minimum cell itself is always kept, so α = 0 stays meaningful.
    pub strict_alpha: bool,
    /// How cells are ranked.
    pub selection: SelectionRule,
}

impl Default for EstimatorConfig {
    fn default() -> Self {
        Self { alpha: 0.1, strict_alpha: false, selection: SelectionRule::PaperScaled }
    }
}

/// Configuration of a Lossy Difference Sketch (spec §3, §4, §13).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LdsConfig {
    /// Rows R (one flow hash per row; one bank per row in multi-bank mode).
    pub rows: u32,
    /// Cells per row W (the paper's C in §2; total cells are R·W).
    pub width: u32,
    /// Length k of each flow's virtual LDA: k contiguous, wrapping cells per row.
    #[serde(default = "one")]
    pub vlda_len: u32,
    /// Packet sampling probability: one value for every row (single bank) or one per row
    /// (multi-bank, paper §4.2). Each in (0, 1].
    #[serde(default = "full_sampling")]
    pub sampling: Vec<f64>,
    /// Seed of every hash the sketch derives (rows, offsets, digests, sampling).
    #[serde(default)]
    pub seed: u64,
    /// Offset drawing (Fig. 5's shared offset by default).
    #[serde(default = "shared_offsets")]
    pub offsets: OffsetMode,
    /// Per-flow integer weights (paper §4.1); default weight 1 for everything.
    #[serde(default)]
    pub weights: WeightPolicy,
    /// Flow keys the point records per epoch so the estimator can enumerate flows (0 = none).
    #[serde(default = "default_flow_capacity")]
    pub flow_capacity: u32,
    /// Cell selection used by the estimator.
    #[serde(default)]
    pub estimator: EstimatorConfig,
}

fn one() -> u32 {
    1
}
fn full_sampling() -> Vec<f64> {
    vec![1.0]
}
fn shared_offsets() -> OffsetMode {
    OffsetMode::Shared
}
fn default_flow_capacity() -> u32 {
    1 << 18
}

impl LdsConfig {
    /// A single-bank sketch of `rows` × `width` cells with k = 1, p = 1 and the paper's α = 0.1.
    pub fn new(rows: u32, width: u32) -> Self {
        Self {
            rows,
            width,
            vlda_len: 1,
            sampling: full_sampling(),
            seed: 0,
            offsets: OffsetMode::Shared,
            weights: WeightPolicy::default(),
            flow_capacity: default_flow_capacity(),
            estimator: EstimatorConfig::default(),
        }
    }

    /// Total cells R·W.
    pub fn cells(&self) -> u64 {
        u64::from(self.rows) * u64::from(self.width)
    }

    /// Paper-equivalent memory of one sketch: 16 bytes per cell (spec §3.2).
    pub fn sketch_bytes(&self) -> u64 {
        self.cells() * super::cell::CELL_BYTES as u64
    }

    /// The sampling probability configured for `row` (single-bank configs repeat their value).
    pub fn sampling_of(&self, row: usize) -> f64 {
        match self.sampling.as_slice() {
            [p] => *p,
            ps => ps.get(row).copied().unwrap_or(1.0),
        }
    }

    fn err(field: &str, reason: impl Into<String>) -> ConfigError {
        ConfigError::new(SynopsisKind::Lds, field, reason)
    }
}

impl SynopsisConfig for LdsConfig {
    const KIND: SynopsisKind = SynopsisKind::Lds;

    fn validate(&self) -> Result<(), ConfigError> {
        if self.rows == 0 || self.rows > MAX_ROWS {
            return Err(Self::err("rows", format!("{} is outside 1..={MAX_ROWS}", self.rows)));
        }
        if self.width == 0 {
            return Err(Self::err("width", "must be at least 1"));
        }
        if self.cells() > MAX_CELLS {
            return Err(Self::err(
                "width",
                format!("rows × width = {} cells exceeds the limit of {MAX_CELLS}", self.cells()),
            ));
        }
        if self.vlda_len == 0 || self.vlda_len > MAX_VLDA_LEN || self.vlda_len > self.width {
            return Err(Self::err(
                "vlda_len",
                format!(
                    "{} must be in 1..={} and at most the width {}",
                    self.vlda_len, MAX_VLDA_LEN, self.width
                ),
            ));
        }
        if self.sampling.len() != 1 && self.sampling.len() != self.rows as usize {
            return Err(Self::err(
                "sampling",
                format!(
                    "give one probability for every row or exactly {} (one per row), not {}",
                    self.rows,
                    self.sampling.len()
                ),
            ));
        }
        for (i, p) in self.sampling.iter().enumerate() {
            if !(p.is_finite() && *p > 0.0 && *p <= 1.0) {
                return Err(Self::err(&format!("sampling[{i}]"), format!("{p} is not in (0, 1]")));
            }
        }
        self.weights.validate()?;
        if self.flow_capacity > MAX_FLOW_CAPACITY {
            return Err(Self::err(
                "flow_capacity",
                format!("{} exceeds the limit of {MAX_FLOW_CAPACITY}", self.flow_capacity),
            ));
        }
        let e = &self.estimator;
        if e.alpha.is_nan() || e.alpha < 0.0 {
            return Err(Self::err("estimator.alpha", format!("{} must be ≥ 0 (may be inf)", e.alpha)));
        }
        if let SelectionRule::Ucb { c } = e.selection
            && !(c.is_finite() && c >= 0.0)
        {
            return Err(Self::err("estimator.selection.ucb.c", format!("{c} must be finite and ≥ 0")));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_validate_and_fingerprints_separate_configs() {
        let c = LdsConfig::new(4, 17_500);
        c.validate().unwrap();
        assert_eq!(c.sketch_bytes(), 1_120_000);
        let mut d = c.clone();
        d.seed = 1;
        assert_ne!(c.fingerprint(), d.fingerprint());
        let mut e = c.clone();
        e.estimator.selection = SelectionRule::Ucb { c: 2.0 };
        assert_ne!(c.fingerprint(), e.fingerprint());
        let mut f = e.clone();
        f.estimator.selection = SelectionRule::Ucb { c: 3.0 };
        assert_ne!(e.fingerprint(), f.fingerprint());
        let mut g = c.clone();
        g.offsets = OffsetMode::PerRow;
        assert_ne!(c.fingerprint(), g.fingerprint());
        assert_eq!(c.fingerprint(), c.clone().fingerprint());
    }

    #[test]
    fn bad_values_are_refused_with_the_field_named() {
        let base = LdsConfig::new(4, 100);
        let cases: Vec<(LdsConfig, &str)> = vec![
            (LdsConfig { rows: 0, ..base.clone() }, "rows"),
            (LdsConfig { rows: 65, ..base.clone() }, "rows"),
            (LdsConfig { width: 0, ..base.clone() }, "width"),
            (LdsConfig { rows: 64, width: u32::MAX, ..base.clone() }, "width"),
            (LdsConfig { vlda_len: 0, ..base.clone() }, "vlda_len"),
            (LdsConfig { vlda_len: 101, ..base.clone() }, "vlda_len"),
            (LdsConfig { sampling: vec![1.0, 0.5], ..base.clone() }, "sampling"),
            (LdsConfig { sampling: vec![0.0], ..base.clone() }, "sampling[0]"),
            (LdsConfig { sampling: vec![1.0, 1.0, f64::NAN, 1.0], ..base.clone() }, "sampling[2]"),
            (LdsConfig { sampling: vec![1.5], ..base.clone() }, "sampling[0]"),
            (LdsConfig { flow_capacity: MAX_FLOW_CAPACITY + 1, ..base.clone() }, "flow_capacity"),
            (
                LdsConfig {
                    estimator: EstimatorConfig { alpha: -0.1, ..Default::default() },
                    ..base.clone()
                },
                "estimator.alpha",
            ),
            (
                LdsConfig {
                    estimator: EstimatorConfig {
                        selection: SelectionRule::Ucb { c: f64::INFINITY },
                        ..Default::default()
                    },
                    ..base.clone()
                },
                "estimator.selection.ucb.c",
            ),
        ];
        for (cfg, field) in cases {
            let e = cfg.validate().unwrap_err();
            assert_eq!(e.field, field, "{cfg:?}: {e}");
        }
        let inf =
            LdsConfig { estimator: EstimatorConfig { alpha: f64::INFINITY, ..Default::default() }, ..base };
        inf.validate().unwrap();
    }

    #[test]
    fn sampling_is_per_row_or_shared() {
        let mut c = LdsConfig::new(4, 10);
        c.sampling = vec![0.5];
        assert_eq!(c.sampling_of(3), 0.5);
        c.sampling = vec![0.01, 0.1, 0.5, 1.0];
        assert_eq!(c.sampling_of(0), 0.01);
        assert_eq!(c.sampling_of(3), 1.0);
    }

    #[test]
    fn toml_like_json_round_trip_with_defaults() {
        let c: LdsConfig = serde_json::from_str(r#"{"rows": 4, "width": 17500}"#).unwrap();
        assert_eq!(c, LdsConfig::new(4, 17_500));
        let m: LdsConfig = serde_json::from_str(
            r#"{"rows": 4, "width": 87500, "vlda_len": 5, "sampling": [0.01, 0.1, 0.5, 1.0],
                "estimator": {"selection": {"ucb": {"c": 2.0}}}}"#,
        )
        .unwrap();
        m.validate().unwrap();
        assert_eq!(m.estimator.selection, SelectionRule::Ucb { c: 2.0 });
        assert_eq!(m.estimator.alpha, 0.1);
        assert!(serde_json::from_str::<LdsConfig>(r#"{"rows": 4, "width": 1, "bogus": 1}"#).is_err());
    }
}
