//! RDA, the Reconcilable Difference Aggregator (Fu, Barlet-Ros, Li, "Every Timestamp Counts";
//! spec `rda.md`): exact mean and the standard deviation of one-way delay between two points
//! despite loss and reordering.
//!
//! What it holds, per point and epoch ([`Rda`]):
//! - a per-epoch ID → timestamp cache ([`TimestampCache`]), fixed capacity; an id seen more
//!   than once in the epoch is excluded from the cache's set and the banks (every copy), and
//!   counted (see [`cache`] for why the spec's first-copy-wins P14 is not followed);
//! - in online mode, k banks × m buckets of ⟨XOR of ids, wrapping Σ timestamps, signed count⟩
//!   ([`Banks`]); in late-binding mode the banks are built from the cache at epoch end once m
//!   is chosen ([`late`]).
//!
//! The packet id is [`Observation::identity`]: the packet layer's seeded xxh3 over the bytes
//! that do not change in flight. It replaces the paper's Bob hash (spec §3.1, §6.3): any
//! well-mixed 64-bit hash both points compute identically will do, and the packet layer already
//! computes one per packet. Id 0 is reserved and becomes 1. Bank l's bucket of an id is
//! `reduce(derive(id, cfg.bank_seed(l)), m)`. Both points must share the configuration (its
//! fingerprint is checked by every decoder).
//!
//! How the runtime and the peer use it, per epoch:
//! 1. Workers call [`Rda::update_logged`] on their shard: the packet goes into the banks and
//!    is appended to the shard's [`PacketLog`] (a store into its id's region, one of 256 lines
//!    that stay in cache), not into the cache (a random miss per packet at line rate). No
//!    allocation, lock or I/O.
//!    ([`Synopsis::update`], the direct path, files each packet into the cache at once; tests,
//!    simulations and tools use it.)
//! 2. The control thread merges the shards into an empty accumulator: buckets add, and the
//!    shards' logged packets are filed into the accumulator's cache with the direct
//!    path's rules (an id already cached is a duplicate: every copy of it is taken out of the
//!    banks and the id stays in the cache as excluded; past the capacity the packet is taken
//!    out and counted in `cache_full`), so the result equals the direct path's; into an empty
//!    cache it sorts them into a run at once ([`sorted`]) instead of one table insert per
//!    packet. The harvest takes every shard of an epoch at once ([`Synopsis::merge_all`]),
//!    which sorts the shards' logs where they lie; merged one by one ([`Synopsis::merge`]),
//!    each shard's log is appended to the accumulator's and [`Rda::settle`] files them. It
//!    then ships [`Synopsis::encode`] (online: counters + bucket array; late binding:
//!    counters + MinHash signature, computed from the cache). The cache is not part
//!    of that encoding: the control thread copies its pairs ([`Rda::cache`]; the accumulator
//!    keeps its buffers for the next epoch) and keeps them for a retention time to answer the
//!    peer's look-ups ([`TimestampSource`]); [`Rda::take_cache`] moves the cache out instead,
//!    where the caller keeps it whole. It may be exported with [`wire::encode_cache`].
//! 3. Late binding only: the decoder picks m from both signatures ([`late::choose_buckets`]),
//!    each point builds and ships its banks from its retained cache ([`banks_from_cache`] or
//!    [`Rda::bind`], [`wire::encode_banks`]), and an incomplete decode is retried with 2m
//!    ([`sizing::next_attempt`]). [`late::run_local`] is the reference sequence.
//! 4. The decoding point (the paper: the sender) runs [`reconcile`] on the two banks with its
//!    own cache and a [`TimestampSource`] for the other point.
//!
//! Synopsis code never does I/O and never logs.

pub mod banks;
pub mod cache;
pub mod config;
pub mod estimator;
pub mod late;
pub mod log;
pub mod peel;
pub mod share;
#[cfg(any(test, feature = "sim"))]
pub mod sim;
pub mod sizing;
pub mod sorted;
pub mod wire;

