//! The RDA ID → timestamp caches a point keeps after shipping an epoch, so the peer can look up
//! the timestamps of reconciled packets (online mode) or have banks built with the m it chose
//! (late binding). Caches are kept for a retention time and within a byte budget; expired and
//! evicted caches are counted.
//!
//! A cache is stored as its (id, timestamp) pairs. A sorted run (the merged epoch's, filed in
//! bulk) usually arrives moved out of the accumulator, shared between the sinks that keep it
//! ([`RdaPairs::Run`]); when the store drops it, its buffer is kept as a spare for the publisher
//! to trade for a later epoch's run ([`RetainedCaches::spare_run`]), so retaining costs neither
//! a copy nor an allocation. Otherwise the pairs are copied on the control thread in one scan
//! (no sort there), and a table's pairs are sorted on first use by the connection thread that
//! answers look-ups.

use crate::sink::RdaPairs;
use crate::wire::{CacheRef, LookupStatus};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use wirelat_dataplane::synopsis::rda::{Banks, RdaConfig, sizing, wire as rda_wire};

wirelat_dataplane::counter_set! {
    /// Counters of the retained caches (part of [`ShipCounters`](super::ShipCounters), under
    /// these names). Plain counts: the caches are only ever used behind the sink's lock.
    #[derive(serde::Serialize)]
    pub struct RetainCounts;
    {
        /// Caches stored.
        rda_caches_retained => rda_caches_retained,
        /// Caches dropped because their retention time passed.
        rda_caches_expired => rda_caches_expired,
        /// Caches dropped early to stay within the byte budget.
        rda_caches_evicted => rda_caches_evicted,
        /// Caches dropped because the peer acknowledged their epoch's RDA synopsis: it
        /// committed the reconciliation, so no look-up for them can come any more.
        rda_caches_released => rda_caches_released,
        /// Look-up requests answered.
        rda_lookups => rda_lookups,
        /// Ids looked up.
        rda_lookup_ids => rda_lookup_ids,
        /// Look-ups and binds for a cache this point does not hold.
        rda_lookup_misses => rda_lookup_misses,
        /// Late-binding bank builds answered.
        rda_binds => rda_binds,
        /// Caches stored by taking the accumulator's sorted run instead of copying it (a spare
        /// buffer was traded for it).
        rda_runs_moved => rda_runs_moved,
    }
}

struct Retained {
    /// Shared with the other sinks that keep the same run (each counts it in its budget).
    pairs: Arc<Vec<(u64, u64)>>,
    sorted: bool,
    stored: Instant,
}

/// What a buffer of pairs holds in memory (its capacity, not its count: the budget is a memory
/// budget).
fn buffer_bytes(pairs: &Vec<(u64, u64)>) -> u64 {
    (pairs.capacity() * 16) as u64
}

impl Retained {
    fn bytes(&self) -> u64 {
        buffer_bytes(&self.pairs)
    }
}

/// Spare buffers kept for trading: two, for an epoch's two directions.
const MAX_SPARES: usize = 2;

/// The caches of one point, keyed by (segment, epoch).
pub struct RetainedCaches {
    point: u32,
    rda: Option<RdaConfig>,
    retention: Duration,
    max_bytes: u64,
    bytes: u64,
    caches: HashMap<(u32, u64), Retained>,
    /// Buffers of dropped caches, for [`RetainedCaches::spare_run`] (counted in `bytes`).
    spares: Vec<Vec<(u64, u64)>>,
    /// Counters.
    pub counters: RetainCounts,
}

impl RetainedCaches {
    /// Caches of `point` kept for `retention` within `max_bytes`; `rda` is the point's RDA
    /// configuration (needed to build late-binding banks).
    pub fn new(point: u32, rda: Option<RdaConfig>, retention: Duration, max_bytes: u64) -> Self {
        Self {
            point,
            rda,
            retention,
            max_bytes,
            bytes: 0,
            caches: HashMap::new(),
            spares: Vec::new(),
            counters: RetainCounts::default(),
        }
    }

