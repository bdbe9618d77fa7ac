//! `wirelat replay` on DPDK's pcap virtual device: what it sends is byte-identical and in
//! order, loops repeat the pcap, two streams keep their own order, and the recorded timing is
//! kept. The pcap driver stamps each record it writes with the TSC time of the tx call, at
//! nanosecond precision, so the written timestamps show when frames left.

#![cfg(feature = "dpdk")]

mod common;

use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::Duration;

use common::*;
use pcap_file::pcap::{PcapPacket, PcapReader, PcapWriter};

/// Frames of a pcap with their timestamps (ns).
fn read_timed(path: &Path) -> Vec<(u64, Vec<u8>)> {
    let file = File::open(path).unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
    let mut reader = PcapReader::new(BufReader::new(file)).expect("pcap header");
    let mut out = Vec::new();
    while let Some(p) = reader.next_packet() {
        let p = p.expect("pcap record");
        out.push((p.timestamp.as_nanos() as u64, p.data.into_owned()));
    }
    out
}

/// `n` distinct 60..123-byte frames, `gap_ns` apart (a multiple of 1 µs), written as a
/// microsecond pcap (the replay reads µs and ns pcaps alike).
fn write_spaced(path: &Path, n: usize, gap_ns: u64) -> Vec<Vec<u8>> {
    let frames: Vec<Vec<u8>> = (0..n)
        .map(|i| {
            let mut f = vec![0u8; 60 + i % 64];
            f[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 1]);
            f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 2]);
            f[12..14].copy_from_slice(&[0x88, 0xb5]); // local experimental ethertype
            f[14..22].copy_from_slice(&(i as u64).to_be_bytes());
            f
        })
        .collect();
    let file = File::create(path).expect("create pcap");
    let mut w = PcapWriter::new(file).expect("pcap header");
    for (i, f) in frames.iter().enumerate() {
        let ts = Duration::from_secs(1_700_000_000) + Duration::from_nanos(i as u64 * gap_ns);
        w.write_packet(&PcapPacket::new(ts, f.len() as u32, f)).expect("pcap record");
    }
    frames
}

/// Frames a pcap that is still being written holds so far (0 while it has no header yet).
fn frames_so_far(path: &Path) -> usize {
    let Ok(file) = File::open(path) else { return 0 };
    let Ok(mut reader) = PcapReader::new(BufReader::new(file)) else { return 0 };
    let mut n = 0;
    while let Some(Ok(_)) = reader.next_packet() {
        n += 1;
    }
    n
}

fn eal(dir: &Path) -> String {
    let prefix = format!(
        "wr{}-{}",
        std::process::id(),
        dir.file_name().and_then(|n| n.to_str()).unwrap_or("x").replace(['.', '-'], "")
    );
    format!("--no-huge -m 512 --no-pci --no-shconf --no-telemetry --log-level=warning --file-prefix={prefix}")
}

fn out_path(dir: &Path, name: &str) -> PathBuf {
    dir.join(name)
}

/// Runs `wirelat replay` with `args` (plus the test EAL arguments) and waits for it.
fn replay(dir: &Path, args: &[String]) -> Output {
    let child = wirelat()
        .arg("replay")
        .arg(format!("--eal-args={}", eal(dir)))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start wirelat");
    wait_with_timeout(child, RUN_TIMEOUT)
}

fn stream(pcap: &Path, device: &str) -> [String; 4] {
    ["--pcap".into(), pcap.display().to_string(), "--device".into(), device.into()]
}

/// The number after `prefix` in `text`.
fn number_after(text: &str, prefix: &str) -> f64 {
    let start =
        text.find(prefix).map(|i| i + prefix.len()).unwrap_or_else(|| panic!("no `{prefix}` in {text}"));
    text[start..]
        .split_whitespace()
        .next()
        .and_then(|w| w.trim_end_matches([',', ';']).parse().ok())
        .unwrap_or_else(|| panic!("no number after `{prefix}` in {text}"))
}

#[test]
fn sample_is_sent_byte_identical_and_in_order_with_chained_jumbo_frames() {
    let dir = scratch();
    let d = dir.path();
    let sample = repo_path("data/sample.pcap");
    let out = out_path(d, "out.pcap");
    // A 2 KiB data room: the sample's 9000-byte frame needs a chain of mbufs.
    let config = d.join("replay.toml");
    std::fs::write(
        &config,
        format!(
            "[replay]\nrate_multiplier = 0\n[mempool]\ndata_room_bytes = 2176\n\
             [[stream]]\npcap = \"{}\"\ndevice = \"net_pcap0,tx_pcap={}\"\n",
            sample.display(),
            out.display()
        ),
    )
    .expect("write config");
    let output = replay(d, &["--config".into(), config.display().to_string()]);
    assert!(output.status.success(), "{}", describe(&output));
    let expected = read_frames(&sample);
    assert_same_frames(&read_frames(&out), &expected, "replayed sample");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let n = expected.len();
    assert!(stdout.contains(&format!("sent {n} frames")), "{stdout}");
    assert!(stdout.contains("chained 1,") && stdout.contains("unsent 0"), "{stdout}");
    assert!(stdout.contains(&format!("device tx {n} oerrors 0")), "{stdout}");
    assert!(stdout.contains("passes 1 of 1; stopped: Finished"), "{stdout}");
}

