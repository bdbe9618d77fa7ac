//! Measurement inside encapsulations (issue 25): a generated pcap with TCP handshakes and DNS
//! exchanges in plain Ethernet and in every encapsulation the packet layer walks, alone and
//! stacked, IPv4 and IPv6 inside, some with the request and the answer tagged differently.
//! Every exchange pairs in the fridge with its exact delay and lands in its encapsulation's
//! subset. And a two-point trace seen plain at one point and inside VXLAN or MPLS at the other
//! gives the same synopsis bodies, hence the same LDA, LDS, RDA and COLATE estimates, as when
//! both see it plain; shipped to a collector, the two give the same records, whose flow
//! records name the encapsulation each point saw the flow in.

mod common;

use common::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use wirelat_dataplane::packet::synth::encap::{Layer, encapsulate};
use wirelat_dataplane::packet::synth::{FrameSpec, IpSpec, L4Spec};
use wirelat_dataplane::packet::tcp::flags::{ACK, SYN};
use wirelat_dataplane::packet::{Encap, ExchangeKind, PacketConfig, Role, measure};
use wirelat_dataplane::sim::{DelayModel, LossModel};
use wirelat_dataplane::synopsis::Synopsis;
use wirelat_dataplane::synopsis::fridge::{
    FridgeConfig, FridgeSet, FridgeSpec, FridgeSynopsis, KindConfig, ResponseOutcome, SubsetRule, WeightMode,
};
use wirelat_trace::generate::{GenConfig, generate};
use wirelat_trace::pcap_io;
use wirelat_trace::segment::{DelaySpec, SegmentConfig};
use wirelat_trace::topology::{Point, Tap};
use wirelat_trace::traffic::TrafficConfig;

/// One place the exchanges are captured: the layers around the request and around the
/// response (different for asymmetric tagging), and the identifier the response carries.
struct Site {
    name: &'static str,
    request: Vec<Layer>,
    response: Vec<Layer>,
    id: Encap,
}

fn site(name: &'static str, layers: Vec<Layer>, id: &str) -> Site {
    Site { name, request: layers.clone(), response: layers, id: id.parse().expect("encap id") }
}

/// The issue's eight captures, the stacks operators run, and asymmetric tagging.
fn sites() -> Vec<Site> {
    let q = |vid| Layer::Vlan(0x8100, vid);
    let s = |vid| Layer::Vlan(0x88a8, vid);
    vec![
        site("plain", vec![], "none"),
        site("802.1q", vec![q(10)], "vlan:10"),
        site("qinq", vec![s(100), q(11)], "vlan:11"),
        site("mpls", vec![Layer::Mpls(1000), Layer::Mpls(2000)], "mpls:2000"),
        site("pppoe", vec![Layer::Pppoe(7)], "pppoe:7"),
        site("gre", vec![Layer::Gre { key: Some(42), seq: Some(1), ethernet: false }], "gre:42"),
        site("vxlan", vec![Layer::Vxlan(5001)], "vni:5001"),
        site("gtpu", vec![Layer::Gtpu(0x0a0b_0c0d, true)], "teid:168496141"),
        site("qinq+pppoe", vec![s(200), q(12), Layer::Pppoe(8)], "pppoe:8"),
        site("mpls over vlan", vec![q(13), Layer::Mpls(3000)], "mpls:3000"),
        site("vxlan over vlan", vec![q(14), Layer::Vxlan(5002)], "vni:5002"),
        site(
            "ethernet pseudowire",
            vec![Layer::Mpls(16), Layer::MplsPseudowire(4000, true), q(15)],
            "vlan:15",
        ),
        site("ip-in-ip", vec![q(16), Layer::IpInIp(false)], "vlan:16"),
        Site {
            name: "tagged request, untagged answer",
            request: vec![q(17)],
            response: vec![],
            id: Encap::NONE,
        },
        Site {
            name: "qinq request, 802.1q answer",
            request: vec![s(300), q(18)],
            response: vec![q(19)],
            id: "vlan:19".parse().unwrap(),
        },
    ]
}

