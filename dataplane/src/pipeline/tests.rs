use super::*;
use crate::epoch::{EpochBuffer, EpochClock, EpochLink};
use crate::packet::synth::{FrameSpec, IpSpec, L4Spec};
use crate::packet::tcp::flags;
use crate::synopsis::colate::ColateConfig;
use crate::synopsis::fridge::FridgeConfig;
use crate::synopsis::lda::LdaConfig;
use crate::synopsis::lds::LdsConfig;
use crate::synopsis::rda::RdaConfig;
use crate::synopsis::{Synopsis, SynopsisKind};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Every synopsis on, small.
fn all_five() -> SynopsisSet {
    SynopsisSet {
        fridge: Some(FridgeConfig::default()),
        lda: Some(LdaConfig::single_bank(64, 1.0, 7)),
        lds: Some(LdsConfig::new(2, 256)),
        rda: Some(RdaConfig::online(2, 256, 1 << 14)),
        colate: Some(ColateConfig::new(1009, 8, 40, u64::MAX / 4)),
    }
}

/// A seeded two-direction trace: per flow a TCP handshake (SYN on port 0, SYN/ACK on port 1
/// 300 µs later) and a few data packets each way; also some ARP-like junk. Sorted by time.
fn trace(flows: u32) -> Vec<(usize, u64, Vec<u8>)> {
    let mut out = Vec::new();
    let start: u64 = 1_700_000_000_000_000_000;
    for f in 0..flows {
        let client = [10, 0, (f >> 8) as u8, f as u8];
        let server = [192, 0, 2, (f % 7) as u8 + 1];
        let sport = 40_000 + (f % 20_000) as u16;
        let t0 = start + u64::from(f) * 97_000;
        let seq = 1000 * f;
        let syn = FrameSpec::new(
            IpSpec::v4(client, server, f as u16),
            L4Spec::tcp(sport, 80, seq, 0, flags::SYN),
            vec![],
        );
        let synack = FrameSpec::new(
            IpSpec::v4(server, client, f as u16),
            L4Spec::tcp(80, sport, 77, seq.wrapping_add(1), flags::SYN | flags::ACK),
            vec![],
        );
        out.push((0, t0, syn.build()));
        out.push((1, t0 + 300_000 + u64::from(f % 13) * 10_000, synack.build()));
        for i in 0..4u32 {
            let data = FrameSpec::new(
                IpSpec::v4(client, server, (f + i) as u16),
                L4Spec::udp(sport, 5000),
                (i * 31 + f).to_le_bytes().repeat(6),
            );
            out.push((0, t0 + 400_000 + u64::from(i) * 50_000, data.build()));
            let back = FrameSpec::new(
                IpSpec::v4(server, client, (f + i) as u16),
                L4Spec::udp(5000, sport),
                (i * 17 + f).to_le_bytes().repeat(3),
            );
            out.push((1, t0 + 420_000 + u64::from(i) * 50_000, back.build()));
        }
        // A frame the packet layer skips (unknown ethertype).
        let mut junk = vec![0u8; 60];
        junk[12] = 0x88;
        junk[13] = 0xcc;
        out.push((0, t0 + 1_000, junk));
    }
    out.sort_by_key(|(port, ts, _)| (*ts, *port));
    out
}

type Merged = BTreeMap<u64, EpochSynopses>;

