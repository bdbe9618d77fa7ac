//! The workers' share of the control thread's harvest, seen from the epoch buffers (issue 24):
//! RDA's filing ([`crate::synopsis::rda::share`]) and LDS's flow lists
//! ([`crate::synopsis::lds::flows::share`]).
//!
//! An accumulator built with [`Boards`] ([`EpochSynopses::with_worker_filing`]) lends each
//! direction's RDA logs and LDS flow lists to jobs of its own and posts the jobs on the boards
//! ([`EpochBuffer::lend`]); the workers, whose pipelines found the boards in their own buffers
//! ([`EpochSynopses::filing_board`]), do one chunk per call on idle polls (RDA's first); the
//! harvest takes the jobs back once every chunk is taken or it has waited long enough
//! ([`EpochBuffer::take_back`]), and its drain then leaves RDA and LDS as they are.
//!
//! A departure from ARCHITECTURE.md's "control never sees a packet ... workers only update their
//! own shard": a worker here reads other workers' closed logs and flow lists (never their open
//! ones) and writes into the accumulator's run, list and encoding through disjoint claims
//! ([`crate::claim`]); that is what moves the control thread's per-packet work onto the workers.

use std::sync::Arc;

use super::buffer::{Direction, EpochSynopses};
use crate::synopsis::MergeError;
use crate::synopsis::Synopsis;
use crate::synopsis::board::{Board, Help};
use crate::synopsis::lds::Lds;
use crate::synopsis::lds::flows::share::{FlowListJob, SharedLists};
use crate::synopsis::rda::Rda;
use crate::synopsis::rda::log::TOP_BUCKETS;
use crate::synopsis::rda::share::{FilingJob, Shared};
use crate::synopsis::rda::sorted::Sorter;

/// The boards the workers help at: RDA's filings and LDS's flow lists, one job of each per
/// direction of an accumulator. Shared by every buffer of a run ([`EpochSynopses::with_worker_filing`]).
#[derive(Debug, Default)]
pub struct Boards {
    rda: Board<FilingJob>,
    lds: Board<FlowListJob>,
}

/// An accumulator's jobs (one per direction) and the board it posts them on.
#[derive(Debug)]
pub struct WorkerFiling {
    board: Arc<Boards>,
    jobs: [Arc<FilingJob>; 2],
    /// Which directions' RDA logs are lent.
    lent: [bool; 2],
    lists: [Arc<FlowListJob>; 2],
    /// Which directions' LDS flow lists are lent.
    lists_lent: [bool; 2],
    counts: FilingCounts,
}

impl WorkerFiling {
    fn new(board: Arc<Boards>) -> Self {
        Self {
            board,
            jobs: [Arc::default(), Arc::default()],
            lent: [false; 2],
            lists: [Arc::default(), Arc::default()],
            lists_lent: [false; 2],
            counts: FilingCounts::default(),
        }
    }

    fn any_lent(&self) -> bool {
        self.lent.iter().chain(&self.lists_lent).any(|&l| l)
    }
}

impl Drop for WorkerFiling {
    /// Takes this accumulator's tickets off the board and waits for the chunks in progress, so
    /// that no worker files for a job nobody will take back, or frees it (its logs and run, tens
    /// of MiB) on its own thread.
    fn drop(&mut self) {
        for job in &self.jobs {
            self.board.rda.withdraw_all(job);
        }
        for job in &self.lists {
            self.board.lds.withdraw_all(job);
        }
    }
}

impl Clone for WorkerFiling {
    /// The same board, jobs of its own: two accumulators never share a job.
    fn clone(&self) -> Self {
        Self::new(self.board.clone())
    }
}

/// Counts of the shared filings an accumulator took back.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FilingCounts {
    /// Directions whose logs were lent and taken back.
    pub lent: u64,
    /// Chunks the workers filed.
    pub by_workers: u64,
    /// Chunks the control thread filed (nobody took them in time, a worker had no room, or
    /// they held more repeats than a chunk records).
    pub by_control: u64,
    /// Pairs moved to close the holes repeats left.
    pub moved: u64,
    /// Directions whose LDS flow lists were lent and taken back.
    pub lists_lent: u64,
    /// Chunks of flow lists the workers gathered and encoded.
    pub list_chunks_by_workers: u64,
    /// Chunks of flow lists the control thread did (nobody took them in time).
    pub list_chunks_by_control: u64,
}

impl FilingCounts {
    /// Adds another accumulator's counts.
    pub fn add_from(&mut self, o: &FilingCounts) {
        self.lent += o.lent;
        self.by_workers += o.by_workers;
        self.by_control += o.by_control;
        self.moved += o.moved;
        self.lists_lent += o.lists_lent;
        self.list_chunks_by_workers += o.list_chunks_by_workers;
        self.list_chunks_by_control += o.list_chunks_by_control;
    }

    fn add_lists(&mut self, s: SharedLists) {
        self.lists_lent += 1;
        self.list_chunks_by_workers += s.by_helpers as u64;
        self.list_chunks_by_control += s.by_control as u64;
    }

