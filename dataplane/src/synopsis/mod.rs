//! The latency synopses and their estimators.
//!
//! Every synopsis follows the same shape, fixed by [`Synopsis`] and [`SynopsisConfig`]:
//!
//! - a config type (serde, validated, with a stable [fingerprint](SynopsisConfig::fingerprint)
//!   that both measurement points compare);
//! - a state type sized at construction: [`Synopsis::update`] never allocates;
//! - [`Synopsis::merge`] of two shards of one configuration is exact: merging per-core shards
//!   equals one structure fed every packet;
//! - [`Synopsis::reset`] for the next epoch;
//! - a compact, versioned binary encoding ([`codec`]) whose decoder refuses truncated,
//!   oversized and mismatched input with a typed error;
//! - estimators: pure functions from the synopses of the points to [`estimate::Measured`]
//!   values, never NaN.
//!
//! Synopsis code never does I/O and never logs.

pub mod backing;
pub mod board;
pub mod codec;
pub mod colate;
pub mod estimate;
pub mod fridge;
pub mod hash;
pub mod lda;
pub mod lds;
pub mod moment;
pub mod quantile;
pub mod rda;
pub mod registry;

pub use registry::{AnyDecodeError, AnySynopsis, Registered, SynopsisSet};

use crate::packet::{Exchange, FlowKey};
use codec::{DecodeError, Reader, Writer};
use serde::{Deserialize, Serialize, de::DeserializeOwned};
use std::fmt;
use thiserror::Error;

macro_rules! define_kinds {
    (
        one_point: [$(($o:ident, $ov:ident = $ob:literal, $ot:ty, $oc:ty, $od:literal),)*],
        two_point: [$(($t:ident, $tv:ident = $tb:literal, $tt:ty, $tc:ty, $td:literal),)*],
    ) => {
        /// The synopses wirelat knows ([`with_synopses!`]). The discriminant is the kind byte
        /// of the encoding.
        #[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        #[repr(u8)]
        pub enum SynopsisKind {
            $(#[doc = $od] $ov = $ob,)*
            $(#[doc = $td] $tv = $tb,)*
        }

        impl SynopsisKind {
            /// How many synopses wirelat knows.
            pub const COUNT: usize = [$(SynopsisKind::$ov,)* $(SynopsisKind::$tv,)*].len();

            /// All kinds, in list order (kind-byte order).
            pub const ALL: [SynopsisKind; Self::COUNT] = [$(SynopsisKind::$ov,)* $(SynopsisKind::$tv,)*];

            /// Lower-case name used in configs, logs and reports.
            pub fn name(self) -> &'static str {
                match self {
                    $(SynopsisKind::$ov => stringify!($o),)*
                    $(SynopsisKind::$tv => stringify!($t),)*
                }
            }

            /// True for a synopsis paired between two points (kept per direction); false for
            /// one measured at one point.
            pub fn is_two_point(self) -> bool {
                match self {
                    $(SynopsisKind::$ov => false,)*
                    $(SynopsisKind::$tv => true,)*
                }
            }
        }
    };
}

crate::with_synopses!(define_kinds);

impl SynopsisKind {
    /// The kind for a kind byte.
    pub fn from_u8(b: u8) -> Option<Self> {
        Self::ALL.into_iter().find(|k| *k as u8 == b)
    }
}

impl fmt::Display for SynopsisKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What the packet layer hands every synopsis for one packet.
#[derive(Clone, Copy, Debug)]
pub struct Observation<'a> {
    /// When this point saw the packet, in ns on the point's (synchronised) clock.
    pub ts_ns: u64,
    /// The packet's directional 5-tuple.
    pub flow: &'a FlowKey,
    /// `flow.hash(identity_seed)`, computed once per packet.
    pub flow_hash: u64,
    /// Packet identity: a seeded hash of the bytes that do not change between two points, so
    /// both points compute the same value for the same packet.
    pub identity: u64,
    /// Request/response classification, for the fridge.
    pub exchange: Option<Exchange>,
    /// The innermost encapsulation identifier (VLAN, VNI, ...): the fridge's `encap` subsets.
    pub encap: crate::packet::Encap,
}

/// A configuration value that is out of range or inconsistent.
#[derive(Debug, Error, Clone, PartialEq)]
#[error("{synopsis}.{field}: {reason}")]
pub struct ConfigError {
    /// The synopsis whose config is wrong.
    pub synopsis: SynopsisKind,
    /// The offending field (dotted path inside the synopsis config).
    pub field: String,
    /// What is wrong.
    pub reason: String,
}

impl ConfigError {
    /// A new error for `field` of `synopsis`.
    pub fn new(synopsis: SynopsisKind, field: impl Into<String>, reason: impl Into<String>) -> Self {
        Self { synopsis, field: field.into(), reason: reason.into() }
    }
}

