use super::*;
use crate::colate_archive::ArchiveReader;
use crate::control_side::LdaHarvest;
use crate::epoch::Harvester;
use crate::synopses::peer_fingerprint;
use std::sync::{Arc, Mutex};
use wirelat_dataplane::epoch::{EpochClock, EpochLink};
use wirelat_dataplane::packet::PacketConfig;
use wirelat_dataplane::packet::sample;
use wirelat_dataplane::pipeline::{OverrunPolicy, Pipeline};
use wirelat_dataplane::synopsis::colate::Colate;
use wirelat_dataplane::synopsis::colate::ColateConfig;
use wirelat_dataplane::synopsis::fridge::FridgeConfig;
use wirelat_dataplane::synopsis::lda::{Lda, LdaConfig};
use wirelat_dataplane::synopsis::lds::{Lds, LdsConfig};
use wirelat_dataplane::synopsis::rda::{Rda, RdaConfig};

/// What a [`Collect`] sink was given: messages, retained caches (segment, epoch, ids), closed,
/// and the RDA caches retained only after their epoch's message was delivered (a network peer
/// could have asked for them in between).
type Collected = (Vec<EpochMessage>, Vec<(u32, u64, usize)>, bool, Vec<(u32, u64)>);

/// Collects what it is given.
#[derive(Clone, Default)]
struct Collect(Arc<Mutex<Collected>>);
impl EpochSink for Collect {
    fn deliver(&mut self, msg: &EpochMessage) {
        self.0.lock().unwrap().0.push(msg.clone());
    }
    fn retain_rda_cache(&mut self, segment: u32, epoch: u64, pairs: RdaPairs<'_>) {
        let mut got = self.0.lock().unwrap();
        let late =
            got.0.iter().any(|m| m.kind == SynopsisKind::Rda && m.segment == segment && m.epoch == epoch);
        if late {
            got.3.push((segment, epoch));
        }
        got.1.push((segment, epoch, pairs.len()));
    }
    fn close(&mut self) {
        self.0.lock().unwrap().2 = true;
    }
}

fn set() -> SynopsisSet {
    SynopsisSet {
        fridge: Some(FridgeConfig::default()),
        lda: Some(LdaConfig::single_bank(64, 1.0, 7)),
        lds: Some(LdsConfig::new(2, 128)),
        rda: Some(RdaConfig::online(2, 128, 1 << 12)),
        colate: Some(ColateConfig::new(101, 4, 40, u64::MAX / 4)),
    }
}

/// One retained pair set, as a [`Keep`] sink was given it.
#[derive(Clone, Debug, PartialEq)]
struct Kept {
    segment: u32,
    epoch: u64,
    /// Given as a moved run ([`RdaPairs::Run`]), not as the cache.
    moved: bool,
    /// Sorted.
    pairs: Vec<(u64, u64)>,
}

/// Keeps every RDA pair set it is given; with `trade`, offers a spare buffer full of stale
/// pairs for each run.
#[derive(Clone, Default)]
struct Keep {
    trade: bool,
    kept: Arc<Mutex<Vec<Kept>>>,
}
impl EpochSink for Keep {
    fn deliver(&mut self, _msg: &EpochMessage) {}
    fn retain_rda_cache(&mut self, segment: u32, epoch: u64, pairs: RdaPairs<'_>) {
        let (moved, mut pairs) = match pairs {
            RdaPairs::Run(run) => (true, run.to_vec()),
            RdaPairs::Cache(c) => (false, c.iter().collect::<Vec<_>>()),
        };
        pairs.sort_unstable();
        self.kept.lock().unwrap().push(Kept { segment, epoch, moved, pairs });
    }
    fn spare_rda_run(&mut self, _segment: u32, min_pairs: usize) -> Option<Vec<(u64, u64)>> {
        self.trade.then(|| vec![(3, 3); min_pairs + 5])
    }
}

/// The point of [`publish_sample`].
const SAMPLE_IDS: PointIds = PointIds { point: 7, forward_segment: 11, reverse_segment: 12 };

/// The packet settings of [`publish_sample`].
fn sample_packet() -> PacketConfig {
    PacketConfig { identity_seed: 5, ..PacketConfig::default() }
}

