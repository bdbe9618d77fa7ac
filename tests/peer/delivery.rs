//! Delivery: the collector's records equal the oracle, also when the peer or a point is killed
//! and restarted, and when a point's spill directory holds another point's file.

use super::oracle::{assert_same, expected, harvests, written};
use super::*;

#[test]
fn collector_estimates_equal_the_estimators_on_the_same_synopses() {
    let dir = scratch();
    let t = traffic(8);
    let mut c = Collector::start(&collector_toml(dir.path(), "127.0.0.1:0", ""));
    let a = sim_point(&point_toml(dir.path(), "a", c.addr, &t, ""), &["--pace-ms", "10"]);
    let b = sim_point(&point_toml(dir.path(), "b", c.addr, &t, ""), &["--pace-ms", "10"]);
    let (oa, ob) = (finish(a, "point a"), finish(b, "point b"));
    for o in [&oa, &ob] {
        let counters: Value = serde_json::from_slice(&o.stdout).expect("counters");
        assert_eq!(counters["queued"], 0, "everything acknowledged: {counters}");
        assert!(counters["acked"].as_u64().unwrap() > 0);
        assert!(counters["rda_lookups"].as_u64().unwrap() > 0, "the peer looked timestamps up: {counters}");
        // W14: each RDA cache is dropped when its epoch is acknowledged, not kept for the
        // retention time (the points' RSS grew with every epoch of the soaks).
        assert_eq!(counters["rda_caches_released"], counters["rda_caches_retained"], "{counters}");
    }
    let want = expected(&harvests(&t), &synopses());
    let got = written(&dir.path().join("records.jsonl"));
    assert_same(&got, &want);
    // The blackout epoch (relative 2) is reported as 100 % loss, not waited for.
    let text = std::fs::read_to_string(dir.path().join("records.jsonl")).unwrap();
    let blackout = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|v| {
            v["record"] == "segment"
                && v["synopsis"] == "lda"
                && v["epoch"] == 1002
                && v["direction"] == "forward"
        })
        .expect("blackout epoch record");
    assert_eq!(blackout["loss"]["rate"], 1.0, "{blackout}");
    assert_eq!(blackout["absent"], serde_json::json!(["downstream"]));
    // Metrics: counters and the latest estimates.
    let m = c.metrics();
    assert!(m.contains("wirelat_latest_mean_delay_ns{segment=\"10\",synopsis=\"lda\"}"), "{m}");
    assert!(c.metric("wirelat_peer_records_total") as usize >= want.len());
    assert_eq!(c.metric("wirelat_peer_pending_groups"), 0.0);
    assert!(dir.path().join("colate/s10-p1.colate").exists(), "COLATE windows archived");
    let log = c.stop();
    assert!(!log.contains("panicked"), "{log}");
}

#[test]
fn a_killed_and_restarted_peer_loses_no_epoch_and_duplicates_none() {
    let dir = scratch();
    let t = traffic(16);
    let cfg = collector_toml(dir.path(), "127.0.0.1:0", "");
    let c = Collector::start(&cfg);
    let addr = c.addr;
    // Restart on the same port (the points keep their peer address).
    let cfg = collector_toml(dir.path(), &addr.to_string(), "");
    let a = sim_point(&point_toml(dir.path(), "a", addr, &t, ""), &["--pace-ms", "60"]);
    let b = sim_point(&point_toml(dir.path(), "b", addr, &t, ""), &["--pace-ms", "60"]);
    let records = dir.path().join("records.jsonl");
    wait_for(60, "the first records", || {
        std::fs::read_to_string(&records).map_or(0, |s| s.lines().count()) > 30
    });
    c.kill();
    std::thread::sleep(Duration::from_millis(300));
    let c = Collector::start(&cfg);
    let (oa, ob) = (finish(a, "point a"), finish(b, "point b"));
    for o in [&oa, &ob] {
        let counters: Value = serde_json::from_slice(&o.stdout).expect("counters");
        assert_eq!(counters["queued"], 0, "{counters}");
        assert!(counters["connections"].as_u64().unwrap() >= 2, "reconnected: {counters}");
    }
    assert_same(&written(&records), &expected(&harvests(&t), &synopses()));
    c.stop();
}

