//! The receiver-side estimator (paper Fig. 6, spec §6): per-flow mean one-way delay from the
//! sender's and the receiver's sketches, plus the flow-size and loss bounds the cells give
//! (spec §6.6) and an epoch summary.
//!
//! A cell is usable when both points saw the same weighted count (> 0, not overflowed) and the
//! same digest. Among a flow's usable cells the selection rule ranks them by a key (the
//! paper's n/p, a noise-aware upper bound, or highest-rate rows first), keeps every cell within
//! (1 + α) of the minimum key and returns Σ Δs / Σ n over them (raw, unscaled sums, spec P9).
//! Pure functions over decoded sketches: no I/O, never NaN.

use super::config::{EstimatorConfig, MAX_ROWS, SelectionRule};
use super::flows::FlowSet;
use super::sketch::Lds;
use crate::packet::FlowKey;
use crate::synopsis::estimate::{Estimate, Measured, NoEstimate};
use crate::synopsis::{ConfigError, Synopsis, SynopsisConfig, SynopsisKind};
use serde::Serialize;

/// How a flow's R·k cells fared.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CellUse {
    /// Cells in the flow's vLDAs (R·k).
    pub total: u32,
    /// Cells with equal non-zero counts and digests at both points.
    pub usable: u32,
    /// Usable cells the selection rule kept.
    pub selected: u32,
    /// Cells empty at both points (the row's sampling passed over the flow's packets).
    pub empty: u32,
    /// Cells where the sender counted more packets than the receiver: a loss, the flow's own
    /// or a colliding flow's.
    pub lossy: u32,
    /// Cells with equal counts but different digests, or more packets at the receiver: a
    /// colliding flow's packets that only one point counted (or a swapped packet).
    pub mismatched: u32,
    /// Cells whose count or timestamp sum overflowed.
    pub overflowed: u32,
    /// Offsets whose usable cell another row repeats exactly (only the flow's own packets;
    /// [`crate::synopsis::lds::SelectionRule::RowAgreement`]); the mean came from these when
    /// non-zero under that rule.
    pub confirmed: u32,
    /// Why the flow has no mean, when it has none (`None` when it has one).
    pub no_estimate_reason: Option<NoFlowEstimate>,
}

/// Flows without a mean in an epoch, by reason.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct NoEstimateCounts {
    /// [`NoFlowEstimate::TooFewPackets`].
    pub too_few_packets: u64,
    /// [`NoFlowEstimate::LossInEveryCell`].
    pub loss_in_every_cell: u64,
    /// [`NoFlowEstimate::Collision`].
    pub collision: u64,
    /// [`NoFlowEstimate::Overflow`].
    pub overflow: u64,
}

/// Why LDS has no mean for a flow that one of the points saw, from its cells.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NoFlowEstimate {
    /// No cell holds a packet at either point: the flow had too few packets for the rows'
    /// sampling rates to keep one (or none in this window).
    TooFewPackets,
    /// No cell is clean and most spoiled cells lost packets between the points (the flow's or a
    /// colliding flow's loss): more sampling rows or cells, or a longer vLDA, leave clean cells.
    LossInEveryCell,
    /// Most spoiled cells hold packets counted at one point only (equal counts with different
    /// digests, or more at the receiver): a colliding flow's, or a swapped packet.
    Collision,
    /// Most spoiled cells overflowed.
    Overflow,
}

impl CellUse {
    /// The reason for a flow without an estimate, from the cell tallies: no packet at all, else
    /// what spoiled most of its non-empty cells (ties: loss, then collision, then overflow).
    fn reason(&self) -> NoFlowEstimate {
        if self.empty >= self.total {
            NoFlowEstimate::TooFewPackets
        } else if self.lossy >= self.mismatched && self.lossy >= self.overflowed {
            NoFlowEstimate::LossInEveryCell
        } else if self.mismatched >= self.overflowed {
            NoFlowEstimate::Collision
        } else {
            NoFlowEstimate::Overflow
        }
    }
}