    fn add(&mut self, s: Shared) {
        self.lent += 1;
        self.by_workers += s.by_helpers as u64;
        self.by_control += s.by_control as u64;
        self.moved += s.moved as u64;
    }
}

impl EpochSynopses {
    /// This buffer with boards on which, as an accumulator, it posts its RDA filing and its LDS
    /// flow lists for the workers ([`super::filing`]); its clones (the workers' buffers too)
    /// share the boards. Without RDA and LDS it stays as it is.
    pub fn with_worker_filing(mut self, board: Arc<Boards>) -> Self {
        let shared = |d: &super::buffer::DirectionSynopses| d.rda.is_some() || d.lds.is_some();
        if shared(&self.forward) || shared(&self.reverse) {
            self.filing = Some(WorkerFiling::new(board));
        }
        self
    }

    /// The boards this buffer's accumulator posts on, for a worker to help at.
    pub fn filing_board(&self) -> Option<&Arc<Boards>> {
        self.filing.as_ref().map(|f| &f.board)
    }

    /// [`crate::epoch::EpochBuffer::lend`]: resets the accumulator's RDA and LDS and lends each
    /// direction's RDA logs and LDS flow lists to their jobs (LDS's cells drained here); true
    /// when some were lent (tickets posted, one per shard).
    pub(super) fn lend_filing(&mut self, shards: &mut [&mut Self]) -> Result<bool, MergeError> {
        if self.filing.as_ref().is_none_or(WorkerFiling::any_lent) {
            return Ok(false);
        }
        // Every shard's configuration first: an error must leave nothing lent.
        for d in DIRECTIONS {
            let (acc, theirs) = (self.direction(d), shards.iter().map(|s| s.direction(d)));
            check_shards(&acc.rda, theirs.clone().map(|s| &s.rda))?;
            check_shards(&acc.lds, theirs.map(|s| &s.lds))?;
        }
        let Some(filing) = &mut self.filing else { return Ok(false) };
        for (d, (acc, job)) in
            [&mut self.forward.rda, &mut self.reverse.rda].into_iter().zip(&mut filing.jobs).enumerate()
        {
            let (Some(acc), Some(job)) = (acc.as_mut(), Arc::get_mut(job)) else { continue };
            let mut rdas = shard_rdas(shards, DIRECTIONS[d]);
            Synopsis::reset(acc);
            filing.lent[d] = acc.lend_logs(&mut rdas, job)?;
        }
        for (d, (acc, job)) in
            [&mut self.forward.lds, &mut self.reverse.lds].into_iter().zip(&mut filing.lists).enumerate()
        {
            let (Some(acc), Some(job)) = (acc.as_mut(), Arc::get_mut(job)) else { continue };
            let mut ldss = shard_ldss(shards, DIRECTIONS[d]);
            Synopsis::reset(acc);
            filing.lists_lent[d] = acc.lend_flows(&mut ldss, job)?;
        }
        for (job, &lent) in filing.jobs.iter().zip(&filing.lent) {
            if lent {
                filing.board.rda.post(job, shards.len());
            }
        }
        for (job, &lent) in filing.lists.iter().zip(&filing.lists_lent) {
            if lent {
                filing.board.lds.post(job, shards.len());
            }
        }
        Ok(filing.any_lent())
    }

    /// True when every chunk of the lent jobs is taken (or none is lent).
    pub(super) fn filing_taken(&self) -> bool {
        self.filing.as_ref().is_none_or(|f| {
            f.jobs.iter().zip(&f.lent).all(|(j, &l)| !l || j.is_taken())
                && f.lists.iter().zip(&f.lists_lent).all(|(j, &l)| !l || j.is_taken())
        })
    }

    /// [`crate::epoch::EpochBuffer::take_back`]: withdraws the tickets, waits for the workers
    /// in the middle of a chunk, and takes each lent direction's logs back (filing what is left).
    /// Nothing lent: nothing to do.
    pub(super) fn take_back_filing(&mut self, shards: &mut [&mut Self]) {
        let Some(filing) = &mut self.filing else { return };
        if !filing.any_lent() {
            return;
        }
        for (d, (acc, job)) in
            [&mut self.forward.rda, &mut self.reverse.rda].into_iter().zip(&mut filing.jobs).enumerate()
        {
            if !filing.lent[d] {
                continue;
            }
            // Waits only for the chunks workers are filing now.
            filing.board.rda.withdraw_all(job);
            let (Some(acc), Some(job)) = (acc.as_mut(), Arc::get_mut(job)) else { continue };
            let mut rdas = shard_rdas(shards, DIRECTIONS[d]);
            let shared = acc.take_back_logs(&mut rdas, job);
            filing.counts.add(shared);
        }
        for (d, (acc, job)) in
            [&mut self.forward.lds, &mut self.reverse.lds].into_iter().zip(&mut filing.lists).enumerate()
        {
            if !filing.lists_lent[d] {
                continue;
            }
            filing.board.lds.withdraw_all(job);
            let (Some(acc), Some(job)) = (acc.as_mut(), Arc::get_mut(job)) else { continue };
            let mut ldss = shard_ldss(shards, DIRECTIONS[d]);
            let shared = acc.take_back_flows(&mut ldss, job);
            filing.counts.add_lists(shared);
        }
    }

