//! Shards: merging equals one structure fed everything, the worker's logged path equals the
//! direct one, reset, and the trait's update and prefetch.

use super::*;

/// Packets with in-shard and cross-shard duplicates, spread over `shards`.
fn shard_stream(seed: u64) -> Vec<(u64, u64)> {
    let mut v = Vec::new();
    for i in 0..3_000u64 {
        let id = crate::synopsis::hash::mix64(seed ^ (i % 2_600 + 1)); // 400 repeats
        let ts = 1_000_000 + (i * 7919 + seed) % 100_000; // repeats are not in time order
        v.push((id, ts));
    }
    v
}

#[test]
fn merged_shards_equal_one_structure_fed_everything() {
    for cfg in [online(2, 128, 4_000), RdaConfig::late_binding(3, 4_000)] {
        for shards in 2..=4usize {
            let stream = shard_stream(shards as u64);
            let mut whole = Rda::new(&cfg).unwrap();
            let mut parts: Vec<Rda> = (0..shards).map(|_| Rda::new(&cfg).unwrap()).collect();
            for (i, &(id, ts)) in stream.iter().enumerate() {
                whole.update_raw(id, 0, ts);
                // Spread by position so that repeats of an id land on different shards.
                parts[i % shards].update_raw(id, 0, ts);
            }
            let mut merged = parts.remove(0);
            for p in &parts {
                merged.merge(p).unwrap();
            }
            assert_eq!(merged, whole, "{} shards, late = {}", shards, cfg.is_late_binding());
            assert_eq!(whole.counters().duplicates, 400);
        }
    }
    let mut a = Rda::new(&online(2, 128, 100)).unwrap();
    let b = Rda::new(&online(2, 129, 100)).unwrap();
    assert!(a.merge(&b).is_err());
}

#[test]
fn reset_returns_to_new() {
    let cfg = online(2, 32, 100);
    let fresh = Rda::new(&cfg).unwrap();
    let mut r = point(&cfg, &[seen(1, 2), seen(3, 4)]);
    assert_ne!(r, fresh);
    r.reset();
    assert_eq!(r, fresh);
    let mut r = point(&cfg, &[seen(1, 2)]);
    let taken = r.take_cache();
    assert_eq!(taken.get(1), Some(2));
    assert!(r.cache().is_empty());
}

#[test]
fn trait_update_equals_update_raw_and_prefetch_targets_the_table() {
    let cfg = online(2, 64, 1_000);
    let flow = crate::packet::FlowKey::default();
    let mut via_trait = Rda::new(&cfg).unwrap();
    let mut raw = Rda::new(&cfg).unwrap();
    for i in 0..100u64 {
        let o = crate::synopsis::Observation {
            ts_ns: 1_000 + i,
            flow: &flow,
            flow_hash: 0,
            identity: i % 70,
            exchange: None,
            encap: crate::packet::Encap::NONE,
        };
        via_trait.update(&mut (), &o);
        raw.update_raw(i % 70, 0, 1_000 + i);
    }
    assert_eq!(via_trait, raw);
    let base = raw.prefetch_target(0) as usize;
    for id in 1..50u64 {
        let p = raw.prefetch_target(id) as usize;
        assert!(p.abs_diff(base) < raw.cache().table_bytes(), "points into the slot table");
        assert_eq!(p % 16, base % 16);
    }
}

/// 400 packets, a fifth of them repeats of an earlier id with a random (earlier or later)
/// timestamp; ids and timestamps random, drawn from the generator state `rng`.
fn packets_with_repeats(rng: &mut u64) -> Vec<(u64, u64)> {
    let mut next = || {
        *rng = mix64(rng.wrapping_add(1));
        *rng
    };
    let mut packets: Vec<(u64, u64)> = Vec::new();
    for i in 0..400u64 {
        let ts = 1_000_000 + (next() % 100_000);
        let id = if i > 10 && next() % 5 == 0 { packets[(next() % i) as usize].0 } else { next() };
        packets.push((id, ts));
    }
    packets
}

/// `packets` with every even id moved into top byte 0x11 (repeats stay repeats): at a capacity
/// of 4 096 (regions of 14 pairs) that region overflows, and the logs' overflow is filed.
fn skewed(packets: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    let skew = |id: u64| if id.is_multiple_of(2) { id & !(0xff << 56) | 0x11 << 56 } else { id };
    packets.into_iter().map(|(id, ts)| (skew(id), ts)).collect()
}

/// The capacity at which [`skewed`] packets overflow a region.
const SKEWED_CAPACITY: u64 = 4_096;

