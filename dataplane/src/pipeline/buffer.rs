//! The epoch buffer of the runtime: every enabled synopsis of one worker for one epoch, both
//! directions, plus the fridge's per-epoch output.
//!
//! Two-point synopses (LDA, LDS, RDA, COLATE) are kept per direction: packets received on
//! port 0 (forward, client → server) update [`EpochSynopses::forward`], port 1 (reverse)
//! [`EpochSynopses::reverse`]; the control thread maps each direction to its configured segment.
//! The fridge is one per point and sees both directions (requests and responses); its
//! worker-lifetime slots are not here but in the worker's carry ([`FridgeCarry`]).
//!
//! Allocation happens in [`EpochSynopses::new`] only (and when the control thread takes an RDA
//! cache); updates, merges and resets keep the allocations.

use crate::epoch::EpochBuffer;
use crate::synopsis::colate::{Colate, ColateConfig};
use crate::synopsis::fridge::{FridgeCarry, FridgeConfig, FridgeSynopsis};
use crate::synopsis::lda::{Lda, LdaConfig};
use crate::synopsis::lds::{Lds, LdsConfig};
use crate::synopsis::rda::{Rda, RdaConfig};
use crate::synopsis::{ConfigError, MergeError, Synopsis, SynopsisKind};

/// Which synopses a worker runs, with their configurations (`None` = off).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SynopsisSet {
    /// Request → response delay distributions (one per point, both directions).
    pub fridge: Option<FridgeConfig>,
    /// Segment mean and std-dev with loss (per direction).
    pub lda: Option<LdaConfig>,
    /// Per-flow mean one-way delay (per direction).
    pub lds: Option<LdsConfig>,
    /// Exact mean despite loss and reordering (per direction).
    pub rda: Option<RdaConfig>,
    /// Per-flow latency without timestamps (per direction).
    pub colate: Option<ColateConfig>,
}

impl SynopsisSet {
    /// The enabled kinds, in kind order.
    pub fn kinds(&self) -> Vec<SynopsisKind> {
        let mut v = Vec::new();
        if self.fridge.is_some() {
            v.push(SynopsisKind::Fridge);
        }
        if self.lda.is_some() {
            v.push(SynopsisKind::Lda);
        }
        if self.lds.is_some() {
            v.push(SynopsisKind::Lds);
        }
        if self.rda.is_some() {
            v.push(SynopsisKind::Rda);
        }
        if self.colate.is_some() {
            v.push(SynopsisKind::Colate);
        }
        v
    }

    /// The worker-lifetime fridge state, if the fridge is on.
    pub fn new_fridge_carry(&self) -> Option<FridgeCarry> {
        self.fridge.as_ref().map(FridgeSynopsis::new_carry)
    }
}

pub use crate::direction::Direction;

/// The two-point synopses of one direction, for one epoch.
#[derive(Clone, Debug)]
pub struct DirectionSynopses {
    /// LDA, if on.
    pub lda: Option<Lda>,
    /// LDS, if on.
    pub lds: Option<Lds>,
    /// RDA, if on.
    pub rda: Option<Rda>,
    /// COLATE, if on.
    pub colate: Option<Colate>,
    /// Packets measured in this direction and epoch (all synopses saw them).
    pub measured: u64,
}

impl DirectionSynopses {
    fn new(set: &SynopsisSet) -> Result<Self, ConfigError> {
        Ok(Self {
            lda: set.lda.as_ref().map(Lda::new).transpose()?,
            lds: set.lds.as_ref().map(Lds::new).transpose()?,
            rda: set.rda.as_ref().map(Rda::new).transpose()?,
            colate: set.colate.as_ref().map(Colate::new).transpose()?,
            measured: 0,
        })
    }

    fn reset(&mut self) {
        if let Some(s) = &mut self.lda {
            s.reset();
        }
        if let Some(s) = &mut self.lds {
            s.reset();
        }
        if let Some(s) = &mut self.rda {
            s.reset();
        }
        if let Some(s) = &mut self.colate {
            s.reset();
        }
        self.measured = 0;
    }

    fn merge_from(&mut self, o: &Self) -> Result<(), MergeError> {
        merge_opt(&mut self.lda, &o.lda)?;
        merge_opt(&mut self.lds, &o.lds)?;
        merge_opt(&mut self.rda, &o.rda)?;
        merge_opt(&mut self.colate, &o.colate)?;
        self.measured = self.measured.wrapping_add(o.measured);
        Ok(())
    }
}

/// Merges `b` into `a` when both exist (buffers of one run always have the same set).
fn merge_opt<S: Synopsis>(a: &mut Option<S>, b: &Option<S>) -> Result<(), MergeError> {
    if let (Some(a), Some(b)) = (a.as_mut(), b.as_ref()) {
        a.merge(b)?;
    }
    Ok(())
}

/// One worker's synopses for one epoch: both directions and the fridge's output.
#[derive(Clone, Debug)]
pub struct EpochSynopses {
    /// Packets received on port 0.
    pub forward: DirectionSynopses,
    /// Packets received on port 1.
    pub reverse: DirectionSynopses,
    /// The fridge's per-epoch histograms (samples belong to the epoch of their response).
    pub fridge: Option<FridgeSynopsis>,
}

impl EpochSynopses {
    /// Zeroed synopses for `set` (validates every configuration). Allocates.
    pub fn new(set: &SynopsisSet) -> Result<Self, ConfigError> {
        Ok(Self {
            forward: DirectionSynopses::new(set)?,
            reverse: DirectionSynopses::new(set)?,
            fridge: set.fridge.as_ref().map(FridgeSynopsis::new).transpose()?,
        })
    }

    /// The synopses of `d`.
    #[inline(always)]
    pub fn direction(&self, d: Direction) -> &DirectionSynopses {
        match d {
            Direction::Forward => &self.forward,
            Direction::Reverse => &self.reverse,
        }
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

impl EpochBuffer for EpochSynopses {
    fn reset(&mut self) {
        self.forward.reset();
        self.reverse.reset();
        if let Some(f) = &mut self.fridge {
            f.reset();
        }
    }

    fn merge_from(&mut self, other: &Self) -> Result<(), MergeError> {
        self.forward.merge_from(&other.forward)?;
        self.reverse.merge_from(&other.reverse)?;
        merge_opt(&mut self.fridge, &other.fridge)
    }
}
