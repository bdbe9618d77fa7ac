//! The bump in the wire on DPDK's pcap virtual device: what goes in on one port comes out of
//! the other byte-identical and in order, in both directions, with one or two workers; frames
//! that cannot be forwarded are counted; signals stop it cleanly.

#![cfg(feature = "dpdk")]

mod common;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use common::*;
use wirelat_dataplane::packet::sample;

/// DPDK's default data room: the 9000-byte frame arrives as a chain of five mbufs.
const DEFAULT_DATA_ROOM: &str = "data_room_bytes = 2176";
/// A data room that holds the 9000-byte frame in one mbuf.
const JUMBO_DATA_ROOM: &str = "data_room_bytes = 9344";

fn sample_frames() -> Vec<Vec<u8>> {
    sample::frames().into_iter().map(|f| f.data).collect()
}

/// A two-port pcap config in `dir`; `ports[i]` holds the device arguments after the name.
fn write_config(dir: &Path, cores: &str, mempool: &str, ports: [&str; 2]) -> std::path::PathBuf {
    let text = format!(
        "[eal]\n{}\nmain_core = 0\n[workers]\ncores = {cores}\n[mempool]\n{mempool}\n[stats]\ninterval_ms = 0\n\
         [stop]\nidle_ms = 300\nafter_ms = 30000\n\
         [[port]]\ndevice = \"net_pcap0,{}\"\n[[port]]\ndevice = \"net_pcap1,{}\"\n",
        eal_args_toml(dir),
        ports[0],
        ports[1]
    );
    let path = dir.join("wirelat.toml");
    std::fs::write(&path, text).expect("write config");
    path
}

fn p(dir: &Path, name: &str) -> String {
    dir.join(name).display().to_string()
}

/// Forwards the pcap `input` received on port `port` (the other port replays an empty file)
/// with the default data room; outputs go to `out0.pcap` / `out1.pcap` in `d`.
fn forward_one_way(d: &Path, input: &str, port: usize) -> std::process::Output {
    let empty = p(d, "empty.pcap");
    write_frames(Path::new(&empty), &[]);
    let rx = if port == 0 { [input, empty.as_str()] } else { [empty.as_str(), input] };
    let config = write_config(
        d,
        "[1]",
        DEFAULT_DATA_ROOM,
        [
            &format!("rx_pcap={},tx_pcap={}", rx[0], p(d, "out0.pcap")),
            &format!("rx_pcap={},tx_pcap={}", rx[1], p(d, "out1.pcap")),
        ],
    );
    let output = run_config(&config);
    assert!(output.status.success(), "{}", describe(&output));
    output
}

#[test]
fn sample_goes_from_port0_to_port1_byte_identical_and_in_order() {
    let dir = scratch();
    let d = dir.path();
    let sample = repo_path("data/sample.pcap").display().to_string();
    let output = forward_one_way(d, &sample, 0);

    assert_same_frames(&read_frames(&d.join("out1.pcap")), &sample_frames(), "port 1 output");
    assert!(read_frames(&d.join("out0.pcap")).is_empty(), "nothing may come out of port 0");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let n = sample_frames().len();
    assert!(
        stdout.contains(&format!("port 0: rx {n} tx 0 tx_retries 0 tx_dropped 0 oversize_dropped 0")),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("port 1: rx 0 tx {n} tx_retries 0 tx_dropped 0 oversize_dropped 0")),
        "{stdout}"
    );
    assert!(stdout.contains("stopped: Idle"), "{stdout}");
}

#[test]
fn sample_goes_from_port1_to_port0_byte_identical_and_in_order() {
    let dir = scratch();
    let d = dir.path();
    let sample = repo_path("data/sample.pcap").display().to_string();
    forward_one_way(d, &sample, 1);
    assert_same_frames(&read_frames(&d.join("out0.pcap")), &sample_frames(), "port 0 output");
    assert!(read_frames(&d.join("out1.pcap")).is_empty(), "nothing may come out of port 1");
}

#[test]
fn both_directions_at_once_keep_their_own_order() {
    let dir = scratch();
    let d = dir.path();
    let forward = sample_frames();
    // The other direction carries different traffic: the sample reversed, repeated 20 times
    // (more than one burst, so that burst boundaries are crossed).
    let backward: Vec<Vec<u8>> = (0..20).flat_map(|_| forward.iter().rev().cloned()).collect();
    write_frames(&d.join("in0.pcap"), &forward);
    write_frames(&d.join("in1.pcap"), &backward);
    let config = write_config(
        d,
        "[1]",
        DEFAULT_DATA_ROOM,
        [
            &format!("rx_pcap={},tx_pcap={}", p(d, "in0.pcap"), p(d, "out0.pcap")),
            &format!("rx_pcap={},tx_pcap={}", p(d, "in1.pcap"), p(d, "out1.pcap")),
        ],
    );
    let output = run_config(&config);
    assert!(output.status.success(), "{}", describe(&output));
    assert_same_frames(&read_frames(&d.join("out1.pcap")), &forward, "port 0 -> port 1");
    assert_same_frames(&read_frames(&d.join("out0.pcap")), &backward, "port 1 -> port 0");
}

