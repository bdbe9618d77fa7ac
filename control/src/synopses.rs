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
use wirelat_dataplane::packet::PacketConfig;
use wirelat_dataplane::synopsis::colate::ColateConfig;
use wirelat_dataplane::synopsis::colate::coverage::ColateConfigKeys;
use wirelat_dataplane::synopsis::fridge::FridgeConfig;
use wirelat_dataplane::synopsis::lda::LdaConfig;
use wirelat_dataplane::synopsis::lds::LdsConfig;
use wirelat_dataplane::synopsis::rda::RdaConfig;
use wirelat_dataplane::synopsis::{ConfigError, Synopsis, SynopsisConfig, SynopsisKind};

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
    /// Per-flow latency without timestamps. Written as [`ColateConfigKeys`]: `cells_per_flow`
    /// may be derived from the configured load (coverage sizing); the derived m is logged.
    #[serde(default, deserialize_with = "colate_from_keys")]
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

    /// The enabled synopses and the fingerprints the peer checks, in kind order (what operators
    /// compare between two points, what a point's hello lists and what every epoch message
    /// carries).
    ///
    /// A fridge's is its configuration's fingerprint. A two-point synopsis's also covers
    /// `packet`'s identity settings ([`PacketConfig::identity_fingerprint`]): its two points
    /// pair packets by identity and flow hash, so two points that hash differently would pair
    /// nothing and report near-total loss. With the settings in the fingerprint the peer
    /// refuses them instead.
    pub fn fingerprints(&self, packet: &PacketConfig) -> Vec<(SynopsisKind, u64)> {
        let mut v = Vec::new();
        let mut push = |kind, config_fingerprint| {
            v.push((kind, peer_fingerprint(kind, config_fingerprint, packet)));
        };
        if let Some(c) = &self.fridge {
            push(SynopsisKind::Fridge, c.fingerprint());
        }
        if let Some(c) = &self.lda {
            push(SynopsisKind::Lda, c.fingerprint());
        }
        if let Some(c) = &self.lds {
            push(SynopsisKind::Lds, c.fingerprint());
        }
        if let Some(c) = &self.rda {
            push(SynopsisKind::Rda, c.fingerprint());
        }
        if let Some(c) = &self.colate {
            push(SynopsisKind::Colate, c.fingerprint());
        }
        v
    }

    /// The fingerprint the peer checks for one enabled synopsis (see [`Self::fingerprints`]).
    pub fn fingerprint_of(&self, kind: SynopsisKind, packet: &PacketConfig) -> Option<u64> {
        self.fingerprints(packet).into_iter().find(|(k, _)| *k == kind).map(|(_, f)| f)
    }

    /// True when `kind` is enabled.
    pub fn enables(&self, kind: SynopsisKind) -> bool {
        match kind {
            SynopsisKind::Fridge => self.fridge.is_some(),
            SynopsisKind::Lda => self.lda.is_some(),
            SynopsisKind::Lds => self.lds.is_some(),
            SynopsisKind::Rda => self.rda.is_some(),
            SynopsisKind::Colate => self.colate.is_some(),
        }
    }

    /// True when no synopsis is enabled (forward-only).
    pub fn is_empty(&self) -> bool {
        !SynopsisKind::ALL.into_iter().any(|k| self.enables(k))
    }
}

/// Reads `[synopses.colate]` as written ([`ColateConfigKeys`]) and derives m where the table
/// gives the load instead of `cells_per_flow`, logging what was derived (every program that
/// reads the table derives the same m, and the fingerprint covers it).
fn colate_from_keys<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<ColateConfig>, D::Error> {
    let Some(keys) = Option::<ColateConfigKeys>::deserialize(d)? else { return Ok(None) };
    let (cfg, sizing) = keys.resolve().map_err(serde::de::Error::custom)?;
    if let Some(s) = sizing {
        tracing::info!(
            cells_per_flow = s.cells_per_flow,
            spoiled_packets_per_window = s.spoiled_packets,
            probability = s.probability,
            exact = s.exact,
            max_delay_us = s.target.max_delay_us,
            max_flow_pps = s.target.max_flow_pps,
            expected_loss = s.target.expected_loss,
            window_ms = s.target.window_ms,
            target_coverage = s.target.target,
            "colate: cells_per_flow derived from the configured load"
        );
    }
    Ok(Some(cfg))
}

/// The fingerprint the peer checks for synopsis `s` at a point with packet settings `packet`:
/// what every epoch message carries ([`peer_fingerprint`] of its kind and configuration).
pub fn peer_fingerprint_of<S: Synopsis>(s: &S, packet: &PacketConfig) -> u64 {
    peer_fingerprint(S::Config::KIND, s.config().fingerprint(), packet)
}