/// The estimate for one flow.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FlowEstimate {
    /// The flow.
    pub flow: FlowKey,
    /// Mean one-way delay in ns (receiver clock minus sender clock; may be negative if the
    /// clocks are offset, spec P19). `samples` is the weighted packet count in the selected
    /// cells of the best-covered row (the flow's own packets plus colliders'); no interval:
    /// the paper gives none.
    pub mean_delay_ns: Measured<Estimate>,
    /// Count-Min estimate of the flow's packets at the sender (spec §6.6): per row Σ n over the
    /// window, scaled by 1/p and divided by the flow's weight; minimum over the rows of the
    /// highest sampling rate. Where rows sample everything, also at most the sum over the
    /// offsets of the fewest packets any such row holds at each (another flow's packet then
    /// counts only where it sits in every row). Never below the truth when those rows sample
    /// everything.
    pub packets: u64,
    /// Upper bound on the flow's lost packets: per row Σ (n_sender − n_receiver) over the
    /// window (scaled and weight-divided like `packets`), minimum over the same rows.
    /// Colliders' losses are included, hence a bound.
    pub lost_packets_bound: u64,
    /// Cell diagnostics.
    pub cells: CellUse,
}

/// Flows whose cells [`Estimator::all`] loads ahead of estimating them.
const WARM_BATCH: usize = 16;

/// One usable cell of a flow.
#[derive(Clone, Copy, Debug)]
struct Candidate {
    row: u16,
    /// The cell's offset inside the flow's vLDA.
    offset: u16,
    count: u32,
    /// The sender's digest (equal at the receiver: the cell is usable).
    digest: u32,
    delta_ns: i64,
    rate: f64,
    /// The selection key (computed once).
    key: f64,
}

/// The estimator over the sketches of one segment's two points for one epoch.
#[derive(Clone, Copy, Debug)]
pub struct Estimator<'a> {
    sender: &'a Lds,
    receiver: &'a Lds,
    opts: EstimatorConfig,
}

impl<'a> Estimator<'a> {
    /// Pairs the sender's and the receiver's sketch; they must share one configuration.
    pub fn new(sender: &'a Lds, receiver: &'a Lds) -> Measured<Self> {
        if sender.config() != receiver.config() {
            return Err(NoEstimate::ConfigMismatch);
        }
        Ok(Self { sender, receiver, opts: sender.config().estimator })
    }

    /// The same pair with other selection settings (for A/B comparisons on one epoch).
    pub fn with_options(mut self, opts: EstimatorConfig) -> Result<Self, ConfigError> {
        let mut cfg = self.sender.config().clone();
        cfg.estimator = opts;
        cfg.validate()?;
        self.opts = opts;
        Ok(self)
    }

    /// The selection settings in use.
    pub fn options(&self) -> &EstimatorConfig {
        &self.opts
    }

    /// The estimate for one flow, given the flow hash the packet layer computes for it
    /// (`key.hash(identity_seed)`).
    pub fn flow(&self, key: &FlowKey, flow_hash: u64) -> FlowEstimate {
        let mut scratch = Vec::with_capacity(self.max_candidates());
        self.flow_with(key, flow_hash, &mut scratch)
    }

    /// Estimates for every flow of `flows` (usually the receiver's flow log), in its order.
    ///
    /// Memory-latency bound (each flow reads R random windows in each sketch), so flows go in
    /// batches: first one load from every window of the batch, all independent so the misses
    /// overlap, then the estimates from warm cache lines.
    pub fn all(&self, flows: &FlowSet) -> Vec<FlowEstimate> {
        let mut scratch = Vec::with_capacity(self.max_candidates());
        let mut out = Vec::with_capacity(flows.len());
        for batch in flows.entries().chunks(WARM_BATCH) {
            self.warm(batch.iter().map(|e| e.flow_hash));
            out.extend(batch.iter().map(|e| self.flow_with(&e.key, e.flow_hash, &mut scratch)));
        }
        out
    }

    /// Loads the first and last cell of every window of these flows at both points.
    fn warm(&self, hashes: impl Iterator<Item = u64>) {
        let addr = self.sender.addressing();
        let (s_cells, r_cells) = (self.sender.cells(), self.receiver.cells());
        let mut touched = 0u32;
        for h in hashes {
            for row in &addr.rows {
                let base = addr.base(row, h);
                // A window of k 16-byte cells spans up to ⌈k/4⌉ + 1 cache lines: its first and
                // last cells cover the common k ≤ 4 (and most of k = 5).
                let last = addr.column(base, addr.k - 1);
                let cols = [base, last];
                for col in &cols[..if last == base { 1 } else { 2 }] {
                    let idx = row.start + *col as usize;
                    touched ^=
                        s_cells.get(idx).map_or(0, |c| c.count) ^ r_cells.get(idx).map_or(0, |c| c.count);
                }
            }
        }
        std::hint::black_box(touched);
    }

