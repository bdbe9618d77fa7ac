//! Many collectors (`[[route]]`): segments of several point pairs split over collectors, every
//! segment's records at exactly one, nothing lost, and misrouted output named.

use super::*;

/// Many collectors (`[[route]]`): three collectors, four points. Points 1 and 2 measure
/// segments 40 and 41, points 3 and 4 (the same traffic) segments 50 and 51. X owns 40, 41 and
/// the fridge of points 1 and 2; Y owns 50; Z owns 51 and the fridge of points 3 and 4, so
/// points 3 and 4 split their output over two collectors. (One collector owning segments of
/// both pairs is the next test.) Every segment's records are
/// at exactly one collector, and nothing is lost: every sink of every point had each delivered
/// epoch synopsis acknowledged.
#[test]
fn three_collectors_split_four_points_by_segment() {
    let dir = scratch();
    let d = dir.path();
    trace(d);
    let key = write_key(d);
    let synopses = "[synopses.lda]\nbanks = [{ rows = 256, p = 1.0 }]\nseed = 9\n[synopses.fridge]\n";
    let start = |name: &str, points: [u32; 2], segments: &[(u32, u32, u32)]| {
        let mut text = format!(
            "[collector]\nlisten = \"127.0.0.1:0\"\nkey_file = \"{}\"\nrecords = \"{}\"\n",
            key.display(),
            d.join(format!("records-{name}.jsonl")).display()
        );
        for (id, point) in points.iter().zip(["a", "b"]) {
            text.push_str(&format!("[[point]]\nid = {id}\nname = \"{point}\"\n"));
        }
        for (id, up, down) in segments {
            text.push_str(&format!("[[segment]]\nid = {id}\nupstream = {up}\ndownstream = {down}\n"));
        }
        text.push_str(synopses);
        let config = d.join(format!("collector-{name}.toml"));
        std::fs::write(&config, text).expect("collector config");
        Collector::start(&config)
    };
    let x = start("x", [1, 2], &[(40, 1, 2), (41, 2, 1)]);
    let y = start("y", [3, 4], &[(50, 3, 4)]);
    let z = start("z", [3, 4], &[(51, 4, 3)]);
    let ship = |c: &Collector| {
        format!(
            "ship = {{ peer = \"{}\", key_file = \"{}\", backoff_initial_ms = 20, close_timeout_ms = 30000 }}\n",
            c.addr,
            key.display()
        )
    };
    let route = |c: &Collector, segments: &str, fridge: bool| {
        format!("[[route]]\nsegments = [{segments}]\nfridge = {fridge}\n{}", ship(c))
    };
    let points = [
        (1, "a", 40, 41, route(&x, "40, 41", true)),
        (2, "b", 40, 41, route(&x, "40, 41", true)),
        (3, "a", 50, 51, route(&y, "50", false) + &route(&z, "51", true)),
        (4, "b", 50, 51, route(&y, "50", false) + &route(&z, "51", true)),
    ];
    let children: Vec<(usize, Child)> = points
        .iter()
        .map(|(id, pcaps, forward, reverse, routes)| {
            let config = d.join(format!("point{id}.toml"));
            let text = format!(
                "[point]\nid = {id}\n[segments]\nforward = {forward}\nreverse = {reverse}\n[epochs]\nlength_ms = 100\n\
                 {routes}{synopses}"
            );
            std::fs::write(&config, text).expect("point config");
            offline_logged(&config, &d.join(format!("{pcaps}_port0.pcap")), &d.join(format!("{pcaps}_port1.pcap")))
                .spawn()
                .map(|c| (routes.matches("[[route]]").count(), c))
                .expect("start wirelat offline")
        })
        .collect();
    for (routes, child) in children {
        let output = wait_with_timeout(child, RUN_TIMEOUT);
        assert!(output.status.success(), "{}", describe(&output));
        let log = String::from_utf8_lossy(&output.stderr);
        let closed: Vec<_> =
            log.lines().filter(|l| l.contains("network sink closed")).map(log_fields).collect();
        assert_eq!(closed.len(), routes, "{log}");
        for c in closed {
            assert_eq!(c["given_up"], "0", "{c:?}");
            assert_eq!(c["acked"], c["delivered"], "{c:?}");
            assert!(c["delivered"].parse::<u64>().expect("delivered") >= 5, "{c:?}");
        }
    }
    let mut seen: BTreeMap<String, BTreeSet<&str>> = BTreeMap::new();
    for (name, c) in [("x", x), ("y", y), ("z", z)] {
        let log = c.stop();
        let text = std::fs::read_to_string(d.join(format!("records-{name}.jsonl"))).expect("records");
        let mut count: BTreeMap<String, usize> = BTreeMap::new();
        for r in text.lines().map(|l| serde_json::from_str::<serde_json::Value>(l).expect("JSON")) {
            let what = match r["record"].as_str() {
                Some("segment") => format!("segment {}", r["segment"]),
                Some("fridge_quantiles") => format!("fridge {}", r["point_id"]),
                _ => continue,
            };
            *count.entry(what).or_default() += 1;
        }
        for (what, n) in &count {
            assert!(*n >= 4, "collector {name}: {n} records of {what}\n{log}");
            seen.entry(what.clone()).or_default().insert(name);
        }
    }
    let expected: BTreeMap<String, BTreeSet<&str>> = [
        ("segment 40", "x"),
        ("segment 41", "x"),
        ("segment 50", "y"),
        ("segment 51", "z"),
        ("fridge 1", "x"),
        ("fridge 2", "x"),
        ("fridge 3", "z"),
        ("fridge 4", "z"),
    ]
    .into_iter()
    .map(|(w, c)| (w.to_owned(), BTreeSet::from([c])))
    .collect();
    assert_eq!(seen, expected);
}