#[test]
fn two_streams_each_leave_their_own_device_in_order() {
    let dir = scratch();
    let d = dir.path();
    // A trace pair's A side: port 0 and port 1 captures, interleaved in time.
    let generated = wirelat()
        .args(["gen-trace", "--duration", "200ms", "--rate", "4000", "--out"])
        .arg(d.join("pair"))
        .output()
        .expect("run gen-trace");
    assert!(generated.status.success(), "{}", describe(&generated));
    let (in0, in1) = (d.join("pair/a_port0.pcap"), d.join("pair/a_port1.pcap"));
    let (out0, out1) = (out_path(d, "o0.pcap"), out_path(d, "o1.pcap"));
    let mut args: Vec<String> = vec!["-r".into(), "0".into()];
    args.extend(stream(&in0, &format!("net_pcap0,tx_pcap={}", out0.display())));
    args.extend(stream(&in1, &format!("net_pcap1,tx_pcap={}", out1.display())));
    let output = replay(d, &args);
    assert!(output.status.success(), "{}", describe(&output));
    assert_same_frames(&read_frames(&out0), &read_frames(&in0), "port 0 stream");
    assert_same_frames(&read_frames(&out1), &read_frames(&in1), "port 1 stream");
    assert!(!read_frames(&in0).is_empty() && !read_frames(&in1).is_empty());
}

/// How the written stamps relate to the schedule. The pcap driver stamps a frame with the TSC
/// when it writes it, a little after the replay read the TSC and handed the burst over; the
/// replay reports each frame's lateness (handed over minus due). Frame 0 is due at the start:
///   stamp_i − stamp_0 = due_i + late_i + lag_i − (late_0 + lag_0),
/// so every frame satisfies due_i − (late_0 + lag_0) ≤ stamp_i − stamp_0 ≤ due_i + max late +
/// lag_i. Lateness is scheduling delay, unbounded on this shared 2-vCPU machine (measured:
/// stalls of 0.1–5 s at load 4–6 while other tests and fuzzers ran), so both bounds use the
/// replay's own reported maximum; the lag is the time to write a burst into the pcap file, and
/// [`LAG_NS`] allows for a short preemption inside that call.
const LAG_NS: u64 = 100_000_000;

/// The `max N ns` of the replay's timing line.
fn max_lateness_ns(stdout: &str) -> u64 {
    let line = stdout.lines().find(|l| l.starts_with("timing error")).unwrap_or_else(|| panic!("{stdout}"));
    number_after(line, ", max ") as u64
}

/// Checks the stamps of `frames_out` against the schedule of `frames_in` at `rate` (frames
/// compared too when both carry bytes).
fn check_timing(frames_in: &[(u64, Vec<u8>)], frames_out: &[(u64, Vec<u8>)], rate: f64, max_late_ns: u64) {
    assert_eq!(frames_in.len(), frames_out.len());
    let (t_in, t_out) = (frames_in[0].0, frames_out[0].0);
    let slack = max_late_ns + LAG_NS;
    for (i, (a, b)) in frames_in.iter().zip(frames_out).enumerate() {
        assert_eq!(a.1, b.1, "frame {i} differs");
        let due = ((a.0 - t_in) as f64 / rate) as u64;
        let left = b.0 - t_out;
        assert!(
            left + slack >= due && left <= due + slack,
            "rate {rate}: frame {i} left {left} ns after the first, due at {due} ns (max lateness {max_late_ns} ns)"
        );
    }
}

