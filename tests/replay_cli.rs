//! `wirelat replay` refuses bad configurations, flags and pcaps with exit code 2 and one clear
//! message, never a panic, before DPDK is touched (so these run with and without DPDK).

mod common;

use std::path::Path;

use common::*;

/// Runs `wirelat replay ARGS` and returns (exit code, stderr).
fn refuse(args: &[&str]) -> (Option<i32>, String) {
    let output = wirelat().arg("replay").args(args).output().expect("run wirelat");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(!stderr.contains("panicked"), "no panic: {stderr}");
    assert!(output.stdout.is_empty(), "nothing on stdout: {}", String::from_utf8_lossy(&output.stdout));
    (output.status.code(), stderr)
}

fn assert_usage(args: &[&str], expect: &str) {
    let (code, stderr) = refuse(args);
    assert_eq!(code, Some(2), "exit code 2 for {args:?}: {stderr}");
    assert!(stderr.contains(expect), "{args:?}: expected `{expect}` in: {stderr}");
}

fn config(dir: &Path, text: &str) -> String {
    let p = dir.join("replay.toml");
    std::fs::write(&p, text).expect("write config");
    p.display().to_string()
}

#[test]
fn bad_configurations_and_flags_exit_2() {
    let dir = scratch();
    let d = dir.path();
    let sample = repo_path("data/sample.pcap").display().to_string();
    let stream = format!("[[stream]]\npcap = \"{sample}\"\ndevice = \"net_pcap0,tx_pcap=/dev/null\"\n");

    let c = config(d, &format!("[replay]\nspeed = 2\n{stream}"));
    assert_usage(&["--config", &c], &format!("{c}:2:1: unknown field `speed`"));
    let c = config(d, &format!("[replay]\nrate_multiplier = -1\n{stream}"));
    assert_usage(&["--config", &c], &format!("{c}:2:19: rate_multiplier -1"));
    let c = config(d, &format!("[replay]\nburst_size = 65\n{stream}"));
    assert_usage(&["--config", &c], "burst_size 65 is outside 1..=64");
    let c = config(d, &format!("{stream}{stream}"));
    assert_usage(&["--config", &c], "used by two streams");
    let c = config(d, "[replay]\nloops = 2\n");
    assert_usage(&["--config", &c], "nothing to replay");
    assert_usage(
        &["--config", "/nonexistent/replay.toml"],
        "cannot read config file /nonexistent/replay.toml",
    );

    assert_usage(&[], "nothing to replay");
    assert_usage(&["--pcap", &sample], "--pcap and --device pair up");
    assert_usage(&["--pcap", &sample, "--device", "net_null0", "-r", "-2"], "rate_multiplier -2");
    assert_usage(&["--pcap", &sample, "--device", "net_null0", "--loop", "many"], "invalid value 'many'");
    assert_usage(
        &["--pcap", &sample, "--device", "net_null0", "--eal-args", "-l 3"],
        "derived from main_core",
    );
}

#[test]
fn bad_pcaps_exit_2_before_dpdk_starts() {
    let dir = scratch();
    let d = dir.path();
    let sample = repo_path("data/sample.pcap").display().to_string();
    assert_usage(&["--pcap", "/nonexistent.pcap", "--device", "net_null0"], "/nonexistent.pcap");
    let junk = d.join("junk.pcap");
    std::fs::write(&junk, b"this is not a capture file at all").expect("write");
    assert_usage(&["--pcap", &junk.display().to_string(), "--device", "net_null0"], "not a readable pcap");
    // The memory bound: refused with the size it needs.
    assert_usage(
        &["--pcap", &sample, "--device", "net_null0", "--max-preload-bytes", "1000"],
        "raise max_preload_bytes",
    );
    let empty = repo_path("data/empty.pcap").display().to_string();
    assert_usage(&["--pcap", &empty, "--device", "net_null0"], "the pcaps hold no frames");
}