    fn max_candidates(&self) -> usize {
        let c = self.sender.config();
        (c.rows * c.vlda_len) as usize
    }

    fn flow_with(&self, key: &FlowKey, flow_hash: u64, cand: &mut Vec<Candidate>) -> FlowEstimate {
        let addr = self.sender.addressing();
        let (s_cells, r_cells) = (self.sender.cells(), self.receiver.cells());
        let weight = f64::from(self.sender.weight_of(key));
        let top_rate = addr.rows.iter().map(|r| r.rate).fold(0.0, f64::max);
        cand.clear();
        let mut cells = CellUse { total: (addr.rows.len() as u64 * addr.k) as u32, ..CellUse::default() };
        let mut any_packet = false;
        let mut packets = f64::INFINITY;
        let mut lost = f64::INFINITY;
        let mut bases = [0u64; MAX_ROWS as usize];
        for (r, row) in addr.rows.iter().enumerate() {
            let base = addr.base(row, flow_hash);
            if let Some(b) = bases.get_mut(r) {
                *b = base;
            }
            let mut row_count = 0u64;
            let mut row_lost = 0i64;
            for o in 0..addr.k {
                let idx = row.start + addr.column(base, o) as usize;
                let (Some(a), Some(b)) = (s_cells.get(idx), r_cells.get(idx)) else { continue };
                any_packet |= a.count != 0 || b.count != 0;
                row_count += u64::from(a.count);
                row_lost += i64::from(a.count) - i64::from(b.count);
                // The same precedence as the epoch's cell census (`summary`).
                if a.count == 0 && b.count == 0 {
                    cells.empty += 1;
                } else if a.overflowed() || b.overflowed() {
                    cells.overflowed += 1;
                } else if a.count > b.count {
                    cells.lossy += 1;
                } else if a.count < b.count || a.digest != b.digest {
                    cells.mismatched += 1;
                }
                if a.count == b.count && a.digest == b.digest && a.count != 0 && !a.overflowed() {
                    cand.push(Candidate {
                        row: r as u16,
                        offset: o as u16,
                        count: a.count,
                        digest: a.digest,
                        delta_ns: b.ts_sum_ns.wrapping_sub(a.ts_sum_ns) as i64,
                        rate: row.rate,
                        key: self.key(a.count, row.rate),
                    });
                }
            }
            if row.rate >= top_rate {
                packets = packets.min(row_count as f64 / row.rate / weight);
                lost = lost.min(row_lost.max(0) as f64 / row.rate / weight);
            }
        }
        cells.usable = cand.len() as u32;
        // The fewest sender packets any row that samples everything holds at offset `o`: every
        // one of the flow's own packets at `o` sits there in each such row.
        let held_at = |o: u16| {
            addr.rows
                .iter()
                .zip(&bases)
                .filter(|(row, _)| row.rate >= 1.0)
                .map(|(row, &base)| {
                    let idx = row.start + addr.column(base, u64::from(o)) as usize;
                    s_cells.get(idx).map_or(0, |c| if c.overflowed() { u32::MAX } else { c.count })
                })
                .min()
                .unwrap_or(u32::MAX)
        };
        // Each row's window also counts the packets other flows put in it, the more so the longer
        // the window; per offset, another flow's packets must sit in every full-rate row to be
        // counted, so the sum of the per-offset minima is the tighter bound on the flow's packets
        // (`packets` is also COLATE's P for the flow).
        let held: Option<u64> =
            (0..addr.k as u16).map(|o| Some(held_at(o)).filter(|&h| h != u32::MAX).map(u64::from)).sum();
        if let Some(h) = held {
            packets = packets.min(h as f64 / weight);
        }
        let mean_delay_ns = if cand.is_empty() {
            Err(if any_packet { NoEstimate::NoUsableCells } else { NoEstimate::NoPackets })
        } else {
            self.select_and_average(cand, &mut cells, held_at)
        };
        if mean_delay_ns.is_err() {
            cells.no_estimate_reason = Some(cells.reason());
        }
        FlowEstimate {
            flow: *key,
            mean_delay_ns,
            packets: finite_round(packets),
            lost_packets_bound: finite_round(lost),
            cells,
        }
    }