/// The worker's path (log in the shard, appended by the control thread's merges to an empty
/// accumulator's log and filed by its `settle`) gives exactly what the direct path gives: same
/// banks, cache and counters, with repeated ids (earlier and later copies, on one shard and
/// across shards), sampling, and more packets than the capacity.
#[test]
fn logged_shards_merged_equal_the_direct_path() {
    let mut rng = 0x1234_5678_u64;
    for cfg in [
        online(3, 64, 10_000),
        online(2, 32, 150),
        RdaConfig { sample_probability: 0.5, ..online(2, 64, 10_000) },
        RdaConfig::late_binding(2, 10_000),
        RdaConfig::late_binding(2, 120),
        online(3, 64, SKEWED_CAPACITY),
    ] {
        let packets = packets_with_repeats(&mut rng);
        let packets = if cfg.cache_capacity == SKEWED_CAPACITY { skewed(packets) } else { packets };
        let mut direct = Rda::new(&cfg).unwrap();
        for &(id, ts) in &packets {
            direct.update_raw(id, id ^ 7, ts);
        }
        for shards in [1usize, 3] {
            let mut workers: Vec<Rda> = (0..shards).map(|_| Rda::new(&cfg).unwrap()).collect();
            for (i, &(id, ts)) in packets.iter().enumerate() {
                // Steered by packet order, so one id can land on two shards.
                workers[i % shards].update_logged(id, id ^ 7, ts);
            }
            if cfg.cache_capacity == SKEWED_CAPACITY {
                assert!(workers.iter().all(|w| !w.log.overflow().is_empty()), "a region overflowed");
            }
            let mut merged = Rda::new(&cfg).unwrap();
            for w in &workers {
                assert_eq!(w.cache().len(), 0, "a worker never fills its cache");
                merged.merge(w).unwrap();
            }
            let logged: usize = workers.iter().map(Rda::logged).sum();
            if logged as u64 <= cfg.cache_capacity {
                assert_eq!(merged.logged(), logged, "merges defer the filing to settle");
            }
            merged.settle();
            assert_eq!(merged.logged(), 0);
            assert_eq!(merged.counters().seen, direct.counters().seen);
            assert_eq!(merged.counters().sampled_out, direct.counters().sampled_out);
            if packets.len() as u64 <= cfg.cache_capacity {
                // Below the capacity the two paths agree on everything.
                assert_eq!(merged, direct, "{cfg:?}, {shards} shard(s)");
                assert_eq!(merged.encode(), direct.encode());
            } else {
                // Past it, which packets are left out depends on the order they are filed in
                // (a log also counts repeats); the banks still hold exactly the cached ids
                // seen once.
                let mut rebuilt = Rda::new(&cfg).unwrap();
                for (id, ts) in merged.cache().iter_measured() {
                    rebuilt.update_raw(id, id ^ 7, ts);
                }
                assert_eq!(rebuilt.banks(), merged.banks(), "{cfg:?}, {shards} shard(s)");
                let c = merged.counters();
                assert_eq!(
                    c.cached + c.duplicate_ids + c.duplicates + c.cache_full + c.sampled_out,
                    c.seen,
                    "{c:?}"
                );
                assert!(c.cache_full > 0);
            }
        }
    }
}

/// A shard settled on its own (the control thread's `take_cache` path) equals the direct path.
#[test]
fn a_settled_shard_equals_the_direct_path() {
    let cfg = online(2, 128, 1_000);
    let mut direct = Rda::new(&cfg).unwrap();
    let mut logged = Rda::new(&cfg).unwrap();
    for i in 0..300u64 {
        let (id, ts) = (mix64(i % 250) | 1, 5_000 - i);
        direct.update_raw(id, 0, ts);
        logged.update_logged(id, 0, ts);
    }
    assert_eq!(logged.logged(), 300);
    logged.settle();
    assert_eq!(logged.logged(), 0);
    assert_eq!(logged, direct);
    assert_eq!(logged.counters().duplicates, 50);
    let mut cleared = logged.clone();
    cleared.reset();
    assert_eq!(cleared.logged(), 0);
    assert!(cleared.cache().is_empty());
}

/// `merge_all` (the harvest's: every worker's log sorted where it lies) leaves exactly what
/// merging the shards in order and settling leaves, where it reads the logs directly (logged
/// shards into an empty value) and where it falls back to the ordered merges (a shard that
/// filed its cache, a value that already holds packets, more packets than the capacity).
#[test]
fn merge_all_equals_ordered_merges_then_settle() {
    let mut rng = 0x9e37_79b9_u64;
    for cfg in [
        online(3, 64, 10_000),
        online(2, 32, 150),
        RdaConfig { sample_probability: 0.5, ..online(2, 64, 10_000) },
        RdaConfig::late_binding(2, 10_000),
        online(3, 64, SKEWED_CAPACITY),
    ] {
        let packets = packets_with_repeats(&mut rng);
        let packets = if cfg.cache_capacity == SKEWED_CAPACITY { skewed(packets) } else { packets };
        for shards in 1..=4usize {
            // 0: every shard logs (the workers' case); 1: the last shard filed its packets
            // directly; 2: the value merged into already holds a logged packet.
            for case in 0..3 {
                let mut workers: Vec<Rda> = (0..shards).map(|_| Rda::new(&cfg).unwrap()).collect();
                for (i, &(id, ts)) in packets.iter().enumerate() {
                    let w = i % shards;
                    if case == 1 && w + 1 == shards {
                        workers[w].update_raw(id, id ^ 7, ts);
                    } else {
                        workers[w].update_logged(id, id ^ 7, ts);
                    }
                }
                let mut start = Rda::new(&cfg).unwrap();
                if case == 2 {
                    start.update_logged(packets[0].0, 0, 5);
                }
                let mut ordered = start.clone();
                for w in &workers {
                    ordered.merge(w).unwrap();
                }
                ordered.settle();
                if cfg.cache_capacity == SKEWED_CAPACITY && case == 0 {
                    assert!(workers.iter().all(|w| !w.log.overflow().is_empty()), "a region overflowed");
                }
                let mut all = start;
                let refs: Vec<&Rda> = workers.iter().collect();
                all.merge_all(&refs).unwrap();
                assert_eq!(all.logged(), 0, "settled");
                assert_eq!(all, ordered, "{cfg:?}, {shards} shard(s), case {case}");
                assert_eq!(all.encode(), ordered.encode());
            }
        }
    }
    let mut a = Rda::new(&online(2, 128, 100)).unwrap();
    let mut b = Rda::new(&online(2, 129, 100)).unwrap();
    b.update_logged(1, 0, 1);
    assert!(a.merge_all(&[&b]).is_err(), "configurations differ");
}
