use super::handlers::mark_missing_caches;
use super::*;
use crate::peer::{estimate, memory};
use wirelat_dataplane::synopsis::Synopsis;
use wirelat_dataplane::synopsis::estimate::NoEstimate;
use wirelat_dataplane::synopsis::lda::Lda;
use wirelat_dataplane::synopsis::lds::Lds;
use wirelat_dataplane::synopsis::rda::{Rda, RdaReport};

#[test]
fn an_rda_record_without_a_points_cache_is_incomplete_and_reports_no_loss() {
    let seg =
        SegmentInfo { id: 10, upstream: 1, downstream: 2, direction: wirelat_records::Direction::Forward };
    let report = RdaReport::unavailable(NoEstimate::NoPackets);
    let sides = Sides { complete: true, absent: &[] };
    let cx = estimate::SegmentContext { seg: &seg, first: 7, last: 7, sides, top_flows: 10 };
    let evidence = estimate::Reconciled { report: &report, process: None, failure: None };
    let mut out = <Rda as estimate::SegmentEstimate>::estimate_segment(&cx, evidence);
    let line = out.lines[0].to_json();
    assert_eq!(line["complete"], true, "{line}");
    assert!(line.get("missing").is_none(), "{line}");
    mark_missing_caches(&mut out, &[1]);
    let line = out.lines[0].to_json();
    assert_eq!(line["complete"], false, "{line}");
    assert_eq!(line["missing"], serde_json::json!(["timestamp_cache:point 1"]), "{line}");
    assert!(line["loss"]["lost"].is_null() && line["loss"]["rate"].is_null(), "{line}");
    assert!(out.latest.as_ref().is_none_or(|l| l.loss_rate.is_none()));
}

/// An engine over a two-point LDA collector (segment 10: 1 → 2) writing to `dir`.
fn lda_engine(dir: &std::path::Path, extra: &str) -> (Engine, Arc<PeerConfig>) {
    engine_with(dir, extra, "[synopses.lda]\nbanks = [{ rows = 16, p = 1.0 }]\nseed = 7\n")
}

/// The same with the `synopses` tables given.
fn engine_with(dir: &std::path::Path, extra: &str, synopses: &str) -> (Engine, Arc<PeerConfig>) {
    let text = format!(
        r#"
[collector]
listen = "127.0.0.1:0"
key_file = "k"
records = "{records}"
{extra}
[[point]]
id = 1
name = "a"
[[point]]
id = 2
name = "b"
[[segment]]
id = 10
upstream = 1
downstream = 2
{synopses}
"#,
        records = dir.join("r.jsonl").display()
    );
    let cfg = Arc::new(PeerConfig::parse(&text, std::path::Path::new("c.toml")).unwrap());
    let sink =
        RecordSink::open(dir.join("r.jsonl").to_str().unwrap(), cfg.commit_log_path().as_deref()).unwrap();
    let (jobs, _) = crossbeam::channel::unbounded();
    let engine =
        Engine::new(cfg.clone(), Arc::new(Points::default()), Arc::new(Metrics::default()), sink, jobs);
    (engine, cfg)
}

fn lda_epoch(cfg: &PeerConfig, point: u32, epoch: u64) -> Event {
    let lda = Lda::new(cfg.synopses.lda.as_ref().unwrap()).unwrap();
    Event::Epoch {
        key: MessageKey { point, segment: 10, epoch, kind: SynopsisKind::Lda },
        complete: true,
        epoch_len_ns: 1_000_000,
        bytes: 300 << 10,
        decoded: Ok(Decoded::Lda(Box::new(lda))),
    }
}

/// Progress of `point` on the connection the tests' hellos give it (`point`).
fn progress(point: u32, watermark: u64) -> Event {
    progress_on(point, point as u64, watermark)
}

fn progress_on(point: u32, conn: u64, watermark: u64) -> Event {
    Event::Progress { point, conn, watermark, given_up: Vec::new() }
}