/// Runs `packets` through `workers` pipelines (steered like the offline runner) and merges the
/// shards epoch by epoch in worker order, the way the control thread does.
fn run(set: &SynopsisSet, packets: &[(usize, u64, Vec<u8>)], workers: usize, epoch_ns: u64) -> Merged {
    let template = EpochSynopses::new(set).unwrap();
    let clock = EpochClock::new(epoch_ns).unwrap();
    let mut links = Vec::new();
    let mut pipes = Vec::new();
    for _ in 0..workers {
        let t = template.clone();
        let (link, writer) = EpochLink::new(4, clock, move || t.clone());
        links.push(link);
        pipes.push(Pipeline::new(PacketConfig::default(), writer, set.new_carry(), OverrunPolicy::Wait));
    }
    let shards: std::cell::RefCell<BTreeMap<u64, Vec<Option<EpochSynopses>>>> = Default::default();
    let drain = |links: &[Arc<EpochLink<EpochSynopses>>]| {
        for (w, link) in links.iter().enumerate() {
            while let Some(f) = link.pop_full() {
                let mut s = shards.borrow_mut();
                let slot = s.entry(f.epoch).or_insert_with(|| vec![None; links.len()]);
                slot[w] = Some((*f.buffer).clone());
                let mut b = f.buffer;
                b.reset();
                assert!(link.push_free(b).is_ok());
            }
        }
        true
    };
    for (port, ts, frame) in packets {
        let w = steer::worker_of(frame, workers);
        pipes[w].process(*port, frame, *ts, &mut || drain(&links));
    }
    for p in &mut pipes {
        p.finish();
    }
    drain(&links);
    let mut merged = Merged::new();
    for (epoch, per_worker) in shards.into_inner() {
        let mut acc = template.clone();
        let held: Vec<&EpochSynopses> = per_worker.iter().flatten().collect();
        for s in &held {
            acc.merge_from(s).unwrap();
        }
        acc.settle();
        // The harvest's way, every shard at once, leaves the same epoch.
        let mut all = template.clone();
        all.merge_all(&held).unwrap();
        assert_eq!(encodings(&all), encodings(&acc), "epoch {epoch}: merge_all against ordered merges");
        assert_eq!(fridge_counts(&all), fridge_counts(&acc), "epoch {epoch}");
        for d in Direction::BOTH {
            assert_eq!(all.direction(d).measured, acc.direction(d).measured, "epoch {epoch}");
        }
        // And the harvest's drain (into a buffer still holding the last epoch) leaves it too,
        // with every shard back to a fresh buffer's state.
        let mut drained = merged.values().next_back().cloned().unwrap_or_else(|| template.clone());
        let mut shards: Vec<EpochSynopses> = per_worker.into_iter().flatten().collect();
        let mut held: Vec<&mut EpochSynopses> = shards.iter_mut().collect();
        drained.drain_all(&mut held).unwrap();
        assert_eq!(encodings(&drained), encodings(&acc), "epoch {epoch}: drain_all against ordered merges");
        assert_eq!(fridge_counts(&drained), fridge_counts(&acc), "epoch {epoch}");
        for d in Direction::BOTH {
            assert_eq!(drained.direction(d).measured, acc.direction(d).measured, "epoch {epoch}");
        }
        for s in &shards {
            assert_eq!(encodings(s), encodings(&template), "epoch {epoch}: a drained shard is reset");
            assert!(Direction::BOTH.iter().all(|d| s.direction(*d).measured == 0), "epoch {epoch}");
        }
        merged.insert(epoch, acc);
    }
    merged
}

/// The enabled two-point synopses' encodings, both directions.
fn encodings(e: &EpochSynopses) -> Vec<Vec<u8>> {
    let mut v = Vec::new();
    for d in Direction::BOTH {
        let s = e.direction(d);
        v.extend(s.lda.as_ref().map(Synopsis::encode));
        v.extend(s.lds.as_ref().map(Synopsis::encode));
        v.extend(s.rda.as_ref().map(Synopsis::encode));
        v.extend(s.colate.as_ref().map(Synopsis::encode));
    }
    v
}

/// The fridge's per-epoch sample counters and per-bin sample counts. Its Σc are floats (summed
/// in another order by another number of workers they may differ in the last bits), and its
/// request-gap sum (counter 1) is per worker by nature. None without a fridge.
fn fridge_counts(e: &EpochSynopses) -> Vec<(Vec<u64>, Vec<u64>)> {
    e.fridge
        .iter()
        .flat_map(|f| f.kinds())
        .map(|k| {
            let mut c = k.counters.to_array().to_vec();
            c.remove(1);
            (c, k.hist_flat().iter().map(|b| b.samples).collect())
        })
        .collect()
}