/// The sample frames, 100 µs apart (several 1-ms epochs), alternately on both ports, through
/// the publisher of [`set`] into `sinks` (COLATE archived in `archive`, if given). Returns the
/// epochs published, the packets the packet layer measured, and the finished publisher.
fn publish_sample(
    archive: Option<&std::path::Path>,
    sinks: Vec<Box<dyn EpochSink>>,
) -> (usize, u64, Publisher) {
    publish_sample_with(&set(), archive, sinks)
}

/// [`publish_sample`] with the synopses of `set`.
fn publish_sample_with(
    set: &SynopsisSet,
    archive: Option<&std::path::Path>,
    sinks: Vec<Box<dyn EpochSink>>,
) -> (usize, u64, Publisher) {
    let set = set.clone();
    let packet = sample_packet();
    let mut publisher = Publisher::new(SAMPLE_IDS, 1_000_000, &set, &packet, archive, sinks).unwrap();
    let template = EpochSynopses::new(&set).unwrap();
    let t = template.clone();
    let (link, writer) = EpochLink::new(64, EpochClock::new(1_000_000).unwrap(), move || t.clone());
    let mut p = Pipeline::new(packet.clone(), writer, set.new_carry(), OverrunPolicy::Wait);
    let mut h = Harvester::new(vec![link], move || template.clone());
    for (i, f) in sample::frames().iter().enumerate() {
        p.process(i % 2, &f.data, f.ts_ns, &mut || panic!("64 buffers are enough"));
    }
    p.finish();
    let mut epochs = 0;
    h.poll(|e| {
        publisher.publish(e.epoch, e.merged, e.shards, e.complete).unwrap();
        epochs += 1;
    })
    .unwrap();
    publisher.finish().unwrap();
    (epochs, p.snapshot().measured, publisher)
}

/// Where a sink offers a spare buffer, an epoch's sorted run is moved out and shared by all
/// sinks (none copies it), and the accumulator files the next epoch into the stale buffer it
/// got in trade: every sink keeps exactly the pairs it keeps when nothing is traded.
#[test]
fn a_traded_run_reaches_every_sink_and_the_next_epochs_match_copying() {
    let (copying, trading, second) =
        (Keep::default(), Keep { trade: true, ..Keep::default() }, Keep::default());
    let (epochs, ..) = publish_sample(None, vec![Box::new(copying.clone())]);
    assert_eq!(publish_sample(None, vec![Box::new(trading.clone()), Box::new(second.clone())]).0, epochs);
    let (copied, traded, shared) =
        (copying.kept.lock().unwrap(), trading.kept.lock().unwrap(), second.kept.lock().unwrap());
    assert!(epochs >= 2 && copied.len() == 2 * epochs, "{epochs} epochs, {} caches", copied.len());
    assert!(copied.iter().all(|c| !c.moved), "nothing moves without a spare");
    // A run moves when it fills at least half its buffer (an epoch much smaller than an
    // earlier one is copied), and both sinks get the same shared run.
    let moved = |v: &[Kept]| v.iter().filter(|c| c.moved).count();
    assert!(moved(&traded) >= 2 && moved(&traded) == moved(&shared), "{} moved", moved(&traded));
    assert!(traded.iter().all(|c| !c.moved || !c.pairs.is_empty()));
    let total: usize = copied.iter().map(|c| c.pairs.len()).sum();
    assert!(total > 10 && copied.iter().filter(|c| !c.pairs.is_empty()).count() >= 2, "{total} pairs");
    assert_eq!(*traded, *shared);
    let unflagged =
        |v: &[Kept]| -> Vec<Kept> { v.iter().map(|c| Kept { moved: false, ..c.clone() }).collect() };
    assert_eq!(unflagged(&traded), unflagged(&copied));
}

