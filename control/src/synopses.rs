//! Which synopses a point runs, and their configurations: the `[synopses.*]` tables shared by
//! the appliance (`wirelat run`), the offline runner and the peer (`wirelat collect`), so every
//! program that encodes or decodes a synopsis agrees on its configuration and fingerprint.
//!
//! ```toml
//! [synopses.lda]
//! banks = [{ rows = 512, p = 0.01 }, { rows = 512, p = 0.0005 }]
//! seed = 7
//! ```
//!
//! A missing table means that synopsis is off.

use serde::{Deserialize, Serialize};
use wirelat_dataplane::synopsis::colate::ColateConfig;
use wirelat_dataplane::synopsis::fridge::FridgeConfig;
use wirelat_dataplane::synopsis::lda::LdaConfig;
use wirelat_dataplane::synopsis::lds::LdsConfig;
use wirelat_dataplane::synopsis::rda::RdaConfig;
use wirelat_dataplane::synopsis::{ConfigError, SynopsisConfig, SynopsisKind};

/// The synopses a point runs (each `None` = off).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SynopsesConfig {
    /// Request→response delay distributions at this point.
    pub fridge: Option<FridgeConfig>,
    /// Segment mean/std-dev with loss.
    pub lda: Option<LdaConfig>,
    /// Per-flow mean one-way delay.
    pub lds: Option<LdsConfig>,
    /// Exact mean despite loss and reordering.
    pub rda: Option<RdaConfig>,
    /// Per-flow latency without timestamps.
    pub colate: Option<ColateConfig>,
}

impl SynopsesConfig {
    /// Validates every enabled synopsis.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if let Some(c) = &self.fridge {
            c.validate()?;
        }
        if let Some(c) = &self.lda {
            c.validate()?;
        }
        if let Some(c) = &self.lds {
            c.validate()?;
        }
        if let Some(c) = &self.rda {
            c.validate()?;
        }
        if let Some(c) = &self.colate {
            c.validate()?;
        }
        Ok(())
    }

    /// The enabled synopses and their configuration fingerprints, in kind order (what operators
    /// compare between two points, and what the peer checks every message against).
    pub fn fingerprints(&self) -> Vec<(SynopsisKind, u64)> {
        let mut v = Vec::new();
        if let Some(c) = &self.fridge {
            v.push((SynopsisKind::Fridge, c.fingerprint()));
        }
        if let Some(c) = &self.lda {
            v.push((SynopsisKind::Lda, c.fingerprint()));
        }
        if let Some(c) = &self.lds {
            v.push((SynopsisKind::Lds, c.fingerprint()));
        }
        if let Some(c) = &self.rda {
            v.push((SynopsisKind::Rda, c.fingerprint()));
        }
        if let Some(c) = &self.colate {
            v.push((SynopsisKind::Colate, c.fingerprint()));
        }
        v
    }

    /// The fingerprint of one enabled synopsis.
    pub fn fingerprint_of(&self, kind: SynopsisKind) -> Option<u64> {
        self.fingerprints().into_iter().find(|(k, _)| *k == kind).map(|(_, f)| f)
    }

    /// True when no synopsis is enabled (forward-only).
    pub fn is_empty(&self) -> bool {
        self.fingerprints().is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_tables_mean_forward_only() {
        let c: SynopsesConfig = toml::from_str("").unwrap();
        assert!(c.is_empty());
        assert!(c.validate().is_ok());
        assert!(toml::from_str::<SynopsesConfig>("[bogus]\n").is_err());
    }

    #[test]
    fn enabled_synopses_are_validated_and_fingerprinted() {
        let lda = LdaConfig::single_bank(1024, 1.0, 7);
        let c = SynopsesConfig { lda: Some(lda.clone()), ..Default::default() };
        assert_eq!(c.fingerprints(), vec![(SynopsisKind::Lda, lda.fingerprint())]);
        assert_eq!(c.fingerprint_of(SynopsisKind::Lda), Some(lda.fingerprint()));
        assert_eq!(c.fingerprint_of(SynopsisKind::Rda), None);
        // Round trip through TOML keeps the fingerprint (both points read the same file).
        let text = toml::to_string(&c).unwrap();
        let back: SynopsesConfig = toml::from_str(&text).unwrap();
        assert_eq!(back.fingerprints(), c.fingerprints());
        let bad = SynopsesConfig { lda: Some(LdaConfig::single_bank(3, 1.0, 7)), ..Default::default() };
        assert!(bad.validate().is_err());
    }
}