    /// Stores the pairs of (`segment`, `epoch`).
    pub fn retain(&mut self, segment: u32, epoch: u64, pairs: RdaPairs<'_>) {
        // A cache filed in bulk is a sorted run already: kept as it is, the look-ups need no
        // sort (which took about 27 ns per pair, under this store's lock).
        let (pairs, sorted) = match pairs {
            RdaPairs::Run(run) => {
                self.counters.rda_runs_moved += 1;
                (Arc::clone(run), true)
            }
            RdaPairs::Cache(cache) => match cache.sorted_pairs() {
                Some(run) => {
                    // Room for the accumulator's run buffer (where the run fills at least half
                    // of it): once dropped, this copy is a spare the publisher can trade for a
                    // later epoch's run.
                    let mut pairs = Vec::with_capacity(cache.run_room().max(run.len()));
                    pairs.extend_from_slice(run);
                    (Arc::new(pairs), true)
                }
                None => {
                    // `iter` filters the table's slots, so collecting would grow by doubling and
                    // keep up to twice the memory the pairs need; the exact count is known.
                    let mut pairs: Vec<(u64, u64)> = Vec::with_capacity(cache.len());
                    pairs.extend(cache.iter());
                    pairs.shrink_to_fit();
                    (Arc::new(pairs), false)
                }
            },
        };
        let r = Retained { pairs, sorted, stored: Instant::now() };
        self.bytes += r.bytes();
        if let Some(old) = self.caches.insert((segment, epoch), r) {
            self.bytes = self.bytes.saturating_sub(old.bytes());
        }
        self.counters.rda_caches_retained += 1;
        self.expire();
    }

    /// Drops caches past their retention time, then the oldest ones while over budget.
    pub fn expire(&mut self) {
        let now = Instant::now();
        let old: Vec<(u32, u64)> = self
            .caches
            .iter()
            .filter(|(_, r)| now.duration_since(r.stored) > self.retention)
            .map(|(k, _)| *k)
            .collect();
        for k in old {
            self.drop_cache(k);
            self.counters.rda_caches_expired += 1;
        }
        while self.bytes > self.max_bytes {
            if let Some(spare) = self.spares.pop() {
                self.bytes = self.bytes.saturating_sub(buffer_bytes(&spare));
                continue;
            }
            if self.caches.len() <= 1 {
                break;
            }
            let Some(oldest) = self.caches.iter().min_by_key(|(_, r)| r.stored).map(|(k, _)| *k) else {
                break;
            };
            self.drop_cache(oldest);
            self.counters.rda_caches_evicted += 1;
            tracing::warn!(
                segment = oldest.0,
                epoch = oldest.1,
                "RDA cache evicted early to stay within the retention budget"
            );
        }
    }

    /// Drops the cache of (`segment`, `epoch`) once the peer acknowledged that epoch's RDA
    /// synopsis: the peer acknowledges only after committing the group, whose reconciliation
    /// (every look-up and bind) is then over. Without this the caches would live for the whole
    /// retention time: at 50 epochs/s and 300 s that is 15 000 caches per segment, the
    /// growth the W14 soaks measured.
    pub fn release(&mut self, segment: u32, epoch: u64) {
        if self.caches.contains_key(&(segment, epoch)) {
            self.drop_cache((segment, epoch));
            self.counters.rda_caches_released += 1;
        }
    }

    /// Drops a cache; its buffer becomes a spare when no other sink shares it and fewer than
    /// [`MAX_SPARES`] are kept (the budget still counts it).
    fn drop_cache(&mut self, k: (u32, u64)) {
        let Some(r) = self.caches.remove(&k) else { return };
        match Arc::try_unwrap(r.pairs) {
            Ok(pairs) if self.spares.len() < MAX_SPARES && pairs.capacity() > 0 => self.spares.push(pairs),
            Ok(pairs) => self.bytes = self.bytes.saturating_sub(buffer_bytes(&pairs)),
            Err(shared) => self.bytes = self.bytes.saturating_sub(buffer_bytes(&shared)),
        }
    }

    /// A spare buffer with room for at least `min_pairs` pairs (its contents are stale), for
    /// the publisher to trade for the next epoch's sorted run; spares too small for that are
    /// dropped on the way.
    pub fn spare_run(&mut self, min_pairs: usize) -> Option<Vec<(u64, u64)>> {
        while let Some(spare) = self.spares.pop() {
            self.bytes = self.bytes.saturating_sub(buffer_bytes(&spare));
            if spare.capacity() >= min_pairs {
                return Some(spare);
            }
        }
        None
    }