pub use banks::{BUCKET_BYTES, BankHash, Banks, Bucket, packet_id};
pub use cache::{CacheInsert, EXCLUDED, TimestampCache, TimestampSource, clamp_ts};
pub use config::{Binding, RdaConfig, SampleKey, StdDevEstimator};
pub use estimator::{Duplicates, LocalCache, RdaReport, Reconciliation, reconcile};
pub use log::PacketLog;
pub use peel::{Difference, PeelGuards, Peeled, Side};
pub use sizing::{DifferenceEstimate, MinHashSignature};

use crate::cpu::prefetch;
use crate::synopsis::codec::{DecodeError, Reader, Writer};
use crate::synopsis::estimate::NoEstimate;
use crate::synopsis::hash::{Coin, mix64};
use crate::synopsis::{ConfigError, MergeError, Observation, Synopsis, SynopsisConfig};
use serde::{Deserialize, Serialize};

/// Per-epoch counters of one point.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RdaCounters {
    /// Packets offered to `update`.
    pub seen: u64,
    /// Packets the consistent sampling left out.
    pub sampled_out: u64,
    /// Distinct ids cached and measured (seen once; online, in the banks).
    pub cached: u64,
    /// Repeats of an id already cached (P14), including ids seen on two cores: copies beyond
    /// the first of every id seen more than once.
    pub duplicates: u64,
    /// Distinct ids seen more than once, excluded from the estimate with all their copies
    /// (`duplicates + duplicate_ids` packets left out). `seen = sampled_out + cached +
    /// duplicate_ids + duplicates + cache_full`.
    pub duplicate_ids: u64,
    /// Packets left out because the cache was full (neither cached nor in the banks, so the
    /// two stay consistent; the other point sees them as a difference).
    pub cache_full: u64,
}

impl RdaCounters {
    /// Adds a shard's counters (saturating: decoded values come from the wire).
    fn add(&mut self, o: &RdaCounters) {
        self.seen = self.seen.saturating_add(o.seen);
        self.sampled_out = self.sampled_out.saturating_add(o.sampled_out);
        self.duplicates = self.duplicates.saturating_add(o.duplicates);
        self.cache_full = self.cache_full.saturating_add(o.cache_full);
    }

    /// Packets left out as copies of an id seen more than once.
    pub fn excluded_packets(&self) -> u64 {
        self.duplicates.saturating_add(self.duplicate_ids)
    }
}

/// One point's RDA state for one epoch: cache, banks (online mode) and counters.
#[derive(Clone, Debug, PartialEq)]
pub struct Rda {
    cfg: RdaConfig,
    coin: Coin,
    sample_all: bool,
    sample_key: u64,
    banks: Option<Banks>,
    cache: TimestampCache,
    /// Packets [`Rda::update_logged`] took and no merge has filed into `cache` yet.
    log: PacketLog,
    counters: RdaCounters,
    /// The signature read from a late-binding encoding (a decoded value has no cache).
    signature: Option<MinHashSignature>,
}

/// `hash::derive(x, seed)` with the seed half precomputed: derive(x, s) = mix64(x ^ key(s)).
#[inline(always)]
fn derive_key(seed: u64) -> u64 {
    mix64(seed ^ 0x9e37_79b9_7f4a_7c15)
}

impl Rda {
    fn with_parts(cfg: &RdaConfig, cache: TimestampCache, banks: Option<Banks>, log_capacity: usize) -> Self {
        let coin = cfg.coin();
        Self {
            cfg: cfg.clone(),
            coin,
            sample_all: coin.probability() >= 1.0,
            sample_key: derive_key(cfg.sample_seed()),
            banks,
            log: PacketLog::new(log_capacity),
            cache,
            counters: RdaCounters::default(),
            signature: None,
        }
    }