#[test]
fn a_watermark_advance_checks_only_the_groups_it_passed() {
    // Point 1 delivers N epochs; point 2 (silent) passes them one at a time. Each advance
    // may make one group ready: a rescan of everything waiting per event would make
    // N²/2 checks, the index makes about one per advance.
    const N: u64 = 2_000;
    let dir = tempfile::tempdir().unwrap();
    let (mut e, cfg) = lda_engine(dir.path(), "");
    e.handle(Event::Connected { point: 1, conn: 1, watermark: 0 });
    e.handle(Event::Connected { point: 2, conn: 2, watermark: 0 });
    for epoch in 0..N {
        e.handle(lda_epoch(&cfg, 1, epoch));
    }
    e.handle(progress(1, N));
    assert_eq!(e.pending.len() as u64, N, "every group waits for point 2");
    let before = e.checks;
    for w in 1..=N {
        e.handle(progress(2, w));
        assert_eq!(e.pending.len() as u64, N - w, "the passed group resolved at once");
    }
    let checks = e.checks - before;
    assert!(checks <= 2 * N, "{checks} readiness checks for {N} advances");
    assert_eq!(e.sink.records_written(), N);
    assert!(e.by_last.is_empty() && e.colate_open.is_empty() && e.lds_open.is_empty());
}

#[test]
fn forgetting_never_passes_a_group_still_waiting() {
    // dedupe_epochs = 1: a group that waits while both watermarks are far past it (here an
    // RDA reconciliation in flight stands for any reason to wait) must still be emitted,
    // and its resent synopses must not be taken for already-emitted ones.
    let dir = tempfile::tempdir().unwrap();
    let (mut e, cfg) = lda_engine(dir.path(), "[report]\ndedupe_epochs = 1");
    e.handle(Event::Connected { point: 1, conn: 1, watermark: 0 });
    e.handle(Event::Connected { point: 2, conn: 2, watermark: 0 });
    let g = e.group_of(&MessageKey { point: 1, segment: 10, epoch: 3, kind: SynopsisKind::Lda });
    // Group 3 held open: take it out of the ready path by parking it as in flight.
    e.in_flight.insert(
        g,
        InFlight { keys: vec![], seg: cfg.segment(10).unwrap(), complete: true, absent: vec![], emit: true },
    );
    for epoch in 0..20 {
        e.handle(lda_epoch(&cfg, 1, epoch));
        e.handle(lda_epoch(&cfg, 2, epoch));
    }
    e.handle(progress(1, 20));
    e.handle(progress(2, 20));
    assert!(!e.sink.is_emitted(&g), "the floor passed a group still in flight");
}

#[test]
fn waiting_groups_never_hold_more_than_max_pending_bytes_and_nothing_is_given_up() {
    // 300 KiB per synopsis, a 1 MiB budget: the fourth waiting group sheds everything
    // waiting, unacknowledged (the points resend it), instead of giving a group up.
    let dir = tempfile::tempdir().unwrap();
    let (mut e, cfg) = lda_engine(dir.path(), "max_pending_bytes = 1048576");
    e.handle(Event::Connected { point: 1, conn: 1, watermark: 0 });
    e.handle(Event::Connected { point: 2, conn: 2, watermark: 0 });
    for epoch in 0..10 {
        e.handle(lda_epoch(&cfg, 1, epoch));
        assert!(e.pending_bytes <= 1 << 20, "{} bytes pending", e.pending_bytes);
    }
    assert_eq!(e.metrics.get(metrics::PEER_GIVEN_UP, &[("reason", "pending_overflow")]), 0.0);
    // The old connections' progress no longer counts: nothing resolves with a side taken
    // for empty whose synopses were dropped.
    e.handle(progress(2, 10));
    assert_eq!(e.sink.records_written(), 0);
    // The points reconnect and resend: every group is emitted once.
    e.handle(Event::Connected { point: 1, conn: 3, watermark: 0 });
    e.handle(Event::Connected { point: 2, conn: 4, watermark: 0 });
    for epoch in 0..10 {
        e.handle(lda_epoch(&cfg, 1, epoch));
        e.handle(lda_epoch(&cfg, 2, epoch));
        assert!(e.pending_bytes <= 1 << 20);
    }
    assert_eq!(e.sink.records_written(), 10);
    assert_eq!((e.pending.len(), e.pending_bytes), (0, 0));
}