    /// Caches held.
    pub fn len(&self) -> usize {
        self.caches.len()
    }

    /// True when none is held.
    pub fn is_empty(&self) -> bool {
        self.caches.is_empty()
    }

    fn get(&mut self, c: &CacheRef) -> Option<&Retained> {
        if c.point != self.point {
            return None;
        }
        let r = self.caches.get_mut(&(c.segment, c.epoch))?;
        if !r.sorted {
            Arc::make_mut(&mut r.pairs).sort_unstable_by_key(|p| p.0);
            r.sorted = true;
        }
        Some(r)
    }

    /// Answers a look-up: the timestamp of each id, in order.
    pub fn lookup(&mut self, c: &CacheRef, ids: &[u64]) -> (LookupStatus, Vec<Option<u64>>) {
        self.counters.rda_lookups += 1;
        self.counters.rda_lookup_ids = self.counters.rda_lookup_ids.wrapping_add(ids.len() as u64);
        let Some(r) = self.get(c) else {
            self.counters.rda_lookup_misses += 1;
            return (LookupStatus::NoCache, Vec::new());
        };
        let out = ids
            .iter()
            .map(|id| {
                r.pairs.binary_search_by_key(id, |p| p.0).ok().and_then(|i| r.pairs.get(i)).map(|p| p.1)
            })
            .collect();
        (LookupStatus::Ok, out)
    }