    /// The selection key of a usable cell with `count` packets in a row sampling at `rate`.
    #[inline]
    fn key(&self, count: u32, rate: f64) -> f64 {
        let n = f64::from(count);
        match self.opts.selection {
            SelectionRule::PaperScaled | SelectionRule::HighestRateFirst | SelectionRule::RowAgreement => {
                n / rate
            }
            SelectionRule::Ucb { c } => (n + c * (n * (1.0 - rate)).sqrt()) / rate,
        }
    }

    /// The offsets whose usable cell another row repeats exactly: their summed delay and count
    /// (one copy per offset) and how many there are. Candidates come in row order, so a cell is
    /// compared only with those of earlier rows.
    ///
    /// Two rows can repeat a cell that holds none of the flow's packets: another flow whose
    /// window sits at the same shift in both rows (probability about C(R,2)·N·(2k − 1)/W² per
    /// flow, `coverage::FALSE_CONFIRMATION`), and then all its packets at the shared offsets are
    /// taken for the flow's own. Its packets are not in the other rows' windows, so an offset
    /// is confirmed only when every row that samples everything holds at least the cell's count
    /// there (`held_at`): the flow's own packets always pass.
    fn confirmed(cand: &[Candidate], held_at: &impl Fn(u16) -> u32) -> (i128, u64, u32) {
        let same = |a: &Candidate, b: &Candidate| {
            a.row != b.row
                && a.offset == b.offset
                && a.count == b.count
                && a.digest == b.digest
                && a.delta_ns == b.delta_ns
        };
        // One bit per offset already counted (k ≤ MAX_VLDA_LEN = 1024).
        let mut counted = [0u64; (super::config::MAX_VLDA_LEN as usize).div_ceil(64)];
        let (mut delta, mut count, mut offsets) = (0i128, 0u64, 0u32);
        for (i, c) in cand.iter().enumerate() {
            let (word, bit) = (usize::from(c.offset) / 64, 1u64 << (c.offset % 64));
            let Some(w) = counted.get_mut(word) else { continue };
            if *w & bit == 0 && cand[..i].iter().any(|d| same(d, c)) && c.count <= held_at(c.offset) {
                *w |= bit;
                delta += i128::from(c.delta_ns);
                count += u64::from(c.count);
                offsets += 1;
            }
        }
        (delta, count, offsets)
    }

    /// Fig. 6 lines 14–20 with the configured key and α test.
    fn select_and_average(
        &self,
        cand: &[Candidate],
        cells: &mut CellUse,
        held_at: impl Fn(u16) -> u32,
    ) -> Measured<Estimate> {
        let agreement = self.opts.selection == SelectionRule::RowAgreement;
        if agreement {
            let (delta, count, offsets) = Self::confirmed(cand, &held_at);
            cells.confirmed = offsets;
            if count > 0 {
                cells.selected = offsets;
                return Estimate::new(delta as f64 / count as f64, count);
            }
        }
        let top_rate = match self.opts.selection {
            SelectionRule::HighestRateFirst => cand.iter().map(|c| c.rate).fold(0.0, f64::max),
            _ => 0.0,
        };
        // Row agreement's fallback leaves out the cells that cannot hold only the flow's own
        // packets (more than some full-rate row holds at that offset): in the wide windows it
        // sizes, the fewest-packet cells are otherwise often another flow's alone.
        let competes = |c: &Candidate| c.rate >= top_rate && (!agreement || c.count <= held_at(c.offset));
        let key_min = cand.iter().filter(|c| competes(c)).map(|c| c.key).fold(f64::INFINITY, f64::min);
        let limit = (1.0 + self.opts.alpha) * key_min;
        let mut delta_sum: i128 = 0;
        let mut count_sum: u64 = 0;
        // Candidates come in row order: track the selected packets of the current row and the
        // best row so far (the estimate's sample size).
        let (mut row, mut row_count, mut samples) = (u16::MAX, 0u64, 0u64);
        for c in cand.iter().filter(|c| competes(c)) {
            let k = c.key;
            let keep = if self.opts.strict_alpha { k < limit || k == key_min } else { k <= limit };
            if keep {
                delta_sum += i128::from(c.delta_ns);
                count_sum += u64::from(c.count);
                if c.row != row {
                    (row, row_count) = (c.row, 0);
                }
                row_count += u64::from(c.count);
                samples = samples.max(row_count);
                cells.selected += 1;
            }
        }
        if count_sum == 0 {
            return Err(NoEstimate::NoUsableCells);
        }
        Estimate::new(delta_sum as f64 / count_sum as f64, samples)
    }

