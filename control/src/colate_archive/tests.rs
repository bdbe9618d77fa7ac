use super::*;
use proptest::prelude::*;
use wirelat_dataplane::synopsis::Synopsis;
use wirelat_dataplane::synopsis::colate::{Colate, EpochAccumulator};

const WINDOW: u64 = 1_000_000;

fn config() -> ColateConfig {
    ColateConfig { packet_counts: true, seed: 11, ..ColateConfig::new(10_007, 20, 40, 10_000_000_000) }
}

fn header(point: u32) -> ArchiveHeader {
    ArchiveHeader { point, window_len_ns: WINDOW, config: config(), packet_identity: Some(0x1d) }
}

/// Creates an archive at `path` under `h` holding one epoch: one packet of flow 1 in window 3.
fn one_epoch_archive(path: &Path, h: &ArchiveHeader) -> ArchiveWriter {
    let mut w = ArchiveWriter::create(path, h.clone()).unwrap();
    let mut v = Colate::new(&h.config).unwrap();
    v.update_raw(1, 1, 3 * WINDOW);
    let mut acc = EpochAccumulator::new(&h.config, h.point, 0).unwrap();
    acc.push_window(3, &v).unwrap();
    w.append(&acc.flush().unwrap()).unwrap();
    w
}

/// Flow 1 from point 1 to point 2, over [3·WINDOW, 3·WINDOW + span_ns].
fn flow1_query(packets: u64, span_ns: u64, max_latency_ns: u64) -> FlowQuery {
    FlowQuery {
        flow_hash: 1,
        packets,
        sender: 1,
        receiver: 2,
        start_ns: 3 * WINDOW,
        end_ns: 3 * WINDOW + span_ns,
        max_latency_ns,
        options: QueryOptions::default(),
        latency_floor: LatencyFloor::Derived,
    }
}

/// Two points, 8 windows of traffic: flow 1 (300 packets, 2 µs latency) among 200 others.
/// Returns the epochs per point, written through accumulators, and flow 1's packets.
fn record(dir: &Path) -> (PathBuf, PathBuf, u64) {
    record_offset(dir, 0)
}

/// [`record`] with point 2's clock `offset_ns` off point 1's.
fn record_offset(dir: &Path, offset_ns: i64) -> (PathBuf, PathBuf, u64) {
    let c = config();
    let mut pkts = Vec::new();
    let base = 1_000 + offset_ns.unsigned_abs();
    for f in 0..200u64 {
        for i in 0..40u64 {
            let ts = base + (wirelat_dataplane::synopsis::hash::mix64(f * 1_000 + i) % (8 * WINDOW - 10_000));
            pkts.push((f + 2, f * 1_000 + i, ts, (ts + 500 + f).checked_add_signed(offset_ns).unwrap()));
        }
    }
    for i in 0..300u64 {
        let ts = 3 * WINDOW + 10 * i;
        pkts.push((1, 1_000_000 + i, ts, (ts + 2_000).checked_add_signed(offset_ns).unwrap()));
    }
    let mut paths = Vec::new();
    for (point, at_r) in [(1u32, false), (2, true)] {
        let path = dir.join(format!("point{point}.colate"));
        let mut w = ArchiveWriter::create(&path, header(point)).unwrap();
        let mut acc = EpochAccumulator::new(&c, point, w.next_seq()).unwrap();
        let mut by_window: Vec<Vec<(u64, u64, u64)>> = vec![Vec::new(); 9];
        for &(f, id, ts, tr) in &pkts {
            let t = if at_r { tr } else { ts };
            by_window[(t / WINDOW) as usize].push((f, id, t));
        }
        let mut shard = Colate::new(&c).unwrap();
        for (k, win) in by_window.iter().enumerate() {
            shard.reset();
            for &(f, id, t) in win {
                shard.update_raw(f, id, t);
            }
            if let Some(e) = acc.push_window(k as u64, &shard).unwrap() {
                w.append(&e).unwrap();
            }
        }
        if let Some(e) = acc.flush() {
            w.append(&e).unwrap();
        }
        assert!(w.bits_per_packet() > 0.0);
        paths.push(path);
    }
    (paths[0].clone(), paths[1].clone(), 300)
}