    /// Builds late-binding banks with `m` buckets per bank from the cache and encodes them.
    pub fn bind(&mut self, c: &CacheRef, m: u32) -> (LookupStatus, Vec<u8>) {
        let Some(cfg) = self.rda.clone() else { return (LookupStatus::Refused, Vec::new()) };
        let (lo, hi, _, _) = sizing::margins(&cfg);
        let m = m as usize;
        if m == 0 || m < lo.min(hi) || m > hi {
            return (LookupStatus::Refused, Vec::new());
        }
        let Some(r) = self.get(c) else {
            self.counters.rda_lookup_misses += 1;
            return (LookupStatus::NoCache, Vec::new());
        };
        let mut banks = Banks::new(&cfg, m);
        for &(id, ts) in r.pairs.iter() {
            banks.insert(id, ts);
        }
        self.counters.rda_binds += 1;
        (LookupStatus::Ok, rda_wire::encode_banks(&cfg, &banks))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirelat_dataplane::synopsis::SynopsisConfig;
    use wirelat_dataplane::synopsis::rda::{TimestampCache, banks_from_cache};

    fn cache(ids: &[u64]) -> TimestampCache {
        let mut c = TimestampCache::new(64, 1);
        for &id in ids {
            c.insert(id, id * 10);
        }
        c
    }

    #[test]
    fn lookups_answer_from_the_right_cache() {
        let mut r = RetainedCaches::new(3, None, Duration::from_secs(60), 1 << 20);
        r.retain(1, 7, RdaPairs::Cache(&cache(&[5, 2, 9])));
        let c = CacheRef { point: 3, segment: 1, epoch: 7 };
        assert_eq!(r.lookup(&c, &[9, 4, 2]), (LookupStatus::Ok, vec![Some(90), None, Some(20)]));
        assert_eq!(r.lookup(&CacheRef { epoch: 8, ..c }, &[9]).0, LookupStatus::NoCache);
        assert_eq!(r.lookup(&CacheRef { point: 4, ..c }, &[9]).0, LookupStatus::NoCache);
        assert_eq!(r.counters.rda_lookup_misses, 2);
    }

    /// A cache filed in bulk (the control thread's merged epochs) is retained as the sorted run
    /// it is, without the sort a table's pairs need, and answers the same look-ups.
    #[test]
    fn a_sorted_run_is_retained_without_a_sort_and_answers_like_a_table() {
        let pairs: Vec<(u64, u64)> =
            (1..=3_000u64).map(|i| (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1, i)).collect();
        let mut bulk = TimestampCache::new(4_000, 1);
        assert!(bulk.file_sorted(&pairs, None, |_, _| {}));
        let mut table = TimestampCache::new(4_000, 1);
        for &(id, ts) in &pairs {
            table.insert(id, ts);
        }
        let mut r = RetainedCaches::new(3, None, Duration::from_secs(60), u64::MAX);
        r.retain(1, 1, RdaPairs::Cache(&bulk));
        r.retain(1, 2, RdaPairs::Cache(&table));
        assert!(r.caches[&(1, 1)].sorted, "a run needs no sort");
        assert!(!r.caches[&(1, 2)].sorted, "a table's pairs are sorted at the first look-up");
        let ids: Vec<u64> = pairs.iter().step_by(7).map(|p| p.0).chain([2, 4, u64::MAX]).collect();
        let want: Vec<Option<u64>> =
            ids.iter().map(|id| pairs.iter().find(|p| p.0 == *id).map(|p| p.1)).collect();
        for epoch in [1, 2] {
            assert_eq!(
                r.lookup(&CacheRef { point: 3, segment: 1, epoch }, &ids),
                (LookupStatus::Ok, want.clone())
            );
        }
    }

    #[test]
    fn an_acknowledged_epochs_cache_is_released_and_the_budget_counts_capacity() {
        // Retention 1 h: only the release frees anything here.
        let mut r = RetainedCaches::new(3, None, Duration::from_secs(3600), u64::MAX);
        let ids: Vec<u64> = (1..=40).collect();
        for epoch in 0..100 {
            r.retain(1, epoch, RdaPairs::Cache(&cache(&ids)));
        }
        assert_eq!(r.len(), 100);
        assert_eq!(r.bytes, 100 * 40 * 16, "exactly the pairs' memory (no doubling slack)");
        for epoch in 0..100 {
            r.release(1, epoch);
        }
        r.release(1, 5); // twice: counted once
        r.release(2, 7); // never held
        assert!(r.is_empty());
        assert_eq!(r.bytes, MAX_SPARES as u64 * 40 * 16, "only the spare buffers are left");
        assert_eq!(r.counters.rda_caches_released, 100);
        assert!(r.spare_run(41).is_none(), "spares too small for the run are dropped");
        assert_eq!(r.bytes, 0);
    }

    /// A run moved out of the accumulator is shared, not copied: the store keeps the very
    /// buffer, two stores count it each, and only the last to drop it gets it back as a spare,
    /// which then files the next epoch and is traded again. Over budget, spares go first.
    #[test]
    fn a_moved_run_is_shared_and_comes_back_as_the_next_epochs_buffer() {
        let epoch = |k: u64| -> Vec<(u64, u64)> {
            (1..=3_000u64)
                .map(|i| ((i + 10_000 * k).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1, i + k))
                .collect()
        };
        let mut acc = TimestampCache::new(4_000, 1);
        assert!(acc.file_sorted(&epoch(1), None, |_, _| {}));
        let want = acc.sorted_pairs().expect("a run").to_vec();
        let need = acc.run_capacity();
        assert!(need >= 3_000);
        let (mut a, mut b) = (
            RetainedCaches::new(3, None, Duration::from_secs(60), u64::MAX),
            RetainedCaches::new(3, None, Duration::from_secs(60), u64::MAX),
        );
        let mut buf = a.spare_run(need).unwrap_or_default();
        assert!(acc.swap_run(&mut buf) && acc.is_empty());
        let run = Arc::new(buf);
        let at = run.as_ptr();
        a.retain(1, 1, RdaPairs::Run(&run));
        b.retain(1, 1, RdaPairs::Run(&run));
        drop(run);
        assert_eq!((a.counters.rda_runs_moved, a.bytes), (1, (need * 16) as u64));
        assert_eq!(a.caches[&(1, 1)].pairs.as_ptr(), at, "the same buffer, not a copy");
        let ids: Vec<u64> = want.iter().step_by(11).map(|p| p.0).chain([2]).collect();
        let answer: Vec<Option<u64>> =
            ids.iter().map(|id| want.iter().find(|p| p.0 == *id).map(|p| p.1)).collect();
        assert_eq!(a.lookup(&CacheRef { point: 3, segment: 1, epoch: 1 }, &ids), (LookupStatus::Ok, answer));
        a.release(1, 1);
        assert!(a.spare_run(0).is_none(), "b still holds it");
        assert_eq!(a.bytes, 0);
        b.release(1, 1);
        assert_eq!(b.bytes, (need * 16) as u64, "the spare stays in the budget");
        let mut buf = b.spare_run(need).expect("the released run's buffer");
        assert_eq!((buf.as_ptr(), b.bytes), (at, 0));
        // The next epoch files into the traded buffer and equals a fresh cache's filing.
        assert!(acc.file_sorted(&epoch(2), None, |_, _| {}));
        let mut fresh = TimestampCache::new(4_000, 1);
        assert!(fresh.file_sorted(&epoch(2), None, |_, _| {}));
        assert_eq!(acc.sorted_pairs(), fresh.sorted_pairs());
        assert!(acc.swap_run(&mut buf));
        assert_eq!(Some(&buf[..]), fresh.sorted_pairs());
        // After a burst the run's buffer is far larger than a small epoch's run: that epoch is
        // copied with no more room than its pairs, and not offered for a trade.
        let mut small = TimestampCache::new(4_000, 1);
        assert!(small.file_sorted(&epoch(3), None, |_, _| {}));
        small.clear();
        assert!(small.file_sorted(&epoch(4)[..100], None, |_, _| {}));
        assert!(small.run_capacity() >= 3_000 && small.run_room() == 0);
        let mut d = RetainedCaches::new(3, None, Duration::from_secs(60), u64::MAX);
        d.retain(1, 4, RdaPairs::Cache(&small));
        assert_eq!(d.bytes, 100 * 16);
        // Over budget, a spare is dropped before any cache is evicted.
        let mut c = RetainedCaches::new(3, None, Duration::from_secs(60), 3 * 40 * 16);
        for epoch in 0..3 {
            c.retain(1, epoch, RdaPairs::Cache(&cache(&(1..=40).collect::<Vec<_>>())));
        }
        c.release(1, 0);
        c.release(1, 1);
        assert_eq!(c.spares.len(), MAX_SPARES);
        c.retain(1, 3, RdaPairs::Cache(&cache(&[7])));
        assert_eq!((c.len(), c.counters.rda_caches_evicted, c.spares.len()), (2, 0, 1));
    }

    #[test]
    fn caches_expire_and_the_budget_evicts_the_oldest() {
        let mut r = RetainedCaches::new(3, None, Duration::from_millis(1), 1 << 20);
        r.retain(1, 1, RdaPairs::Cache(&cache(&[1])));
        std::thread::sleep(Duration::from_millis(5));
        r.expire();
        assert!(r.is_empty());
        assert_eq!(r.counters.rda_caches_expired, 1);
        let mut r = RetainedCaches::new(3, None, Duration::from_secs(60), 40);
        r.retain(1, 1, RdaPairs::Cache(&cache(&[1, 2])));
        r.retain(1, 2, RdaPairs::Cache(&cache(&[3, 4])));
        assert_eq!(r.len(), 1);
        assert_eq!(r.counters.rda_caches_evicted, 1);
        assert_eq!(r.lookup(&CacheRef { point: 3, segment: 1, epoch: 2 }, &[3]).1, vec![Some(30)]);
    }

    #[test]
    fn bound_banks_equal_the_library_binding() {
        let cfg = RdaConfig::late_binding(2, 1 << 10);
        assert!(cfg.validate().is_ok());
        let mut c = TimestampCache::new(1000, cfg.cache_seed());
        for id in 1..500u64 {
            c.insert(id.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1, id * 3);
        }
        let mut r = RetainedCaches::new(1, Some(cfg.clone()), Duration::from_secs(60), 1 << 30);
        r.retain(1, 0, RdaPairs::Cache(&c));
        let at = CacheRef { point: 1, segment: 1, epoch: 0 };
        let (lo, _, _, _) = sizing::margins(&cfg);
        let (status, bytes) = r.bind(&at, lo as u32);
        assert_eq!(status, LookupStatus::Ok);
        assert_eq!(bytes, rda_wire::encode_banks(&cfg, &banks_from_cache(&cfg, &c, lo)));
        assert_eq!(r.bind(&at, 0).0, LookupStatus::Refused);
    }
}