#[test]
fn two_workers_merge_to_exactly_what_one_worker_measures() {
    let set = all_five();
    let packets = trace(300);
    // Epochs of 5 ms: the 29 ms trace spans several, and handshakes cross boundaries.
    let one = run(&set, &packets, 1, 5_000_000);
    let two = run(&set, &packets, 2, 5_000_000);
    assert!(one.len() >= 5, "{} epochs", one.len());
    assert_eq!(one.keys().collect::<Vec<_>>(), two.keys().collect::<Vec<_>>());
    for (k, a) in &one {
        let b = &two[k];
        // LDA, LDS, RDA and COLATE merge exactly; the fridge's samples land in the same bins,
        // because a flow's request and response stay on one worker.
        // LDS's flow log lists flows in insertion order, which sharding changes: compare its
        // cells exactly and its flows as a set.
        for (i, (x, y)) in encodings(a).iter().zip(encodings(b).iter()).enumerate() {
            assert!(x == y || i % 4 == 1, "epoch {k} encoding {i}");
        }
        for d in Direction::BOTH {
            let (x, y) = (a.direction(d).lds.as_ref().unwrap(), b.direction(d).lds.as_ref().unwrap());
            assert!(x.cells() == y.cells(), "epoch {k} LDS cells");
            let keys = |l: &crate::synopsis::lds::Lds| {
                let mut v: Vec<_> = l.flows().entries().iter().map(|e| e.key).collect();
                v.sort();
                v
            };
            assert_eq!(keys(x), keys(y));
        }
        assert_eq!(fridge_counts(a), fridge_counts(b), "epoch {k}");
        assert_eq!(a.forward.measured, b.forward.measured);
    }
    // Every measured packet is in some epoch, on the right direction.
    let fwd: u64 = one.values().map(|e| e.forward.measured).sum();
    let rev: u64 = one.values().map(|e| e.reverse.measured).sum();
    assert_eq!((fwd, rev), (300 * 5, 300 * 5));
    // Every handshake is a fridge sample (p = 1 and a response always follows its request).
    let samples: u64 = one
        .values()
        .map(|e| e.fridge.as_ref().unwrap().kinds().iter().map(|k| k.counters.samples).sum::<u64>())
        .sum();
    assert_eq!(samples, 300);
}

#[test]
fn port_zero_feeds_forward_and_port_one_reverse() {
    let set = all_five();
    let packets: Vec<_> = trace(20).into_iter().filter(|(port, _, _)| *port == 0).collect();
    let merged = run(&set, &packets, 1, 1_000_000_000);
    let e = merged.values().next().unwrap();
    assert_eq!(e.forward.measured, 20 * 5);
    assert_eq!(e.reverse.measured, 0);
    assert_eq!(e.reverse.lda.as_ref().unwrap().total_packets(), 0);
    assert_eq!(e.forward.lda.as_ref().unwrap().total_packets(), 100);
    assert_eq!(e.reverse.colate.as_ref().unwrap().packets(), 0);
    // Requests only: the fridge inserted but found no response.
    let f = e.fridge.as_ref().unwrap();
    assert_eq!(f.kinds().iter().map(|k| k.counters.samples).sum::<u64>(), 0);
}

#[test]
fn skip_policy_counts_overruns_and_wait_policy_loses_nothing() {
    let set = SynopsisSet { lda: Some(LdaConfig::single_bank(64, 1.0, 7)), ..Default::default() };
    let template = EpochSynopses::new(&set).unwrap();
    let packets = trace(50);
    let clock = EpochClock::new(1_000_000).unwrap();
    for policy in [OverrunPolicy::Skip, OverrunPolicy::Wait] {
        let t = template.clone();
        let (link, writer) = EpochLink::new(2, clock, move || t.clone());
        let mut p = Pipeline::new(PacketConfig::default(), writer, set.new_carry(), policy);
        let mut returned = 0u64;
        let mut harvested = 0u64;
        for (port, ts, frame) in &packets {
            // The control thread never runs on its own here: only when the pipeline waits.
            p.process(*port, frame, *ts, &mut || {
                while let Some(f) = link.pop_full() {
                    harvested += f.buffer.forward.measured + f.buffer.reverse.measured;
                    let mut b = f.buffer;
                    b.reset();
                    returned += 1;
                    assert!(link.push_free(b).is_ok());
                }
                true
            });
        }
        p.finish();
        while let Some(f) = link.pop_full() {
            harvested += f.buffer.forward.measured + f.buffer.reverse.measured;
        }
        let c = p.snapshot();
        assert_eq!(c.measured, 500);
        assert_eq!(c.unknown_ethertype, 50);
        assert_eq!(c.frames, 550);
        match policy {
            OverrunPolicy::Skip => {
                assert_eq!(returned, 0);
                assert!(c.overrun_epochs > 0 && c.overrun_packets > 0, "{c:?}");
                assert_eq!(harvested + c.overrun_packets, 500);
                assert_eq!(c.waits, 0);
            }
            OverrunPolicy::Wait => {
                assert!(returned > 0 && c.waits > 0);
                assert_eq!((c.overrun_epochs, c.overrun_packets), (0, 0));
                assert_eq!(harvested, 500);
            }
        }
    }
}

