//! The one list of the synopses wirelat runs, and what is generated from it.
//!
//! [`with_synopses!`] is the list: every place that needs one item per synopsis (the kind
//! enum, the configuration set, the epoch buffer's fields, the staged locations, the decoded
//! value the peer estimates from) is generated from it, here and in the control crate
//! (`control_side`: the harvest summaries, the segment keys, publishing and the peer's dispatch).
//! Adding a synopsis is a module that implements [`Synopsis`], its control-side module and one
//! line here (see `docs/adding-a-synopsis.md`).
//!
//! Each entry is `(field, Variant = kind_byte, Type, ConfigType, "description")`:
//! - `field`: the lower-case name used in configs (`[synopses.<field>]`), records, logs and
//!   metrics; also the field of [`SynopsisSet`] and of the epoch buffer.
//! - `Variant = kind_byte`: the [`SynopsisKind`] and its byte in every encoding (never reuse
//!   one: a peer of another build must refuse what it cannot read).
//! - `Type`: the [`Synopsis`]; `ConfigType`: its [`SynopsisConfig`].
//!
//! `one_point` synopses measure at one point and see both directions (the fridge, whose
//! worker-lifetime [`Synopsis::Carry`] lives in the worker); `two_point` ones are kept per
//! direction, paired between an upstream and a downstream point, and carry nothing across
//! epochs (their `Carry` is `()`).

use super::codec::DecodeError;
use super::{ConfigError, Synopsis, SynopsisConfig, SynopsisKind};
use crate::packet::PacketConfig;

/// Calls the macro `$callback` with the list of synopses (see the [module docs](self)).
#[macro_export]
macro_rules! with_synopses {
    ($callback:ident) => {
        $callback! {
            one_point: [
                (fridge, Fridge = 1, $crate::synopsis::fridge::FridgeSynopsis,
                 $crate::synopsis::fridge::FridgeConfig,
                 "Unbiased request→response delay distributions at one point."),
            ],
            two_point: [
                (lda, Lda = 2, $crate::synopsis::lda::Lda, $crate::synopsis::lda::LdaConfig,
                 "Lossy Difference Aggregator: segment mean/std-dev with loss."),
                (lds, Lds = 3, $crate::synopsis::lds::Lds, $crate::synopsis::lds::LdsConfig,
                 "Lossy Difference Sketch: per-flow mean one-way delay."),
                (rda, Rda = 4, $crate::synopsis::rda::Rda, $crate::synopsis::rda::RdaConfig,
                 "Reconcilable Difference Aggregator: exact mean despite loss and reordering."),
                (colate, Colate = 5, $crate::synopsis::colate::Colate,
                 $crate::synopsis::colate::ColateConfig,
                 "COLATE: per-flow latency without timestamps in packets."),
            ],
        }
    };
}

