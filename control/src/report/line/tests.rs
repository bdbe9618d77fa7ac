use super::*;
use crate::control_side::LdsSegment;
use wirelat_dataplane::packet::{ExchangeKind, FlowKey};
use wirelat_dataplane::synopsis::estimate::ConfidenceInterval;
use wirelat_dataplane::synopsis::lds::estimator::LdsSummary;
use wirelat_records::{FlowEncap, FlowId, Point, QuantilePoint, Record, parse_lines};

fn estimate(value: f64) -> Estimate {
    Estimate {
        value,
        samples: 9,
        interval: Some(ConfidenceInterval { level: 0.98, low: value - 1.0, high: value + 1.0 }),
    }
}

fn sides() -> SegmentSides {
    SegmentSides { segment: 10, upstream: 1, downstream: 2, complete: true, absent: vec![Side::Downstream] }
}

fn segment_record() -> SegmentRecord {
    SegmentRecord {
        synopsis: SynopsisKind::Lds,
        direction: Direction::Reverse,
        epoch: 4,
        mean_ns: Some(estimate(1500.0)),
        std_dev_ns: None,
    }
}

fn flow_record() -> FlowRecord {
    let key = FlowKey::new("192.0.2.1".parse().unwrap(), "198.51.100.7".parse().unwrap(), 1234, 80, 6);
    FlowRecord {
        synopsis: SynopsisKind::Lds,
        direction: Direction::Forward,
        epoch_first: 4,
        epoch_last: 4,
        flow: FlowId::from(key),
        encap: FlowEncap { upstream: "vlan:10".parse().ok(), downstream: None },
        mean_ns: None,
        std_dev_ns: None,
    }
}

/// The scorer reads every typed line that carries one of its records back as that very record,
/// and skips the peer's own `epoch_summary` lines: the records file stays the scorer's schema.
#[test]
fn the_scorer_reads_back_the_record_of_each_line() {
    let fridge = FridgeRecord {
        point: Point::B,
        kind: ExchangeKind::Dns,
        epoch_first: 0,
        epoch_last: 9,
        quantiles: vec![QuantilePoint { q: 0.5, delay_ns: 3e6 }],
    };
    let lines = [
        Line::run(),
        Line::Segment(SegmentLine {
            record: segment_record(),
            sides: sides(),
            result: SegmentResult::Lds(LdsSegment {
                loss: LdsLoss { sent: 10, received: 9, rate: Some(0.1) },
                summary: Box::new(lds_summary()),
            }),
            missing: None,
        }),
        Line::Flow(FlowLine {
            record: flow_record(),
            segment: 10,
            packets: 77,
            result: FlowResult::Lds {
                lost_packets_bound: 3,
                cells: CellUse::default(),
                mean_error: Some(NoEstimate::NoUsableCells),
            },
        }),
        Line::FridgeQuantiles(FridgeLine {
            record: fridge.clone(),
            point_id: 2,
            samples: 0,
            estimated_pairs: Err(NoEstimate::NoPackets),
            report: Box::new(kind_report()),
        }),
        failure(),
    ];
    let text: String = lines.iter().map(|l| l.to_json().to_string() + "\n").collect();
    let parsed = parse_lines(&text, "typed").unwrap();
    assert_eq!(
        parsed.records,
        [
            Record::Run { version: RECORD_VERSION },
            Record::Segment(segment_record()),
            Record::Flow(flow_record()),
            Record::FridgeQuantiles(fridge),
        ]
    );
    assert_eq!(parsed.skipped, 1, "the epoch_summary line");
}

fn failure() -> Line {
    Line::EpochSummary(EpochSummary::Failed(GroupFailure {
        synopsis: SynopsisKind::Fridge,
        scope: ScopeId::PointId(3),
        direction: None,
        epoch_first: 8,
        epoch_last: 15,
        error: "merge failed".into(),
    }))
}