/// An RDA epoch in which a worker's cache was full is counted, with the packets it left out:
/// exactly the epochs and packets the RDA messages report as `cache_full`. A cache with room
/// counts nothing.
#[test]
fn rda_epochs_with_a_full_cache_are_counted() {
    let cache_full = |sink: &Collect| -> Vec<u64> {
        let got = sink.0.lock().unwrap();
        got.0
            .iter()
            .filter(|m| m.kind == SynopsisKind::Rda)
            .map(|m| match &m.summary {
                Summary::Harvested(Harvested { synopsis: SynopsisSummary::Rda(h), .. }) => {
                    h.counters.cache_full
                }
                other => panic!("{other:?}"),
            })
            .collect()
    };
    let roomy = Collect::default();
    let (_, _, publisher) = publish_sample(None, vec![Box::new(roomy.clone())]);
    assert!(cache_full(&roomy).iter().all(|&n| n == 0));
    assert_eq!(
        (publisher.counters().rda_cache_full_epochs, publisher.counters().rda_cache_full_packets),
        (0, 0)
    );

    // Two packets per worker and epoch: the sample's epochs carry more in each direction.
    let small = SynopsisSet { rda: Some(RdaConfig::online(2, 128, 2)), ..set() };
    let sink = Collect::default();
    let (_, _, publisher) = publish_sample_with(&small, None, vec![Box::new(sink.clone())]);
    let full = cache_full(&sink);
    let c = publisher.counters();
    assert!(c.rda_cache_full_epochs >= 2, "{c:?} {full:?}");
    assert_eq!(c.rda_cache_full_epochs, full.iter().filter(|&&n| n > 0).count() as u64);
    assert_eq!(c.rda_cache_full_packets, full.iter().sum::<u64>());
}

/// A routed sink offers spares only for its own segments: another segment's run is not moved
/// (it would be moved for no keeper and freed), so the unrouted sink copies it.
#[test]
fn only_a_sink_that_keeps_the_segment_trades_its_run() {
    let (trading, everything) = (Keep { trade: true, ..Keep::default() }, Keep::default());
    let routed = crate::sink::RouteSink::new(trading.clone(), |segment| segment == 11);
    publish_sample(None, vec![Box::new(routed), Box::new(everything.clone())]);
    let (traded, all) = (trading.kept.lock().unwrap(), everything.kept.lock().unwrap());
    assert!(!traded.is_empty() && traded.iter().all(|c| c.segment == 11));
    assert!(all.iter().all(|c| !c.moved || c.segment == 11), "only segment 11's runs move");
    assert!(all.iter().any(|c| c.moved) && all.iter().any(|c| c.segment == 12 && !c.pairs.is_empty()));
}

