//! truth.json against an independent recomputation from the four written pcaps: packets are
//! matched across the points by their invariant bytes (etherparse, not the crate's parser),
//! statistics come from exact integer sums, and the fridge's pairs from a separate pairing.

mod common;

use common::*;
use std::collections::{BTreeMap, HashMap};
use wirelat_dataplane::packet::ExchangeKind;
use wirelat_dataplane::sim::{DelayModel, LossModel};
use wirelat_trace::generate::{self, GenConfig};
use wirelat_trace::segment::ReorderSpec;
use wirelat_trace::truth::{Resolution, Stats, Truth};
use wirelat_trace::{Direction, Point};

fn close(a: f64, b: f64, what: &str) {
    assert!((a - b).abs() <= 1e-6 * a.abs().max(b.abs()).max(1.0), "{what}: {a} vs {b}");
}

fn same(s: &Stats, e: &Exact, what: &str) {
    assert_eq!(s.count as i128, e.n, "{what}: count");
    close(s.mean_ns, e.mean(), &format!("{what}: mean"));
    close(s.std_dev_ns, e.sd(), &format!("{what}: sd"));
}

#[derive(Default)]
struct EpochRe {
    sent: u64,
    delivered: Exact,
    same: Exact,
    received: u64,
    crossing_out: u64,
    crossing_in: u64,
}

/// Per flow: packets sent, delays, and per epoch (sent, delays, same-epoch delays).
type FlowRe = (u64, Exact, BTreeMap<u64, (u64, Exact, Exact)>);

fn check_two_point(truth: &Truth, files: &[Vec<Rec>; 4]) {
    let e = truth.epoch_len_ns;
    let mut flows_seen = 0;
    for (dir, up, down) in [(Direction::Forward, 0, 2), (Direction::Reverse, 3, 1)] {
        let t = truth.direction(dir).unwrap();
        let m = matched(&files[up], &files[down]);
        let mut epochs: BTreeMap<u64, EpochRe> = BTreeMap::new();
        let mut total = Exact::default();
        let mut reordered = 0u64;
        let mut latest = None::<u64>;
        let mut flows: HashMap<String, FlowRe> = HashMap::new();
        for (a, b, frame) in &m {
            let k = a / e;
            epochs.entry(k).or_default().sent += 1;
            let f = flows.entry(flow_text(frame).unwrap()).or_default();
            f.0 += 1;
            let fe = f.2.entry(k).or_default();
            fe.0 += 1;
            let Some(b) = b else { continue };
            let d = *b as i64 - *a as i64;
            total.push(d);
            if latest.is_some_and(|l| *b < l) {
                reordered += 1;
            }
            latest = Some(latest.map_or(*b, |l| l.max(*b)));
            f.1.push(d);
            fe.1.push(d);
            let kd = b / e;
            let ep = epochs.entry(k).or_default();
            ep.delivered.push(d);
            if kd == k {
                ep.same.push(d);
                ep.received += 1;
                fe.2.push(d);
            } else {
                ep.crossing_out += 1;
                let r = epochs.entry(kd).or_default();
                r.received += 1;
                r.crossing_in += 1;
            }
        }
        let name = format!("{dir:?}");
        assert_eq!(t.total.sent as usize, m.len(), "{name} sent");
        same(&t.total.delay, &total, &format!("{name} total"));
        assert_eq!(t.total.lost, t.total.sent - total.n as u64);
        assert_eq!(t.total.reordered, reordered, "{name} reordered");
        assert_eq!(t.epochs.len(), epochs.len(), "{name} epochs");
        for (te, (k, re)) in t.epochs.iter().zip(&epochs) {
            let w = format!("{name} epoch {k}");
            assert_eq!(te.epoch, *k, "{w}");
            assert_eq!(te.sent, re.sent, "{w} sent");
            assert_eq!(te.delivered as i128, re.delivered.n, "{w} delivered");
            assert_eq!(te.lost, re.sent - re.delivered.n as u64, "{w} lost");
            assert_eq!(te.received, re.received, "{w} received");
            assert_eq!(te.crossing_out, re.crossing_out, "{w} crossing out");
            assert_eq!(te.crossing_in, re.crossing_in, "{w} crossing in");
            same(&te.delay, &re.delivered, &w);
            same(&te.same_epoch, &re.same, &format!("{w} same epoch"));
        }
        for f in truth.flows.iter().filter(|f| f.direction == dir) {
            let id = f.flow;
            let text = format!("{} {} {} {} {}", id.src, id.dst, id.src_port, id.dst_port, id.protocol);
            let re = flows.remove(&text).unwrap_or_else(|| panic!("{name}: flow {text} not in the pcaps"));
            assert_eq!(f.sent, re.0, "{text} sent");
            same(&f.delay, &re.1, &text);
            assert_eq!(f.epochs.len(), re.2.len(), "{text} epochs");
            for (fe, (k, (s, d, sm))) in f.epochs.iter().zip(&re.2) {
                assert_eq!((fe.epoch, fe.sent), (*k, *s));
                same(&fe.delay, d, &format!("{text} epoch {k}"));
                same(&fe.same_epoch, sm, &format!("{text} epoch {k} same"));
            }
            flows_seen += 1;
        }
        assert!(flows.is_empty(), "{name}: {} flows missing from the truth", flows.len());
    }
    assert!(flows_seen > 500);
}