    /// Counts a packet and applies the consistent sampling: its id, or `None` when sampled
    /// out.
    #[inline(always)]
    fn admit(&mut self, identity: u64, flow_hash: u64) -> Option<u64> {
        self.counters.seen += 1;
        let id = packet_id(identity);
        if !self.sample_all {
            let key = match self.cfg.sample_by {
                SampleKey::Packet => id,
                SampleKey::Flow => flow_hash,
            };
            if !self.coin.accepts(mix64(key ^ self.sample_key)) {
                self.counters.sampled_out += 1;
                return None;
            }
        }
        Some(id)
    }

    /// Folds one packet in from its parts (tests, benches, offline tools); the trait's
    /// `update` calls this. `flow_hash` matters only with flow-keyed sampling.
    #[inline]
    pub fn update_raw(&mut self, identity: u64, flow_hash: u64, ts_ns: u64) {
        let Some(id) = self.admit(identity, flow_hash) else { return };
        let ts_ns = clamp_ts(ts_ns);
        match self.cache.insert(id, ts_ns) {
            CacheInsert::Inserted => {
                self.counters.cached += 1;
                if let Some(b) = &mut self.banks {
                    b.insert(id, ts_ns);
                }
            }
            CacheInsert::Duplicate { previous_ts_ns } => {
                self.counters.duplicates += 1;
                // The second copy: the first leaves the banks; later copies never enter.
                if previous_ts_ns != EXCLUDED {
                    self.counters.cached -= 1;
                    self.counters.duplicate_ids += 1;
                    if let Some(b) = &mut self.banks {
                        b.delete(id, previous_ts_ns);
                    }
                }
            }
            CacheInsert::Full => self.counters.cache_full += 1,
        }
    }

    /// The worker's path: like [`Rda::update_raw`], but the packet is appended to the shard's
    /// log instead of being filed into the cache (see [`PacketLog`]); `merge` files it. Ids are
    /// not de-duplicated here, so a repeated id enters the banks twice until the merge takes
    /// the later copy out. Once the log holds `cache_capacity` packets, further packets are
    /// counted in `cache_full` and left out of the banks, as the direct path does past the
    /// capacity (the log counts repeats too, which only matters if the epoch has more
    /// packets than the cache has room for).
    #[inline]
    pub fn update_logged(&mut self, identity: u64, flow_hash: u64, ts_ns: u64) {
        let Some(id) = self.admit(identity, flow_hash) else { return };
        let ts_ns = clamp_ts(ts_ns);
        if !self.log.push(id, ts_ns) {
            self.counters.cache_full += 1;
            return;
        }
        if let Some(b) = &mut self.banks {
            b.insert(id, ts_ns);
        }
    }

    /// Files logged packets (whose copies are already in `self`'s banks, put there by this
    /// shard's `update_logged` or added with its banks by `merge`) into the cache, with the
    /// direct path's duplicate and capacity rules. Into an empty cache with room for every
    /// packet (an epoch's first filing, the control thread's case), they are sorted into a run
    /// ([`Rda::file_sorted_logs`]): no id can be refused there, so the order does not matter
    /// and the result is the one-by-one path's. Otherwise they are inserted one by one, region
    /// by region and then the overflow ([`PacketLog::parts`]): which ids do not fit depends on
    /// that order.
    fn file_logged(&mut self, logged: &PacketLog) {
        if logged.is_empty() {
            return;
        }
        if !self.file_sorted_logs(&[logged]) {
            // The ids are known in advance: hint the slot a few entries ahead so the misses of
            // the (table-sized, random) probes overlap instead of following one another.
            const AHEAD: usize = 16;
            // Allocated before the first slot address is taken (a no-op once it is).
            self.cache.reserve();
            let mut ahead = logged.parts().flatten().skip(AHEAD);
            for &(id, ts) in logged.parts().flatten() {
                if let Some(&(a, _)) = ahead.next() {
                    prefetch(self.cache.slot_ptr(a));
                }
                self.file(id, ts);
            }
        }
        self.count_cache();
    }