#[test]
fn staged_bursts_equal_packet_by_packet_processing() {
    let set = all_five();
    let packets = trace(40);
    let by_packet = run(&set, &packets, 1, 2_000_000);
    let template = EpochSynopses::new(&set).unwrap();
    let t = template.clone();
    let (link, writer) = EpochLink::new(64, EpochClock::new(2_000_000).unwrap(), move || t.clone());
    let mut p = Pipeline::new(PacketConfig::default(), writer, set.new_carry(), OverrunPolicy::Wait);
    let mut staged = StagedBurst::new();
    let mut hints = 0;
    // Bursts of up to 8 packets of one port, in time order.
    let mut i = 0;
    while i < packets.len() {
        let port = packets[i].0;
        staged.clear();
        while i < packets.len() && packets[i].0 == port && staged.len() < 8 {
            p.stage(&mut staged, &packets[i].2, packets[i].1, port, &mut |ptr: *const u8| {
                assert!(!ptr.is_null());
                hints += 1;
            });
            i += 1;
        }
        p.apply(port, &staged, &mut |_| panic!("64 buffers are enough"));
    }
    p.finish();
    assert!(hints > 0);
    let mut got = Merged::new();
    // Merged into an empty buffer and settled, as the control thread harvests (RDA files its
    // log there).
    while let Some(f) = link.pop_full() {
        let mut acc = template.clone();
        acc.merge_from(&f.buffer).unwrap();
        acc.settle();
        got.insert(f.epoch, acc);
    }
    assert_eq!(got.keys().collect::<Vec<_>>(), by_packet.keys().collect::<Vec<_>>());
    for (k, e) in &got {
        assert_eq!(encodings(e), encodings(&by_packet[k]), "epoch {k}");
        let (a, b) = (e.fridge.as_ref().unwrap(), by_packet[k].fridge.as_ref().unwrap());
        assert_eq!(a.encode(), b.encode(), "same worker, same order: the fridge is byte-identical");
    }
}

/// Page faults taken by backing a fresh buffer of `set`, and by backing it a second time.
fn faults_of_backing(set: &SynopsisSet) -> (u64, u64) {
    use crate::synopsis::backing::minor_faults;
    let mut b = EpochSynopses::new(set).expect("synopses");
    let before = minor_faults();
    b.back_reserved();
    let first = minor_faults() - before;
    let before = minor_faults();
    b.back_reserved();
    (first, minor_faults() - before)
}

#[test]
fn backing_a_buffer_backs_rda_and_lds_logs_of_both_directions_once() {
    // RDA's log: 2^20 packets × 16 B = 16 MiB per direction, at least 8 pages of any size each.
    let rda = SynopsisSet { rda: Some(RdaConfig::online(2, 256, 1 << 20)), ..SynopsisSet::default() };
    let (first, again) = faults_of_backing(&rda);
    assert!(first >= 16, "backing two 16-MiB RDA logs took only {first} page faults: were they written?");
    assert!(again <= 2, "{again} page faults backing an already backed buffer");
    // LDS's flow log: 2^18 entries × 56 B, about 14 MiB per direction.
    let mut cfg = LdsConfig::new(2, 256);
    cfg.flow_capacity = 1 << 18;
    let lds = SynopsisSet { lds: Some(cfg), ..SynopsisSet::default() };
    let (first, again) = faults_of_backing(&lds);
    assert!(
        first >= 12,
        "backing two 14-MiB LDS flow logs took only {first} page faults: were they written?"
    );
    assert!(again <= 2, "{again} page faults backing an already backed buffer");
}