/// A collector owning segments of two point pairs (`[[point]]` 1–4; names repeat, ids tell
/// them apart): points 1 and 2 measure segments 40 and 41, points 3 and 4 the same traffic as
/// 50 and 51, all shipping to the one collector, which owns 40, 41 and 50 but not 51. Every
/// owned segment has a record for every epoch, and pair (3, 4)'s segment 50 gets exactly the
/// estimates pair (1, 2)'s segment 40 gets; each point's fridge is reported under its own id.
/// Segment 51 is misrouted: its epochs are acknowledged and dropped, counted per point and
/// segment in `wirelat_peer_unowned_epochs_total`, and logged once per point and segment.
#[test]
fn one_collector_owns_segments_of_two_point_pairs_and_names_misrouted_ones() {
    let dir = scratch();
    let d = dir.path();
    trace(d);
    let key = write_key(d);
    let synopses = "[synopses.lda]\nbanks = [{ rows = 256, p = 1.0 }]\nseed = 9\n[synopses.fridge]\n";
    let mut text = format!(
        "[collector]\nlisten = \"127.0.0.1:0\"\nkey_file = \"{}\"\nrecords = \"{}\"\nmetrics_listen = \"127.0.0.1:0\"\n",
        key.display(),
        d.join("records.jsonl").display()
    );
    for (id, name) in [(1, "a"), (2, "b"), (3, "a"), (4, "b")] {
        text.push_str(&format!("[[point]]\nid = {id}\nname = \"{name}\"\n"));
    }
    for (id, up, down) in [(40, 1, 2), (41, 2, 1), (50, 3, 4)] {
        text.push_str(&format!("[[segment]]\nid = {id}\nupstream = {up}\ndownstream = {down}\n"));
    }
    text.push_str(synopses);
    let config = d.join("collector.toml");
    std::fs::write(&config, text).expect("collector config");
    let mut collector = Collector::start(&config);
    let metrics: std::net::SocketAddr =
        collector.wait_for_line("metrics on http://").trim_end_matches("/metrics").parse().expect("address");
    let children: Vec<(u32, Child)> = [(1, "a", 40, 41), (2, "b", 40, 41), (3, "a", 50, 51), (4, "b", 50, 51)]
        .into_iter()
        .map(|(id, pcaps, forward, reverse)| {
            let config = d.join(format!("point{id}.toml"));
            let text = format!(
                "[point]\nid = {id}\n[segments]\nforward = {forward}\nreverse = {reverse}\n[epochs]\nlength_ms = 100\n\
                 [ship]\npeer = \"{}\"\nkey_file = \"{}\"\nbackoff_initial_ms = 20\nclose_timeout_ms = 30000\n{synopses}",
                collector.addr,
                key.display()
            );
            std::fs::write(&config, text).expect("point config");
            let child =
                offline_logged(&config, &d.join(format!("{pcaps}_port0.pcap")), &d.join(format!("{pcaps}_port1.pcap")))
                    .spawn()
                    .expect("start wirelat offline");
            (id, child)
        })
        .collect();
    let mut epochs = BTreeMap::new();
    for (id, child) in children {
        let output = wait_with_timeout(child, RUN_TIMEOUT);
        assert!(output.status.success(), "point {id}: {}", describe(&output));
        let log = String::from_utf8_lossy(&output.stderr);
        let closed = log.lines().find(|l| l.contains("network sink closed")).map(log_fields);
        let closed = closed.unwrap_or_else(|| panic!("point {id}: {log}"));
        assert_eq!(closed["given_up"], "0", "point {id}: {closed:?}");
        assert_eq!(closed["acked"], closed["delivered"], "point {id}: {closed:?}");
        let done = log.lines().find(|l| l.contains("offline run finished")).map(log_fields);
        let n: u64 = done.and_then(|f| f.get("epochs")?.parse().ok()).unwrap_or_else(|| panic!("{log}"));
        epochs.insert(id, n);
    }
    assert!(epochs.values().all(|&n| n == epochs[&1] && n >= 5), "{epochs:?}");
    let page = Collector::http_get(metrics, "/metrics");
    let log = collector.stop();
    let records: Vec<serde_json::Value> = std::fs::read_to_string(d.join("records.jsonl"))
        .expect("records")
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON"))
        .collect();
    // Per owned segment: one record per epoch; the estimates without the segment's own
    // names (segment id, points) are the same for both pairs.
    let of_segment = |seg: u64| -> Vec<serde_json::Value> {
        records
            .iter()
            .filter(|r| r["record"] == "segment" && r["segment"] == seg)
            .map(|r| {
                let mut r = r.clone();
                let o = r.as_object_mut().expect("object");
                for k in ["segment", "upstream", "downstream", "upstream_id", "downstream_id"] {
                    o.remove(k);
                }
                r
            })
            .collect()
    };
    for seg in [40, 41, 50] {
        assert_eq!(of_segment(seg).len() as u64, epochs[&1], "segment {seg}:\n{records:?}\n{log}");
    }
    assert_eq!(of_segment(50), of_segment(40));
    assert!(of_segment(51).is_empty());
    let fridge_ids: BTreeSet<u64> = records
        .iter()
        .filter(|r| r["record"] == "fridge_quantiles")
        .filter_map(|r| r["point_id"].as_u64())
        .collect();
    assert_eq!(fridge_ids, BTreeSet::from([1, 2, 3, 4]));
    // Same traffic at points 1 and 3 (both "a"): two series with the same counts.
    let count = |id: u32| {
        page.lines()
            .filter(|l| {
                l.starts_with(&format!("wirelat_fridge_delay_seconds_count{{point=\"a\",point_id=\"{id}\","))
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>()
    };
    assert!(count(1) > 0.0 && count(1) == count(3), "{page}");
    // The misrouted segment: every epoch of it counted per point, one log line per point.
    for (point, n) in [(3, epochs[&3]), (4, epochs[&4])] {
        let s =
            format!("wirelat_peer_unowned_epochs_total{{point=\"{point}\",segment=\"51\",synopsis=\"lda\"}}");
        assert_eq!(series_value(&page, &s), Some(n as f64), "{s}:\n{page}");
        let logged: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("acknowledged and dropped") && l.contains(&format!("point={point}")))
            .collect();
        assert_eq!(logged.len(), 1, "point {point}: {logged:?}");
        assert!(logged[0].contains("segment=51"), "{logged:?}");
    }
    assert!(!page.contains("wirelat_peer_unowned_epochs_total{point=\"1\""), "{page}");
}