#[test]
fn archive_queries_derive_the_latency_floor_as_the_collector_does() {
    // W12: archive queries used a floor of 0. Under a clock offset that makes every latency
    // read negative, every clean cell then looked swapped, and flow 1 had no mean.
    let dir = tempfile::tempdir().unwrap();
    let (ps, pr, p) = record_offset(dir.path(), -3_000);
    let store = ColateStore::open(&[ps, pr]).unwrap();
    let q = flow1_query(p, 3_000, 10_000);
    let rep = store.query_flow(&q).unwrap();
    let floor = rep.diagnostics.latency_floor;
    // The foreign latencies read −2 500 … −2 301 ns: the floor lies below them.
    assert!(floor.derived && floor.floor_ns <= -2_500, "{floor:?}");
    let counts = rep.mean_counts_ns.as_ref().unwrap();
    assert!((counts.value / -1_000.0 - 1.0).abs() < 0.02, "{rep:?}");
    assert!(counts.interval.is_some_and(|i| i.low <= -1_000.0 && -1_000.0 <= i.high), "{rep:?}");
    // The old floor of 0, still there as the operator's override, drops every cell.
    let fixed = store.query_flow(&FlowQuery { latency_floor: LatencyFloor::Fixed(0), ..q }).unwrap();
    assert_eq!(fixed.diagnostics.swapped_flow_cells, Some(20), "{fixed:?}");
    assert!(fixed.mean_counts_ns.is_err());
}

#[test]
fn write_read_and_query_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let (ps, pr, p) = record(dir.path());
    let a = ArchiveReader::open(&ps).unwrap();
    assert_eq!(a.header(), &header(1));
    assert!(a.metas().len() > 1, "T closes several epochs");
    let (bytes, packets, bpp) = a.storage();
    assert_eq!(packets, 200 * 40 + 300);
    assert!((bpp - 8.0 * bytes as f64 / packets as f64).abs() < 1e-12);
    for i in 0..a.metas().len() {
        assert_eq!(a.epoch(i).unwrap().meta(), a.metas()[i]);
    }
    let store = ColateStore::open(&[ps.clone(), pr.clone()]).unwrap();
    let over = store.epochs_overlapping(1, 3 * WINDOW, 3 * WINDOW + 3_000).unwrap();
    assert!(!over.is_empty() && over.iter().all(|e| e.point == 1));
    let q = flow1_query(p, 3_000, 10_000);
    let rep = store.query_flow(&q).unwrap();
    // Constant 2 µs latency: the count mean within 1 % (its foreign packets' latencies differ
    // from 2 µs), its interval covering; Eq 3 within its much wider noise.
    let counts = rep.mean_counts_ns.as_ref().unwrap();
    assert!((counts.value / 2_000.0 - 1.0).abs() < 0.01, "{rep:?}");
    assert!(counts.interval.is_some_and(|i| i.low <= 2_000.0 && 2_000.0 <= i.high));
    assert_eq!(rep.diagnostics.flags, 0);
    assert!((rep.mean_ns.as_ref().unwrap().value / 2_000.0 - 1.0).abs() < 0.2, "{rep:?}");
    // Reopening for append continues the sequence.
    let w = ArchiveWriter::open_or_create(&ps, header(1)).unwrap();
    assert_eq!(w.next_seq(), a.metas().last().unwrap().seq + 1);
    // Unknown point, a point twice, another header.
    assert!(matches!(
        store.query_flow(&FlowQuery { receiver: 9, ..q }),
        Err(ArchiveError::UnknownPoint { point: 9 })
    ));
    assert!(ColateStore::open(&[ps.clone(), ps.clone()]).is_err());
    assert!(matches!(ArchiveWriter::open_or_create(&ps, header(2)), Err(ArchiveError::Mismatch { .. })));
    assert!(matches!(ArchiveWriter::create(&ps, header(1)), Err(ArchiveError::Exists { .. })));
}

