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
    /// Not in the paper (issue 19): with shared offsets, the flow's packets at offset o are the
    /// same packets in every row, while the other flows sharing its cells differ from row to
    /// row. A usable cell that another row repeats exactly at the same offset (count, digest and
    /// delay sum) therefore holds only the flow's own packets. The mean averages those
    /// offsets (one copy each), so it is the mean of a hash-chosen subset of the flow's own
    /// delivered packets, never of another flow's. A flow with no such offset falls back to
    /// `paper_scaled`. Needs `offsets = "shared"` and at least two rows sampling every packet
    /// to confirm anything; the default when `expected_flows` sizes the sketch.
    RowAgreement,
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
///
/// Read from `[synopses.lds]` through [`LdsConfigKeys`]: `width` and `vlda_len` are given, or
/// derived from a coverage target (`expected_flows`, …; see [`super::coverage`]). What is
/// fingerprinted and serialised is the resolved layout, so two points with the same keys get
/// the same sketch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, try_from = "LdsConfigKeys")]
pub struct LdsConfig {
    /// Rows R (one flow hash per row; one bank per row in multi-bank mode).
    pub rows: u32,
    /// Cells per row W (the paper's C in §2; total cells are R·W).
    pub width: u32,
    /// Length k of each flow's virtual LDA: k contiguous, wrapping cells per row.
    pub vlda_len: u32,
    /// Packet sampling probability: one value for every row (single bank) or one per row
    /// (multi-bank, paper §4.2). Each in (0, 1].
    pub sampling: Vec<f64>,
    /// Seed of every hash the sketch derives (rows, offsets, digests, sampling).
    pub seed: u64,
    /// Offset drawing (Fig. 5's shared offset by default).
    pub offsets: OffsetMode,
    /// Per-flow integer weights (paper §4.1); default weight 1 for everything.
    pub weights: WeightPolicy,
    /// Flow keys the point records per epoch so the estimator can enumerate flows (0 = none).
    pub flow_capacity: u32,
    /// Cell selection used by the estimator.
    pub estimator: EstimatorConfig,
}

/// Rows when a coverage target derives the layout and `rows` is not given.
pub const DEFAULT_SIZED_ROWS: u32 = 4;

/// The `[synopses.lds]` table as written: [`LdsConfig`]'s keys with `width` and `vlda_len`
/// optional, plus the coverage-sizing keys. Either `width` is given (and `vlda_len` defaults to
/// 1), or `expected_flows` is, and [`super::coverage::for_coverage`] derives `width` and
/// `vlda_len` (giving either of them too is refused: one source of truth for the layout).
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LdsConfigKeys {
    /// R; required with `width`, default [`DEFAULT_SIZED_ROWS`] with `expected_flows`.
    pub rows: Option<u32>,
    /// W.
    pub width: Option<u32>,
    /// k.
    pub vlda_len: Option<u32>,
    /// See [`LdsConfig::sampling`].
    #[serde(default = "full_sampling")]
    pub sampling: Vec<f64>,
    /// See [`LdsConfig::seed`].
    #[serde(default)]
    pub seed: u64,
    /// See [`LdsConfig::offsets`].
    #[serde(default = "shared_offsets")]
    pub offsets: OffsetMode,
    /// See [`LdsConfig::weights`].
    #[serde(default)]
    pub weights: WeightPolicy,
    /// See [`LdsConfig::flow_capacity`].
    #[serde(default = "default_flow_capacity")]
    pub flow_capacity: u32,
    /// See [`LdsConfig::estimator`]; with `expected_flows` and no `[estimator]` table the
    /// selection is [`SelectionRule::RowAgreement`] with α = 0.
    pub estimator: Option<EstimatorConfig>,
    /// Flows per epoch and direction: derive `width` and `vlda_len` for a coverage target.
    pub expected_flows: Option<f64>,
    /// Loss plus epoch-boundary crossings, a fraction (default 0.01).
    pub expected_loss: Option<f64>,
    /// Mean packets per flow per epoch (default 32).
    pub mean_flow_packets: Option<f64>,
    /// Largest flow, packets per epoch, the target must hold for (default 1000).
    pub max_flow_packets: Option<f64>,
    /// Fraction of flows of 10 to `max_flow_packets` packets that must get a mean (default 0.95).
    pub target_coverage: Option<f64>,
}

impl TryFrom<LdsConfigKeys> for LdsConfig {
    type Error = ConfigError;