#[test]
fn every_synopsis_and_direction_becomes_one_message_with_its_segment() {
    let set = set();
    let (ids, packet) = (SAMPLE_IDS, sample_packet());
    let dir = tempfile::tempdir().unwrap();
    let sink = Collect::default();
    let (epochs, sample_measured, publisher) = publish_sample(Some(dir.path()), vec![Box::new(sink.clone())]);
    assert!(epochs >= 2, "{epochs}");
    let got = sink.0.lock().unwrap();
    let (msgs, caches, closed) = (&got.0, &got.1, got.2);
    assert!(closed);
    // Per epoch: each one-point synopsis once, each two-point one per direction (9 for the five).
    let per_epoch: usize = SynopsisKind::ALL.iter().map(|k| if k.is_two_point() { 2 } else { 1 }).sum();
    assert_eq!(msgs.len(), epochs * per_epoch);
    assert_eq!(planned_messages(&ids, &set).len(), per_epoch);
    for m in msgs {
        assert_eq!(m.point, 7);
        assert_eq!(m.epoch_len_ns, 1_000_000);
        assert!(m.complete);
        let want_segments: &[u32] = if m.kind == SynopsisKind::Fridge { &[LOCAL_SEGMENT] } else { &[11, 12] };
        assert!(want_segments.contains(&m.segment), "{m:?}");
        let Summary::Harvested(summary) = &m.summary else { panic!("{m:?}") };
        assert_eq!(summary.body_bytes, m.body.len());
        // What the peer checks: two-point fingerprints cover this point's packet settings.
        let config_fingerprint =
            set.config_fingerprints().into_iter().find(|(k, _)| *k == m.kind).map(|(_, f)| f).unwrap();
        assert_eq!(m.fingerprint, peer_fingerprint(m.kind, config_fingerprint, &packet));
        if m.kind == SynopsisKind::Fridge {
            assert_eq!(m.fingerprint, config_fingerprint);
        } else {
            assert_ne!(m.fingerprint, config_fingerprint);
        }
        match m.kind {
            SynopsisKind::Lda => {
                let cfg = set.lda.as_ref().unwrap();
                let lda = Lda::decode(cfg, &m.body).unwrap();
                let SynopsisSummary::Lda(LdaHarvest { packets, measured, .. }) = summary.synopsis else {
                    panic!("{m:?}")
                };
                assert_eq!(packets, lda.total_packets());
                assert_eq!(measured, lda.total_packets());
            }
            SynopsisKind::Rda => {
                Rda::decode(set.rda.as_ref().unwrap(), &m.body).unwrap();
            }
            SynopsisKind::Fridge => {
                assert!(matches!(summary.synopsis, SynopsisSummary::Fridge(_)), "{m:?}")
            }
            // Every body decodes to its end: the publisher encodes them all into one reused
            // buffer, so a body with another's bytes left behind would fail here.
            SynopsisKind::Lds => {
                Lds::decode(set.lds.as_ref().unwrap(), &m.body).unwrap();
            }
            SynopsisKind::Colate => {
                Colate::decode(set.colate.as_ref().unwrap(), &m.body).unwrap();
            }
        }
    }
    // Measured packets add up to what the packet layer measured.
    let measured: u64 = msgs
        .iter()
        .filter(|m| m.kind == SynopsisKind::Lda)
        .map(|m| match &m.summary {
            Summary::Harvested(Harvested {
                synopsis: SynopsisSummary::Lda(LdaHarvest { measured, .. }),
                ..
            }) => *measured,
            other => panic!("{other:?}"),
        })
        .sum();
    assert_eq!(measured, sample_measured);
    // One cache per epoch and direction, holding that direction's packets, retained before the
    // epoch's RDA message went out.
    assert_eq!(caches.len(), epochs * 2);
    assert!(got.3.is_empty(), "RDA caches retained after their message was sent: {:?}", got.3);
    let cached: usize = caches.iter().map(|c| c.2).sum();
    assert_eq!(cached as u64, measured);
    // COLATE: the windows went into counter epochs in an archive per direction.
    for seg in [11, 12] {
        let r = ArchiveReader::open(colate_archive_path(dir.path(), 7, seg)).unwrap();
        assert_eq!(r.header().point, 7);
        assert_eq!(r.header().packet_identity, Some(packet.identity_fingerprint()));
        assert!(!r.metas().is_empty());
    }
    assert_eq!(publisher.counters().colate_archived, publisher.counters().colate_epochs);
    // The whole run's fridge is the sum of every epoch's (the sample's handshakes and DNS
    // exchanges span several epochs).
    let cfg = set.fridge.as_ref().unwrap();
    let mut sum: Option<fridge::FridgeSynopsis> = None;
    for m in msgs.iter().filter(|m| m.kind == SynopsisKind::Fridge) {
        let f = fridge::FridgeSynopsis::decode(cfg, &m.body).unwrap();
        match &mut sum {
            None => sum = Some(f),
            Some(s) => s.merge(&f).unwrap(),
        }
    }
    let whole = publisher.whole_run_fridge().unwrap();
    assert!(whole.kinds.iter().map(|k| k.all.samples).sum::<u64>() >= 2, "{whole:?}");
    assert_eq!(whole, fridge::estimate(&sum.unwrap()));
}

/// Records the progress watermarks it is given.
#[derive(Clone, Default)]
struct Progress(Arc<Mutex<Vec<u64>>>);
impl EpochSink for Progress {
    fn deliver(&mut self, _msg: &EpochMessage) {}
    fn progress(&mut self, passed_epoch: u64) {
        self.0.lock().unwrap().push(passed_epoch);
    }
}

#[test]
fn progress_reaches_the_sinks_only_when_it_advances() {
    let set = SynopsisSet { lda: Some(LdaConfig::single_bank(64, 1.0, 7)), ..SynopsisSet::default() };
    let ids = PointIds { point: 1, forward_segment: 1, reverse_segment: 2 };
    let sink = Progress::default();
    let mut publisher =
        Publisher::new(ids, 1_000, &set, &PacketConfig::default(), None, vec![Box::new(sink.clone())])
            .unwrap();
    for passed in [0, 3, 3, 2, 7, u64::MAX, 9] {
        publisher.progress(passed);
    }
    assert_eq!(*sink.0.lock().unwrap(), vec![3, 7, u64::MAX]);
}

/// A network sink stand-in that reports fixed counters.
struct Shipping(crate::ship::ShipCounters);
impl EpochSink for Shipping {
    fn deliver(&mut self, _msg: &EpochMessage) {}
    fn ship_counters(&self) -> Option<crate::ship::ShipCounters> {
        Some(self.0.clone())
    }
}