#[test]
fn archives_of_different_seeds_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (ps, _, _) = record(dir.path());
    let other = dir.path().join("other.colate");
    let h = ArchiveHeader { config: ColateConfig { seed: 12, ..config() }, ..header(2) };
    let mut w = one_epoch_archive(&other, &h);
    // An epoch of another config cannot even be appended.
    let mut acc1 = EpochAccumulator::new(&config(), 2, 5).unwrap();
    acc1.push_window(3, &Colate::new(&config()).unwrap()).unwrap();
    assert!(matches!(w.append(&acc1.flush().unwrap()), Err(ArchiveError::Mismatch { .. })));
    let store = ColateStore::open(&[ps, other]).unwrap();
    let q = flow1_query(1, 0, 0);
    assert!(matches!(store.query_flow(&q), Err(ArchiveError::Query(QueryError::ConfigMismatch { .. }))));
}

#[test]
fn archives_of_different_packet_identities_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (ps, _, _) = record(dir.path());
    // The same point reopened under other packet settings: its cells would mix two hashings.
    let moved = ArchiveHeader { packet_identity: Some(0x2e), ..header(1) };
    let e = ArchiveWriter::open_or_create(&ps, moved).err().unwrap();
    assert!(
        matches!(e, ArchiveError::Mismatch { .. }) && e.to_string().contains("0x000000000000002e"),
        "{e}"
    );
    // Point 2 measured with other packet settings: same COLATE config, refused by the query.
    let other = dir.path().join("other.colate");
    let h = ArchiveHeader { packet_identity: Some(0x2e), ..header(2) };
    drop(one_epoch_archive(&other, &h));
    assert_eq!(ArchiveReader::open(&other).unwrap().header().packet_identity, Some(0x2e));
    let store = ColateStore::open(&[ps, other]).unwrap();
    let q = flow1_query(1, 0, 0);
    let e = store.query_flow(&q).unwrap_err();
    assert!(matches!(e, ArchiveError::Query(QueryError::ConfigMismatch { .. })), "{e}");
    assert!(e.to_string().contains("packet identity"), "{e}");
    // A caller's packet settings against archives that record theirs.
    let packet = PacketConfig::default();
    let solo = dir.path().join("solo.colate");
    let own = ArchiveHeader { packet_identity: Some(packet.identity_fingerprint()), ..header(1) };
    drop(ArchiveWriter::create(&solo, own).unwrap());
    let one = ColateStore::open(std::slice::from_ref(&solo)).unwrap();
    one.check_packet(&packet).unwrap();
    let e = one.check_packet(&PacketConfig { identity_seed: 9, ..packet.clone() }).unwrap_err();
    assert!(e.to_string().contains("point 1's archive"), "{e}");
}

#[test]
fn version_2_archives_are_read_appended_to_and_queried_with_an_unknown_identity() {
    let dir = tempfile::tempdir().unwrap();
    let (ps, pr, p) = record(dir.path());
    // Point 2's archive as a build before headers recorded the packet identity wrote it:
    // the same epochs under a version-2 header.
    let old = dir.path().join("v2.colate");
    {
        let r = ArchiveReader::open(&pr).unwrap();
        let mut w =
            ArchiveWriter::create(&old, ArchiveHeader { packet_identity: None, ..header(2) }).unwrap();
        for i in 0..r.metas().len() {
            w.append(&r.epoch(i).unwrap()).unwrap();
        }
    }
    let bytes = std::fs::read(&old).unwrap();
    assert_eq!(bytes[8], VERSION_WITHOUT_IDENTITY);
    let r = ArchiveReader::open(&old).unwrap();
    assert_eq!(r.header().packet_identity, None);
    // A point of this build continues it (its identity is unknown, so it cannot differ)...
    let n = r.metas().len();
    let w = ArchiveWriter::open_or_create(&old, header(2)).unwrap();
    assert_eq!(w.next_seq(), r.metas()[n - 1].seq + 1);
    // ... and queries pair it with a version-3 archive of any identity, giving the same answer.
    let q = flow1_query(p, 3_000, 10_000);
    let new = ColateStore::open(&[ps.clone(), pr]).unwrap().query_flow(&q).unwrap();
    let mixed = ColateStore::open(&[ps, old.clone()]).unwrap().query_flow(&q).unwrap();
    assert_eq!(format!("{new:?}"), format!("{mixed:?}"));
    // Version 1 (the earlier flow hash) is still refused, by its version.
    let mut v1 = bytes.clone();
    v1[8] = 1;
    std::fs::write(&old, v1).unwrap();
    let e = ArchiveReader::open(&old).err().unwrap();
    assert!(e.to_string().contains("format version 1"), "{e}");
}

