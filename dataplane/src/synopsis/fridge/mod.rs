//! The fridge: unbiased request→response delay distributions at one point (Zheng, Chen,
//! Braverman, Rexford, APoCS 2022; spec `fridge.md`).
//!
//! A fridge is a hash-indexed array of M slots that a request enters with probability p and
//! always overwrites; a response that finds its request reports the delay t and the number x
//! of insertions (W1) or offered requests (W2) it survived, and counts with weight
//! c = p⁻¹(1 − 1/M)^(−x) (or p⁻¹(1 − p/M)^(−x)): the inverse of its survival probability, which
//! removes the survivorship bias against long delays. Several fridges with different
//! lifetimes M/p share the traffic (a request enters at most one) and are combined per delay
//! bin.
//!
//! # How the pieces map onto the runtime
//! - [`FridgeCarry`] (the `Carry`): per worker, for each configured [`ExchangeKind`] a
//!   [`FridgeSet`] of slot arrays and counters. It lives as long as the worker and is **never
//!   cleared at an epoch boundary** (spec §7.4).
//! - [`FridgeSynopsis`] (the per-epoch value): weighted log-binned histograms with Σc, Σc² and
//!   sample counts per bin, per fridge, per subset bucket and per kind, plus counters. A sample
//!   belongs to the epoch of its response. `merge` of per-core shards **sums** (spec §7.3);
//!   `reset` clears only these accumulators.
//! - [`estimate`]: the combination (model weights by default, or the paper's plug-in IVW), the
//!   CDF, quantiles p50/p90/p95/p99 with intervals, per kind and per subset.
//!
//! # Decisions (see the spec's table §8)
//! - Kinds are kept apart by giving each [`ExchangeKind`] its own fridge set: handshake and DNS
//!   delays are different distributions at different request rates, and one kind's requests
//!   must not shorten another's lifetime. Unconfigured kinds are counted and ignored.
//! - Histograms default to 4 bins per octave from 1.024 µs to 68.7 s; the runtime's quantiles
//!   come from them (log-linear interpolation inside a bin). The exact-delay path is the
//!   [`FridgeSet`] API itself: [`sim`] collects its [`Sample`]s and [`distribution`] builds
//!   the exact CDF of spec §5 from them; tests and the reproduction use it and report both.
//! - Subsets (customer prefix or server port) are decided from the response's 5-tuple: its
//!   destination is the client. They partition samples; the fridges and weights are shared.
//! - Changing p or M is a new configuration, hence a new carry. To keep pairs spanning the
//!   change unbiased, the runtime should keep the old carry answering responses until it has
//!   drained (spec §7.4 "generations"); [`tuning`] gives the recommended p with hysteresis.
//!
//! Synopsis code never does I/O, never logs, and `update` never allocates or panics.

pub mod accum;
pub mod baseline;
pub mod bins;
mod codec;
pub mod combine;
pub mod config;
pub mod distribution;
pub mod metrics;
pub mod report;
pub mod set;
#[cfg(any(test, feature = "sim"))]
pub mod sim;
pub mod subset;
pub mod table;
pub mod tuning;

pub use accum::{BinStats, FridgeCounters, KindCounters, KindEpoch};
pub use bins::LogBins;
pub use config::{
    Combination, FridgeConfig, FridgeSpec, HistogramConfig, KindConfig, SubsetRule, WeightMode,
};
pub use report::{FridgeReport, estimate};
pub use set::{FridgeSet, Located, RequestOutcome, ResponseOutcome, Sample};
pub use subset::{IpPrefix, SubsetMatcher};

use crate::packet::{Exchange, ExchangeKind, Role};
use crate::synopsis::codec::{DecodeError, Reader, Writer};
use crate::synopsis::hash::derive;
use crate::synopsis::{ConfigError, MergeError, Observation, Synopsis, SynopsisConfig};

/// Position of a kind in the kind → set lookup table.
#[inline]
fn kind_ordinal(k: ExchangeKind) -> usize {
    match k {
        ExchangeKind::TcpHandshake => 0,
        ExchangeKind::Dns => 1,
        ExchangeKind::TcpData => 2,
    }
}