#[test]
fn a_stale_progress_after_shedding_neither_resolves_nor_forgets_the_resent_epochs() {
    // Issue 21's `dedupe_epochs = 1000` loss, made deterministic: shedding drops what waits
    // and cuts both points; each reconnects (a new hello) and resends from its safe
    // watermark, but a progress its old connection read before the cut is handed in after
    // the hello. Taken, it said "every epoch below 10 delivered": the resent epochs' groups
    // resolved with the other side taken for empty, and the forgetting floor
    // (dedupe_epochs = 1) passed them, so their synopses were acknowledged as duplicates
    // and never written.
    let dir = tempfile::tempdir().unwrap();
    let (mut e, cfg) = lda_engine(dir.path(), "max_pending_bytes = 1048576\n[report]\ndedupe_epochs = 1");
    e.handle(Event::Connected { point: 1, conn: 1, watermark: 0 });
    e.handle(Event::Connected { point: 2, conn: 2, watermark: 0 });
    for epoch in 0..10 {
        e.handle(lda_epoch(&cfg, 1, epoch));
    }
    assert!(e.pending.len() < 4 && !e.awaiting_hello.is_empty(), "shed");
    e.handle(Event::Connected { point: 1, conn: 3, watermark: 0 });
    e.handle(Event::Connected { point: 2, conn: 4, watermark: 0 });
    e.handle(progress_on(1, 1, 10));
    e.handle(progress_on(2, 2, 10));
    for epoch in 0..10 {
        e.handle(lda_epoch(&cfg, 1, epoch));
        e.handle(lda_epoch(&cfg, 2, epoch));
    }
    e.handle(progress_on(1, 3, 10));
    e.handle(progress_on(2, 4, 10));
    assert_eq!(e.sink.records_written(), 10, "one record per epoch");
    let text = std::fs::read_to_string(dir.path().join("r.jsonl")).unwrap();
    let both = text.lines().filter(|l| l.contains(r#""absent":[]"#)).count();
    assert_eq!(both, 10, "every record has both sides:\n{text}");
}

#[test]
fn an_lds_census_whose_colate_group_never_comes_is_dropped_and_its_synopses_acknowledged() {
    // LDS and COLATE on; both points send LDS for 50 epochs and no COLATE at all. Each LDS
    // group keeps its flow census for the COLATE group of its window (and holds its LDS
    // synopses unacknowledged); once every watermark passed a window with no COLATE
    // synopsis waiting, that group cannot come: the census must go, or it grows with
    // every epoch (the leak the issue's last note names).
    let dir = tempfile::tempdir().unwrap();
    let synopses = "[synopses.lds]\nrows = 2\nwidth = 64\nvlda_len = 2\nflow_capacity = 64\nseed = 9\n\
                    [synopses.colate]\ncounters = 101\ncells_per_flow = 4\ncounter_bits = 48\n\
                    epoch_threshold_ticks = 100000000000000\npacket_counts = true\ntick_ns = 100\n\
                    origin_ns = 1000000000\n";
    let (mut e, cfg) = engine_with(dir.path(), "", synopses);
    e.handle(Event::Connected { point: 1, conn: 1, watermark: 0 });
    e.handle(Event::Connected { point: 2, conn: 2, watermark: 0 });
    let lds = |point: u32, epoch: u64| Event::Epoch {
        key: MessageKey { point, segment: 10, epoch, kind: SynopsisKind::Lds },
        complete: true,
        epoch_len_ns: 1_000_000,
        bytes: 1000,
        decoded: Ok(Decoded::Lds(Box::new(Lds::new(cfg.synopses.lds.as_ref().unwrap()).unwrap()))),
    };
    for epoch in 0..50 {
        e.handle(lds(1, epoch));
        e.handle(lds(2, epoch));
    }
    assert_eq!(e.census.len(), 50, "each window's census waits while no watermark passed it");
    e.handle(progress(1, 30));
    e.handle(progress(2, 30));
    assert_eq!(e.census.len(), 20, "windows 0..30 were passed by both points with no COLATE waiting");
    assert_eq!(e.held.len(), 40);
    e.handle(progress(1, 50));
    e.handle(progress(2, 50));
    assert!(e.census.is_empty() && e.held.is_empty());
    let g = e.group_of(&MessageKey { point: 1, segment: 10, epoch: 49, kind: SynopsisKind::Lds });
    assert!(e.pending.is_empty() && e.sink.committed(&g), "the LDS groups themselves were emitted");
}

#[test]
fn rda_reconciliations_in_flight_are_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let (mut e, _) = lda_engine(dir.path(), "");
    let g =
        |epoch| GroupKey { scope: Scope::Segment(10), kind: SynopsisKind::Rda, first: epoch, last: epoch };
    e.handle(Event::Connected { point: 1, conn: 1, watermark: 0 });
    e.handle(Event::Connected { point: 2, conn: 2, watermark: 0 });
    // RDA groups with nothing to reconcile still go through the slot rule: park 16 as in
    // flight, then one more ready group must wait for a slot.
    for epoch in 0..memory::RDA_IN_FLIGHT as u64 {
        e.in_flight.insert(
            g(epoch),
            InFlight {
                keys: vec![],
                seg: e.cfg.segment(10).unwrap(),
                complete: true,
                absent: vec![],
                emit: true,
            },
        );
    }
    e.open(g(100));
    e.handle(progress(1, 200));
    e.handle(progress(2, 200));
    assert!(e.rda_blocked.contains(&g(100)) && e.pending.contains_key(&g(100)), "waits for a slot");
}

#[test]
fn a_waiting_colate_synopsis_counts_its_decoded_vector_not_its_sparse_body() {
    // A quiet window's COLATE body lists only its non-zero counters: a few hundred bytes on
    // the wire (the fixed fields and a bitmap of 1 563 blocks) for a vector of 100 003 × 16
    // bytes once decoded. max_pending_bytes bounds the memory the waiting groups hold, so the
    // group must count the vector.
    let dir = tempfile::tempdir().unwrap();
    let synopses = "[synopses.colate]\ncounters = 100003\ncells_per_flow = 4\ncounter_bits = 48\n\
                    epoch_threshold_ticks = 100000000000000\npacket_counts = true\ntick_ns = 100\n\
                    origin_ns = 1000000000\n";
    let (mut e, cfg) = engine_with(dir.path(), "", synopses);
    let c = wirelat_dataplane::synopsis::colate::Colate::new(cfg.synopses.colate.as_ref().unwrap()).unwrap();
    let bytes = c.encode();
    assert!(bytes.len() < 1_000, "an empty window is sparse: {} bytes", bytes.len());
    let decoded = estimate::decode(&cfg.synopses, SynopsisKind::Colate, &bytes).unwrap();
    let held = estimate::held_bytes(bytes.len(), &decoded);
    assert!(held >= 100_003 * 16, "{held}");
    // Any other synopsis counts its encoding.
    let lds_cfg = "[synopses.lds]\nrows = 2\nwidth = 64\nvlda_len = 2\nflow_capacity = 64\nseed = 9\n";
    let (_, lcfg) = engine_with(dir.path(), "", lds_cfg);
    let lds = Decoded::Lds(Box::new(Lds::new(lcfg.synopses.lds.as_ref().unwrap()).unwrap()));
    assert_eq!(estimate::held_bytes(1234, &lds), 1234);
    e.handle(Event::Connected { point: 1, conn: 1, watermark: 0 });
    e.handle(Event::Epoch {
        key: MessageKey { point: 1, segment: 10, epoch: 0, kind: SynopsisKind::Colate },
        complete: true,
        epoch_len_ns: 1_000_000,
        bytes: held,
        decoded: Ok(decoded),
    });
    assert_eq!(e.pending_bytes, held, "the group waits for point 2 and counts the vector");
}