/// Request or response key of a frame: (kind, request flow text, pairing number).
fn exchange_key(frame: &[u8]) -> Option<(ExchangeKind, bool, String, u32)> {
    let p = etherparse::SlicedPacket::from_ethernet(frame).ok()?;
    let (src, dst) = match p.net? {
        etherparse::NetSlice::Ipv4(ip) => {
            (ip.header().source_addr().to_string(), ip.header().destination_addr().to_string())
        }
        etherparse::NetSlice::Ipv6(ip) => {
            (ip.header().source_addr().to_string(), ip.header().destination_addr().to_string())
        }
        _ => return None,
    };
    let key = |s: &str, d: &str, sp: u16, dp: u16, proto: u8| format!("{s} {d} {sp} {dp} {proto}");
    let dns_id = |msg: &[u8]| {
        (msg.len() >= 12).then(|| (u32::from(msg[0]) << 8 | u32::from(msg[1]), msg[2] & 0x80 != 0))
    };
    match p.transport? {
        etherparse::TransportSlice::Tcp(t) => {
            let (sp, dp) = (t.source_port(), t.destination_port());
            if t.syn() && !t.rst() {
                return Some(if t.ack() {
                    (ExchangeKind::TcpHandshake, false, key(&dst, &src, dp, sp, 6), t.acknowledgment_number())
                } else {
                    (
                        ExchangeKind::TcpHandshake,
                        true,
                        key(&src, &dst, sp, dp, 6),
                        t.sequence_number().wrapping_add(1),
                    )
                });
            }
            let payload = t.payload();
            let (id, qr) = dns_id(payload.get(2..)?)?;
            if dp == 53 && !qr {
                Some((ExchangeKind::Dns, true, key(&src, &dst, sp, dp, 6), id))
            } else if sp == 53 && qr {
                Some((ExchangeKind::Dns, false, key(&dst, &src, dp, sp, 6), id))
            } else {
                None
            }
        }
        etherparse::TransportSlice::Udp(u) => {
            let (sp, dp) = (u.source_port(), u.destination_port());
            let (id, qr) = dns_id(u.payload())?;
            if dp == 53 && !qr {
                Some((ExchangeKind::Dns, true, key(&src, &dst, sp, dp, 17), id))
            } else if sp == 53 && qr {
                Some((ExchangeKind::Dns, false, key(&dst, &src, dp, sp, 17), id))
            } else {
                None
            }
        }
        _ => None,
    }
}

type Samples = HashMap<(ExchangeKind, String, u32), Vec<(u64, u64)>>;

fn check_fridge(truth: &Truth, files: &[Vec<Rec>; 4]) -> [Samples; 2] {
    let mut per_point: [Samples; 2] = Default::default();
    for (pi, point, p0, p1) in [(0, Point::A, 0, 1), (1, Point::B, 2, 3)] {
        let mut stream: Vec<(u64, u8, usize, &[u8])> = Vec::new();
        for (port, f) in [(0u8, p0), (1, p1)] {
            stream.extend(files[f].iter().enumerate().map(|(i, r)| (r.ts_ns, port, i, r.data.as_slice())));
        }
        stream.sort_by_key(|x| (x.0, x.1, x.2));
        let mut pending: HashMap<(ExchangeKind, String, u32), u64> = HashMap::new();
        let mut lists: HashMap<ExchangeKind, (Vec<u64>, Vec<u64>)> = HashMap::new();
        for (ts, _, _, frame) in stream {
            let Some((kind, request, flow, n)) = exchange_key(frame) else { continue };
            let k = (kind, flow, n);
            if request {
                pending.insert(k, ts);
            } else if let Some(t0) = pending.remove(&k) {
                let l = lists.entry(kind).or_default();
                l.0.push(ts);
                l.1.push(ts - t0);
                per_point[pi].entry(k).or_default().push((ts, ts - t0));
            }
        }
        for kind in [ExchangeKind::TcpHandshake, ExchangeKind::Dns] {
            let t = truth.fridge.iter().find(|f| f.point == point && f.kind == kind).unwrap();
            let (ts, d) = lists.remove(&kind).unwrap_or_default();
            assert!(ts.len() > 100, "{point:?} {kind:?}: {} samples", ts.len());
            assert_eq!(t.response_ts_ns, ts, "{point:?} {kind:?} response times");
            assert_eq!(t.delay_ns, d, "{point:?} {kind:?} delays");
        }
    }
    per_point
}

