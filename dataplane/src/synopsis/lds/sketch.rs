//! The sketch state: R×W cells plus the epoch's flow log, with the per-packet update of paper
//! Fig. 5 (spec §4), exact shard merge, reset and the binary body encoding.
//!
//! Allocates only in [`Lds::new`] (and when decoding); `update` is a few hashes and R cell
//! updates, never allocating, locking or logging.

use super::addressing::{Addressing, RowParams, offset_from_low_bits};
use super::cell::{CELL_BYTES, Cell};
use super::config::LdsConfig;
use super::flows::FlowSet;
use super::flows::share::{FlowListJob, SharedLists};
use super::weights::WeightMatcher;
use crate::packet::FlowKey;
use crate::synopsis::codec::{DecodeError, Reader, Writer};
use crate::synopsis::{ConfigError, MergeError, Observation, Synopsis, SynopsisConfig};

/// Most rows [`Lds::locate`] handles (larger sketches update through [`Lds::update_raw`]).
pub const MAX_LOCATED_ROWS: usize = 8;

/// The cells one packet updates in a sketch, computed ahead of the update ([`Lds::locate`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LocatedCells {
    /// Row-major cell indices, the first `len` in use.
    cells: [u32; MAX_LOCATED_ROWS],
    len: u8,
    digest: u32,
}

impl LocatedCells {
    /// No cells.
    pub const EMPTY: Self = Self { cells: [0; MAX_LOCATED_ROWS], len: 0, digest: 0 };

    /// The cells' row-major indices.
    pub fn indices(&self) -> &[u32] {
        self.cells.get(..usize::from(self.len)).unwrap_or_default()
    }
}

/// A Lossy Difference Sketch of one point for one epoch.
#[derive(Clone, Debug)]
pub struct Lds {
    cfg: LdsConfig,
    addr: Addressing,
    weights: WeightMatcher,
    cells: Vec<Cell>,
    flows: FlowSet,
}

/// Equal configuration, cells and recorded flows (derived state is a function of the config).
impl PartialEq for Lds {
    fn eq(&self, other: &Self) -> bool {
        self.cfg == other.cfg && self.cells == other.cells && self.flows == other.flows
    }
}

impl Lds {
    /// The cells, row-major (row r occupies `r·W .. (r+1)·W`).
    pub fn cells(&self) -> &[Cell] {
        &self.cells
    }

    /// The cell at (`row`, `col`), if in range.
    pub fn cell(&self, row: usize, col: usize) -> Option<&Cell> {
        if col >= self.cfg.width as usize {
            return None;
        }
        self.cells.get(row * self.cfg.width as usize + col)
    }

    /// The flows this point recorded in this epoch.
    pub fn flows(&self) -> &FlowSet {
        &self.flows
    }

    /// The cells of `first` and `rest` into this sketch's (the first copied, the rest added),
    /// each shard's zeroed as it is read.
    fn drain_cells(&mut self, first: &mut Self, rest: &mut [&mut Self]) {
        for (a, b) in self.cells.iter_mut().zip(first.cells.iter_mut()) {
            *a = std::mem::take(b);
        }
        for s in rest.iter_mut() {
            for (a, b) in self.cells.iter_mut().zip(s.cells.iter_mut()) {
                a.merge(&std::mem::take(b));
            }
        }
    }

    /// The harvest's first step where the workers gather and encode the flow logs
    /// ([`super::flows::share`]): `self`, reset, drains the shards' cells as
    /// [`Synopsis::drain_all`] does and lends their flow lists to `job`. False, with nothing
    /// changed, where the lists are not for sharing ([`FlowSet::lend_lists`]): the caller then
    /// drains as before. An error (a shard of another configuration) changes nothing either.
    pub fn lend_flows(
        &mut self,
        shards: &mut [&mut Self],
        job: &mut FlowListJob,
    ) -> Result<bool, MergeError> {
        for s in shards.iter() {
            self.check_same_config(s)?;
        }
        let mut sets: Vec<&mut FlowSet> = shards.iter_mut().map(|s| &mut s.flows).collect();
        if !self.flows.lend_lists(&mut sets, job) {
            return Ok(false);
        }
        if let Some((first, rest)) = shards.split_first_mut() {
            self.drain_cells(first, rest);
        }
        Ok(true)
    }

