//! The per-epoch output accumulators of one exchange kind: weighted log-binned histograms
//! (Σc, Σc², sample count and delay extremes per bin, per subset and per fridge) and counters.
//!
//! These are the only fridge state an epoch boundary resets (spec §7.4): the slots live in
//! the worker's carry. Merging per-core shards adds them (spec §7.3: shards partition the
//! pairs, so their estimates sum). Never allocates after construction, never panics.

use super::bins::LogBins;
use super::set::{MAX_LN_WEIGHT, RequestOutcome, ResponseOutcome};
use serde::{Deserialize, Serialize};

/// Σc, Σc², the number of samples and the smallest and largest delay in one bin of one fridge.
///
/// The exact extremes [ours; the paper keeps Σc only] let the report place a bin's mass where
/// its samples are rather than across the whole bin: a point mass comes back exact at any
/// resolution, and a quantile in a gap between bins interpolates between the neighbouring
/// samples as the samples' own CDF does (see [`super::distribution::BinnedDistribution`]).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BinStats {
    /// Samples counted.
    pub samples: u64,
    /// Σc: the bin's unbiased estimate f̂_k(b).
    pub weight_sum: f64,
    /// Σc²: the paper's variance proxy V̂_k(b) (Eq 7).
    pub weight_sq_sum: f64,
    /// Smallest delay counted, ns (meaningless while `samples` is 0).
    pub min_ns: u64,
    /// Largest delay counted, ns (meaningless while `samples` is 0).
    pub max_ns: u64,
}

impl BinStats {
    /// Adds one sample of weight `c` and delay `delay_ns`.
    #[inline]
    pub fn add_sample(&mut self, c: f64, delay_ns: u64) {
        if self.samples == 0 {
            self.min_ns = delay_ns;
            self.max_ns = delay_ns;
        } else {
            self.min_ns = self.min_ns.min(delay_ns);
            self.max_ns = self.max_ns.max(delay_ns);
        }
        self.samples += 1;
        self.weight_sum += c;
        self.weight_sq_sum += c * c;
    }

    /// Adds another bin's sums and extremes.
    #[inline]
    pub fn add(&mut self, o: &BinStats) {
        if o.samples == 0 {
            return;
        }
        if self.samples == 0 {
            (self.min_ns, self.max_ns) = (o.min_ns, o.max_ns);
        } else {
            self.min_ns = self.min_ns.min(o.min_ns);
            self.max_ns = self.max_ns.max(o.max_ns);
        }
        self.samples = self.samples.wrapping_add(o.samples);
        self.weight_sum += o.weight_sum;
        self.weight_sq_sum += o.weight_sq_sum;
    }

    /// Σc(c − 1) = Σc² − Σc: unbiased for Var f̂_k(b) under independent survivals (spec §3.5).
    pub fn variance_estimate(&self) -> f64 {
        (self.weight_sq_sum - self.weight_sum).max(0.0)
    }
}

/// Number of [`KindCounters`] fields (the encoding writes them in order).
pub const COUNTERS: usize = 7;

/// Per-epoch counters of one exchange kind (shards add them). Evictions and duplicate requests
/// (spec P6) are not counted: that needs a read of the slot on every request, which costs a
/// cache miss per request (see [`super::table::FridgeTable::insert_at`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KindCounters {
    /// Requests offered to the kind's fridges.
    pub requests: u64,
    /// Σ of the gaps between consecutive requests on each shard, ns: requests / this is the
    /// per-shard request rate the model weights use.
    pub request_gap_ns: u64,
    /// Responses seen.
    pub responses: u64,
    /// Samples accumulated in the histograms.
    pub samples: u64,
    /// Responses routed to a fridge whose request was not there (evicted, never seen, or a
    /// duplicate response whose request was already answered, spec P7).
    pub unmatched_responses: u64,
    /// Matched samples dropped because ln c > 300 (spec P8).
    pub weight_overflow: u64,
    /// Matched responses stamped before their request (clock anomaly), dropped.
    pub negative_delays: u64,
}

impl KindCounters {
    fn add(&mut self, o: &KindCounters) {
        self.requests = self.requests.wrapping_add(o.requests);
        self.request_gap_ns = self.request_gap_ns.wrapping_add(o.request_gap_ns);
        self.responses = self.responses.wrapping_add(o.responses);
        self.samples = self.samples.wrapping_add(o.samples);
        self.unmatched_responses = self.unmatched_responses.wrapping_add(o.unmatched_responses);
        self.weight_overflow = self.weight_overflow.wrapping_add(o.weight_overflow);
        self.negative_delays = self.negative_delays.wrapping_add(o.negative_delays);
    }

    /// The counters as an array, in encoding order.
    pub fn to_array(&self) -> [u64; COUNTERS] {
        [
            self.requests,
            self.request_gap_ns,
            self.responses,
            self.samples,
            self.unmatched_responses,
            self.weight_overflow,
            self.negative_delays,
        ]
    }