#[test]
fn a_point_restarted_mid_run_resumes_from_its_spill_directory() {
    let dir = scratch();
    let t = traffic(10);
    let mut c = Collector::start(&collector_toml(dir.path(), "127.0.0.1:0", ""));
    let spill = dir.path().join("spill-a");
    let extra = format!("spill_dir = \"{}\"\nspill_all = true", spill.display());
    let pa = point_toml(dir.path(), "a", c.addr, &t, &extra);
    let b = sim_point(&point_toml(dir.path(), "b", c.addr, &t, ""), &["--pace-ms", "40"]);
    // Point a crashes after epoch 4; what it had queued is on disk.
    let crashed = wait_with_timeout(
        sim_point(&pa, &["--pace-ms", "40", "--crash-after", "4"]),
        Duration::from_secs(60),
    );
    assert_eq!(crashed.status.code(), Some(3), "{}", describe(&crashed));
    let a = sim_point(&pa, &["--pace-ms", "40", "--from-epoch", "5"]);
    let (oa, _) = (finish(a, "restarted point a"), finish(b, "point b"));
    let counters: Value = serde_json::from_slice(&oa.stdout).unwrap();
    assert_eq!(counters["queued"], 0, "{counters}");
    let records = dir.path().join("records.jsonl");
    let want = expected(&harvests(&t), &synopses());
    assert_same(&written(&records), &want);
    // A clean restart that replays everything (trace mode) adds no record: all duplicates.
    let before = std::fs::read_to_string(&records).unwrap();
    finish(sim_point(&pa, &[]), "replaying point a");
    assert_eq!(std::fs::read_to_string(&records).unwrap(), before);
    assert!(c.metric("wirelat_peer_duplicates_total{point=\"1\",synopsis=\"lda\"}") > 0.0);
    c.stop();
}

/// A spill directory holding another point's epoch synopsis (point 2's, as a shared directory
/// or a changed `[point] id` leaves it): point 1 sets it aside with a reason, never sends it,
/// and delivers every one of its own epochs. Before, it sent the file first on every
/// connection, the collector cut the connection, and nothing was delivered.
#[test]
fn a_point_with_a_foreign_spill_file_sets_it_aside_and_delivers_everything() {
    let dir = scratch();
    let t = traffic(6);
    let mut c = Collector::start(&collector_toml(dir.path(), "127.0.0.1:0", ""));
    let spill = dir.path().join("spill-a");
    std::fs::create_dir_all(&spill).unwrap();
    let [_, hb] = harvests(&t);
    let theirs = hb
        .iter()
        .flat_map(|h| &h.messages)
        .find(|m| m.kind == SynopsisKind::Lda)
        .expect("an LDA message of point b");
    let key =
        MessageKey { point: theirs.point, segment: theirs.segment, epoch: theirs.epoch, kind: theirs.kind };
    let frame = Message::Epoch(EpochFrame {
        key,
        fingerprint: theirs.fingerprint,
        complete: theirs.complete,
        epoch_len_ns: theirs.epoch_len_ns,
        synopsis: theirs.body.clone(),
    });
    let name = format!("p{}-s{}-e{}-k{}.wlq", key.point, key.segment, key.epoch, key.kind as u8);
    std::fs::write(spill.join(&name), frame.encode()).unwrap();
    let extra = format!("spill_dir = \"{}\"", spill.display());
    let a = sim_point(&point_toml(dir.path(), "a", c.addr, &t, &extra), &["--pace-ms", "20"]);
    let b = sim_point(&point_toml(dir.path(), "b", c.addr, &t, ""), &["--pace-ms", "20"]);
    let (oa, _) = (finish(a, "point a"), finish(b, "point b"));
    let counters: Value = serde_json::from_slice(&oa.stdout).unwrap();
    assert_eq!(counters["queued"], 0, "{counters}");
    assert_eq!(counters["loaded_from_spill"], 0, "{counters}");
    let log = String::from_utf8_lossy(&oa.stderr);
    assert!(log.contains("spill file set aside") && log.contains("foreign_point"), "{log}");
    assert!(spill.join("set-aside").join(format!("{name}.foreign_point")).exists());
    assert_same(&written(&dir.path().join("records.jsonl")), &expected(&harvests(&t), &synopses()));
    assert_eq!(c.metric("wirelat_peer_rejected_total{reason=\"protocol\"}"), 0.0);
    c.stop();
}
