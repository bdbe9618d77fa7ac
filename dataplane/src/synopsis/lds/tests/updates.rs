//! The data path's updates: merged shards equal one sketch fed everything, and located
//! updates equal the trait's.

use super::*;

/// The shard tests' sketch: multi-bank sampling, per-row offsets and a small flow log.
fn sharded_config() -> LdsConfig {
    LdsConfig {
        vlda_len: 3,
        sampling: vec![0.1, 0.5, 1.0],
        offsets: OffsetMode::PerRow,
        flow_capacity: 1_000,
        ..LdsConfig::new(3, 257)
    }
}

#[test]
fn merged_shards_equal_one_sketch_fed_everything() {
    let pkts = stream(11, 300, 20_000);
    let cfg = sharded_config();
    let mut rng = sim::rng(12);
    for shards in 2..=4 {
        let mut whole = Lds::new(&cfg).unwrap();
        let mut parts: Vec<Lds> = (0..shards).map(|_| Lds::new(&cfg).unwrap()).collect();
        for p in &pkts {
            observe(&mut whole, p, p.send_ns);
            // Per-flow steering like RSS, with some flows split across cores.
            let core = if p.flow % 7 == 0 { rng.random_range(0..shards) } else { p.flow as usize % shards };
            observe(&mut parts[core], p, p.send_ns);
        }
        let mut merged = parts.remove(0);
        for p in &parts {
            merged.merge(p).unwrap();
        }
        assert_eq!(merged, whole, "{shards} shards");
        merged.reset();
        assert_eq!(merged, Lds::new(&cfg).unwrap());
    }
}

#[test]
fn drain_all_equals_merges_then_resets() {
    let pkts = stream(13, 300, 6_000);
    let cfg = sharded_config();
    let fresh = Lds::new(&cfg).unwrap();
    let mut stale = fresh.clone();
    for p in stream(17, 40, 500).iter() {
        observe(&mut stale, p, p.send_ns + 7);
    }
    for shards in 0..=3usize {
        let mut parts: Vec<Lds> = (0..shards).map(|_| fresh.clone()).collect();
        for p in pkts.iter().filter(|_| shards > 0) {
            observe(&mut parts[p.identity as usize % shards], p, p.send_ns);
        }
        let mut expected = fresh.clone();
        for p in &parts {
            expected.merge(p).unwrap();
        }
        for start in [&fresh, &stale] {
            let mut acc = start.clone();
            let mut drained = parts.clone();
            let mut refs: Vec<&mut Lds> = drained.iter_mut().collect();
            acc.drain_all(&mut refs).unwrap();
            assert_eq!(acc, expected, "{shards} shards");
            assert!(drained.iter().all(|d| *d == fresh), "{shards} shards left reset");
        }
    }
    // A shard of another shape is refused, and every shard is still left reset.
    let other = Lds::new(&LdsConfig { flow_capacity: 1_000, ..LdsConfig::new(3, 263) }).unwrap();
    let (mut acc, mut a, mut b) = (stale.clone(), stale.clone(), other.clone());
    let mut refs = vec![&mut a, &mut b];
    assert!(matches!(acc.drain_all(&mut refs), Err(MergeError::ConfigMismatch { .. })));
    assert_eq!((acc, a), (fresh.clone(), fresh));
    assert_eq!(b, Lds::new(other.config()).unwrap());
}

#[test]
fn located_updates_equal_trait_updates() {
    // Multi-bank sampling and per-row offsets, so located cells skip rows and differ per row.
    let cfg = LdsConfig { vlda_len: 5, sampling: vec![0.1, 0.5, 1.0, 1.0], ..LdsConfig::new(4, 997) };
    let (mut a, mut b) = (Lds::new(&cfg).unwrap(), Lds::new(&cfg).unwrap());
    let mut rng = sim::rng(11);
    let mut skipped_rows = 0;
    for i in 0..20_000u64 {
        let flow = FlowKey::new([10, 0, 0, (i % 50) as u8].into(), [10, 0, 1, 1].into(), 1000, 80, 6);
        let (flow_hash, identity, ts_ns) = (flow.hash(3), rng.random::<u64>(), 1_000 + i * 37);
        let obs = Observation {
            ts_ns,
            flow: &flow,
            flow_hash,
            identity,
            exchange: None,
            encap: crate::packet::Encap::NONE,
        };
        let at = b.locate(flow_hash, identity).unwrap();
        let expected: Vec<u32> =
            a.cells_of_packet(flow_hash, identity).map(|(r, c)| (r * 997) as u32 + c as u32).collect();
        assert_eq!(at.indices(), &expected[..]);
        skipped_rows += 4 - at.indices().len();
        a.update(&mut (), &obs);
        b.update_located(&at, &obs);
    }
    assert!(skipped_rows > 0);
    assert_eq!(a, b);
    let wide = LdsConfig { sampling: vec![1.0], ..LdsConfig::new(9, 16) };
    assert!(Lds::new(&wide).unwrap().locate(1, 2).is_none());
}