/// Counters with every field non-zero: field i of the whole (in JSON order) is `(i + 1) * k`.
fn ship_counters(k: u64) -> crate::ship::ShipCounters {
    use crate::ship::retain::RetainCounts;
    use crate::ship::{ConnectionCounts, FrameCounts, QueueCounts, ShipCounters};
    ShipCounters {
        frames: FrameCounts {
            delivered: k,
            duplicate_deliveries: 2 * k,
            sent: 3 * k,
            resent: 4 * k,
            acked: 5 * k,
        },
        given_up: vec![("queue_full", 6 * k), ("too_old", 7 * k)],
        queue: QueueCounts {
            queued: 8 * k,
            spilled: 9 * k,
            loaded_from_spill: 10 * k,
            not_crash_safe: 11 * k,
        },
        connections: ConnectionCounts {
            connections: 12 * k,
            connect_failures: 13 * k,
            rejected_by_peer: 14 * k,
        },
        rda: RetainCounts {
            rda_caches_retained: 15 * k,
            rda_caches_expired: 16 * k,
            rda_caches_evicted: 17 * k,
            rda_caches_released: 18 * k,
            rda_lookups: 19 * k,
            rda_lookup_ids: 20 * k,
            rda_lookup_misses: 21 * k,
            rda_binds: 22 * k,
            rda_runs_moved: 23 * k,
        },
    }
}

#[test]
fn ship_counters_sum_every_counter_over_the_network_sinks() {
    let set = SynopsisSet { lda: Some(LdaConfig::single_bank(64, 1.0, 7)), ..SynopsisSet::default() };
    let ids = PointIds { point: 1, forward_segment: 1, reverse_segment: 2 };
    let sinks: Vec<Box<dyn EpochSink>> = vec![
        Box::new(Shipping(ship_counters(1))),
        Box::new(Progress::default()),
        Box::new(Shipping(ship_counters(100))),
    ];
    let publisher = Publisher::new(ids, 1_000, &set, &PacketConfig::default(), None, sinks).unwrap();
    let total = publisher.ship_counters().expect("two network sinks");
    // Compared through the JSON so that every field, by name, is checked: each is 101 times
    // its index, and a reason given up by one sink only is kept.
    let got = serde_json::to_value(&total).unwrap();
    let want = serde_json::to_value(ship_counters(101)).unwrap();
    assert_eq!(got, want);
    let obj = got.as_object().unwrap();
    assert_eq!(obj.len(), 22, "every counter of ShipCounters is in the comparison: {got}");

    let mut with_other_reason = ship_counters(1);
    with_other_reason.given_up = vec![("too_old", 1), ("spill_failed", 2)];
    let mut sum = ship_counters(1);
    sum.add(&with_other_reason);
    assert_eq!(sum.given_up, vec![("queue_full", 6), ("too_old", 8), ("spill_failed", 2)]);
    let none = Publisher::new(ids, 1_000, &set, &PacketConfig::default(), None, vec![]).unwrap();
    assert_eq!(none.ship_counters(), None);
}

/// Counter epochs exist to be archived: without `colate_archive` none is built (building one
/// costs several passes over the whole vector per window), and every window still goes out.
#[test]
fn colate_counter_epochs_are_built_only_for_an_archive() {
    let colate_messages =
        |sink: &Collect| sink.0.lock().unwrap().0.iter().filter(|m| m.kind == SynopsisKind::Colate).count();
    let dir = tempfile::tempdir().unwrap();
    let archived = Collect::default();
    let (epochs, _, with) = publish_sample(Some(dir.path()), vec![Box::new(archived.clone())]);
    // At least one counter epoch per direction (closed at finish), every one archived.
    let c = with.counters();
    assert!(c.colate_epochs >= 2 && c.colate_archived == c.colate_epochs, "{c:?}");
    let plain = Collect::default();
    let (epochs_plain, _, without) = publish_sample(None, vec![Box::new(plain.clone())]);
    assert_eq!((without.counters().colate_epochs, without.counters().colate_archived), (0, 0));
    assert_eq!(epochs, epochs_plain);
    assert_eq!(colate_messages(&plain), 2 * epochs);
    assert_eq!(colate_messages(&archived), colate_messages(&plain));
}