/// The exact bytes of the lines whose shape no golden digest covers (a group that failed, an
/// RDA line without a point's cache), as the peer wrote them with `serde_json::json!` before
/// the lines were typed: keys sorted at every depth, `null` where a value is missing, and
/// `missing` only when there is something missing.
#[test]
fn lines_keep_the_bytes_of_the_json_they_replace() {
    assert_eq!(
        failure().to_json().to_string(),
        r#"{"direction":null,"epoch_first":8,"epoch_last":15,"error":"merge failed","point_id":3,"record":"epoch_summary","synopsis":"fridge"}"#
    );
    let seg = Line::EpochSummary(EpochSummary::Failed(GroupFailure {
        synopsis: SynopsisKind::Colate,
        scope: ScopeId::Segment(10),
        direction: Some(Direction::Forward),
        epoch_first: 0,
        epoch_last: 3,
        error: "e".into(),
    }));
    assert_eq!(
        seg.to_json().to_string(),
        r#"{"direction":"forward","epoch_first":0,"epoch_last":3,"error":"e","record":"epoch_summary","segment":10,"synopsis":"colate"}"#
    );
    let error = Line::Segment(SegmentLine {
        record: SegmentRecord { mean_ns: None, ..segment_record() },
        sides: sides(),
        result: SegmentResult::Error { error: "configurations differ".into() },
        missing: None,
    });
    assert_eq!(
        error.to_json().to_string(),
        r#"{"absent":["downstream"],"complete":true,"direction":"reverse","downstream":2,"epoch":4,"error":"configurations differ","mean_ns":null,"record":"segment","segment":10,"std_dev_ns":null,"synopsis":"lds","upstream":1}"#
    );
    let Line::Segment(mut with_missing) = error else { unreachable!() };
    with_missing.missing = Some(vec!["timestamp_cache:point 2".into()]);
    let text = Line::Segment(with_missing).to_json().to_string();
    assert!(
        text.contains(r#""mean_ns":null,"missing":["timestamp_cache:point 2"],"record":"segment""#),
        "{text}"
    );
    // Nested objects are sorted too (a struct's own field order would put "value" first).
    let v = Line::Segment(SegmentLine {
        record: segment_record(),
        sides: sides(),
        result: SegmentResult::Error { error: String::new() },
        missing: None,
    })
    .to_json()
    .to_string();
    assert!(
        v.contains(
            r#""mean_ns":{"interval":{"high":1501.0,"level":0.98,"low":1499.0},"samples":9,"value":1500.0}"#
        ),
        "{v}"
    );
}

fn lds_summary() -> LdsSummary {
    LdsSummary {
        flows_listed: 0,
        flows_estimated: 0,
        flows_no_usable_cells: 0,
        flows_no_packets: 0,
        flows_no_estimate_by_reason: Default::default(),
        flows_unrecorded_estimate: 0.0,
        packets_unrecorded: 0,
        weighted_packets_sent: 10,
        weighted_packets_received: 9,
        aggregate_mean_delay_ns: Ok(estimate(1500.0)),
        cells: Default::default(),
    }
}

fn kind_report() -> KindReport {
    use wirelat_dataplane::synopsis::fridge::report::{DistributionReport, KindDiagnostics};
    let none = || Err(NoEstimate::NoPackets);
    KindReport {
        kind: ExchangeKind::Dns,
        all: DistributionReport {
            samples: 0,
            estimated_pairs: none(),
            p50_ns: none(),
            p90_ns: none(),
            p95_ns: none(),
            p99_ns: none(),
            above: Vec::new(),
            histogram: Vec::new(),
        },
        subsets: Vec::new(),
        diagnostics: KindDiagnostics {
            counters: Default::default(),
            request_rate_per_s: None,
            combination: "model_weights",
            weight: "insertions",
            fridges: Vec::new(),
            clamped_quantiles: 0,
        },
    }
}
