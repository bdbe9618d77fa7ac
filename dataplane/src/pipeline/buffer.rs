//! The epoch buffer of the runtime: every enabled synopsis of one worker for one epoch, both
//! directions, generated from the one list of synopses ([`crate::with_synopses!`]).
//!
//! Two-point synopses (LDA, LDS, RDA, COLATE) are kept per direction: packets received on
//! port 0 (forward, client → server) update [`EpochSynopses::forward`], port 1 (reverse)
//! [`EpochSynopses::reverse`]; the control thread maps each direction to its configured segment.
//! One-point synopses (the fridge) are one per point and see both directions (requests and
//! responses); their worker-lifetime state is not here but in the worker's [`WorkerCarry`].
//!
//! Every packet goes through the [`Synopsis`] contract only: [`Synopsis::locate`] in the
//! staging pass (into the packet's [`Locations`]), [`Synopsis::apply`] in the update pass.
//!
//! Allocation happens in [`EpochSynopses::new`] only (and when the control thread takes an RDA
//! cache); updates, merges and resets keep the allocations.

use crate::epoch::EpochBuffer;
use crate::synopsis::{ConfigError, MergeError, Observation, Synopsis, SynopsisKind};

pub use crate::direction::Direction;
pub use crate::synopsis::SynopsisSet;