    /// The last step of a shared gathering: takes the lists back from `job` (doing what no
    /// helper did) into this sketch's flow log, and clears the shards' logs. Nothing lent:
    /// nothing to do.
    pub fn take_back_flows(&mut self, shards: &mut [&mut Self], job: &mut FlowListJob) -> SharedLists {
        let mut sets: Vec<&mut FlowSet> = shards.iter_mut().map(|s| &mut s.flows).collect();
        self.flows.take_back_lists(&mut sets, job)
    }

    pub(crate) fn addressing(&self) -> &Addressing {
        &self.addr
    }

    /// The weight the configured policy gives `flow`.
    pub fn weight_of(&self, flow: &FlowKey) -> u32 {
        self.weights.weight_of(flow)
    }

    /// The base column h_r(f) of a flow's vLDA in `row` (for tests and diagnostics).
    pub fn base_column(&self, row: usize, flow_hash: u64) -> Option<u64> {
        self.addr.rows.get(row).map(|r| self.addr.base(r, flow_hash))
    }

    /// Folds in one packet given its flow hash, identity, timestamp and weight, without
    /// touching the flow log: what [`Synopsis::update`] does after evaluating the weight
    /// policy. For tests, benches and replays.
    #[inline]
    pub fn update_raw(&mut self, flow_hash: u64, identity: u64, ts_ns: u64, weight: u32) {
        let addr = &self.addr;
        let ph = addr.packet_hash(identity);
        let digest = Addressing::digest(ph);
        let shared = offset_from_low_bits(ph, addr.k);
        for row in &addr.rows {
            if !addr.sampled(row, identity) {
                continue;
            }
            let col = addr.column(addr.base(row, flow_hash), addr.offset(row, identity, shared));
            if let Some(c) = self.cells.get_mut(row.start + col as usize) {
                c.add(ts_ns, weight, digest);
            }
        }
    }

    /// The cells a packet updates (the same ones, in the same order, as
    /// [`Lds::update_raw`]), or `None` when the sketch has more than [`MAX_LOCATED_ROWS`]
    /// rows. A function of the configuration and the packet only: a worker computes it once per
    /// packet in its staging pass, prefetches [`Lds::cell_ptr`] of each, then applies it with
    /// [`Lds::update_located`] to any sketch of the same configuration.
    #[inline(always)]
    pub fn locate(&self, flow_hash: u64, identity: u64) -> Option<LocatedCells> {
        let mut out = LocatedCells::EMPTY;
        self.locate_into(flow_hash, identity, &mut out).then_some(out)
    }

    /// [`Lds::locate`] written into `out` in place (false, `out` unspecified: too many rows).
    /// The worker's staging pass uses this form: building the cells in a local and copying
    /// the struct into the staged burst read them back with wide loads over the narrow stores
    /// that had just written them, a store-forwarding stall on every packet.
    #[inline(always)]
    pub fn locate_into(&self, flow_hash: u64, identity: u64, out: &mut LocatedCells) -> bool {
        let addr = &self.addr;
        if addr.rows.len() > MAX_LOCATED_ROWS {
            return false;
        }
        let ph = addr.packet_hash(identity);
        let shared = offset_from_low_bits(ph, addr.k);
        out.digest = Addressing::digest(ph);
        // Counted in a local and stored once: `out` is in the staged burst, and the stores
        // into its cells could alias `out.len` for the compiler, which then reloaded it per row.
        let mut len = 0u8;
        for row in &addr.rows {
            if !addr.sampled(row, identity) {
                continue;
            }
            let col = addr.column(addr.base(row, flow_hash), addr.offset(row, identity, shared));
            if let Some(slot) = out.cells.get_mut(usize::from(len)) {
                // Below MAX_CELLS = 2^26 (validated), so it fits.
                *slot = (row.start + col as usize) as u32;
                len += 1;
            }
        }
        out.len = len;
        true
    }