/// A pipeline of `set` with the default packet layer (what `Pipeline::new` made of it is in
/// its `packet`).
fn pipeline(set: &SynopsisSet) -> Pipeline {
    let template = EpochSynopses::new(set).unwrap();
    let (_link, writer) = EpochLink::new(2, EpochClock::new(1_000_000).unwrap(), move || template.clone());
    Pipeline::new(PacketConfig::default(), writer, set.new_carry(), OverrunPolicy::Wait)
}

/// The classifiers run only where a synopsis reads what they find: without the fridge the
/// pipeline turns them off (a TCP SYN costs no pairing id), with it they stay as configured,
/// and the two-point synopses measure the same either way.
#[test]
fn classifiers_run_only_for_the_fridge() {
    let mut two_point = all_five();
    two_point.fridge = None;
    let off = pipeline(&two_point);
    assert!(!off.packet.classify.tcp_handshake && !off.packet.classify.dns && !off.packet.classify.tcp_data);
    assert_eq!(off.packet.classify.dns_ports, PacketConfig::default().classify.dns_ports);
    assert_eq!(off.packet.identity_seed, PacketConfig::default().identity_seed);
    let on = pipeline(&all_five());
    assert_eq!(on.packet, PacketConfig::default());

    let packets = trace(40);
    let without = run(&two_point, &packets, 2, 1_000_000);
    let with = run(&all_five(), &packets, 2, 1_000_000);
    assert!(!with.is_empty());
    assert_eq!(with.keys().collect::<Vec<_>>(), without.keys().collect::<Vec<_>>());
    for (epoch, w) in &with {
        let o = &without[epoch];
        assert_eq!(encodings(w), encodings(o), "epoch {epoch}");
        for d in Direction::BOTH {
            assert_eq!(w.direction(d).measured, o.direction(d).measured, "epoch {epoch}");
        }
    }
    // The fridge did classify the handshakes: its counts are not all zero.
    assert!(with.values().any(|e| fridge_counts(e).iter().any(|(a, b)| a.iter().chain(b).any(|n| *n > 0))));
}

/// The flow hash and the packet identity are computed only where a two-point synopsis reads
/// them: a fridge alone runs without them and measures exactly what it measures beside the
/// others.
#[test]
fn hashes_are_computed_only_for_two_point_synopses() {
    let fridge_only = SynopsisSet { fridge: Some(FridgeConfig::default()), ..SynopsisSet::default() };
    assert!(!pipeline(&fridge_only).packet.hashes);
    assert!(pipeline(&fridge_only).packet.classify.tcp_handshake);
    assert!(pipeline(&all_five()).packet.hashes);
    for kind in [SynopsisKind::Lda, SynopsisKind::Lds, SynopsisKind::Rda, SynopsisKind::Colate] {
        let mut one = all_five();
        one.retain(|k| k == kind);
        assert!(pipeline(&one).packet.hashes, "{kind:?}");
    }
    // A frame measured without the hashes carries 0 for both, and the same flow key.
    let frame = &trace(1)[0].2;
    let off = PacketConfig { hashes: false, ..PacketConfig::default() };
    let mut counters = PacketCounters::default();
    let (Inspection::Measured(a), Inspection::Measured(b)) = (
        packet::inspect(frame, &PacketConfig::default(), &mut counters),
        packet::inspect(frame, &off, &mut counters),
    ) else {
        panic!("the trace's first frame is measured")
    };
    assert_ne!((a.flow_hash, a.identity), (0, 0));
    assert_eq!((b.flow_hash, b.identity, b.flow, b.exchange), (0, 0, a.flow, a.exchange));

    let packets = trace(40);
    let alone = run(&fridge_only, &packets, 2, 1_000_000);
    let beside = run(&all_five(), &packets, 2, 1_000_000);
    assert_eq!(alone.keys().collect::<Vec<_>>(), beside.keys().collect::<Vec<_>>());
    for (epoch, e) in &alone {
        assert_eq!(fridge_counts(e), fridge_counts(&beside[epoch]), "epoch {epoch}");
    }
    assert!(alone.values().any(|e| fridge_counts(e).iter().any(|(a, b)| a.iter().chain(b).any(|n| *n > 0))));
}