/// Two shards could not be merged.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum MergeError {
    /// The shards were built with different configurations.
    #[error("cannot merge {kind} shards of different configurations ({ours:#018x} vs {theirs:#018x})")]
    ConfigMismatch {
        /// The synopsis.
        kind: SynopsisKind,
        /// Our fingerprint.
        ours: u64,
        /// The other shard's fingerprint.
        theirs: u64,
    },
}

/// A synopsis configuration: validated before use, identical at both points.
pub trait SynopsisConfig:
    Clone + fmt::Debug + PartialEq + Serialize + DeserializeOwned + Send + Sync + 'static
{
    /// The synopsis this configures.
    const KIND: SynopsisKind;

    /// The `[synopses.<name>]` table as operators write it: `Self` for most synopses; COLATE's
    /// may give the expected load instead of its cell count, which is derived from it.
    type Written: DeserializeOwned;

    /// The configuration a written table describes (derivations and their refusals).
    fn from_written(written: Self::Written) -> Result<Self, ConfigError>;

    /// Checks ranges and consistency.
    fn validate(&self) -> Result<(), ConfigError>;

    /// A stable 64-bit fingerprint of everything that must match between the two points (shape,
    /// seeds, sampling): xxh3 of the kind byte and the config's postcard encoding, whose wire
    /// format is stable across postcard 1.x. The same on every CPU and build.
    fn fingerprint(&self) -> u64 {
        let mut bytes = vec![Self::KIND as u8];
        // postcard cannot fail on plain structs of numbers, strings, vectors and enums; an
        // error would leave just the kind byte, which is still deterministic.
        if let Ok(body) = postcard::to_allocvec(self) {
            bytes.extend_from_slice(&body);
        }
        xxhash_rust::xxh3::xxh3_64(&bytes)
    }
}

/// One synopsis: per-packet update, exact shard merge, reset and encoding.
pub trait Synopsis: Sized + Send {
    /// Its configuration.
    type Config: SynopsisConfig;
    /// State that must outlive an epoch on a worker (the fridge's slot array, never cleared at
    /// a boundary); `()` for synopses whose whole state is per epoch.
    type Carry: Send;
    /// Version of the body encoding written by [`Synopsis::encode`].
    const FORMAT_VERSION: u8;

    /// Allocates a zeroed synopsis for `cfg` (validates it first). All allocation happens here.
    fn new(cfg: &Self::Config) -> Result<Self, ConfigError>;

    /// Allocates the worker-lifetime state for `cfg`.
    fn new_carry(cfg: &Self::Config) -> Self::Carry;

    /// The configuration this synopsis was built with.
    fn config(&self) -> &Self::Config;