#[test]
fn two_workers_each_forward_their_queue_in_order() {
    let dir = scratch();
    let d = dir.path();
    let frames = sample_frames();
    let queue0: Vec<Vec<u8>> = frames.iter().step_by(2).cloned().collect();
    let queue1: Vec<Vec<u8>> = frames.iter().skip(1).step_by(2).cloned().collect();
    write_frames(&d.join("q0.pcap"), &queue0);
    write_frames(&d.join("q1.pcap"), &queue1);
    write_frames(&d.join("empty.pcap"), &[]);
    // The pcap device has one rx queue per rx_pcap and one tx queue per tx_pcap.
    let config = write_config(
        d,
        "[0, 1]",
        JUMBO_DATA_ROOM,
        [
            &format!(
                "rx_pcap={},rx_pcap={},tx_pcap={},tx_pcap={}",
                p(d, "q0.pcap"),
                p(d, "q1.pcap"),
                p(d, "out0_q0.pcap"),
                p(d, "out0_q1.pcap")
            ),
            &format!(
                "rx_pcap={},rx_pcap={},tx_pcap={},tx_pcap={}",
                p(d, "empty.pcap"),
                p(d, "empty.pcap"),
                p(d, "out1_q0.pcap"),
                p(d, "out1_q1.pcap")
            ),
        ],
    );
    let output = run_config(&config);
    assert!(output.status.success(), "{}", describe(&output));
    assert_same_frames(&read_frames(&d.join("out1_q0.pcap")), &queue0, "queue 0, port 0 -> port 1");
    assert_same_frames(&read_frames(&d.join("out1_q1.pcap")), &queue1, "queue 1, port 0 -> port 1");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("queue counters") && stderr.contains("queue=1"), "per-queue counters: {stderr}");
}

#[test]
fn sigterm_stops_cleanly_with_final_counters() {
    let dir = scratch();
    let d = dir.path();
    // net_null receives an endless stream of frames and discards what it sends.
    let text = format!(
        "[eal]\n{}\n[workers]\ncores = [1]\n[stats]\ninterval_ms = 100\n\
         [[port]]\ndevice = \"net_null0\"\n[[port]]\ndevice = \"net_null1\"\n",
        eal_args_toml(d)
    );
    let config = d.join("null.toml");
    std::fs::write(&config, text).expect("write config");
    let child = wirelat()
        .args(["run", "--config"])
        .arg(&config)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start wirelat");
    let pid = child.id().to_string();
    let killer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(1500));
        let status = std::process::Command::new("kill").args(["-TERM", &pid]).status().expect("run kill");
        assert!(status.success(), "kill -TERM failed");
    });
    let output = wait_with_timeout(child, RUN_TIMEOUT);
    killer.join().expect("killer thread");
    assert!(output.status.success(), "{}", describe(&output));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(stdout.contains("stopped: Signal"), "{}", describe(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("label=\"final\""), "{}", describe(&output));
    // Something was forwarded before the signal, and every received frame is accounted for.
    let rx = field(&stdout, "port 0: rx ");
    assert!(rx > 0, "{}", describe(&output));
    let port1 = &stdout[stdout.find("port 1:").expect("port 1 line")..];
    let sent = field(port1, " tx ") + field(port1, "tx_dropped ") + field(port1, "oversize_dropped ");
    assert_eq!(rx, sent, "port 0 rx = port 1 tx + dropped: {}", describe(&output));
}

/// The number after `prefix` in `text`.
fn field(text: &str, prefix: &str) -> u64 {
    let start =
        text.find(prefix).map(|i| i + prefix.len()).unwrap_or_else(|| panic!("no `{prefix}` in {text}"));
    text[start..]
        .split_whitespace()
        .next()
        .and_then(|w| w.parse().ok())
        .unwrap_or_else(|| panic!("no number after `{prefix}`"))
}

/// Frames of every size, from a runt to past libpcap's 65 535-byte default snap length, with a
/// pattern that makes every byte position distinct (a cut or shifted copy cannot compare equal).
fn sized_frame(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 7 + len) as u8).collect()
}