    /// Address of cell `index` (row-major; a prefetch hint, never dereferenced here).
    #[inline(always)]
    pub fn cell_ptr(&self, index: u32) -> *const u8 {
        self.cells.as_ptr().wrapping_add(index as usize).cast()
    }

    /// The flow log's slot for `flow_hash` (a prefetch hint, never dereferenced here).
    #[inline(always)]
    pub fn flow_log_ptr(&self, flow_hash: u64) -> *const u8 {
        self.flows.slot_ptr(flow_hash)
    }

    /// [`Synopsis::update`] for a packet located with [`Lds::locate`] (on a sketch of the same
    /// configuration): the same result, without recomputing the packet's cells.
    #[inline]
    pub fn update_located(&mut self, at: &LocatedCells, obs: &Observation<'_>) {
        let weight = self.weight_for(obs.flow);
        // Read once: for the compiler the cell stores below could alias `at` and `obs`.
        let (ts_ns, digest) = (obs.ts_ns, at.digest);
        for &i in at.cells.get(..usize::from(at.len)).unwrap_or_default() {
            if let Some(c) = self.cells.get_mut(i as usize) {
                c.add(ts_ns, weight, digest);
            }
        }
        self.flows.record(obs.flow, obs.flow_hash, obs.encap);
    }

    #[inline(always)]
    fn weight_for(&self, flow: &FlowKey) -> u32 {
        if self.weights.is_uniform() { self.cfg.weights.default_weight } else { self.weights.weight_of(flow) }
    }

    /// The cells (row, column) a packet lands in: one per row that samples it.
    pub fn cells_of_packet(&self, flow_hash: u64, identity: u64) -> impl Iterator<Item = (usize, u64)> + '_ {
        let addr = &self.addr;
        let ph = addr.packet_hash(identity);
        let shared = offset_from_low_bits(ph, addr.k);
        addr.rows.iter().enumerate().filter(move |(_, row)| addr.sampled(row, identity)).map(
            move |(r, row): (usize, &RowParams)| {
                (r, addr.column(addr.base(row, flow_hash), addr.offset(row, identity, shared)))
            },
        )
    }

    /// Cells whose weighted count overflowed (never usable).
    pub fn overflowed_cells(&self) -> usize {
        self.cells.iter().filter(|c| c.overflowed()).count()
    }
}

impl Synopsis for Lds {
    type Config = LdsConfig;
    type Carry = ();
    /// 2 since `FlowKey::hash` hashes the key padded to 40 bytes: cells placed by the
    /// earlier flow hash (version 1) do not line up with this build's, so a peer refuses a
    /// body from a point of the other version instead of pairing it. 3 since each flow-log
    /// entry carries its encapsulation (5 more bytes, [`FlowSet::encode`]).
    const FORMAT_VERSION: u8 = 3;

    fn new(cfg: &LdsConfig) -> Result<Self, ConfigError> {
        cfg.validate()?;
        Ok(Self {
            addr: Addressing::new(cfg),
            weights: WeightMatcher::new(&cfg.weights),
            cells: vec![Cell::default(); cfg.cells() as usize],
            flows: FlowSet::new(cfg.flow_capacity),
            cfg: cfg.clone(),
        })
    }

    fn new_carry(_cfg: &LdsConfig) {}

    fn config(&self) -> &LdsConfig {
        &self.cfg
    }

    #[inline]
    fn update(&mut self, _carry: &mut (), obs: &Observation<'_>) {
        let weight = self.weight_for(obs.flow);
        self.update_raw(obs.flow_hash, obs.identity, obs.ts_ns, weight);
        self.flows.record(obs.flow, obs.flow_hash, obs.encap);
    }

    /// The packet's cells ([`Lds::locate_into`]); `None` when not located or when the sketch
    /// has more than [`MAX_LOCATED_ROWS`] rows.
    type Location = Option<LocatedCells>;