    /// Files several shards' logs into this value's **empty** cache, which has room for all
    /// of them, as one sorted run read from where they lie: what appending them to one log
    /// and [`Rda::file_logged`] would leave ([`Rda::merge_all`] checks the conditions).
    fn file_logs(&mut self, logs: &[&PacketLog]) {
        let sorted = self.file_sorted_logs(logs);
        debug_assert!(sorted, "file_logs needs an empty cache with room for every pair");
        self.count_cache();
    }

    /// Sorts `logs` into the empty cache as one run (false, nothing filed, when the cache is
    /// not empty or has no room for them all). Where no log used its overflow, every region is
    /// one top byte's ids and the sort starts from them ([`TimestampCache::file_sorted_regions`]);
    /// otherwise it scatters every part by top byte first, from the logs' counts.
    fn file_sorted_logs(&mut self, logs: &[&PacketLog]) -> bool {
        let (banks, counters) = (&mut self.banks, &mut self.counters);
        if logs.iter().all(|l| l.overflow().is_empty()) {
            let regions: Vec<&[(u64, u64)]> =
                (0..log::TOP_BUCKETS).flat_map(|b| logs.iter().map(move |l| l.region(b))).collect();
            return self.cache.file_sorted_regions(&regions, logs.len(), Self::on_repeat(banks, counters));
        }
        let parts: Vec<&[(u64, u64)]> = logs.iter().flat_map(|l| l.parts()).collect();
        // The logs' counts added up; `None` if one of them disowned its own.
        let mut top = [0u32; log::TOP_BUCKETS];
        let mut counted = true;
        for l in logs {
            match l.top_counts() {
                Some(c) => top.iter_mut().zip(c).for_each(|(t, c)| *t = t.wrapping_add(c)),
                None => counted = false,
            }
        }
        let top_counts = counted.then_some(&top);
        self.cache.file_sorted_parts(&parts, top_counts, Self::on_repeat(banks, counters))
    }