/// The fingerprint the peer checks for a `kind` synopsis whose configuration fingerprint is
/// `config_fingerprint`, at a point with packet settings `packet` (see
/// [`SynopsesConfig::fingerprints`]): the configuration's own for the fridge, which pairs
/// packets at one point; for a two-point synopsis, xxh3 of it and the packet identity's.
pub fn peer_fingerprint(kind: SynopsisKind, config_fingerprint: u64, packet: &PacketConfig) -> u64 {
    if kind == SynopsisKind::Fridge {
        return config_fingerprint;
    }
    let mut bytes = [0u8; 16];
    bytes[..8].copy_from_slice(&config_fingerprint.to_le_bytes());
    bytes[8..].copy_from_slice(&packet.identity_fingerprint().to_le_bytes());
    xxhash_rust::xxh3::xxh3_64(&bytes)
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
        let packet = PacketConfig::default();
        let c = SynopsesConfig { lda: Some(lda.clone()), ..Default::default() };
        let fp = c.fingerprint_of(SynopsisKind::Lda, &packet).unwrap();
        assert_eq!(c.fingerprints(&packet), vec![(SynopsisKind::Lda, fp)]);
        assert_ne!(fp, lda.fingerprint());
        assert_eq!(fp, peer_fingerprint(SynopsisKind::Lda, lda.fingerprint(), &packet));
        assert_eq!(c.fingerprint_of(SynopsisKind::Rda, &packet), None);
        assert!(c.enables(SynopsisKind::Lda) && !c.enables(SynopsisKind::Fridge) && !c.is_empty());
        // Round trip through TOML keeps the fingerprint (both points read the same file).
        let text = toml::to_string(&c).unwrap();
        let back: SynopsesConfig = toml::from_str(&text).unwrap();
        assert_eq!(back.fingerprints(&packet), c.fingerprints(&packet));
        let bad = SynopsesConfig { lda: Some(LdaConfig::single_bank(3, 1.0, 7)), ..Default::default() };
        assert!(bad.validate().is_err());
    }

    #[test]
    fn two_point_fingerprints_cover_the_packet_identity_and_the_fridge_does_not() {
        // The shipped collector enables all five.
        #[derive(Deserialize)]
        struct Shipped {
            synopses: SynopsesConfig,
        }
        let all = toml::from_str::<Shipped>(include_str!("../../configs/collector.toml")).unwrap().synopses;
        let a = PacketConfig::default();
        let seed = PacketConfig { identity_seed: 9, ..a.clone() };
        let prefix = PacketConfig { payload_prefix_bytes: 8, ..a.clone() };
        let mut classify = a.clone();
        classify.classify.tcp_data = true;
        assert_eq!(all.fingerprints(&classify), all.fingerprints(&a));
        for other in [&seed, &prefix] {
            for ((k, f), (k2, g)) in all.fingerprints(&a).into_iter().zip(all.fingerprints(other)) {
                assert_eq!(k, k2);
                if k == SynopsisKind::Fridge {
                    assert_eq!(f, g, "the fridge pairs packets at one point only");
                } else {
                    assert_ne!(f, g, "{k} must not pair points that hash packets differently");
                }
            }
        }
        assert_eq!(all.fingerprints(&a).len(), 5);
    }

    #[test]
    fn colate_cells_per_flow_is_derived_from_the_load_and_fingerprinted() {
        let table = "[colate]\ncounters = 1000003\ncounter_bits = 48\nepoch_threshold_ticks = 1000\n\
                     packet_counts = true\n";
        let at = |extra: &str| toml::from_str::<SynopsesConfig>(&format!("{table}{extra}"));
        let sized = at("max_delay_us = 30000\nmax_flow_pps = 300\nwindow_ms = 100\n").unwrap();
        let m = sized.colate.as_ref().unwrap().cells_per_flow;
        assert!(m > 20, "m = {m}");
        // The same table at the other point derives the same m; an explicit m of that value is
        // the same configuration, the default m is not.
        let packet = PacketConfig::default();
        let again = at("max_delay_us = 30000\nmax_flow_pps = 300\nwindow_ms = 100\n").unwrap();
        assert_eq!(again.fingerprints(&packet), sized.fingerprints(&packet));
        let explicit = at(&format!("cells_per_flow = {m}\n")).unwrap();
        assert_eq!(explicit.fingerprints(&packet), sized.fingerprints(&packet));
        let default = at("").unwrap();
        assert_eq!(default.colate.as_ref().unwrap().cells_per_flow, 20);
        assert_ne!(default.fingerprints(&packet), sized.fingerprints(&packet));
        // Serialised (as the peer's copy is) and read back: the derived m survives.
        let back: SynopsesConfig = toml::from_str(&toml::to_string(&sized).unwrap()).unwrap();
        assert_eq!(back.fingerprints(&packet), sized.fingerprints(&packet));
        // Refusals name the key.
        let e = at("cells_per_flow = 20\nmax_delay_us = 100\nmax_flow_pps = 10\n").unwrap_err().to_string();
        assert!(e.contains("colate.cells_per_flow"), "{e}");
        let e = at("max_delay_us = 1e5\nmax_flow_pps = 1e6\n").unwrap_err().to_string();
        assert!(e.contains("colate.target_coverage"), "{e}");
    }
}