    /// Epoch-level diagnostics over the whole sketch and the listed flows.
    pub fn summary(&self, flows: &FlowSet, estimates: &[FlowEstimate]) -> LdsSummary {
        let addr = self.sender.addressing();
        let (s_cells, r_cells) = (self.sender.cells(), self.receiver.cells());
        let mut cells = CellCensus { total: s_cells.len() as u64, ..CellCensus::default() };
        for (a, b) in s_cells.iter().zip(r_cells) {
            if a.count == 0 && b.count == 0 {
                continue;
            }
            cells.nonempty += 1;
            if a.overflowed() || b.overflowed() {
                cells.overflowed += 1;
            } else if a.count != b.count {
                cells.count_mismatch += 1;
            } else if a.digest != b.digest {
                cells.digest_mismatch += 1;
            } else {
                cells.usable += 1;
            }
        }
        // Segment totals and the LDA-style aggregate from the first row of the highest rate.
        let top = addr
            .rows
            .iter()
            .enumerate()
            .fold(None::<(usize, f64)>, |best, (i, r)| match best {
                Some((_, p)) if p >= r.rate => best,
                _ => Some((i, r.rate)),
            })
            .map(|(i, _)| i)
            .unwrap_or(0);
        let (mut sent, mut received, mut delta, mut n) = (0u64, 0u64, 0i128, 0u64);
        if let Some(row) = addr.rows.get(top) {
            let w = addr.width as usize;
            let range = row.start..row.start + w;
            for (a, b) in
                s_cells.get(range.clone()).unwrap_or(&[]).iter().zip(r_cells.get(range).unwrap_or(&[]))
            {
                sent += u64::from(a.count);
                received += u64::from(b.count);
                if a.count == b.count && a.digest == b.digest && a.count != 0 && !a.overflowed() {
                    delta += i128::from(b.ts_sum_ns.wrapping_sub(a.ts_sum_ns) as i64);
                    n += u64::from(a.count);
                }
            }
        }
        let rate = addr.rows.get(top).map(|r| r.rate).unwrap_or(1.0);
        let aggregate =
            if n == 0 { Err(NoEstimate::NoUsableCells) } else { Estimate::new(delta as f64 / n as f64, n) };
        let mut flows_no_usable_cells = 0;
        let mut flows_no_packets = 0;
        let mut why = NoEstimateCounts::default();
        for e in estimates {
            match e.mean_delay_ns {
                Err(NoEstimate::NoPackets) => flows_no_packets += 1,
                Err(_) => flows_no_usable_cells += 1,
                Ok(_) => {}
            }
            match e.cells.no_estimate_reason {
                Some(NoFlowEstimate::TooFewPackets) => why.too_few_packets += 1,
                Some(NoFlowEstimate::LossInEveryCell) => why.loss_in_every_cell += 1,
                Some(NoFlowEstimate::Collision) => why.collision += 1,
                Some(NoFlowEstimate::Overflow) => why.overflow += 1,
                None => {}
            }
        }
        LdsSummary {
            flows_listed: estimates.len() as u64,
            flows_estimated: estimates.len() as u64 - flows_no_usable_cells - flows_no_packets,
            flows_no_usable_cells,
            flows_no_packets,
            flows_no_estimate_by_reason: why,
            flows_unrecorded_estimate: flows.unrecorded_flows_estimate(),
            packets_unrecorded: flows.unrecorded_packets(),
            weighted_packets_sent: finite_round(sent as f64 / rate),
            weighted_packets_received: finite_round(received as f64 / rate),
            aggregate_mean_delay_ns: aggregate,
            cells,
        }
    }
}

fn finite_round(x: f64) -> u64 {
    if x.is_finite() && x > 0.0 { x.round() as u64 } else { 0 }
}