/// Writes `frames` with the largest snap length libpcap reads (262 144), so that records above
/// 65 535 bytes are whole records of the file.
fn write_large_frames(path: &Path, frames: &[Vec<u8>]) {
    use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
    let header = PcapHeader { snaplen: 262_144, ..Default::default() };
    let mut w =
        PcapWriter::with_header(std::fs::File::create(path).expect("create"), header).expect("header");
    for (i, f) in frames.iter().enumerate() {
        w.write_packet(&PcapPacket::new(Duration::from_micros(1_000_000 + i as u64), f.len() as u32, f))
            .expect("record");
    }
}

/// DPDK 22.11's pcap device writes at most 16 128 bytes of a chained frame (cutting longer ones
/// while counting them sent) and builds a broken chain for some records above 65 535 bytes,
/// on which its transmit crashed (SIGSEGV). Every frame that fits leaves byte-identical and in
/// order; each other one is dropped and counted by reason; nothing crashes.
#[test]
fn hostile_frame_sizes_are_forwarded_whole_or_counted_never_cut_or_crashing() {
    let dir = scratch();
    let d = dir.path();
    let sizes = [1usize, 14, 60, 1514, 9000, 16_000, 16_128, 16_129, 16_200, 65_535, 70_000, 100, 9018];
    let frames: Vec<Vec<u8>> = sizes.iter().map(|&n| sized_frame(n)).collect();
    let input = p(d, "hostile.pcap");
    write_large_frames(Path::new(&input), &frames);
    let output = forward_one_way(d, &input, 0);

    // What fits the pcap device's 16 128-byte limit for chains goes out whole, in order.
    let fits: Vec<Vec<u8>> = frames.iter().filter(|f| f.len() <= 16_128).cloned().collect();
    let out = read_frames(&d.join("out1.pcap"));
    assert_eq!(out.len(), fits.len(), "{}", describe(&output));
    assert_same_frames(&out, &fits, "port 1 output");

    let stdout = String::from_utf8_lossy(&output.stdout);
    let port0 = &stdout[stdout.find("port 0:").expect("port 0 line")..];
    let port1 = &stdout[stdout.find("port 1:").expect("port 1 line")..];
    assert_eq!(field(port0, "port 0: rx "), sizes.len() as u64, "{stdout}");
    // 16 129, 16 200 and 65 535 bytes arrive as whole chains the egress cannot send whole; the
    // 70 000-byte record arrives as a broken chain (the device's own fault), which is dropped
    // as truncated on the ingress port.
    assert_eq!(field(port1, "oversize_dropped "), 3, "{stdout}");
    assert_eq!(field(port0, "truncated_dropped "), 1, "{stdout}");
    assert_eq!(field(port1, " tx "), fits.len() as u64, "{stdout}");
}

/// Idle mode gives a shared core back: with `idle_after_us` set, a worker that receives nothing
/// sleeps between polls. Measured as the process's CPU time over a 2-second run on empty
/// inputs (busy polling costs about one CPU-second per second here; idle mode measured 0.15 s
/// in all, EAL start-up included).
#[test]
fn idle_mode_sleeps_when_nothing_arrives() {
    let dir = scratch();
    let d = dir.path();
    let empty = p(d, "empty.pcap");
    write_frames(Path::new(&empty), &[]);
    let text = format!(
        "[eal]\n{}\nmain_core = 0\n[workers]\ncores = [1]\nidle_after_us = 1000\nidle_sleep_us = 1000\n\
         [stats]\ninterval_ms = 0\n[stop]\nidle_ms = 0\nafter_ms = 2000\n\
         [[port]]\ndevice = \"net_pcap0,rx_pcap={empty},tx_pcap={}\"\n\
         [[port]]\ndevice = \"net_pcap1,rx_pcap={empty},tx_pcap={}\"\n",
        eal_args_toml(d),
        p(d, "out0.pcap"),
        p(d, "out1.pcap")
    );
    let config = d.join("idle.toml");
    std::fs::write(&config, text).expect("write config");
    // bash's `time` reports the child's user and system CPU seconds.
    let output = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(
            "TIMEFORMAT='cpu %U %S'; time {} run --config {} >/dev/null 2>&1",
            env!("CARGO_BIN_EXE_wirelat"),
            config.display()
        ))
        .output()
        .expect("run bash");
    assert!(output.status.success(), "{}", describe(&output));
    let stderr = String::from_utf8_lossy(&output.stderr);
    let cpu: f64 = stderr
        .lines()
        .find_map(|l| l.strip_prefix("cpu "))
        .map(|l| l.split_whitespace().filter_map(|w| w.parse::<f64>().ok()).sum())
        .unwrap_or_else(|| panic!("no cpu line: {stderr}"));
    assert!(cpu < 0.5, "an idle worker used {cpu} CPU-seconds in a 2-second run");
}