    fn try_from(k: LdsConfigKeys) -> Result<Self, ConfigError> {
        use super::coverage::{CoverageTarget, for_coverage};
        let sizing_key = [
            ("expected_loss", k.expected_loss.is_some()),
            ("mean_flow_packets", k.mean_flow_packets.is_some()),
            ("max_flow_packets", k.max_flow_packets.is_some()),
            ("target_coverage", k.target_coverage.is_some()),
        ]
        .into_iter()
        .find(|(_, set)| *set)
        .map(|(name, _)| name);
        let sized = k.expected_flows.is_some();
        let estimator = k.estimator.unwrap_or(if sized {
            EstimatorConfig { alpha: 0.0, strict_alpha: false, selection: SelectionRule::RowAgreement }
        } else {
            EstimatorConfig::default()
        });
        let (rows, width, vlda_len) = match (k.expected_flows, k.width) {
            (Some(_), Some(_)) => {
                return Err(Self::err(
                    "width",
                    "give either width (and vlda_len) or expected_flows, not both",
                ));
            }
            (Some(_), None) if k.vlda_len.is_some() => {
                return Err(Self::err("vlda_len", "is derived from expected_flows; give one or the other"));
            }
            (Some(flows), None) => {
                let d = CoverageTarget::new(flows);
                let target = CoverageTarget {
                    expected_flows: flows,
                    expected_loss: k.expected_loss.unwrap_or(d.expected_loss),
                    mean_flow_packets: k.mean_flow_packets.unwrap_or(d.mean_flow_packets),
                    max_flow_packets: k.max_flow_packets.unwrap_or(d.max_flow_packets),
                    target: k.target_coverage.unwrap_or(d.target),
                };
                if k.offsets != OffsetMode::Shared {
                    return Err(Self::err("offsets", "coverage sizing needs \"shared\" offsets"));
                }
                let s = for_coverage(&target, k.rows.unwrap_or(DEFAULT_SIZED_ROWS))?;
                (s.rows, s.width, s.vlda_len)
            }
            (None, _) if sizing_key.is_some() => {
                return Err(Self::err(sizing_key.unwrap_or_default(), "needs expected_flows"));
            }
            (None, None) => return Err(Self::err("width", "give width (and rows), or expected_flows")),
            (None, Some(width)) => {
                let Some(rows) = k.rows else { return Err(Self::err("rows", "is required with width")) };
                (rows, width, k.vlda_len.unwrap_or(1))
            }
        };
        Ok(Self {
            rows,
            width,
            vlda_len,
            sampling: k.sampling,
            seed: k.seed,
            offsets: k.offsets,
            weights: k.weights,
            flow_capacity: k.flow_capacity,
            estimator,
        })
    }
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

    /// Memory one sketch's flow log reserves: [`super::flows::ENTRY_BYTES`] per flow of
    /// `flow_capacity`, whether or not traffic fills it.
    pub fn flow_log_bytes(&self) -> u64 {
        u64::from(self.flow_capacity) * super::flows::ENTRY_BYTES as u64
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
    type Written = Self;

    fn from_written(written: Self) -> Result<Self, ConfigError> {
        Ok(written)
    }

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

    #[test]
    fn expected_flows_derive_the_layout_and_the_row_agreement_rule() {
        let c: LdsConfig = serde_json::from_str(
            r#"{"expected_flows": 20000, "expected_loss": 0.05, "max_flow_packets": 200}"#,
        )
        .unwrap();
        c.validate().unwrap();
        let t = super::super::coverage::CoverageTarget {
            expected_loss: 0.05,
            max_flow_packets: 200.0,
            ..super::super::coverage::CoverageTarget::new(20_000.0)
        };
        let s = super::super::coverage::for_coverage(&t, DEFAULT_SIZED_ROWS).unwrap();
        assert_eq!((c.rows, c.width, c.vlda_len), (s.rows, s.width, s.vlda_len));
        assert_eq!(c.estimator.selection, SelectionRule::RowAgreement);
        assert_eq!(c.estimator.alpha, 0.0);
        // What is serialised (and fingerprinted) is the layout: it reads back unchanged.
        let back: LdsConfig = serde_json::from_str(&serde_json::to_string(&c).unwrap()).unwrap();
        assert_eq!(back, c);
        assert_eq!(back.fingerprint(), c.fingerprint());
        // An explicit [estimator] table wins.
        let e: LdsConfig = serde_json::from_str(
            r#"{"expected_flows": 500, "rows": 3, "estimator": {"selection": "paper_scaled"}}"#,
        )
        .unwrap();
        assert_eq!((e.rows, e.estimator.selection), (3, SelectionRule::PaperScaled));
    }

    #[test]
    fn sizing_keys_refuse_conflicts_and_unreachable_targets() {
        let field = |json: &str| serde_json::from_str::<LdsConfig>(json).unwrap_err().to_string();
        assert!(field(r#"{"expected_flows": 10, "width": 100}"#).contains("width"));
        assert!(field(r#"{"expected_flows": 10, "vlda_len": 4}"#).contains("vlda_len"));
        assert!(field(r#"{"rows": 4, "width": 100, "expected_loss": 0.1}"#).contains("expected_loss"));
        assert!(field(r#"{"width": 100}"#).contains("rows"));
        assert!(field(r#"{"rows": 4}"#).contains("width"));
        assert!(field(r#"{"expected_flows": 10, "offsets": "per_row"}"#).contains("offsets"));
        let e = field(
            r#"{"expected_flows": 1e6, "expected_loss": 0.5, "max_flow_packets": 1e6, "target_coverage": 0.999}"#,
        );
        assert!(e.contains("no layout"), "{e}");
    }
}