    /// Counters from [`Self::to_array`]'s order.
    pub fn from_array(a: [u64; COUNTERS]) -> Self {
        let [
            requests,
            request_gap_ns,
            responses,
            samples,
            unmatched_responses,
            weight_overflow,
            negative_delays,
        ] = a;
        Self {
            requests,
            request_gap_ns,
            responses,
            samples,
            unmatched_responses,
            weight_overflow,
            negative_delays,
        }
    }
}

/// Per-epoch counters of one fridge.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FridgeCounters {
    /// Requests written into this fridge.
    pub insertions: u64,
}

/// The accumulators of one exchange kind for one epoch.
#[repr(C, align(64))]
#[derive(Clone, Debug, PartialEq)]
pub struct KindEpoch {
    /// Counters.
    pub counters: KindCounters,
    /// Per-fridge counters.
    pub fridges: Vec<FridgeCounters>,
    /// Histograms, laid out subset-major, then fridge, then bin.
    hist: Vec<BinStats>,
    bins: usize,
}

impl KindEpoch {
    /// Zeroed accumulators for `fridges` fridges, `subsets` buckets and `bins` bins.
    pub fn new(fridges: usize, subsets: usize, bins: usize) -> Self {
        Self {
            counters: KindCounters::default(),
            fridges: vec![FridgeCounters::default(); fridges],
            hist: vec![BinStats::default(); fridges * subsets * bins],
            bins,
        }
    }

    /// Number of fridges.
    pub fn fridge_count(&self) -> usize {
        self.fridges.len()
    }

    /// Number of subset buckets.
    pub fn subset_count(&self) -> usize {
        let per = self.fridges.len() * self.bins;
        self.hist.len().checked_div(per).unwrap_or(0)
    }

    /// Number of bins per histogram.
    pub fn bin_count(&self) -> usize {
        self.bins
    }

    /// The histogram of fridge `fridge` in subset bucket `subset` (empty if out of range).
    pub fn hist(&self, subset: usize, fridge: usize) -> &[BinStats] {
        let start = (subset * self.fridges.len() + fridge) * self.bins;
        self.hist.get(start..start + self.bins).unwrap_or(&[])
    }

    /// All histograms, flat: subset-major, then fridge, then bin.
    pub fn hist_flat(&self) -> &[BinStats] {
        &self.hist
    }

    /// Mutable flat histograms (for the decoder).
    pub(crate) fn hist_flat_mut(&mut self) -> &mut [BinStats] {
        &mut self.hist
    }

    /// Folds in a request's outcome.
    #[inline]
    pub fn record_request(&mut self, out: RequestOutcome, gap_ns: u64) {
        self.counters.requests += 1;
        self.counters.request_gap_ns = self.counters.request_gap_ns.wrapping_add(gap_ns);
        if let RequestOutcome::Inserted { fridge } = out
            && let Some(f) = self.fridges.get_mut(usize::from(fridge))
        {
            f.insertions += 1;
        }
    }

    /// Folds in a response's outcome; `subset` is called only for a sample.
    #[inline]
    pub fn record_response(&mut self, out: ResponseOutcome, bins: &LogBins, subset: impl FnOnce() -> usize) {
        self.counters.responses += 1;
        match out {
            ResponseOutcome::NotSampled => {}
            ResponseOutcome::Unmatched { .. } => self.counters.unmatched_responses += 1,
            ResponseOutcome::NegativeDelay { .. } => self.counters.negative_delays += 1,
            ResponseOutcome::Matched(s) => {
                if s.ln_weight > MAX_LN_WEIGHT || s.ln_weight.is_nan() {
                    self.counters.weight_overflow += 1;
                    return;
                }
                let c = s.ln_weight.exp();
                let idx = (subset() * self.fridges.len() + usize::from(s.fridge)) * self.bins
                    + bins.bin_of(s.delay_ns);
                if let Some(b) = self.hist.get_mut(idx) {
                    b.add_sample(c, s.delay_ns);
                    self.counters.samples += 1;
                }
            }
        }
    }

    /// Adds another shard's accumulators (same shape; the caller checks configs).
    pub fn merge(&mut self, o: &KindEpoch) {
        self.counters.add(&o.counters);
        for (a, b) in self.fridges.iter_mut().zip(&o.fridges) {
            a.insertions = a.insertions.wrapping_add(b.insertions);
        }
        for (a, b) in self.hist.iter_mut().zip(&o.hist) {
            a.add(b);
        }
    }

    /// Zeroes everything, keeping the allocation.
    pub fn reset(&mut self) {
        self.counters = KindCounters::default();
        self.fridges.fill(FridgeCounters::default());
        self.hist.fill(BinStats::default());
    }
}