fn run(cfg: &GenConfig, name: &str) {
    let s = Scratch::new(name);
    generate::generate(cfg).unwrap().write_dir(&s.0).unwrap();
    let truth = Truth::read(&s.0.join("truth.json")).unwrap();
    let files = read_pair(&s.0);
    check_two_point(&truth, &files);
    let samples = check_fridge(&truth, &files);
    // Handshakes A saw once: A's delay = SYN's forward delay + B's delay + SYN/ACK's reverse
    // delay, exactly (the written timestamps telescope), so A's samples include both segment
    // crossings and B's are server-side time only.
    let fwd: HashMap<Vec<u8>, (u64, Option<u64>)> =
        matched(&files[0], &files[2]).into_iter().map(|(a, b, f)| (identity(&f).unwrap(), (a, b))).collect();
    let rev: HashMap<Vec<u8>, (u64, Option<u64>)> =
        matched(&files[3], &files[1]).into_iter().map(|(a, b, f)| (identity(&f).unwrap(), (a, b))).collect();
    let mut syn_count: HashMap<(ExchangeKind, String, u32), usize> = HashMap::new();
    let mut syn_at_a: HashMap<(ExchangeKind, String, u32), Vec<u8>> = HashMap::new();
    for r in &files[0] {
        if let Some((kind, true, flow, n)) = exchange_key(&r.data) {
            *syn_count.entry((kind, flow.clone(), n)).or_default() += 1;
            syn_at_a.insert((kind, flow, n), identity(&r.data).unwrap());
        }
    }
    let mut synack_at_b: HashMap<(ExchangeKind, String, u32, u64), Vec<u8>> = HashMap::new();
    for r in &files[3] {
        if let Some((kind, false, flow, n)) = exchange_key(&r.data) {
            synack_at_b.insert((kind, flow, n, r.ts_ns), identity(&r.data).unwrap());
        }
    }
    let mut telescoped = 0;
    for (k, a_samples) in &samples[0] {
        let (Some(b_samples), Some(1)) = (samples[1].get(k), syn_count.get(k)) else { continue };
        let [(_, delay_a)] = a_samples[..] else { continue };
        let [(b_resp_ts, delay_b)] = b_samples[..] else { continue };
        let (syn_a, Some(syn_b)) = fwd[&syn_at_a[k]] else { continue };
        let Some(resp) = synack_at_b.get(&(k.0, k.1.clone(), k.2, b_resp_ts)) else { continue };
        let (resp_b, Some(resp_a)) = rev[resp] else { continue };
        if resp_a - syn_a != delay_a {
            continue; // A paired a different copy of the response.
        }
        let d_fwd = syn_b as i64 - syn_a as i64;
        let d_rev = resp_a as i64 - resp_b as i64;
        assert_eq!(delay_a as i64, d_fwd + delay_b as i64 + d_rev, "{k:?}");
        telescoped += 1;
    }
    assert!(telescoped > 300, "{telescoped} exchanges checked at both points");
}

#[test]
fn truth_matches_the_pcaps_ns_with_offset_loss_and_reordering() {
    let mut cfg = small(21);
    cfg.clock_offset_ns = 7_321;
    cfg.epoch_len_ns = 50_000_000;
    cfg.forward.reorder =
        Some(ReorderSpec { fraction: 0.02, extra: DelayModel::Uniform { low: 0.0, high: 300_000.0 } });
    cfg.reverse =
        segment(DelayModel::Pareto { shape: 3.0, mean: 80_000.0 }, LossModel::Uniform { rate: 0.02 });
    run(&cfg, "truth-ns");
}

#[test]
fn truth_matches_the_pcaps_us_with_negative_offset_and_bursty_loss() {
    let mut cfg = small(22);
    cfg.resolution = Resolution::Us;
    cfg.clock_offset_ns = -40_500;
    cfg.epoch_len_ns = 100_000_000;
    cfg.forward.loss = LossModel::Bursty { rate: 0.02, mean_burst: 10.0 };
    run(&cfg, "truth-us");
}