    /// What filing a sorted run does with an id given more than once: every copy leaves the
    /// banks; all but the first count as duplicates (as [`Rda::file`]).
    fn on_repeat<'a>(
        banks: &'a mut Option<Banks>,
        counters: &'a mut RdaCounters,
    ) -> impl FnMut(u64, &[(u64, u64)]) + 'a {
        move |id, copies| {
            counters.duplicates = counters.duplicates.saturating_add(copies.len() as u64 - 1);
            if let Some(b) = banks {
                for &(_, ts) in copies {
                    if ts != EXCLUDED {
                        b.delete(id, ts);
                    }
                }
            }
        }
    }

    /// Sets `cached` and `duplicate_ids` from the cache (after filing; the control thread).
    fn count_cache(&mut self) {
        let excluded = self.cache.excluded() as u64;
        self.counters.cached = (self.cache.len() as u64).saturating_sub(excluded);
        self.counters.duplicate_ids = excluded;
    }

    /// Files one entry into the cache. `ts` is a packet whose copy is already in the banks,
    /// or [`EXCLUDED`] for an id another shard excluded (none of its copies is in the banks).
    /// A repeat takes every copy of the id out of the banks (counted in `duplicates`; the
    /// caller recounts `cached` and `duplicate_ids` from the cache); past the capacity the
    /// packet leaves the banks (counted in `cache_full`).
    #[inline(always)]
    fn file(&mut self, id: u64, ts: u64) {
        match self.cache.insert(id, ts) {
            CacheInsert::Inserted => {}
            CacheInsert::Duplicate { previous_ts_ns } => {
                self.counters.duplicates = self.counters.duplicates.saturating_add(1);
                if let Some(b) = &mut self.banks {
                    for copy in [ts, previous_ts_ns] {
                        if copy != EXCLUDED {
                            b.delete(id, copy);
                        }
                    }
                }
            }
            // A shard's excluded id that does not fit: nothing of it is in the banks.
            CacheInsert::Full if ts == EXCLUDED => {}
            CacheInsert::Full => {
                self.counters.cache_full = self.counters.cache_full.saturating_add(1);
                if let Some(b) = &mut self.banks {
                    b.delete(id, ts);
                }
            }
        }
    }

    /// Files this value's log (its own packets and those merges deferred) into its cache: due
    /// before its counters, banks or cache are read or encoded. Control thread; may allocate
    /// the cache.
    pub fn settle(&mut self) {
        if self.log.is_empty() {
            return;
        }
        let log = std::mem::replace(&mut self.log, PacketLog::new(0));
        self.file_logged(&log);
        self.log = log;
        self.log.clear();
    }

    /// Packets logged by [`Rda::update_logged`] or deferred by `merge`, and not filed into the
    /// cache yet ([`Rda::settle`] files them).
    pub fn logged(&self) -> usize {
        self.log.len()
    }

    /// Address of the cache slot `identity` probes first, for a caller of the direct path
    /// ([`Rda::update_raw`]) to prefetch a few packets ahead: with a DRAM-sized cache that
    /// update costs about one cache and TLB miss per packet (the reason workers log instead).
    /// Never dereferenced here; any value is a harmless hint.
    #[inline(always)]
    pub fn prefetch_target(&self, identity: u64) -> *const u8 {
        self.cache.slot_ptr(packet_id(identity))
    }

    /// The per-epoch counters.
    pub fn counters(&self) -> &RdaCounters {
        &self.counters
    }

    /// The banks (online mode, or a decoded online value); `None` in late-binding mode.
    pub fn banks(&self) -> Option<&Banks> {
        self.banks.as_ref()
    }

    /// The epoch's ID → timestamp cache (empty in a decoded value).
    pub fn cache(&self) -> &TimestampCache {
        &self.cache
    }

    /// Moves the filed cache's sorted run into `buf` ([`TimestampCache::swap_run`]): for
    /// retention after [`Rda::settle`], when the counters and the encoding are final. The
    /// cache is empty afterwards, the counters stay. False, nothing moved, when the cache is a
    /// table or holds nothing.
    pub fn swap_run(&mut self, buf: &mut Vec<(u64, u64)>) -> bool {
        self.cache.swap_run(buf)
    }

    /// Moves the cache out for retention (to answer the peer's look-ups), leaving an empty
    /// cache of the same capacity (logged packets are filed first). Allocates: control thread
    /// only.
    pub fn take_cache(&mut self) -> TimestampCache {
        self.settle();
        let fresh = TimestampCache::new(self.cfg.cache_capacity as usize, self.cfg.cache_seed());
        std::mem::replace(&mut self.cache, fresh)
    }

    /// The MinHash signature of this epoch: computed from the cache, or the one a decoded
    /// late-binding value carried.
    pub fn signature(&self) -> MinHashSignature {
        match &self.signature {
            Some(s) => s.clone(),
            None => MinHashSignature::of_cache(&self.cache, &self.cfg),
        }
    }

    /// Late binding: this epoch's banks with m buckets per bank, built from the cache (spec
    /// §6.4 step 3, P30 `from_cache`). Allocates k·m buckets: control thread only.
    pub fn bind(&self, buckets_per_bank: usize) -> Banks {
        banks_from_cache(&self.cfg, &self.cache, buckets_per_bank)
    }
}

/// Banks with m buckets per bank holding every (id, timestamp) of `cache` seen once (the
/// excluded ids stay out, as they do online).
pub fn banks_from_cache(cfg: &RdaConfig, cache: &TimestampCache, buckets_per_bank: usize) -> Banks {
    let mut b = Banks::new(cfg, buckets_per_bank.max(1));
    for (id, ts) in cache.iter_measured() {
        b.insert(id, ts);
    }
    b
}

