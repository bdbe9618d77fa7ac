//! Hostile or heavy input: slow-drip handshakes, a collector that gives groups up, overload
//! without shedding, and bad keys, frames and configurations refused while the peer keeps
//! serving.

use super::oracle::{assert_same, expected, harvests, written};
use super::*;

/// `n` unauthenticated clients that each send one byte every `every` and reconnect at once
/// when cut, until `stop`: the slow-drip attack on the handshake slots.
fn drip_clients(
    addr: SocketAddr,
    n: usize,
    every: Duration,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        let mut conns: Vec<Option<(TcpStream, Instant)>> = (0..n).map(|_| None).collect();
        let mut connects = 0u64;
        while !stop.load(std::sync::atomic::Ordering::SeqCst) {
            for c in conns.iter_mut() {
                let alive = match c {
                    Some((s, last)) if last.elapsed() >= every => {
                        let ok = s.write_all(&[0x57]).is_ok();
                        *last = Instant::now();
                        ok
                    }
                    Some((s, _)) => {
                        // Cut by the collector? (a read of 0 bytes, without blocking)
                        let mut b = [0u8; 64];
                        let _ = s.set_nonblocking(true);
                        !matches!(s.read(&mut b), Ok(0))
                    }
                    None => false,
                };
                if !alive && let Ok(s) = TcpStream::connect(addr) {
                    connects += 1;
                    *c = Some((s, Instant::now()));
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        connects
    })
}

/// 70 clients dripping a byte every 3 s into their handshakes (more than the 64 connection
/// slots) while two points deliver every epoch: handshakes have their own budget, a per-address
/// budget and a total deadline, so the points get in and lose nothing.
#[test]
fn seventy_slow_handshakes_do_not_keep_two_points_out() {
    let dir = scratch();
    let t = traffic(8);
    let mut c = Collector::start(&collector_toml(dir.path(), "127.0.0.1:0", "handshake_timeout_ms = 3000"));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let drip = drip_clients(c.addr, 70, Duration::from_secs(3), stop.clone());
    std::thread::sleep(Duration::from_millis(1500));
    let started = Instant::now();
    let a = sim_point(&point_toml(dir.path(), "a", c.addr, &t, ""), &["--pace-ms", "20"]);
    let b = sim_point(&point_toml(dir.path(), "b", c.addr, &t, ""), &["--pace-ms", "20"]);
    let (oa, ob) = (finish(a, "point a"), finish(b, "point b"));
    let took = started.elapsed();
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let connects = drip.join().unwrap();
    for o in [&oa, &ob] {
        let counters: Value = serde_json::from_slice(&o.stdout).expect("counters");
        assert_eq!(counters["queued"], 0, "{counters}");
        assert!(counters["given_up"].as_array().unwrap().iter().all(|g| g[1] == 0), "{counters}");
    }
    assert_same(&written(&dir.path().join("records.jsonl")), &expected(&harvests(&t), &synopses()));
    assert!(connects >= 70, "the attack ran: {connects} connections");
    let evicted = c.metric("wirelat_peer_rejected_total{reason=\"handshake_evicted_addr\"}")
        + c.metric("wirelat_peer_rejected_total{reason=\"handshake_evicted\"}");
    assert!(evicted > 0.0, "the budget evicted slow handshakes");
    assert!(took < Duration::from_secs(30), "the points took {took:?}");
    c.stop();
}

/// A collector that gives groups up (here: more groups waiting for point b than
/// `max_pending_groups`) says so when it stops: exit code 1 and one sentence counting them by
/// reason (it exited 0 before, the records silently missing).
#[test]
fn a_collector_that_gave_groups_up_exits_non_zero_with_a_summary() {
    let dir = scratch();
    let t = traffic(6);
    let mut c = Collector::start(&collector_toml(dir.path(), "127.0.0.1:0", "max_pending_groups = 1"));
    // Only point a: its groups wait for b, and all but one overflow.
    let mut a = sim_point(&point_toml(dir.path(), "a", c.addr, &t, ""), &["--pace-ms", "10"]);
    wait_for(60, "a pending overflow", || {
        c.metric("wirelat_peer_given_up_total{reason=\"pending_overflow\"}") > 0.0
    });
    let _ = a.kill();
    let _ = a.wait();
    let (status, log) = c.stop_with_status();
    assert_eq!(status.code(), Some(1), "{log}");
    let last = log.lines().last().unwrap_or_default();
    assert!(last.contains("groups were given up without records (pending_overflow "), "{log}");
}

/// W14: an overloaded collector (unpaced points, a 4 MiB `max_pending_bytes`) slows its
/// points down through their send windows (`[ship] window_bytes`, 1 MiB each: together under
/// the budget) instead of shedding what waits and making them resend their backlog. Nothing
/// is shed or resent, each point keeps its one connection, and every group is committed.
/// Without the window (the points sending as fast as TCP takes it) the same run sheds.
#[test]
fn an_overloaded_collector_slows_its_points_down_without_shedding_or_losing_anything() {
    let dir = scratch();
    let t = traffic(40);
    let mut c = Collector::start(&collector_toml(dir.path(), "127.0.0.1:0", "max_pending_bytes = 4194304"));
    let window = "window_bytes = 1048576";
    let a = sim_point(&point_toml(dir.path(), "a", c.addr, &t, window), &["--pace-ms", "0"]);
    let b = sim_point(&point_toml(dir.path(), "b", c.addr, &t, window), &["--pace-ms", "0"]);
    let (oa, ob) = (finish(a, "point a"), finish(b, "point b"));
    for o in [&oa, &ob] {
        let counters: Value = serde_json::from_slice(&o.stdout).expect("counters");
        assert_eq!(counters["queued"], 0, "{counters}");
        assert_eq!(counters["resent"], 0, "nothing was shed and resent: {counters}");
        assert_eq!(counters["connections"], 1, "never cut: {counters}");
    }
    assert!(c.metric("wirelat_peer_records_total") > 0.0);
    let log = c.stop();
    assert!(!log.contains("dropped unacknowledged"), "the collector shed: {log}");
    assert_same(&written(&dir.path().join("records.jsonl")), &expected(&harvests(&t), &synopses()));
}

/// Connects as point 1 and completes the handshake; returns the raw stream too.
fn bad_client(
    addr: SocketAddr,
    psk: &PreSharedKey,
    hello: &Hello,
) -> (TcpStream, conn::FrameReader, conn::FrameWriter) {
    let s = TcpStream::connect(addr).unwrap();
    let raw = s.try_clone().unwrap();
    let (r, w) = conn::client_handshake(s, psk, hello, 1 << 20, Duration::from_secs(5)).expect("handshake");
    (raw, r, w)
}

/// The peer ends the connection (with a Reject or by closing it).
fn assert_closed(r: &mut conn::FrameReader) -> String {
    r.set_timeout(Some(Duration::from_secs(10))).unwrap();
    loop {
        match r.read() {
            Ok(Message::Reject { reason }) => return reason,
            Ok(Message::Ack(_)) => continue,
            Ok(other) => panic!("unexpected {other:?}"),
            Err(e) => return e.to_string(),
        }
    }
}

#[test]
fn bad_keys_frames_and_configurations_are_refused_and_the_peer_keeps_serving() {
    let dir = scratch();
    let t = traffic(6);
    let mut c = Collector::start(&collector_toml(dir.path(), "127.0.0.1:0", "max_body_bytes = 1048576"));
    let psk = PreSharedKey::from_hex(KEY).unwrap();
    let packet = PacketConfig::default();
    let hello = Hello {
        point: 1,
        watermark: 0,
        packet_identity: packet.identity_fingerprint(),
        fingerprints: synopses().fingerprints(&packet),
    };
    let key = MessageKey { point: 1, segment: SEGMENTS.forward, epoch: 5, kind: SynopsisKind::Lda };
    let lda = Lda::new(synopses().lda.as_ref().unwrap()).unwrap();
    let lda_frame = |packet: &PacketConfig| {
        Message::Epoch(EpochFrame {
            key,
            fingerprint: peer_fingerprint(SynopsisKind::Lda, lda.config().fingerprint(), packet),
            complete: true,
            epoch_len_ns: t.epoch_len_ns,
            synopsis: lda.encode(),
        })
        .encode()
    };
    let frame = lda_frame(&packet);
    // The same synopsis from a point whose packets hash with another seed: it would pair
    // nothing with the other point's.
    let other_packet = PacketConfig { identity_seed: 9, ..PacketConfig::default() };
    let other_frame = lda_frame(&other_packet);

    // A corrupt frame under a valid tag: the checksum catches it.
    let (_raw, mut r, mut w) = bad_client(c.addr, &psk, &hello);
    let mut bad = frame.clone();
    *bad.last_mut().unwrap() ^= 0x40;
    w.send_frame(&bad).unwrap();
    assert!(assert_closed(&mut r).contains("checksum"));
    // A frame with a wrong tag.
    let (mut raw, mut r, _w) = bad_client(c.addr, &psk, &hello);
    raw.write_all(&frame).unwrap();
    raw.write_all(&[7u8; 32]).unwrap();
    assert!(assert_closed(&mut r).contains("authentication"));
    // A truncated frame, then the end of the stream.
    let (mut raw, mut r, _w) = bad_client(c.addr, &psk, &hello);
    raw.write_all(&frame[..frame.len() / 2]).unwrap();
    raw.shutdown(std::net::Shutdown::Write).unwrap();
    let _ = assert_closed(&mut r);
    // An oversized length: refused from the header, before any body is read.
    let (mut raw, mut r, _w) = bad_client(c.addr, &psk, &hello);
    let mut big = frame[..HEADER_LEN].to_vec();
    big[28..32].copy_from_slice(&(64u32 << 20).to_le_bytes());
    raw.write_all(&big).unwrap();
    assert!(assert_closed(&mut r).contains("exceeds the cap"));
    // An unknown format version: a point of the previous one.
    let (mut raw, mut r, _w) = bad_client(c.addr, &psk, &hello);
    let mut v2 = frame.clone();
    v2[4] = WIRE_VERSION - 1;
    let sum = checksum(&v2[..HEADER_LEN], &v2[HEADER_LEN..]);
    v2[40..48].copy_from_slice(&sum.to_le_bytes());
    raw.write_all(&v2).unwrap();
    // The peer may refuse on the header and close before the tag arrives: that write can fail.
    let _ = raw.write_all(&[0u8; 32]);
    assert!(assert_closed(&mut r).contains("version"));
    // An epoch synopsis made under other packet settings (a spill file of an earlier run,
    // say) after a good hello: refused by its fingerprint.
    let (_raw, mut r, mut w) = bad_client(c.addr, &psk, &hello);
    w.send_frame(&other_frame).unwrap();
    let why = assert_closed(&mut r);
    assert!(why.contains("fingerprint") && why.contains("[packet]"), "{why}");

    // Now the good points run, while a wrong key and a mismatched fingerprint keep knocking.
    let a = sim_point(&point_toml(dir.path(), "a", c.addr, &t, ""), &["--pace-ms", "20"]);
    let b = sim_point(&point_toml(dir.path(), "b", c.addr, &t, ""), &["--pace-ms", "20"]);
    for _ in 0..3 {
        let wrong = PreSharedKey::from_bytes(&[9u8; 32]).unwrap();
        let s = TcpStream::connect(c.addr).unwrap();
        assert!(conn::client_handshake(s, &wrong, &hello, 1 << 20, Duration::from_secs(5)).is_err());
        let mut h = hello.clone();
        h.fingerprints[1].1 ^= 1;
        let s = TcpStream::connect(c.addr).unwrap();
        let (mut r, _w) =
            conn::client_handshake(s, &psk, &h, 1 << 20, Duration::from_secs(5)).expect("handshake");
        assert!(assert_closed(&mut r).contains("fingerprint"));
        // A point whose packet settings differ: its hello says so, naming the settings.
        let h = Hello {
            packet_identity: other_packet.identity_fingerprint(),
            fingerprints: synopses().fingerprints(&other_packet),
            ..hello.clone()
        };
        let s = TcpStream::connect(c.addr).unwrap();
        let (mut r, _w) =
            conn::client_handshake(s, &psk, &h, 1 << 20, Duration::from_secs(5)).expect("handshake");
        let why = assert_closed(&mut r);
        assert!(why.contains("identity_seed") && why.contains("[packet]"), "{why}");
        std::thread::sleep(Duration::from_millis(50));
    }
    finish(a, "point a");
    finish(b, "point b");
    assert_same(&written(&dir.path().join("records.jsonl")), &expected(&harvests(&t), &synopses()));

    for reason in [
        "bad_checksum",
        "bad_mac",
        "truncated",
        "oversized_length",
        "unknown_version",
        "fingerprint_mismatch",
    ] {
        let series = format!("wirelat_peer_rejected_total{{reason=\"{reason}\"}}");
        assert!(c.metric(&series) >= 1.0, "{series} not counted:\n{}", c.metrics());
    }
    let log = c.stop();
    for reason in [
        "bad_checksum",
        "bad_mac",
        "truncated",
        "oversized_length",
        "unknown_version",
        "fingerprint_mismatch",
    ] {
        assert!(log.contains(reason), "no log line names {reason}:\n{log}");
    }
}