macro_rules! define_set {
    (
        one_point: [$(($o:ident, $ov:ident = $ob:literal, $ot:ty, $oc:ty, $od:literal),)*],
        two_point: [$(($t:ident, $tv:ident = $tb:literal, $tt:ty, $tc:ty, $td:literal),)*],
    ) => {
        /// Which synopses a point runs, with their configurations (`None` = off): the
        /// `[synopses.*]` tables of every program's config (a missing table means off). Each
        /// table is read as its configuration's [`SynopsisConfig::Written`] form.
        #[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct SynopsisSet {
            $(
                #[doc = $od]
                #[serde(default, deserialize_with = "from_written")]
                pub $o: Option<$oc>,
            )*
            $(
                #[doc = $td]
                #[serde(default, deserialize_with = "from_written")]
                pub $t: Option<$tc>,
            )*
        }

        impl SynopsisSet {
            /// True when `kind` is enabled.
            pub fn enables(&self, kind: SynopsisKind) -> bool {
                match kind {
                    $(SynopsisKind::$ov => self.$o.is_some(),)*
                    $(SynopsisKind::$tv => self.$t.is_some(),)*
                }
            }

            /// Validates every enabled synopsis.
            pub fn validate(&self) -> Result<(), ConfigError> {
                $(if let Some(c) = &self.$o { c.validate()?; })*
                $(if let Some(c) = &self.$t { c.validate()?; })*
                Ok(())
            }

            /// Turns off every synopsis for which `keep` is false (the registry test's sets, the
            /// pipeline bench's one-synopsis runs).
            pub fn retain(&mut self, keep: impl Fn(SynopsisKind) -> bool) {
                $(if !keep(SynopsisKind::$ov) { self.$o = None; })*
                $(if !keep(SynopsisKind::$tv) { self.$t = None; })*
            }

            /// The enabled synopses and their configurations' fingerprints, in kind order.
            pub fn config_fingerprints(&self) -> Vec<(SynopsisKind, u64)> {
                let mut v = Vec::new();
                $(if let Some(c) = &self.$o { v.push((SynopsisKind::$ov, c.fingerprint())); })*
                $(if let Some(c) = &self.$t { v.push((SynopsisKind::$tv, c.fingerprint())); })*
                v.sort_by_key(|(k, _)| *k as u8);
                v
            }
        }

        /// A decoded epoch synopsis of any kind (what the peer estimates from).
        #[derive(Clone, Debug)]
        pub enum AnySynopsis {
            $(#[doc = $od] $ov(Box<$ot>),)*
            $(#[doc = $td] $tv(Box<$tt>),)*
        }

        impl AnySynopsis {
            /// Decodes `bytes` as a `kind` synopsis of `set`'s configuration (the fingerprint
            /// in the encoding is checked against it).
            pub fn decode(set: &SynopsisSet, kind: SynopsisKind, bytes: &[u8]) -> Result<Self, AnyDecodeError> {
                match kind {
                    $(SynopsisKind::$ov => {
                        let cfg = set.$o.as_ref().ok_or(AnyDecodeError::NotEnabled(kind))?;
                        Ok(Self::$ov(Box::new(<$ot as Synopsis>::decode(cfg, bytes)?)))
                    })*
                    $(SynopsisKind::$tv => {
                        let cfg = set.$t.as_ref().ok_or(AnyDecodeError::NotEnabled(kind))?;
                        Ok(Self::$tv(Box::new(<$tt as Synopsis>::decode(cfg, bytes)?)))
                    })*
                }
            }

            /// A zeroed `kind` synopsis of `set`'s configuration (the registry test's values).
            #[cfg(test)]
            pub fn new(set: &SynopsisSet, kind: SynopsisKind) -> Result<Self, AnyNewError> {
                match kind {
                    $(SynopsisKind::$ov => {
                        let cfg = set.$o.as_ref().ok_or(AnyNewError::NotEnabled(kind))?;
                        Ok(Self::$ov(Box::new(<$ot as Synopsis>::new(cfg)?)))
                    })*
                    $(SynopsisKind::$tv => {
                        let cfg = set.$t.as_ref().ok_or(AnyNewError::NotEnabled(kind))?;
                        Ok(Self::$tv(Box::new(<$tt as Synopsis>::new(cfg)?)))
                    })*
                }
            }

            /// [`Synopsis::encode`] of the synopsis inside (the registry test's bytes).
            #[cfg(test)]
            pub fn encode(&self) -> Vec<u8> {
                match self {
                    $(Self::$ov(s) => s.encode(),)*
                    $(Self::$tv(s) => s.encode(),)*
                }
            }

            /// Its kind.
            pub fn kind(&self) -> SynopsisKind {
                match self {
                    $(Self::$ov(_) => SynopsisKind::$ov,)*
                    $(Self::$tv(_) => SynopsisKind::$tv,)*
                }
            }
        }
    };
}

crate::with_synopses!(define_set);

/// A synopsis of the list: where its configuration sits in a [`SynopsisSet`] and its variant of
/// [`AnySynopsis`], so generic code (the peer's pairing of two points' synopses) needs no
/// per-synopsis `match`.
pub trait Registered: Synopsis {
    /// Its configuration in `set`, if enabled.
    fn config_in(set: &SynopsisSet) -> Option<&Self::Config>;

    /// The synopsis inside `any`, if `any` is of this kind.
    fn from_any(any: &AnySynopsis) -> Option<&Self>;
}

macro_rules! define_registered {
    (
        one_point: [$(($o:ident, $ov:ident = $ob:literal, $ot:ty, $oc:ty, $od:literal),)*],
        two_point: [$(($t:ident, $tv:ident = $tb:literal, $tt:ty, $tc:ty, $td:literal),)*],
    ) => {
        $(
            impl Registered for $ot {
                fn config_in(set: &SynopsisSet) -> Option<&$oc> {
                    set.$o.as_ref()
                }

                #[allow(irrefutable_let_patterns, reason = "one variant only if the list has one synopsis")]
                fn from_any(any: &AnySynopsis) -> Option<&Self> {
                    if let AnySynopsis::$ov(s) = any { Some(s) } else { None }
                }
            }
        )*
        $(
            impl Registered for $tt {
                fn config_in(set: &SynopsisSet) -> Option<&$tc> {
                    set.$t.as_ref()
                }

                #[allow(irrefutable_let_patterns, reason = "one variant only if the list has one synopsis")]
                fn from_any(any: &AnySynopsis) -> Option<&Self> {
                    if let AnySynopsis::$tv(s) = any { Some(s) } else { None }
                }
            }
        )*
    };
}

crate::with_synopses!(define_registered);

/// [`AnySynopsis::decode`] refused the bytes.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum AnyDecodeError {
    /// The kind is not enabled in the configuration decoding it.
    #[error("{0} is not enabled in this collector's [synopses]")]
    NotEnabled(SynopsisKind),
    /// The synopsis's decoder refused the bytes.
    #[error(transparent)]
    Decode(#[from] DecodeError),
}

/// `AnySynopsis::new` could not build the synopsis (test builds only).
#[cfg(test)]
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum AnyNewError {
    /// The kind is not enabled in the configuration.
    #[error("{0} is not enabled in this configuration's [synopses]")]
    NotEnabled(SynopsisKind),
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
}

/// Reads an optional `[synopses.<name>]` table in its written form and resolves it.
fn from_written<'de, D, C>(d: D) -> Result<Option<C>, D::Error>
where
    D: serde::Deserializer<'de>,
    C: SynopsisConfig,
{
    use serde::Deserialize;
    let Some(written) = Option::<C::Written>::deserialize(d)? else { return Ok(None) };
    C::from_written(written).map(Some).map_err(serde::de::Error::custom)
}

impl SynopsisSet {
    /// True when no synopsis is enabled (forward-only).
    pub fn is_empty(&self) -> bool {
        !SynopsisKind::ALL.iter().any(|k| self.enables(*k))
    }

    /// The enabled synopses and the fingerprints the peer checks, in kind order (what operators
    /// compare between two points, what a point's hello lists and what every epoch message
    /// carries).
    ///
    /// A one-point synopsis's is its configuration's fingerprint. A two-point synopsis's also
    /// covers `packet`'s identity settings ([`PacketConfig::identity_fingerprint`]): its two
    /// points pair packets by identity and flow hash, so two points that hash differently would
    /// pair nothing and report near-total loss. With the settings in the fingerprint the peer
    /// refuses them instead.
    pub fn fingerprints(&self, packet: &PacketConfig) -> Vec<(SynopsisKind, u64)> {
        self.config_fingerprints().into_iter().map(|(k, f)| (k, peer_fingerprint(k, f, packet))).collect()
    }

    /// The fingerprint the peer checks for one enabled synopsis (see [`Self::fingerprints`]).
    pub fn fingerprint_of(&self, kind: SynopsisKind, packet: &PacketConfig) -> Option<u64> {
        self.fingerprints(packet).into_iter().find(|(k, _)| *k == kind).map(|(_, f)| f)
    }
}

/// The fingerprint the peer checks for synopsis `s` at a point with packet settings `packet`:
/// what every epoch message carries ([`peer_fingerprint`] of its kind and configuration).
pub fn peer_fingerprint_of<S: Synopsis>(s: &S, packet: &PacketConfig) -> u64 {
    peer_fingerprint(S::Config::KIND, s.config().fingerprint(), packet)
}

/// The fingerprint the peer checks for a `kind` synopsis whose configuration fingerprint is
/// `config_fingerprint`, at a point with packet settings `packet` (see
/// [`SynopsisSet::fingerprints`]): the configuration's own for a one-point synopsis; for a
/// two-point synopsis, xxh3 of it and the packet identity's.
pub fn peer_fingerprint(kind: SynopsisKind, config_fingerprint: u64, packet: &PacketConfig) -> u64 {
    if !kind.is_two_point() {
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
    use crate::pipeline::EpochSynopses;
    use crate::synopsis::codec;

    /// Every synopsis on, small.
    fn every() -> SynopsisSet {
        SynopsisSet {
            fridge: Some(crate::synopsis::fridge::FridgeConfig::default()),
            lda: Some(crate::synopsis::lda::LdaConfig::single_bank(64, 1.0, 7)),
            lds: Some(crate::synopsis::lds::LdsConfig::new(2, 256)),
            rda: Some(crate::synopsis::rda::RdaConfig::online(2, 256, 1 << 14)),
            colate: Some(crate::synopsis::colate::ColateConfig::new(1009, 8, 40, u64::MAX / 4)),
        }
    }

    /// Each line of the list is consistent wherever it is used: the set's field, the kind, the
    /// encoding's kind byte, the decoder, the epoch buffer and the config table's name.
    #[test]
    fn every_registered_synopsis_round_trips_through_everything_generated_from_the_list() {
        assert_eq!(SynopsisKind::ALL.len(), SynopsisKind::COUNT);
        let all = every();
        assert_eq!(all.kinds(), SynopsisKind::ALL.to_vec(), "the test's set must enable every kind");
        for kind in SynopsisKind::ALL {
            let mut one = all.clone();
            one.retain(|k| k == kind);
            assert_eq!(one.kinds(), vec![kind]);
            assert!(one.enables(kind) && !one.is_empty());
            assert_eq!(one.config_fingerprints().len(), 1);
            let s = AnySynopsis::new(&one, kind).unwrap();
            assert_eq!(s.kind(), kind);
            let bytes = s.encode();
            let (byte, _, fingerprint) = codec::peek_header(&bytes).unwrap();
            assert_eq!(byte, kind as u8);
            assert_eq!(SynopsisKind::from_u8(byte), Some(kind));
            assert_eq!(fingerprint, one.config_fingerprints()[0].1);
            assert_eq!(AnySynopsis::decode(&one, kind, &bytes).unwrap().kind(), kind);
            for other in SynopsisKind::ALL.into_iter().filter(|k| *k != kind) {
                assert_eq!(
                    AnySynopsis::decode(&one, other, &bytes).unwrap_err(),
                    AnyDecodeError::NotEnabled(other)
                );
                assert!(AnySynopsis::decode(&all, other, &bytes).is_err(), "{kind}'s bytes read as {other}");
            }
            // The epoch buffer holds it where its scope says (per direction or once per point).
            let buf = EpochSynopses::new(&one).unwrap();
            let json = format!("{buf:?}");
            let field = format!("{}: Some(", kind.name());
            assert_eq!(json.matches(&field).count(), if kind.is_two_point() { 2 } else { 1 }, "{json}");
            // The config table is named after the kind.
            let table = serde_json::to_value(&one).unwrap();
            let on: Vec<&String> =
                table.as_object().unwrap().iter().filter(|(_, v)| !v.is_null()).map(|(k, _)| k).collect();
            assert_eq!(on, vec![kind.name()]);
            assert_eq!(serde_json::to_value(kind).unwrap(), kind.name());
        }
    }
}