    /// Locates the cells and hints each, and the flow log's slot.
    #[inline(always)]
    fn locate(
        &self,
        _carry: &(),
        obs: &Observation<'_>,
        at: &mut Option<LocatedCells>,
        hint: &mut impl FnMut(*const u8),
    ) {
        let cells = at.insert(LocatedCells::EMPTY);
        if !self.locate_into(obs.flow_hash, obs.identity, cells) {
            *at = None;
            return;
        }
        for &i in cells.indices() {
            hint(self.cell_ptr(i));
        }
        hint(self.flow_log_ptr(obs.flow_hash));
    }

    #[inline(always)]
    fn apply(&mut self, carry: &mut (), at: &Option<LocatedCells>, obs: &Observation<'_>) {
        match at {
            Some(at) => self.update_located(at, obs),
            None => self.update(carry, obs),
        }
    }

    fn back_reserved(&mut self) {
        self.flows.back_reserved();
    }

    fn merge(&mut self, other: &Self) -> Result<(), MergeError> {
        self.check_same_config(other)?;
        for (a, b) in self.cells.iter_mut().zip(&other.cells) {
            a.merge(b);
        }
        self.flows.merge(&other.flows);
        Ok(())
    }

    fn reset(&mut self) {
        self.cells.fill(Cell::default());
        self.flows.clear();
    }

    /// One pass over each shard's cells, which reads, adds and zeroes them while their lines
    /// are in cache, the first shard's copied instead of added to zeros: the default zeroed the
    /// merged cells, added every shard and then zeroed every shard again (BENCHMARKS.md, W17).
    /// At a worker's rate nearly every cell is touched in an epoch, so unlike COLATE's counters
    /// there is no untouched part to skip. The flow logs are gathered ([`FlowSet::gather`]: the
    /// lists appended, no table probed); where they might not all fit, merged and cleared in
    /// turn instead, the first one copied where it is dense ([`FlowSet::take_from`]).
    fn drain_all(&mut self, shards: &mut [&mut Self]) -> Result<(), MergeError> {
        let Some((first, rest)) = self.drain_split(shards)? else { return Ok(()) };
        self.drain_cells(first, rest);
        let mut sets: Vec<&mut FlowSet> =
            std::iter::once(&mut first.flows).chain(rest.iter_mut().map(|s| &mut s.flows)).collect();
        if !self.flows.gather(&mut sets) {
            let Some((first, rest)) = sets.split_first_mut() else { return Ok(()) };
            self.flows.take_from(first);
            for s in rest.iter_mut() {
                self.flows.merge(s);
                s.clear();
            }
        }
        Ok(())
    }

    /// Body: R·W cells row-major, 16 bytes each (s u64, n u32, d u32, little-endian), then the
    /// flow log ([`FlowSet::encode`]). The shape comes from the fingerprinted config.
    fn encode_body(&self, w: &mut Writer<'_>) {
        w.reserve(self.cells.len() * CELL_BYTES + 12 + self.flows.len() * 51);
        for c in &self.cells {
            w.u64(c.ts_sum_ns);
            w.u32(c.count);
            w.u32(c.digest);
        }
        self.flows.encode(w);
    }

    fn decode_body(cfg: &LdsConfig, r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        cfg.validate().map_err(|e| DecodeError::Invalid { field: "lds.config", reason: e.to_string() })?;
        // The cells must all be present before the R·W array is allocated.
        r.require(cfg.cells() as usize * CELL_BYTES)?;
        let mut cells = Vec::with_capacity(cfg.cells() as usize);
        for _ in 0..cfg.cells() {
            cells.push(Cell { ts_sum_ns: r.u64()?, count: r.u32()?, digest: r.u32()? });
        }
        let flows = FlowSet::decode(cfg.flow_capacity, r)?;
        Ok(Self {
            addr: Addressing::new(cfg),
            weights: WeightMatcher::new(&cfg.weights),
            cells,
            flows,
            cfg: cfg.clone(),
        })
    }
}