    /// Folds one packet in. No allocation, no lock, no I/O.
    fn update(&mut self, carry: &mut Self::Carry, obs: &Observation<'_>);

    /// Where one packet lands in this synopsis, computed by [`Synopsis::locate`] in the
    /// worker's staging pass so that the whole burst's random memory can be prefetched before
    /// any update waits on it. `Default` means "not located": [`Synopsis::apply`] then computes
    /// it itself. `()` for a synopsis whose update touches sequential memory only, or memory it
    /// cannot name ahead.
    type Location: Copy + Default;

    /// Data path, staging pass: writes where `obs` lands into `at` (in place: a location built
    /// in a local and copied into the staged burst was read back with wide loads over the narrow
    /// stores that had just written it, a store-forwarding stall per packet) and passes each
    /// address the update will touch at random to `hint`, never reading them. Depends only on
    /// the configuration and the carry, which every buffer of a worker's ring shares, so a
    /// location stays right when a burst crosses an epoch boundary. The default locates nothing.
    #[inline(always)]
    fn locate(
        &self,
        _carry: &Self::Carry,
        _obs: &Observation<'_>,
        _at: &mut Self::Location,
        _hint: &mut impl FnMut(*const u8),
    ) {
    }

    /// Data path, update pass: folds one packet in at `at` (as located by [`Synopsis::locate`]
    /// on a synopsis of the same configuration, or `Default`: not located). What the worker's
    /// pipeline calls for every packet; the state it leaves merges, encodes and estimates
    /// exactly as [`Synopsis::update`]'s does. The default is [`Synopsis::update`].
    #[inline(always)]
    fn apply(&mut self, carry: &mut Self::Carry, at: &Self::Location, obs: &Observation<'_>) {
        let _ = at;
        self.update(carry, obs);
    }

    /// Adds `other` (a shard of the same configuration) into `self`. A synopsis may defer part
    /// of the work to [`Synopsis::settle`].
    fn merge(&mut self, other: &Self) -> Result<(), MergeError>;

    /// Adds every shard of `others` into `self` and settles: the value equals `merge` of each
    /// in order followed by [`Synopsis::settle`]. For a synopsis that can read all shards at
    /// once instead of adding them one by one (RDA sorts every worker's log where it lies,
    /// without first copying each into the merged value's). Stops at the first error, as the
    /// merges in order would. The default merges in order, then settles.
    fn merge_all(&mut self, others: &[&Self]) -> Result<(), MergeError> {
        for o in others {
            self.merge(o)?;
        }
        self.settle();
        Ok(())
    }

    /// The harvest's step: `self` becomes the settled merge of `shards` (whatever it held
    /// before is dropped) and every shard is left reset, also after an error. Equal to
    /// [`Synopsis::reset`], [`Synopsis::merge_all`], then a reset of each shard (the default).
    /// A synopsis whose state is one large vector overrides it to read, add and zero each
    /// shard's vector in one pass, and to copy the first shard instead of adding it to zeros:
    /// two passes over every worker's vector and one over the merged one fewer per epoch.
    fn drain_all(&mut self, shards: &mut [&mut Self]) -> Result<(), MergeError> {
        self.reset();
        let read: Vec<&Self> = shards.iter().map(|s| &**s).collect();
        let merged = self.merge_all(&read);
        for s in shards.iter_mut() {
            s.reset();
        }
        merged
    }

    /// Finishes what merges deferred (RDA files the appended logs at once), so the value is
    /// ready to encode or estimate. Called once an epoch's shards are all merged; idempotent.
    /// Control thread (may allocate). Nothing to do by default.
    fn settle(&mut self) {}

    /// Backs with memory now what the data path will write into reserved space (RDA's packet
    /// log, LDS's flow log), so that a worker's first epochs take no page fault
    /// ([`backing`]). Called by the worker on its own lcore when it builds its ring of
    /// buffers. Nothing to do by default.
    fn back_reserved(&mut self) {}

    /// Back to the state of [`Synopsis::new`], keeping the allocation.
    fn reset(&mut self);

    /// Writes the body (everything after the common header).
    fn encode_body(&self, w: &mut Writer<'_>);

    /// Reads a body written by [`Synopsis::encode_body`] for `cfg`. Must check every length
    /// against `cfg` before allocating and must not panic on any input.
    fn decode_body(cfg: &Self::Config, r: &mut Reader<'_>) -> Result<Self, DecodeError>;

    /// Appends the full encoding (header and body) to `out`.
    fn encode_into(&self, out: &mut Vec<u8>) {
        let mut w = Writer::new(out);
        codec::write_header(&mut w, Self::Config::KIND, Self::FORMAT_VERSION, self.config().fingerprint());
        self.encode_body(&mut w);
    }

    /// The full encoding (header and body).
    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.encode_into(&mut out);
        out
    }

    /// Decodes bytes written by [`Synopsis::encode`] by a point configured with `cfg`.
    fn decode(cfg: &Self::Config, bytes: &[u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(bytes);
        codec::read_header(&mut r, Self::Config::KIND, Self::FORMAT_VERSION, cfg.fingerprint())?;
        let s = Self::decode_body(cfg, &mut r)?;
        r.finish()?;
        Ok(s)
    }

    /// For a [`Synopsis::drain_all`] that reads its shards itself: the first shard and the
    /// rest, when there is a shard and every shard has this configuration. Otherwise `self`
    /// and every shard are reset, as the default drain leaves them, and the answer is
    /// `Ok(None)` (no shard) or the mismatch.
    #[allow(clippy::type_complexity)]
    fn drain_split<'s, 'a>(
        &mut self,
        shards: &'s mut [&'a mut Self],
    ) -> Result<Option<(&'s mut &'a mut Self, &'s mut [&'a mut Self])>, MergeError> {
        let same = shards.iter().try_for_each(|s| self.check_same_config(s));
        if same.is_err() || shards.is_empty() {
            self.reset();
            for s in shards.iter_mut() {
                s.reset();
            }
            return same.map(|()| None);
        }
        Ok(shards.split_first_mut())
    }

    /// Checks that `other` has this synopsis's configuration (for [`Synopsis::merge`]).
    fn check_same_config(&self, other: &Self) -> Result<(), MergeError> {
        if self.config() == other.config() {
            Ok(())
        } else {
            Err(MergeError::ConfigMismatch {
                kind: Self::Config::KIND,
                ours: self.config().fingerprint(),
                theirs: other.config().fingerprint(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kind_bytes_round_trip() {
        for k in SynopsisKind::ALL {
            assert_eq!(SynopsisKind::from_u8(k as u8), Some(k));
        }
        assert_eq!(SynopsisKind::from_u8(0), None);
        assert_eq!(SynopsisKind::Lds.to_string(), "lds");
    }
}