    /// Takes out the accumulator's RDA of each direction whose filing was taken back, for the
    /// drain to leave it alone; [`Self::restore_filed`] puts them back.
    pub(super) fn take_filed(&mut self) -> Filed {
        let Some(filing) = &mut self.filing else { return Filed::default() };
        let lent = std::mem::take(&mut filing.lent);
        let lists = std::mem::take(&mut filing.lists_lent);
        Filed {
            rda: [
                if lent[0] { self.forward.rda.take() } else { None },
                if lent[1] { self.reverse.rda.take() } else { None },
            ],
            lds: [
                if lists[0] { self.forward.lds.take() } else { None },
                if lists[1] { self.reverse.lds.take() } else { None },
            ],
        }
    }

    /// Puts back what [`Self::take_filed`] took out.
    pub(super) fn restore_filed(&mut self, filed: Filed) {
        let Filed { rda: [f, r], lds: [lf, lr] } = filed;
        if f.is_some() {
            self.forward.rda = f;
        }
        if r.is_some() {
            self.reverse.rda = r;
        }
        if lf.is_some() {
            self.forward.lds = lf;
        }
        if lr.is_some() {
            self.reverse.lds = lr;
        }
    }

    /// What the shared filings of this accumulator did so far.
    pub fn filing_counts(&self) -> FilingCounts {
        self.filing.as_ref().map(|f| f.counts).unwrap_or_default()
    }
}

/// The directions in the order of [`WorkerFiling`]'s jobs.
const DIRECTIONS: [Direction; 2] = [Direction::Forward, Direction::Reverse];

/// What the drain leaves alone: the accumulator's synopses whose shared work was taken back.
#[derive(Debug, Default)]
pub(super) struct Filed {
    rda: [Option<Rda>; 2],
    lds: [Option<Lds>; 2],
}

/// Checks every shard's `S` against the accumulator's (nothing to check without one).
fn check_shards<'a, S: Synopsis + 'a>(
    acc: &Option<S>,
    shards: impl Iterator<Item = &'a Option<S>>,
) -> Result<(), MergeError> {
    let Some(acc) = acc else { return Ok(()) };
    shards.flatten().try_for_each(|s| acc.check_same_config(s))
}

/// The shards' LDS of direction `d`, in shard order.
fn shard_ldss<'a>(shards: &'a mut [&mut EpochSynopses], d: Direction) -> Vec<&'a mut Lds> {
    shards.iter_mut().filter_map(|s| s.direction_mut(d).lds.as_mut()).collect()
}

/// The shards' RDA of direction `d`, in shard order.
fn shard_rdas<'a>(shards: &'a mut [&mut EpochSynopses], d: Direction) -> Vec<&'a mut Rda> {
    shards.iter_mut().filter_map(|s| s.direction_mut(d).rda.as_mut()).collect()
}

/// A worker's side of the shared filing: the board and a sorter with room for any group of
/// its epochs, made on the worker's own core before its loop starts.
#[derive(Debug)]
pub struct FilingHelper {
    board: Arc<Boards>,
    sorter: Sorter,
    /// Chunks it left to the control thread for want of room (those it filed, the
    /// accumulators count: [`FilingCounts::by_workers`]).
    pub declined: u64,
}

impl FilingHelper {
    /// A helper for the board `buffer`'s accumulators post on (`None` without one). The sorter
    /// has room for groups of twice the even share of the larger RDA cache: a group holds its
    /// share within a few per cent at any epoch big enough to matter, and a larger one is
    /// declined, not grown.
    pub fn for_buffer(buffer: &EpochSynopses) -> Option<Self> {
        let board = buffer.filing_board()?.clone();
        let capacity = [&buffer.forward.rda, &buffer.reverse.rda]
            .into_iter()
            .flatten()
            .map(|r| r.config().cache_capacity)
            .max()
            .unwrap_or(0);
        let room = usize::try_from(capacity / TOP_BUCKETS as u64 * 2).unwrap_or(usize::MAX).max(64);
        Some(Self { board, sorter: Sorter::with_room(room), declined: 0 })
    }

    /// Does at most one chunk of an open job, RDA's filing first, then LDS's flow lists; true
    /// when it did. On idle polls: never allocates, locks or blocks.
    #[inline]
    pub fn help(&mut self) -> bool {
        match self.board.rda.help(&mut self.sorter) {
            Some(Help::Filed) => return true,
            Some(Help::Declined) => self.declined += 1,
            Some(Help::NoneLeft) | None => {}
        }
        self.board.lds.help(&mut ()) == Some(Help::Filed)
    }
}