/// Cell-level census of an epoch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CellCensus {
    /// All cells (R·W).
    pub total: u64,
    /// Cells non-empty at either point.
    pub nonempty: u64,
    /// Non-empty cells with equal counts and digests.
    pub usable: u64,
    /// Cells whose counts differ (loss, or packets across an epoch boundary).
    pub count_mismatch: u64,
    /// Cells with equal counts but different digests (reordering across a boundary with loss,
    /// corruption, or a swapped packet).
    pub digest_mismatch: u64,
    /// Cells whose weighted count overflowed at either point.
    pub overflowed: u64,
}

/// Epoch summary of one segment.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LdsSummary {
    /// Flows listed (and estimated).
    pub flows_listed: u64,
    /// Flows with a delay estimate.
    pub flows_estimated: u64,
    /// Flows whose cells were all spoiled.
    pub flows_no_usable_cells: u64,
    /// Flows without a sampled packet in any cell.
    pub flows_no_packets: u64,
    /// Flows without a mean, by [`NoFlowEstimate`] (they add up to the two counts above).
    pub flows_no_estimate_by_reason: NoEstimateCounts,
    /// Flows the flow log could not record (linear-counting estimate).
    pub flows_unrecorded_estimate: f64,
    /// Packets of flows the flow log could not record.
    pub packets_unrecorded: u64,
    /// Weighted packets at the sender (first highest-rate row, scaled by 1/p).
    pub weighted_packets_sent: u64,
    /// Weighted packets at the receiver (same row).
    pub weighted_packets_received: u64,
    /// Mean delay over all usable cells of that row (an LDA over all flows).
    pub aggregate_mean_delay_ns: Measured<Estimate>,
    /// Cell census.
    pub cells: CellCensus,
}

/// A segment-epoch report: the summary and the per-flow estimates (all, or the top N by
/// packets).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LdsReport {
    /// Always [`SynopsisKind::Lds`].
    pub synopsis: SynopsisKind,
    /// Epoch diagnostics.
    pub summary: LdsSummary,
    /// Per-flow estimates, largest flows first.
    pub flows: Vec<FlowEstimate>,
}

/// Estimates every flow of `flows` from the two points' sketches.
pub fn estimate_all(sender: &Lds, receiver: &Lds, flows: &FlowSet) -> Measured<Vec<FlowEstimate>> {
    Ok(Estimator::new(sender, receiver)?.all(flows))
}

/// Estimates one flow; `flow_hash` is `key.hash(identity_seed)` as the packet layer computes it.
pub fn estimate_flow(sender: &Lds, receiver: &Lds, key: &FlowKey, flow_hash: u64) -> Measured<FlowEstimate> {
    Ok(Estimator::new(sender, receiver)?.flow(key, flow_hash))
}

/// The full report: summary plus the flows sorted by packets (only the `top_n` largest if given).
pub fn report(sender: &Lds, receiver: &Lds, flows: &FlowSet, top_n: Option<usize>) -> Measured<LdsReport> {
    let est = Estimator::new(sender, receiver)?;
    let all = est.all(flows);
    let summary = est.summary(flows, &all);
    let flows = match top_n {
        Some(n) => top_by_packets(all, n),
        None => {
            let mut all = all;
            sort_by_packets(&mut all);
            all
        }
    };
    Ok(LdsReport { synopsis: SynopsisKind::Lds, summary, flows })
}

/// Sorts estimates by estimated packets, largest first (ties by flow key, so the order is
/// deterministic).
pub fn sort_by_packets(estimates: &mut [FlowEstimate]) {
    estimates.sort_unstable_by(|a, b| b.packets.cmp(&a.packets).then_with(|| a.flow.cmp(&b.flow)));
}

/// The `n` largest flows by estimated packets, largest first (O(F + n log n)).
pub fn top_by_packets(mut estimates: Vec<FlowEstimate>, n: usize) -> Vec<FlowEstimate> {
    if n == 0 {
        return Vec::new();
    }
    if estimates.len() > n {
        estimates.select_nth_unstable_by(n - 1, |a, b| {
            b.packets.cmp(&a.packets).then_with(|| a.flow.cmp(&b.flow))
        });
        estimates.truncate(n);
    }
    sort_by_packets(&mut estimates);
    estimates
}