const NO_KIND: u8 = u8::MAX;

fn kind_table(cfg: &FridgeConfig) -> [u8; 3] {
    let mut t = [NO_KIND; 3];
    for (i, k) in cfg.kinds.iter().enumerate() {
        if let Some(slot) = t.get_mut(kind_ordinal(k.kind)) {
            *slot = i as u8;
        }
    }
    t
}

/// The hash seed of a kind's fridge set: kinds use independent hashes.
pub fn kind_seed(cfg: &FridgeConfig, kind: ExchangeKind) -> u64 {
    derive(cfg.seed, 0x100 + kind_ordinal(kind) as u64)
}

/// Worker-lifetime fridge state: one [`FridgeSet`] per configured kind, in config order.
#[derive(Clone, Debug, PartialEq)]
pub struct FridgeCarry {
    sets: Vec<FridgeSet>,
    kind_index: [u8; 3],
}

impl FridgeCarry {
    /// The fridge set of `kind`, if it is measured.
    pub fn set(&self, kind: ExchangeKind) -> Option<&FridgeSet> {
        self.sets.get(usize::from(self.kind_index[kind_ordinal(kind)]))
    }

    /// Address of the slot a request or response touches (a prefetch hint for the worker's
    /// staging pass; never dereferenced here).
    #[inline(always)]
    pub fn prefetch_target(&self, exchange: &Exchange) -> Option<*const u8> {
        self.set(exchange.kind)?.prefetch_target(exchange.id)
    }
}

/// The per-epoch fridge synopsis: histograms and counters for every configured kind.
#[derive(Clone, Debug, PartialEq)]
pub struct FridgeSynopsis {
    cfg: FridgeConfig,
    bins: LogBins,
    subsets: SubsetMatcher,
    kind_index: [u8; 3],
    kinds: Vec<KindEpoch>,
    ignored_exchanges: u64,
}

impl FridgeSynopsis {
    /// The accumulators of `kind`, if measured.
    pub fn kind(&self, kind: ExchangeKind) -> Option<&KindEpoch> {
        self.kinds.get(usize::from(self.kind_index[kind_ordinal(kind)]))
    }

    /// Accumulators in config order.
    pub fn kinds(&self) -> &[KindEpoch] {
        &self.kinds
    }

    /// The bin layout.
    pub fn bins(&self) -> &LogBins {
        &self.bins
    }

    /// The subset matcher.
    pub fn subsets(&self) -> &SubsetMatcher {
        &self.subsets
    }

    /// Exchanges of kinds that are not configured.
    pub fn ignored_exchanges(&self) -> u64 {
        self.ignored_exchanges
    }

    fn decode_kind(&mut self, k: usize, r: &mut Reader<'_>) -> Result<(), DecodeError> {
        let Some(epoch) = self.kinds.get_mut(k) else { return Ok(()) };
        let mut a = [0u64; accum::COUNTERS];
        for v in &mut a {
            *v = r.u64()?;
        }
        epoch.counters = KindCounters::from_array(a);
        for f in &mut epoch.fridges {
            f.insertions = r.u64()?;
        }
        codec::decode_hist(epoch.hist_flat_mut(), &self.bins, r)?;
        // Checked, not wrapping: bins whose samples overflow u64 cannot come from one epoch, and
        // the report's sums over them would overflow.
        let total = epoch.hist_flat().iter().try_fold(0u64, |s, b| s.checked_add(b.samples));
        if total != Some(epoch.counters.samples) {
            return Err(DecodeError::Invalid {
                field: "fridge.counters.samples",
                reason: match total {
                    Some(t) => {
                        format!("{} samples counted but the histograms hold {t}", epoch.counters.samples)
                    }
                    None => "the histograms' sample counts overflow 64 bits".into(),
                },
            });
        }
        Ok(())
    }
}

impl Synopsis for FridgeSynopsis {
    type Config = FridgeConfig;
    type Carry = FridgeCarry;
    /// 2: every encoded bin carries its smallest and largest delay.
    const FORMAT_VERSION: u8 = 2;

