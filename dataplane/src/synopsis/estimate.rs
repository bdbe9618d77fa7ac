//! What estimators return: a value with its sample size and confidence interval, or the reason
//! there is none. No estimator returns NaN or an infinity.

use serde::{Deserialize, Serialize};

/// A two-sided confidence interval.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConfidenceInterval {
    /// Nominal coverage, e.g. 0.98.
    pub level: f64,
    /// Lower end.
    pub low: f64,
    /// Upper end.
    pub high: f64,
}

/// One estimated quantity.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    /// The estimate (unit given by the field that holds it, usually ns).
    pub value: f64,
    /// How many packets (or samples) it rests on.
    pub samples: u64,
    /// Confidence interval, where the method gives one.
    pub interval: Option<ConfidenceInterval>,
}

impl Estimate {
    /// An estimate without interval; `NoEstimate::NotFinite` if `value` is NaN or infinite.
    pub fn new(value: f64, samples: u64) -> Measured<Self> {
        if value.is_finite() {
            Ok(Self { value, samples, interval: None })
        } else {
            Err(NoEstimate::NotFinite)
        }
    }

    /// Adds a symmetric interval `value ± half_width` at `level` (ignored unless finite).
    pub fn with_half_width(mut self, level: f64, half_width: f64) -> Self {
        if half_width.is_finite() && half_width >= 0.0 {
            self.interval = Some(ConfidenceInterval {
                level,
                low: self.value - half_width,
                high: self.value + half_width,
            });
        }
        self
    }
}

/// Why an estimate could not be made.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum NoEstimate {
    /// The epoch held no packets.
    #[error("no packets")]
    NoPackets,
    /// Every cell or bucket was spoiled (loss, collisions, reordering).
    #[error("no usable cells")]
    NoUsableCells,
    /// Fewer samples than the method needs.
    #[error("too few samples: {have} < {need}")]
    TooFewSamples {
        /// Samples available.
        have: u64,
        /// Samples needed.
        need: u64,
    },
    /// The two synopses were built with different configurations.
    #[error("configurations differ")]
    ConfigMismatch,
    /// The arithmetic gave NaN or an infinity (degenerate input).
    #[error("result not finite")]
    NotFinite,
    /// Anything specific to one synopsis.
    #[error("{detail}")]
    Other {
        /// Human-readable reason.
        detail: String,
    },
}

impl NoEstimate {
    /// The snake_case reason records and metrics carry (the serialised `"reason"` tag).
    pub fn reason(&self) -> &'static str {
        match self {
            NoEstimate::NoPackets => "no_packets",
            NoEstimate::NoUsableCells => "no_usable_cells",
            NoEstimate::TooFewSamples { .. } => "too_few_samples",
            NoEstimate::ConfigMismatch => "config_mismatch",
            NoEstimate::NotFinite => "not_finite",
            NoEstimate::Other { .. } => "other",
        }
    }
}

/// An estimate or the reason there is none.
pub type Measured<T> = Result<T, NoEstimate>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_are_the_serialised_tags() {
        for e in [
            NoEstimate::NoPackets,
            NoEstimate::NoUsableCells,
            NoEstimate::TooFewSamples { have: 1, need: 2 },
            NoEstimate::ConfigMismatch,
            NoEstimate::NotFinite,
            NoEstimate::Other { detail: "x".into() },
        ] {
            let v = serde_json::to_value(&e).unwrap();
            assert_eq!(v["reason"], e.reason(), "{e:?}");
        }
        for k in crate::packet::ExchangeKind::ALL {
            assert_eq!(serde_json::to_value(k).unwrap(), k.name());
        }
    }

    #[test]
    fn nan_is_refused() {
        assert_eq!(Estimate::new(f64::NAN, 3), Err(NoEstimate::NotFinite));
        assert_eq!(Estimate::new(f64::INFINITY, 3), Err(NoEstimate::NotFinite));
        let e = Estimate::new(10.0, 3).unwrap().with_half_width(0.98, 2.0);
        assert_eq!(e.interval.unwrap().low, 8.0);
        assert_eq!(e.interval.unwrap().high, 12.0);
    }

    #[test]
    fn reasons_serialise_with_a_tag() {
        let s = serde_json::to_string(&NoEstimate::TooFewSamples { have: 1, need: 2 }).unwrap();
        assert_eq!(s, r#"{"reason":"too_few_samples","have":1,"need":2}"#);
    }
}