impl Synopsis for Rda {
    type Config = RdaConfig;
    type Carry = ();
    /// 2 since `FlowKey::hash` hashes the key padded to 40 bytes: with `sample_by = "flow"`
    /// a point samples by the flow hash, so points of the two versions would keep different
    /// flows and the difference would read as loss; a peer refuses the other version instead.
    ///
    /// 3 since an id seen twice is excluded (every copy) instead of keeping its first copy,
    /// and the counters carry `duplicate_ids`: points of versions 2 and 3 would pair different
    /// copies, so a peer refuses the other version.
    const FORMAT_VERSION: u8 = 3;

    fn new(cfg: &RdaConfig) -> Result<Self, ConfigError> {
        cfg.validate()?;
        let cache = TimestampCache::new(cfg.cache_capacity as usize, cfg.cache_seed());
        Ok(Self::with_parts(
            cfg,
            cache,
            cfg.online_buckets_per_bank().map(|m| Banks::new(cfg, m)),
            cfg.cache_capacity as usize,
        ))
    }

    fn new_carry(_cfg: &RdaConfig) {}

    fn config(&self) -> &RdaConfig {
        &self.cfg
    }

    #[inline]
    fn update(&mut self, _carry: &mut (), obs: &Observation<'_>) {
        self.update_raw(obs.identity, obs.flow_hash, obs.ts_ns);
    }

    /// Not located: the data path appends to the log (sequential). Hinting the bank buckets
    /// too measured slower (BENCHMARKS.md): the other synopses' hints already keep as many
    /// misses in flight as the core takes.
    type Location = ();

    /// Logged, not filed ([`Rda::update_logged`]): the control thread's merge (or
    /// [`Rda::take_cache`]) files the log, so the worker never probes the cache's random
    /// memory. The state it leaves merges, encodes and estimates as [`Synopsis::update`]'s.
    #[inline(always)]
    fn apply(&mut self, _carry: &mut (), _at: &(), obs: &Observation<'_>) {
        self.update_logged(obs.identity, obs.flow_hash, obs.ts_ns);
    }

    /// Adds a shard of the same configuration: banks add, caches unite. An id cached by both
    /// shards is a duplicate: every copy is deleted from the merged banks and the id stays
    /// excluded. If the union outgrows the capacity, the ids that do not fit are deleted from
    /// the merged banks and counted in `cache_full`.
    ///
    /// The other shard's logged packets are **appended to this value's log, not filed**: the
    /// next [`Rda::settle`] (or [`Rda::take_cache`]) files every shard's packets at once, into a
    /// sorted run (see [`sorted`]); filing each shard's log as it came would cost a random
    /// table write per packet. So the counters, banks and cache of a merged value are final only
    /// after `settle`: call it before encoding or reading them ([`Rda::logged`] says whether it
    /// is due). Where the log has no room left, the packets are filed now instead.
    fn merge(&mut self, other: &Self) -> Result<(), MergeError> {
        self.check_same_config(other)?;
        self.counters.add(&other.counters);
        if let (Some(a), Some(b)) = (&mut self.banks, &other.banks) {
            a.add(b);
        }
        if !other.cache.is_empty() {
            // Filed ids come after this value's own logged packets, as they would have.
            self.settle();
            for (id, ts) in other.cache.iter() {
                self.file(id, ts);
            }
            self.count_cache();
        }
        // The other shard's logged packets are in its banks, now added to ours.
        if !self.log.append(&other.log) {
            self.settle();
            self.file_logged(&other.log);
        }
        if other.signature.is_some() || self.signature.is_some() {
            // Signatures of decoded values cannot be merged exactly; recompute from caches.
            self.signature = None;
        }
        Ok(())
    }