    fn new(cfg: &FridgeConfig) -> Result<Self, ConfigError> {
        cfg.validate()?;
        let bins = LogBins::new(&cfg.histogram);
        let subsets = SubsetMatcher::new(&cfg.subsets);
        let kinds = cfg
            .kinds
            .iter()
            .map(|k| KindEpoch::new(k.fridges.len(), subsets.buckets(), bins.len()))
            .collect();
        Ok(Self { kind_index: kind_table(cfg), cfg: cfg.clone(), bins, subsets, kinds, ignored_exchanges: 0 })
    }

    fn new_carry(cfg: &FridgeConfig) -> FridgeCarry {
        // An invalid config gets a carry without sets: every exchange is then ignored, and
        // `new` has already refused the config with a reason.
        if cfg.validate().is_err() {
            return FridgeCarry { sets: Vec::new(), kind_index: [NO_KIND; 3] };
        }
        let sets: Result<Vec<FridgeSet>, ConfigError> = cfg
            .kinds
            .iter()
            .map(|k| FridgeSet::new(&k.fridges, kind_seed(cfg, k.kind), cfg.weight))
            .collect();
        let Ok(sets) = sets else { return FridgeCarry { sets: Vec::new(), kind_index: [NO_KIND; 3] } };
        FridgeCarry { sets, kind_index: kind_table(cfg) }
    }

    fn config(&self) -> &FridgeConfig {
        &self.cfg
    }

    #[inline(always)]
    fn update(&mut self, carry: &mut FridgeCarry, obs: &Observation<'_>) {
        let Some(ex) = obs.exchange else { return };
        let k = usize::from(self.kind_index[kind_ordinal(ex.kind)]);
        let (Some(set), Some(epoch)) = (carry.sets.get_mut(k), self.kinds.get_mut(k)) else {
            self.ignored_exchanges += 1;
            return;
        };
        match ex.role {
            Role::Request => {
                let (out, gap_ns) = set.on_request(ex.id, obs.ts_ns);
                epoch.record_request(out, gap_ns);
            }
            Role::Response => {
                let out = set.on_response(ex.id, obs.ts_ns);
                let subsets = &self.subsets;
                epoch.record_response(out, &self.bins, || subsets.bucket_of_response(obs.flow, obs.encap));
            }
        }
    }

    /// Not kept: the fridge's slot is found again by the update (a hash and a shift).
    type Location = ();

    /// Hints the carry's slot the request or response will touch.
    #[inline(always)]
    fn locate(
        &self,
        carry: &FridgeCarry,
        obs: &Observation<'_>,
        _at: &mut (),
        hint: &mut impl FnMut(*const u8),
    ) {
        if let Some(p) = obs.exchange.as_ref().and_then(|x| carry.prefetch_target(x)) {
            hint(p);
        }
    }

    fn merge(&mut self, other: &Self) -> Result<(), MergeError> {
        self.check_same_config(other)?;
        for (a, b) in self.kinds.iter_mut().zip(&other.kinds) {
            a.merge(b);
        }
        self.ignored_exchanges = self.ignored_exchanges.wrapping_add(other.ignored_exchanges);
        Ok(())
    }

    fn reset(&mut self) {
        for k in &mut self.kinds {
            k.reset();
        }
        self.ignored_exchanges = 0;
    }

    fn encode_body(&self, w: &mut Writer<'_>) {
        w.u64(self.ignored_exchanges);
        for k in &self.kinds {
            for v in k.counters.to_array() {
                w.u64(v);
            }
            for f in &k.fridges {
                w.u64(f.insertions);
            }
            codec::encode_hist(k.hist_flat(), w);
        }
    }

    fn decode_body(cfg: &FridgeConfig, r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let mut s = Self::new(cfg)
            .map_err(|e| DecodeError::Invalid { field: "fridge config", reason: e.to_string() })?;
        s.ignored_exchanges = r.u64()?;
        for k in 0..s.kinds.len() {
            s.decode_kind(k, r)?;
        }
        Ok(s)
    }
}

#[cfg(test)]
mod tests;