#[test]
fn recorded_timing_is_kept_and_scaled_by_the_rate_multiplier() {
    let dir = scratch();
    let d = dir.path();
    let input = d.join("spaced.pcap");
    // 201 frames 5 ms apart: a 1 s schedule at rate 1, 0.25 s at rate 4. Unless the replay is
    // stalled for longer than their difference, only the right rate passes the bounds.
    write_spaced(&input, 201, 5_000_000);
    let frames_in = read_timed(&input);
    for (rate, name) in [(1.0, "r1.pcap"), (4.0, "r4.pcap")] {
        let out = out_path(d, name);
        let mut args = vec!["--rate-multiplier".into(), rate.to_string()];
        args.extend(stream(&input, &format!("net_pcap0,tx_pcap={}", out.display())));
        let output = replay(d, &args);
        assert!(output.status.success(), "{}", describe(&output));
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(stdout.contains("timing error") && stdout.contains("over 201 frames"), "{stdout}");
        check_timing(&frames_in, &read_timed(&out), rate, max_lateness_ns(&stdout));
    }
    // As fast as possible: far quicker than the 1 s schedule.
    let out = out_path(d, "fast.pcap");
    let mut args = vec!["-r".into(), "0".into()];
    args.extend(stream(&input, &format!("net_pcap0,tx_pcap={}", out.display())));
    let output = replay(d, &args);
    assert!(output.status.success(), "{}", describe(&output));
    let frames_out = read_timed(&out);
    let span = frames_out.last().map(|f| f.0).unwrap_or(0) - frames_out[0].0;
    assert!(span < 500_000_000, "as fast as possible took {span} ns for 201 frames");
    assert!(String::from_utf8_lossy(&output.stdout).contains("as fast as possible"));
}

#[test]
fn loop_three_sends_the_pcap_three_times_one_period_apart() {
    let dir = scratch();
    let d = dir.path();
    let input = d.join("short.pcap");
    // 21 frames 5 ms apart: span 100 ms, mean gap 5 ms, period 105 ms; 3 passes are due over
    // 2 * 105 + 100 = 310 ms.
    let frames = write_spaced(&input, 21, 5_000_000);
    let out = out_path(d, "looped.pcap");
    let mut args = vec!["--loop".into(), "3".into()];
    args.extend(stream(&input, &format!("net_pcap0,tx_pcap={}", out.display())));
    let output = replay(d, &args);
    assert!(output.status.success(), "{}", describe(&output));
    let expected: Vec<Vec<u8>> = (0..3).flat_map(|_| frames.iter().cloned()).collect();
    let timed = read_timed(&out);
    let got: Vec<Vec<u8>> = timed.iter().map(|f| f.1.clone()).collect();
    assert_same_frames(&got, &expected, "three passes");
    // Pass k's frame j is due k periods plus j gaps after the start.
    let stdout = String::from_utf8_lossy(&output.stdout);
    let schedule: Vec<(u64, Vec<u8>)> = (0..3u64)
        .flat_map(|k| (0..21u64).map(move |j| (k * 105_000_000 + j * 5_000_000, Vec::new())))
        .collect();
    let stamps: Vec<(u64, Vec<u8>)> = timed.iter().map(|f| (f.0, Vec::new())).collect();
    check_timing(&schedule, &stamps, 1.0, max_lateness_ns(&stdout));
    assert!(stdout.contains("sent 63 frames") && stdout.contains("passes 3 of 3"), "{stdout}");
}

#[test]
fn endless_loop_stops_cleanly_on_sigterm_with_whole_passes_in_order() {
    let dir = scratch();
    let d = dir.path();
    let input = d.join("short.pcap");
    let frames = write_spaced(&input, 21, 5_000_000);
    let out = out_path(d, "endless.pcap");
    let mut args = vec![format!("--eal-args={}", eal(d)), "--loop".into(), "0".into()];
    args.extend(stream(&input, &format!("net_pcap0,tx_pcap={}", out.display())));
    let child = wirelat()
        .arg("replay")
        .args(&args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start wirelat");
    let pid = child.id().to_string();
    // Signal once more than one pass was written (the driver flushes every burst), however
    // long the EAL takes to start on a busy machine.
    let watched = out.clone();
    let killer = std::thread::spawn(move || {
        let started = std::time::Instant::now();
        while started.elapsed() < RUN_TIMEOUT / 2 {
            if frames_so_far(&watched) > 21 {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        std::process::Command::new("kill").args(["-TERM", &pid]).status().expect("run kill")
    });
    let output = wait_with_timeout(child, RUN_TIMEOUT);
    assert!(killer.join().expect("killer").success());
    assert!(output.status.success(), "{}", describe(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("of unlimited; stopped: Signal"), "{stdout}");
    // Whatever was sent is the pcap repeated, in order, and the count matches the output.
    let got = read_frames(&out);
    assert!(got.len() > 21, "more than one pass before the signal: {}", got.len());
    for (i, f) in got.iter().enumerate() {
        assert!(*f == frames[i % 21], "frame {i} is not frame {} of the pcap", i % 21);
    }
    assert_eq!(number_after(&stdout, "sent ") as usize, got.len(), "{stdout}");
}