    /// The workers' logs sorted where they lie, not appended first: where every shard merely
    /// logged (the workers' case) into an empty value with room for all their packets, the
    /// ordered merges would append each log and [`Rda::settle`] would then file the whole
    /// into a sorted run, whose result does not depend on the order; reading the shards' logs
    /// directly spares a copy of every logged pair. Otherwise it merges in order and settles.
    fn merge_all(&mut self, others: &[&Self]) -> Result<(), MergeError> {
        let logged: usize = others.iter().map(|o| o.log.len()).sum();
        let direct = self.cache.is_empty()
            && self.log.is_empty()
            && logged <= self.log.capacity().min(self.cache.capacity())
            && others.iter().all(|o| o.cache.is_empty() && self.check_same_config(o).is_ok());
        if !direct {
            for o in others {
                self.merge(o)?;
            }
            self.settle();
            return Ok(());
        }
        for o in others {
            self.counters.add(&o.counters);
            if let (Some(a), Some(b)) = (&mut self.banks, &o.banks) {
                a.add(b);
            }
            if o.signature.is_some() || self.signature.is_some() {
                self.signature = None;
            }
        }
        if logged > 0 {
            let logs: Vec<&PacketLog> = others.iter().map(|o| &o.log).collect();
            self.file_logs(&logs);
        }
        Ok(())
    }

    fn settle(&mut self) {
        Rda::settle(self);
    }

    fn back_reserved(&mut self) {
        self.log.back_reserved();
    }

    fn reset(&mut self) {
        self.cache.clear();
        self.log.clear();
        if let Some(b) = &mut self.banks {
            b.clear();
        }
        self.counters = RdaCounters::default();
        self.signature = None;
    }

    /// Of a settled value ([`Rda::settle`]): logged packets are not filed yet, so their
    /// duplicates would still be in the banks and the counters (debug builds check).
    fn encode_body(&self, w: &mut Writer<'_>) {
        debug_assert!(
            self.log.is_empty(),
            "RDA encoded with {} packets not filed: settle first",
            self.log.len()
        );
        wire::write_epoch_body(self, w);
    }

    fn decode_body(cfg: &RdaConfig, r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        cfg.validate().map_err(|e| DecodeError::Invalid { field: "config", reason: e.to_string() })?;
        let (counters, body) = wire::read_epoch_body(cfg, r)?;
        // A decoded value carries no cache: a one-slot placeholder, not the configured table.
        let placeholder = TimestampCache::new(1, cfg.cache_seed());
        let mut s = match body {
            wire::EpochBody::Banks(b) => Self::with_parts(cfg, placeholder, Some(b), 0),
            wire::EpochBody::Signature(sig) => {
                let mut s = Self::with_parts(cfg, placeholder, None, 0);
                s.signature = Some(sig);
                s
            }
        };
        s.counters = counters;
        Ok(s)
    }
}

/// Online mode: reconciles and estimates from the two points' epoch values (`sender`, then
/// `receiver`), with the decoding point's cache and a look-up for the other point. Refuses
/// values of different configurations (`ConfigMismatch`; the cache capacity may differ) or
/// without banks.
pub fn estimate(
    sender: &Rda,
    receiver: &Rda,
    local: LocalCache<'_>,
    remote: &dyn TimestampSource,
    guards: &PeelGuards,
) -> RdaReport {
    if sender.config().fingerprint() != receiver.config().fingerprint() {
        return RdaReport::unavailable(NoEstimate::ConfigMismatch);
    }
    match (sender.banks(), receiver.banks()) {
        (Some(a), Some(b)) => {
            let mut r = reconcile(a, b, local, remote, guards);
            r.choose_std_dev(sender.config().std_dev);
            r.note_duplicates(sender.counters(), receiver.counters());
            r
        }
        _ => RdaReport::unavailable(NoEstimate::Other {
            detail: "late-binding RDA values carry no banks: bind them first (rda::late)".into(),
        }),
    }
}

#[cfg(test)]
mod tests;
