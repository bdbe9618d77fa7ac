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

use wirelat_dataplane::synopsis::colate::coverage::ColateConfigKeys;

/// The `[synopses.*]` tables: the data plane's [`SynopsisSet`], generated from the one list of
/// synopses ([`wirelat_dataplane::with_synopses!`]) with its fingerprints.
///
/// [`SynopsisSet`]: wirelat_dataplane::synopsis::SynopsisSet
pub type SynopsesConfig = wirelat_dataplane::synopsis::SynopsisSet;

pub use wirelat_dataplane::synopsis::registry::{peer_fingerprint, peer_fingerprint_of};

/// Logs what `[synopses.colate]` derived, if its table in `text` (a config file that parsed)
/// gives the load instead of `cells_per_flow`: every program that reads the table derives the
/// same m (the fingerprint covers it), and the operator sees which.
pub fn log_derived(text: &str) {
    #[derive(serde::Deserialize)]
    struct File {
        synopses: Option<Synopses>,
    }
    #[derive(serde::Deserialize)]
    struct Synopses {
        colate: Option<ColateConfigKeys>,
    }
    let Ok(File { synopses: Some(Synopses { colate: Some(keys) }) }) = toml::from_str::<File>(text) else {
        return;
    };
    if let Ok((_, Some(s))) = keys.resolve() {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use wirelat_dataplane::packet::PacketConfig;
    use wirelat_dataplane::synopsis::lda::LdaConfig;
    use wirelat_dataplane::synopsis::{SynopsisConfig, SynopsisKind};

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
