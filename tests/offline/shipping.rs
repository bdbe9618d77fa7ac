//! Shipping through `[ship]`: points ship their epochs to a collector that estimates the
//! segment, wait for a peer instead of giving epochs up, and exit non-zero with a summary when
//! the peer is unreachable.

use super::*;

#[test]
fn offline_points_ship_their_epochs_to_a_collector_that_estimates_the_segment() {
    let dir = scratch();
    let d = dir.path();
    trace(d);
    let key = write_key(d);
    // A packet identity seed other than the default at both points and the collector: the
    // two-point fingerprints cover it, so a point that shipped under any other would be refused.
    let synopses =
        "[synopses.lda]\nbanks = [{ rows = 256, p = 1.0 }]\nseed = 9\n[packet]\nidentity_seed = 5\n";
    let collector = Collector::start(&collector_config(d, &key, synopses));
    ship_points(d, &collector, &key, synopses, &trace_pcaps(d), "");
    // Point a again, measuring with another identity seed: the collector refuses it by its
    // hello, naming the packet settings, and accepts none of its epochs.
    let config = d.join("a-other-seed.toml");
    std::fs::write(
        &config,
        format!(
            "[point]\nid = 1\n[segments]\nforward = 40\nreverse = 41\n[epochs]\nlength_ms = 100\n\
             [ship]\npeer = \"{}\"\nkey_file = \"{}\"\nbackoff_initial_ms = 20\nclose_timeout_ms = 1000\n\
             {}",
            collector.addr,
            key.display(),
            synopses.replace("identity_seed = 5", "identity_seed = 6")
        ),
    )
    .expect("point config");
    let output = wirelat()
        .args(["offline", "--config"])
        .arg(&config)
        .arg("--port0")
        .arg(d.join("a_port0.pcap"))
        .arg("--port1")
        .arg(d.join("a_port1.pcap"))
        .env("RUST_LOG", "info")
        .output()
        .expect("run wirelat offline");
    let log = String::from_utf8_lossy(&output.stderr);
    let refused =
        log.lines().find(|l| l.contains("the peer refused this point")).unwrap_or_else(|| panic!("{log}"));
    assert!(refused.contains("identity_seed"), "{refused}");
    let closed = log.lines().find(|l| l.contains("network sink closed")).unwrap_or_else(|| panic!("{log}"));
    assert!(closed.contains("acked=0") && !closed.contains("given_up=0"), "{closed}");
    // A run that lost epochs says so and fails.
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    assert!(log.contains("epoch synopses were not delivered to the peer"), "{log}");
    let log = collector.stop();
    assert!(log.contains("fingerprint_mismatch"), "{log}");
    // The collector paired both points' epochs into one LDA record per segment and epoch; the
    // scorer compares each with the generator's truth. The delay is a constant 30 µs without
    // loss, so LDA's usable rows hold exactly equal packets with equal delays: the mean is exact
    // up to float rounding. Only a packet that crosses an epoch boundary inside the segment
    // (A's epoch k, B's epoch k+1) makes its row's counts differ, and LDA drops that row. The
    // 1e-6 bound leaves room for rounding only; 5 epochs × 2 directions must be scored.
    let output = wirelat()
        .args(["check", "--truth"])
        .arg(d.join("truth.json"))
        .arg("--records")
        .arg(d.join("records.jsonl"))
        .args(["--bound", "lda.mean_rel_err_max=1e-6", "--bound", "lda.min_records=10"])
        .output()
        .expect("check");
    assert!(output.status.success(), "{}\n--- collector\n{log}", describe(&output));
}

/// A queue to the peer that holds one epoch synopsis: without backpressure nearly every epoch
/// was given up as `queue_full` (and the run still exited 0); offline now waits for the
/// collector's acknowledgements, so everything arrives and every record is scored.
#[test]
fn offline_waits_for_the_peer_instead_of_giving_epochs_up() {
    let dir = scratch();
    let d = dir.path();
    trace(d);
    let key = write_key(d);
    let synopses = "[synopses.lda]\nbanks = [{ rows = 256, p = 1.0 }]\nseed = 9\n";
    let collector = Collector::start(&collector_config(d, &key, synopses));
    ship_points(d, &collector, &key, synopses, &trace_pcaps(d), "queue_messages = 1");
    let log = collector.stop();
    let output = wirelat()
        .args(["check", "--truth"])
        .arg(d.join("truth.json"))
        .arg("--records")
        .arg(d.join("records.jsonl"))
        .args(["--bound", "lda.min_records=10"])
        .output()
        .expect("check");
    assert!(output.status.success(), "{}\n--- collector\n{log}", describe(&output));
}

/// A peer that never answers: the run waits `close_timeout_ms` without an acknowledgement,
/// then gives up, and exits 1 with one sentence counting what was lost, by reason.
#[test]
fn offline_with_an_unreachable_peer_exits_non_zero_with_a_summary() {
    let dir = scratch();
    let d = dir.path();
    let pcaps = trace(d);
    let key = write_key(d);
    // A port nothing listens on (bound, then closed).
    let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("port").port();
    let config = d.join("a.toml");
    std::fs::write(
        &config,
        format!(
            "[point]\nid = 1\n[segments]\nforward = 40\nreverse = 41\n[epochs]\nlength_ms = 100\n\
             [ship]\npeer = \"127.0.0.1:{port}\"\nkey_file = \"{}\"\nbackoff_initial_ms = 20\n\
             close_timeout_ms = 300\nqueue_messages = 2\n[synopses.lda]\nbanks = [{{ rows = 256, p = 1.0 }}]\n",
            key.display()
        ),
    )
    .expect("config");
    let output = offline_output(&config, &pcaps, &[]);
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    let err = String::from_utf8_lossy(&output.stderr);
    let last = err.lines().last().unwrap_or_default();
    assert!(last.starts_with("wirelat: error: "), "{err}");
    assert!(last.contains("epoch synopses were not delivered to the peer (queue_full "), "{last}");
    assert!(last.contains("unacked_at_close 2"), "{last}");
}
