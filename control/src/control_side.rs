//! The control side of each synopsis, and what is generated for all of them from the one list
//! of synopses ([`wirelat_dataplane::with_synopses!`]).
//!
//! The data plane's contract ([`Synopsis`]) says how a synopsis is updated, merged and encoded.
//! This one says what the control programs do with it once an epoch is merged:
//! - [`ControlSide::publish`]: how a point hands a merged epoch to its sinks, with its
//!   [`ControlSide::Harvest`] summary (the counters a JSON line or a metric shows);
//! - `PeerSide::handle_group` (crate-private): how the peer estimates a ready group of it (usually: pair
//!   the two points' synopses and run its [`SegmentEstimate`](crate::peer::estimate::SegmentEstimate));
//! - for two-point synopses, [`TwoPointSide::SegmentKeys`]: its keys in a `segment` record.
//!
//! Each synopsis implements it in its own module here (`control_side/<name>.rs`). The lists
//! that need one item per synopsis are generated below: [`SynopsisSummary`], [`SegmentResult`],
//! the publishing of a merged epoch (`publish_epoch`) and the peer's dispatch of a ready group
//! (`handle_group`). Adding a synopsis is therefore its data-plane module, its module here and
//! its line in the list (`docs/adding-a-synopsis.md`): the compiler asks for this impl.
//!
//! Control code never sees a packet: all of this runs per epoch or per group.

mod colate;
mod fridge;
mod lda;
mod lds;
mod rda;

pub use colate::{ColateEvidence, ColateHarvest, ColateQuery, NoSegmentLine, colate_epoch};
pub use fridge::FridgeHarvest;
pub use lda::{LdaHarvest, LdaSegment};
pub use lds::{LdsHarvest, LdsSegment};
pub use rda::{RdaHarvest, RdaSegment, Reconciled};

use serde::Serialize;
use wirelat_dataplane::pipeline::{Direction, DirectionSynopses, EpochSynopses};
use wirelat_dataplane::synopsis::{Registered, Synopsis, SynopsisKind};

use crate::peer::engine::{Engine, GroupCall};
use crate::publish::{PublishError, Publisher};
use crate::sink::MeasuredBoth;

/// Where and how a merged epoch of one synopsis is published.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PublishAt {
    /// The epoch.
    pub epoch: u64,
    /// The segment its message names ([`crate::sink::LOCAL_SEGMENT`] for a one-point synopsis).
    pub segment: u32,
    /// The direction of a two-point synopsis; `None` for a one-point one (it sees both).
    pub direction: Option<Direction>,
    /// Packets each direction measured in the epoch.
    pub measured: MeasuredBoth,
    /// Worker shards merged into the epoch.
    pub shards: usize,
    /// False when a worker skipped the epoch.
    pub complete: bool,
}

impl PublishAt {
    /// The direction's name ("forward", "reverse"; "both" for a one-point synopsis).
    pub fn direction_name(&self) -> &'static str {
        self.direction.map_or("both", Direction::name)
    }

    /// Packets this synopsis's direction measured (both directions for a one-point synopsis).
    pub fn measured_here(&self) -> u64 {
        match self.direction {
            Some(Direction::Forward) => self.measured.forward,
            Some(Direction::Reverse) => self.measured.reverse,
            None => self.measured.forward + self.measured.reverse,
        }
    }
}

/// What the control programs do with one synopsis (see the [module docs](self)).
pub trait ControlSide: Synopsis + Registered + Sized {
    /// The per-epoch counters a point's summary of this synopsis carries (serialised flat into
    /// the epoch's JSON line, beside `shards` and `body_bytes`).
    type Harvest: Clone + std::fmt::Debug + PartialEq + Serialize;

    /// Publishes merged epoch `at.epoch` of this synopsis through `p` (its message to every
    /// sink, and whatever else it keeps: RDA's cache, COLATE's counter epochs). An error is
    /// reported after every other synopsis of the epoch is published.
    fn publish(p: &mut Publisher, at: &PublishAt, s: &mut Self) -> Result<(), PublishError>;
}