#[test]
fn appends_out_of_order_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.colate");
    let mut w = ArchiveWriter::create(&path, header(1)).unwrap();
    let c = config();
    let mut acc = EpochAccumulator::new(&c, 1, 0).unwrap();
    acc.push_window(4, &Colate::new(&c).unwrap()).unwrap();
    let e = acc.flush().unwrap();
    w.append(&e).unwrap();
    assert!(matches!(w.append(&e), Err(ArchiveError::Record { .. })));
    let mut other_point = e.clone();
    other_point.point = 3;
    other_point.seq = 9;
    other_point.first_window = 10;
    other_point.last_window = 10;
    assert!(matches!(w.append(&other_point), Err(ArchiveError::Record { .. })));
}

#[test]
fn corrupt_and_truncated_files_are_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let (ps, _, _) = record(dir.path());
    let good = std::fs::read(&ps).unwrap();
    let write = |name: &str, bytes: &[u8]| {
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    };
    // Truncations inside the header or a record: Truncated or BadHeader. A cut exactly at a
    // record boundary is a valid, shorter archive: its epochs must be a prefix.
    let all = ArchiveReader::open(&ps).unwrap().metas();
    for len in (0..good.len()).step_by(997).chain([good.len() - 1, 5, 40]) {
        let p = write("cut.colate", &good[..len]);
        match ArchiveReader::open(&p) {
            Err(ArchiveError::Truncated { .. } | ArchiveError::BadHeader { .. }) => {}
            Ok(a) => assert!(a.metas().len() < all.len() && all.starts_with(&a.metas()), "len {len}"),
            Err(e) => panic!("len {len}: unexpected {e}"),
        }
    }
    // A flipped bit anywhere is caught (header checksum, frame, record checksum).
    for pos in [0usize, 9, 15, 30, 45, 70, 90, good.len() / 2, good.len() - 1] {
        let mut bad = good.clone();
        bad[pos] ^= 0x04;
        assert!(ArchiveReader::open(write("flip.colate", &bad)).is_err(), "flip at {pos}");
    }
    // An absurd record length is refused before anything is allocated.
    let hdr_len = ArchiveHeader::encode(&header(1)).unwrap().len();
    let mut bad = good.clone();
    bad[hdr_len..hdr_len + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(matches!(ArchiveReader::open(write("big.colate", &bad)), Err(ArchiveError::Oversized { .. })));
    // Another file entirely.
    assert!(matches!(
        ArchiveReader::open(write("x.colate", b"hello world, not an archive at all")),
        Err(ArchiveError::BadHeader { .. })
    ));
    assert!(matches!(ArchiveReader::open(dir.path().join("missing")), Err(ArchiveError::Io { .. })));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]
    #[test]
    fn random_bytes_never_panic(tail in proptest::collection::vec(any::<u8>(), 0..600), keep_header in any::<bool>()) {
        let dir = tempfile::tempdir().unwrap();
        let mut bytes = if keep_header { ArchiveHeader::encode(&header(1)).unwrap() } else { Vec::new() };
        bytes.extend_from_slice(&tail);
        let p = dir.path().join("r.colate");
        std::fs::write(&p, &bytes).unwrap();
        if let Ok(a) = ArchiveReader::open(&p) {
            for i in 0..a.metas().len() {
                let _ = a.epoch(i);
            }
        }
    }
}