/// Every walk on.
fn packet_config() -> PacketConfig {
    let mut c = PacketConfig::default();
    c.encap.gre = true;
    c.encap.vxlan = true;
    c.encap.gtpu = true;
    c.encap.ip_in_ip = true;
    c
}

fn dns(id: u16, answer: bool) -> Vec<u8> {
    let mut m = id.to_be_bytes().to_vec();
    m.extend_from_slice(if answer {
        &[0x81, 0x80, 0, 1, 0, 1, 0, 0, 0, 0]
    } else {
        &[0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0]
    });
    m.extend_from_slice(&[7, b'e', b'x', b'a', b'm', b'p', b'l', b'e', 0, 0, 1, 0, 1]);
    if answer {
        m.extend_from_slice(&[0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4, 192, 0, 2, 1]);
    }
    m
}

/// One generated exchange: where, which kind, its delay.
struct Expected {
    site: usize,
    kind: ExchangeKind,
    delay_ns: u64,
}

/// The frames (timestamp, bytes) of 40 handshakes and 40 DNS exchanges per site and IP
/// version, delays 1–40 ms plus a few µs, one exchange after the other.
fn exchanges() -> (Vec<(u64, Vec<u8>)>, Vec<Expected>) {
    let mut frames = Vec::new();
    let mut expected = Vec::new();
    let mut t = 1_700_000_000_000_000_000u64;
    let mut port = 20_000u16;
    for (si, site) in sites().iter().enumerate() {
        for v6 in [false, true] {
            let (client, server) = if v6 {
                let mut c = [0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
                let mut s = c;
                c[15] = si as u8 + 1;
                s[14] = 0x53;
                (IpSpec::v6(c, s), IpSpec::v6(s, c))
            } else {
                (
                    IpSpec::v4([10, 0, si as u8, 1], [192, 0, 2, 53], 1),
                    IpSpec::v4([192, 0, 2, 53], [10, 0, si as u8, 1], 2),
                )
            };
            for i in 0..80u32 {
                port += 1;
                let handshake = i < 40;
                let delay_ns = u64::from(i % 40 + 1) * 1_000_000 + u64::from(si as u32 * 7 + i) * 1_000 + 3;
                let (req, resp) = if handshake {
                    (
                        FrameSpec::new(client.clone(), L4Spec::tcp(port, 443, 1000 + i, 0, SYN), vec![]),
                        FrameSpec::new(
                            server.clone(),
                            L4Spec::tcp(443, port, 77, 1001 + i, SYN | ACK),
                            vec![],
                        ),
                    )
                } else {
                    let id = i as u16 * 31 + si as u16;
                    (
                        FrameSpec::new(client.clone(), L4Spec::udp(port, 53), dns(id, false)),
                        FrameSpec::new(server.clone(), L4Spec::udp(53, port), dns(id, true)),
                    )
                };
                frames.push((t, encapsulate(&req.build(), &site.request)));
                frames.push((t + delay_ns, encapsulate(&resp.build(), &site.response)));
                let kind = if handshake { ExchangeKind::TcpHandshake } else { ExchangeKind::Dns };
                expected.push(Expected { site: si, kind, delay_ns });
                t += 50_000_000;
            }
        }
    }
    (frames, expected)
}

#[test]
fn every_exchange_in_every_encapsulation_pairs_with_its_exact_delay() {
    let dir = scratch();
    let pcap = dir.path().join("encap.pcap");
    let (frames, expected) = exchanges();
    pcap_io::write_file(&pcap, frames.iter().map(|(t, f)| (*t, f.as_slice()))).expect("write pcap");
    let records = pcap_io::read_file(&pcap).expect("read pcap");
    assert_eq!(records.len(), frames.len());

    let cfg = packet_config();
    cfg.validate().expect("packet config");
    let sites = sites();
    // The fridge as configured on a point: subsets by the answers' encapsulations.
    let ids: Vec<Encap> = {
        let mut v: Vec<Encap> = sites.iter().map(|s| s.id).filter(|e| *e != Encap::NONE).collect();
        v.dedup();
        v
    };
    let one = vec![FridgeSpec { slots: 1 << 16, entry_probability: 1.0 }];
    let fcfg = FridgeConfig {
        kinds: vec![
            KindConfig { kind: ExchangeKind::TcpHandshake, fridges: one.clone() },
            KindConfig { kind: ExchangeKind::Dns, fridges: one.clone() },
        ],
        subsets: SubsetRule::Encap { ids: ids.clone() },
        ..FridgeConfig::default()
    };
    let mut fridge = FridgeSynopsis::new(&fcfg).expect("fridge");
    let mut carry = FridgeSynopsis::new_carry(&fcfg);
    // The fridge's own table, for each sample's delay.
    // Index 0 handshakes, 1 DNS.
    let mut sets = [0, 1].map(|_| FridgeSet::new(&one, 3, WeightMode::Insertions).expect("set"));
    let mut delays = Vec::new();
    for r in &records {
        let m = measure(&r.data, &cfg).unwrap_or_else(|e| panic!("frame skipped: {e:?}"));
        let x = m.exchange.expect("every frame is half an exchange");
        fridge.update(&mut carry, &m.observation(r.ts_ns));
        let set = &mut sets[usize::from(x.kind == ExchangeKind::Dns)];
        match x.role {
            Role::Request => {
                set.on_request(x.id, r.ts_ns);
            }
            Role::Response => match set.on_response(x.id, r.ts_ns) {
                ResponseOutcome::Matched(s) => delays.push((x.kind, s.delay_ns, m.encap)),
                other => panic!("unpaired response: {other:?}"),
            },
        }
    }
    // Every exchange paired, in order, with the generated delay to the ns, and the answer's
    // encapsulation identifier.
    assert_eq!(delays.len(), expected.len());
    for (got, want) in delays.iter().zip(&expected) {
        assert_eq!(
            (got.0, got.1, got.2),
            (want.kind, want.delay_ns, sites[want.site].id),
            "{}",
            sites[want.site].name
        );
    }
    // The fridge synopsis: all 2 × 15 × 80 / 2 samples per kind, each subset with its sites'.
    for kind in [ExchangeKind::TcpHandshake, ExchangeKind::Dns] {
        let epoch = fridge.kind(kind).expect("kind");
        let per_subset = |b: usize| -> u64 { epoch.hist(b, 0).iter().map(|s| s.samples).sum() };
        assert_eq!(epoch.counters.samples, (sites.len() * 80) as u64);
        for (b, id) in std::iter::once(Encap::NONE).chain(ids.iter().copied()).enumerate() {
            let want = sites.iter().filter(|s| s.id == id).count() as u64 * 80;
            assert_eq!(per_subset(b), want, "{kind:?} subset {id}");
        }
    }
}

/// A trace pair's point-B pcaps, and copies of them inside `layers`.
fn wrapped(dir: &Path, layers: &[Layer], tag: &str) -> [PathBuf; 2] {
    [0, 1].map(|port| {
        let plain = dir.join(format!("{}.pcap", Tap { point: Point::B, port }.name()));
        let records = pcap_io::read_file(&plain).expect("read");
        let frames: Vec<(u64, Vec<u8>)> = records
            .iter()
            .map(|r| {
                let ip = matches!(r.data.get(12..14), Some([0x08, 0x00] | [0x86, 0xdd]));
                (r.ts_ns, if ip { encapsulate(&r.data, layers) } else { r.data.clone() })
            })
            .collect();
        let out = dir.join(format!("{tag}-{port}.pcap"));
        pcap_io::write_file(&out, frames.iter().map(|(t, f)| (*t, f.as_slice()))).expect("write");
        out
    })
}

const SYNOPSES: &str = r#"
[packet]
identity_seed = 99
[packet.encap]
vxlan = true
[synopses.lda]
banks = [{ rows = 128, p = 0.5 }]
seed = 3
[synopses.lds]
rows = 2
width = 512
flow_capacity = 4096
[synopses.rda]
binding = { mode = "online", buckets_per_bank = 512 }
cache_capacity = 65536
[synopses.colate]
counters = 2003
cells_per_flow = 8
counter_bits = 48
epoch_threshold_ticks = 1000000000000
tick_ns = 1000
origin_ns = 1700000000000000000
"#;

/// Runs `wirelat offline` on `pcaps` and returns the synopsis bodies it dumped, by name.
fn bodies(dir: &Path, pcaps: &[PathBuf; 2], tag: &str) -> BTreeMap<String, Vec<u8>> {
    let out = dir.join(tag);
    std::fs::create_dir_all(&out).expect("mkdir");
    let config = out.join("c.toml");
    let text = format!(
        "[point]\nid = 2\n[segments]\nforward = 40\nreverse = 41\n[epochs]\nlength_ms = 100\n[output]\njson = \"{}\"\ndump_dir = \"{}\"\n{SYNOPSES}",
        out.join("e.jsonl").display(),
        out.join("dump").display()
    );
    std::fs::write(&config, text).expect("config");
    run_offline(&config, pcaps, &[]);
    read_dump(&out.join("dump"))
}

/// A generated trace pair in `d`: 300 ms at 4000 packets/s, a constant 30 µs, 5 % loss.
fn lossy_pair(d: &Path) {
    let traffic =
        TrafficConfig { packet_rate_pps: 4_000.0, duration_ns: 300_000_000, ..TrafficConfig::default() };
    let seg = SegmentConfig {
        delay: DelaySpec::Iid(DelayModel::Constant { delay: 30_000.0 }),
        loss: LossModel::Uniform { rate: 0.05 },
        fifo: false,
        reorder: None,
        paths: vec![],
    };
    generate(&GenConfig::synthetic(5, traffic, seg)).expect("generate").write_dir(d).expect("write");
}

#[test]
fn a_point_inside_a_tunnel_gives_the_same_synopses_as_a_plain_one() {
    let dir = scratch();
    let d = dir.path();
    lossy_pair(d);
    let plain = [0, 1].map(|port| d.join(format!("{}.pcap", Tap { point: Point::B, port }.name())));
    let reference = bodies(d, &plain, "plain");
    assert!(
        reference.keys().any(|k| k.starts_with("lda")) && reference.keys().any(|k| k.starts_with("colate"))
    );
    assert!(reference.keys().any(|k| k.starts_with("lds")) && reference.keys().any(|k| k.starts_with("rda")));
    for (tag, layers) in [
        ("vxlan", vec![Layer::Vlan(0x8100, 7), Layer::Vxlan(5001)]),
        ("mpls", vec![Layer::Mpls(100), Layer::Mpls(200)]),
    ] {
        let tunnelled = bodies(d, &wrapped(d, &layers, tag), tag);
        // Byte-identical bodies: whatever A's bodies, every estimate against them is the same.
        // LDS's differ only in its flow log's encapsulation attribute (checked end to end by
        // the collector test below), so its cells are compared.
        assert_eq!(tunnelled.keys().collect::<Vec<_>>(), reference.keys().collect::<Vec<_>>(), "{tag}");
        for (name, body) in &reference {
            let got = tunnelled.get(name).expect("same names");
            if name.starts_with("lds") {
                let cells = lds_cells(body);
                assert_eq!(
                    &got[..cells],
                    &body[..cells],
                    "{tag}: {name}'s cells differ from the plain point's"
                );
            } else {
                assert!(got == body, "{tag}: {name} differs from the plain point's");
            }
        }
    }
}

/// Bytes of an LDS dump up to the end of its cells: header, then 2 × 512 cells of 16 bytes
/// (`[synopses.lds]` of [`SYNOPSES`]).
fn lds_cells(body: &[u8]) -> usize {
    let cells = 10 + 2 * 512 * 16;
    assert!(body.len() > cells, "an LDS body of {} bytes", body.len());
    cells
}

/// The records of a collector fed by point A's plain pcaps and point B's `b`, run in `d/run`.
fn collected(d: &Path, run: &str, b: [PathBuf; 2]) -> Vec<serde_json::Value> {
    let dir = d.join(run);
    std::fs::create_dir_all(&dir).expect("mkdir");
    let key = write_key(&dir);
    let collector = Collector::start(&collector_config(&dir, &key, SYNOPSES));
    let [a, _] = trace_pcaps(d);
    ship_points(&dir, &collector, &key, SYNOPSES, &[a, b], "");
    collector.stop();
    std::fs::read_to_string(dir.join("records.jsonl"))
        .expect("records")
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON"))
        .collect()
}

/// The flow records' `encap` per direction, as (upstream, downstream) strings ("null" where
/// the point did not log the flow), each with its count.
fn flow_encaps(records: &[serde_json::Value]) -> BTreeMap<(String, String, String, String), usize> {
    let mut out = BTreeMap::new();
    for r in records.iter().filter(|r| r["record"] == "flow") {
        let e = &r["encap"];
        let key = (
            r["synopsis"].to_string(),
            r["direction"].to_string(),
            e["upstream"].to_string(),
            e["downstream"].to_string(),
        );
        *out.entry(key).or_default() += 1;
    }
    out
}

#[test]
fn flow_records_name_each_points_encapsulation_and_keep_the_plain_estimates() {
    let dir = scratch();
    let d = dir.path();
    lossy_pair(d);
    let [_, plain_b] = trace_pcaps(d);
    let plain = collected(d, "plain", plain_b);
    let vxlan = collected(d, "vxlan", wrapped(d, &[Layer::Vlan(0x8100, 7), Layer::Vxlan(5001)], "vxlan"));
    // Point A (segment 40's upstream, 41's downstream) sees every flow plain, point B inside
    // VNI 5001: each record names both, or null where that point's log lacks the flow (all
    // its packets lost on the way).
    let (none, vni, null) = ("\"none\"", "\"vni:5001\"", "null");
    for (records, b) in [(&plain, none), (&vxlan, vni)] {
        let encaps = flow_encaps(records);
        for synopsis in ["\"lds\"", "\"colate\""] {
            for (direction, up, down) in [("\"forward\"", none, b), ("\"reverse\"", b, none)] {
                let both = (synopsis.to_owned(), direction.to_owned(), up.to_owned(), down.to_owned());
                assert!(encaps.get(&both).is_some_and(|n| *n > 0), "no {both:?} in {encaps:?}");
            }
        }
        for ((_, direction, up, down), n) in &encaps {
            let (want_up, want_down) = if direction == "\"forward\"" { (none, b) } else { (b, none) };
            assert!(
                (up == want_up || up == null) && (down == want_down || down == null),
                "{n} flow records {direction} with encap {up} -> {down}"
            );
        }
    }
    // Without the attribute, the two runs wrote the same records, estimates included.
    let strip = |records: &[serde_json::Value]| -> Vec<String> {
        let mut lines: Vec<String> = records
            .iter()
            .map(|r| {
                let mut r = r.clone();
                if let Some(o) = r.as_object_mut() {
                    o.remove("encap");
                }
                r.to_string()
            })
            .collect();
        lines.sort();
        lines
    };
    assert!(plain.iter().filter(|r| r["record"] == "flow").count() >= 8, "{plain:?}");
    assert_eq!(strip(&vxlan), strip(&plain));
}