/// The peer's part of the control side (crate-private: it works on the engine's state).
pub(crate) trait PeerSide: ControlSide {
    /// Estimates (or acknowledges) a ready group of this synopsis.
    fn handle_group(e: &mut Engine, call: GroupCall<'_>);
}

/// A two-point synopsis's part of a `segment` record.
pub trait TwoPointSide: ControlSide {
    /// Its keys in a `segment` record, beside the scorer's ones ([`NoSegmentLine`] if it writes
    /// none).
    type SegmentKeys: SegmentKeys;
}

/// The synopsis-specific keys of a `segment` record.
pub trait SegmentKeys: Clone + std::fmt::Debug + PartialEq + Serialize {
    /// (packets sent, packets lost) for the loss series of the metrics; lost is `None` when the
    /// keys give no lost packets (the epoch counts as loss unknown).
    fn sent_lost(&self) -> (u64, Option<u64>);
}

macro_rules! define_control_side {
    (
        one_point: [$(($o:ident, $ov:ident = $ob:literal, $ot:ty, $oc:ty, $od:literal),)*],
        two_point: [$(($t:ident, $tv:ident = $tb:literal, $tt:ty, $tc:ty, $td:literal),)*],
    ) => {
        /// Per-synopsis counters of one harvested epoch ([`ControlSide::Harvest`]).
        #[derive(Clone, Debug, PartialEq, Serialize)]
        #[serde(untagged)]
        pub enum SynopsisSummary {
            $(#[doc = $od] $ov(<$ot as ControlSide>::Harvest),)*
            $(#[doc = $td] $tv(<$tt as ControlSide>::Harvest),)*
        }

        /// A segment line's estimator output, per two-point synopsis
        /// ([`TwoPointSide::SegmentKeys`]).
        #[derive(Clone, Debug, PartialEq, Serialize)]
        #[serde(untagged)]
        pub enum SegmentResult {
            $(#[doc = $td] $tv(<$tt as TwoPointSide>::SegmentKeys),)*
            /// The estimator refused the pair (configurations differ).
            Error {
                /// Why.
                error: String,
            },
        }

        impl SegmentResult {
            /// (packets sent, packets lost) of the line, `None` for an error line
            /// ([`SegmentKeys::sent_lost`]).
            pub fn sent_lost(&self) -> Option<(u64, Option<u64>)> {
                match self {
                    $(Self::$tv(k) => Some(k.sent_lost()),)*
                    Self::Error { .. } => None,
                }
            }
        }

        /// Publishes every synopsis of merged epoch `epoch` (one-point ones first, then each
        /// direction's in the list's order); the first error after all are published.
        pub(crate) fn publish_epoch(
            p: &mut Publisher,
            epoch: u64,
            merged: &mut EpochSynopses,
            shards: usize,
            complete: bool,
        ) -> Result<(), PublishError> {
            let mut first_error = None;
            let EpochSynopses { forward, reverse, $($o,)* .. } = merged;
            let measured = MeasuredBoth { forward: forward.measured, reverse: reverse.measured };
            let mut at = PublishAt {
                epoch,
                segment: crate::sink::LOCAL_SEGMENT,
                direction: None,
                measured,
                shards,
                complete,
            };
            $(
                if let Some(s) = $o {
                    if let Err(e) = <$ot as ControlSide>::publish(p, &at, s) {
                        first_error.get_or_insert(e);
                    }
                }
            )*
            for (d, dir) in [(Direction::Forward, forward), (Direction::Reverse, reverse)] {
                at.direction = Some(d);
                at.segment = p.segment_of(d);
                let DirectionSynopses { $($t,)* measured: _ } = dir;
                $(
                    if let Some(s) = $t {
                        if let Err(e) = <$tt as ControlSide>::publish(p, &at, s) {
                            first_error.get_or_insert(e);
                        }
                    }
                )*
            }
            first_error.map_or(Ok(()), Err)
        }

        /// The peer's dispatch of a ready group to its synopsis's [`PeerSide::handle_group`].
        pub(crate) fn handle_group(e: &mut Engine, call: GroupCall<'_>) {
            match call.g.kind {
                $(SynopsisKind::$ov => <$ot as PeerSide>::handle_group(e, call),)*
                $(SynopsisKind::$tv => <$tt as PeerSide>::handle_group(e, call),)*
            }
        }
    };
}

wirelat_dataplane::with_synopses!(define_control_side);