macro_rules! define_buffer {
    (
        one_point: [$(($o:ident, $ov:ident = $ob:literal, $ot:ty, $oc:ty, $od:literal),)*],
        two_point: [$(($t:ident, $tv:ident = $tb:literal, $tt:ty, $tc:ty, $td:literal),)*],
    ) => {
        impl SynopsisSet {
            /// The enabled kinds, in kind order.
            pub fn kinds(&self) -> Vec<SynopsisKind> {
                SynopsisKind::ALL.iter().copied().filter(|k| self.enables(*k)).collect()
            }

            /// The worker-lifetime state of the enabled one-point synopses. Allocates.
            pub fn new_carry(&self) -> WorkerCarry {
                WorkerCarry { $($o: self.$o.as_ref().map(<$ot as Synopsis>::new_carry),)* }
            }
        }

        /// State of one worker that outlives its epochs: one-point synopses' carries (the
        /// fridge's slot arrays, never cleared at a boundary).
        #[derive(Debug)]
        pub struct WorkerCarry {
            $(#[doc = $od] pub $o: Option<<$ot as Synopsis>::Carry>,)*
        }

        impl DirectionSynopses {
            /// True when at least one two-point synopsis is enabled.
            pub fn any_enabled(&self) -> bool {
                false $(|| self.$t.is_some())*
            }
        }

        impl WorkerCarry {
            /// True when a one-point synopsis is enabled: those are the request/response
            /// synopses (the fridge), the only readers of a packet's [`crate::packet::Exchange`].
            pub fn reads_exchanges(&self) -> bool {
                false $(|| self.$o.is_some())*
            }
        }

        /// Where one staged packet lands in each synopsis ([`Synopsis::Location`]); filled in
        /// by the staging pass, `Default` when not located. A function of the configurations
        /// only, which every buffer of a worker's ring shares.
        #[derive(Clone, Copy, Debug, Default)]
        pub struct Locations {
            $($o: <$ot as Synopsis>::Location,)*
            $($t: <$tt as Synopsis>::Location,)*
        }

        /// The two-point synopses of one direction, for one epoch.
        #[derive(Clone, Debug)]
        pub struct DirectionSynopses {
            $(#[doc = $td] pub $t: Option<$tt>,)*
            /// Packets measured in this direction and epoch (all synopses saw them).
            pub measured: u64,
        }

        impl DirectionSynopses {
            fn new(set: &SynopsisSet) -> Result<Self, ConfigError> {
                Ok(Self { $($t: set.$t.as_ref().map(<$tt>::new).transpose()?,)* measured: 0 })
            }

            fn reset(&mut self) {
                $(if let Some(s) = &mut self.$t { s.reset(); })*
                self.measured = 0;
            }

            fn back_reserved(&mut self) {
                $(if let Some(s) = &mut self.$t { s.back_reserved(); })*
            }

            fn merge_from(&mut self, o: &Self) -> Result<(), MergeError> {
                $(merge_opt(&mut self.$t, &o.$t)?;)*
                self.measured = self.measured.wrapping_add(o.measured);
                Ok(())
            }

            fn settle(&mut self) {
                $(if let Some(s) = &mut self.$t { s.settle(); })*
            }

            fn merge_all(&mut self, others: &[&Self]) -> Result<(), MergeError> {
                $(merge_all_opt(&mut self.$t, others.iter().map(|o| &o.$t))?;)*
                for o in others {
                    self.measured = self.measured.wrapping_add(o.measured);
                }
                Ok(())
            }

            /// [`Synopsis::drain_all`] of every enabled synopsis; every synopsis is drained
            /// (and every shard left reset) even after one fails, whose error is returned.
            fn drain_all(&mut self, shards: &mut [&mut Self]) -> Result<(), MergeError> {
                let mut result = Ok(());
                $(keep_first_error(&mut result, drain_all_opt(&mut self.$t, shards.iter_mut().map(|s| &mut s.$t)));)*
                self.measured = 0;
                for s in shards.iter_mut() {
                    self.measured = self.measured.wrapping_add(std::mem::take(&mut s.measured));
                }
                result
            }

            /// [`Synopsis::locate`] of every enabled synopsis, into `at`.
            #[inline(always)]
            pub(crate) fn locate(&self, obs: &Observation<'_>, at: &mut Locations, hint: &mut impl FnMut(*const u8)) {
                $(if let Some(s) = &self.$t { Synopsis::locate(s, &(), obs, &mut at.$t, hint); })*
            }

            /// [`Synopsis::apply`] of every enabled synopsis.
            #[inline(always)]
            pub(crate) fn apply(&mut self, at: &Locations, obs: &Observation<'_>) {
                self.measured = self.measured.wrapping_add(1);
                $(if let Some(s) = &mut self.$t { Synopsis::apply(s, &mut (), &at.$t, obs); })*
            }
        }

        /// One worker's synopses for one epoch: both directions and the one-point synopses.
        #[derive(Clone, Debug)]
        pub struct EpochSynopses {
            /// Packets received on port 0.
            pub forward: DirectionSynopses,
            /// Packets received on port 1.
            pub reverse: DirectionSynopses,
            $(#[doc = $od] pub $o: Option<$ot>,)*
            /// The board and jobs of the workers' share of RDA's filing, if any
            /// ([`super::filing`]).
            pub(super) filing: Option<super::filing::WorkerFiling>,
        }

        impl EpochSynopses {
            /// Zeroed synopses for `set` (validates every configuration). Allocates.
            pub fn new(set: &SynopsisSet) -> Result<Self, ConfigError> {
                Ok(Self {
                    forward: DirectionSynopses::new(set)?,
                    reverse: DirectionSynopses::new(set)?,
                    $($o: set.$o.as_ref().map(<$ot>::new).transpose()?,)*
                    filing: None,
                })
            }

            /// [`Synopsis::back_reserved`] of every enabled synopsis: what the worker's data
            /// path will write is backed with memory now, on the calling thread.
            pub fn back_reserved(&mut self) {
                self.forward.back_reserved();
                self.reverse.back_reserved();
                $(if let Some(s) = &mut self.$o { s.back_reserved(); })*
            }

            /// [`Synopsis::locate`] of a packet of direction `d` in every enabled synopsis.
            #[inline(always)]
            pub(crate) fn locate(
                &self,
                d: Direction,
                carry: &WorkerCarry,
                obs: &Observation<'_>,
                at: &mut Locations,
                hint: &mut impl FnMut(*const u8),
            ) {
                $(if let (Some(s), Some(c)) = (&self.$o, &carry.$o) { Synopsis::locate(s, c, obs, &mut at.$o, hint); })*
                self.direction(d).locate(obs, at, hint);
            }

            /// [`Synopsis::apply`] of a packet of direction `d` to every enabled synopsis.
            #[inline(always)]
            pub(crate) fn apply(&mut self, d: Direction, carry: &mut WorkerCarry, at: &Locations, obs: &Observation<'_>) {
                self.direction_mut(d).apply(at, obs);
                $(if let (Some(s), Some(c)) = (&mut self.$o, &mut carry.$o) { Synopsis::apply(s, c, &at.$o, obs); })*
            }
        }

        impl EpochBuffer for EpochSynopses {
            fn reset(&mut self) {
                self.forward.reset();
                self.reverse.reset();
                $(if let Some(s) = &mut self.$o { s.reset(); })*
            }

            fn merge_from(&mut self, other: &Self) -> Result<(), MergeError> {
                self.forward.merge_from(&other.forward)?;
                self.reverse.merge_from(&other.reverse)?;
                $(merge_opt(&mut self.$o, &other.$o)?;)*
                Ok(())
            }

            fn settle(&mut self) {
                self.forward.settle();
                self.reverse.settle();
                $(if let Some(s) = &mut self.$o { s.settle(); })*
            }

            /// Each synopsis reads every shard's at once ([`Synopsis::merge_all`]).
            fn merge_all(&mut self, others: &[&Self]) -> Result<(), MergeError> {
                let forward: Vec<&DirectionSynopses> = others.iter().map(|o| &o.forward).collect();
                self.forward.merge_all(&forward)?;
                let reverse: Vec<&DirectionSynopses> = others.iter().map(|o| &o.reverse).collect();
                self.reverse.merge_all(&reverse)?;
                $(merge_all_opt(&mut self.$o, others.iter().map(|o| &o.$o))?;)*
                Ok(())
            }

            /// Each synopsis drains every shard's at once ([`Synopsis::drain_all`]); all are
            /// drained even after one fails, so every shard goes back to its worker reset.
            /// RDA's filing taken back ([`EpochBuffer::take_back`]) is left as it is: only the
            /// shards' RDA is reset.
            fn drain_all(&mut self, shards: &mut [&mut Self]) -> Result<(), MergeError> {
                let filed = self.take_filed();
                let result = self.drain_rest(shards);
                self.restore_filed(filed);
                result
            }

            fn lend(&mut self, shards: &mut [&mut Self]) -> Result<bool, MergeError> {
                self.lend_filing(shards)
            }

            fn lent_taken(&self) -> bool {
                self.filing_taken()
            }

            fn take_back(&mut self, shards: &mut [&mut Self]) {
                self.take_back_filing(shards);
            }
        }

        impl EpochSynopses {
            /// [`EpochBuffer::drain_all`] of every synopsis the accumulator holds.
            fn drain_rest(&mut self, shards: &mut [&mut Self]) -> Result<(), MergeError> {
                let mut forward: Vec<&mut DirectionSynopses> = shards.iter_mut().map(|s| &mut s.forward).collect();
                let mut result = self.forward.drain_all(&mut forward);
                let mut reverse: Vec<&mut DirectionSynopses> = shards.iter_mut().map(|s| &mut s.reverse).collect();
                keep_first_error(&mut result, self.reverse.drain_all(&mut reverse));
                $(keep_first_error(&mut result, drain_all_opt(&mut self.$o, shards.iter_mut().map(|s| &mut s.$o)));)*
                result
            }
        }
    };
}

crate::with_synopses!(define_buffer);

/// Merges `b` into `a` when both exist (buffers of one run always have the same set).
fn merge_opt<S: Synopsis>(a: &mut Option<S>, b: &Option<S>) -> Result<(), MergeError> {
    if let (Some(a), Some(b)) = (a.as_mut(), b.as_ref()) {
        a.merge(b)?;
    }
    Ok(())
}

/// [`Synopsis::merge_all`] of the shards that have `S` into `a` (buffers of one run always
/// have the same set); settles `a` even when no shard has it, as the ordered merges' settle
/// would.
fn merge_all_opt<'a, S: Synopsis + 'a>(
    a: &mut Option<S>,
    others: impl Iterator<Item = &'a Option<S>>,
) -> Result<(), MergeError> {
    if let Some(a) = a.as_mut() {
        let shards: Vec<&S> = others.filter_map(Option::as_ref).collect();
        a.merge_all(&shards)?;
    }
    Ok(())
}

/// [`Synopsis::drain_all`] of the shards that have `S` into `a`; without `a` (never in one
/// run, whose buffers all have the same set) the shards are only reset.
fn drain_all_opt<'a, S: Synopsis + 'a>(
    a: &mut Option<S>,
    shards: impl Iterator<Item = &'a mut Option<S>>,
) -> Result<(), MergeError> {
    let mut shards: Vec<&mut S> = shards.filter_map(Option::as_mut).collect();
    match a.as_mut() {
        Some(a) => a.drain_all(&mut shards),
        None => {
            shards.iter_mut().for_each(|s| s.reset());
            Ok(())
        }
    }
}

/// Keeps the first error of several steps that must all run.
fn keep_first_error(first: &mut Result<(), MergeError>, next: Result<(), MergeError>) {
    if first.is_ok() {
        *first = next;
    }
}

impl EpochSynopses {
    /// The synopses of `d`.
    #[inline(always)]
    pub fn direction(&self, d: Direction) -> &DirectionSynopses {
        match d {
            Direction::Forward => &self.forward,
            Direction::Reverse => &self.reverse,
        }
    }

    /// True when a two-point synopsis is enabled: the only readers of a packet's flow hash
    /// and identity.
    pub fn measures_two_points(&self) -> bool {
        self.forward.any_enabled() || self.reverse.any_enabled()
    }

    /// The synopses of `d`, mutably.
    #[inline(always)]
    pub fn direction_mut(&mut self, d: Direction) -> &mut DirectionSynopses {
        match d {
            Direction::Forward => &mut self.forward,
            Direction::Reverse => &mut self.reverse,
        }
    }
}
