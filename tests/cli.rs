//! Command-line behaviour that needs no DPDK: configuration errors exit with code 2 and a
//! clear message naming the file, line and key, never a panic; the bundled sample pcap is
//! exactly what the generator writes.

mod common;

use std::path::Path;

use common::*;

const VALID_PORTS: &str = "[[port]]\ndevice = \"net_ring0\"\n[[port]]\ndevice = \"net_ring1\"\n";

/// Runs `wirelat run` on `text` and returns (exit code, stderr, config path).
fn run_bad(text: &str) -> (Option<i32>, String, String) {
    let dir = scratch();
    let path = dir.path().join("bad.toml");
    std::fs::write(&path, text).expect("write config");
    let output = wirelat().args(["run", "--config"]).arg(&path).output().expect("run wirelat");
    (output.status.code(), String::from_utf8_lossy(&output.stderr).into_owned(), path.display().to_string())
}

fn assert_clear_usage_error(code: Option<i32>, stderr: &str) {
    assert_eq!(code, Some(2), "exit code 2 expected: {stderr}");
    assert!(!stderr.contains("panicked") && !stderr.contains("RUST_BACKTRACE"), "no panic: {stderr}");
    assert!(
        stderr.starts_with("wirelat: error:") || stderr.starts_with("error:"),
        "one clear message: {stderr}"
    );
}

#[test]
fn syntax_error_names_file_and_line() {
    let (code, stderr, path) = run_bad(&format!("{VALID_PORTS}[workers\ncores = [1]\n"));
    assert_clear_usage_error(code, &stderr);
    assert!(stderr.contains(&format!("{path}:5:")), "{stderr}");
}

#[test]
fn unknown_key_names_file_line_column_and_key() {
    let (code, stderr, path) = run_bad(&format!("[workers]\ncores = [1]\nburst = 3\n{VALID_PORTS}"));
    assert_clear_usage_error(code, &stderr);
    assert!(stderr.contains(&format!("{path}:3:1: key `workers.burst`")), "{stderr}");
    assert!(stderr.contains("unknown field `burst`"), "{stderr}");
}

#[test]
fn bad_value_names_file_line_and_key() {
    let (code, stderr, path) = run_bad(&format!("[workers]\nburst_size = 500\n{VALID_PORTS}"));
    assert_clear_usage_error(code, &stderr);
    assert!(stderr.contains(&format!("{path}:2:14: key `workers.burst_size`")), "{stderr}");
    let (code, stderr, _) = run_bad(&format!("[stats]\ninterval_ms = \"soon\"\n{VALID_PORTS}"));
    assert_clear_usage_error(code, &stderr);
    assert!(stderr.contains("key `stats.interval_ms`"), "{stderr}");
}

#[test]
fn wrong_number_of_ports_is_a_usage_error() {
    let (code, stderr, _) = run_bad("[[port]]\ndevice = \"net_ring0\"\n");
    assert_clear_usage_error(code, &stderr);
    assert!(stderr.contains("exactly two [[port]] tables"), "{stderr}");
}

#[test]
fn missing_config_file_is_a_usage_error() {
    let output =
        wirelat().args(["run", "--config", "/nonexistent/wirelat.toml"]).output().expect("run wirelat");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_clear_usage_error(output.status.code(), &stderr);
    assert!(stderr.contains("cannot read config file /nonexistent/wirelat.toml"), "{stderr}");
}

#[test]
fn bad_command_line_is_a_usage_error() {
    let output = wirelat().args(["run"]).output().expect("run wirelat");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_clear_usage_error(output.status.code(), &stderr);
    assert!(stderr.contains("--config"), "{stderr}");
}

#[test]
fn bundled_sample_pcap_is_what_the_generator_writes() {
    let dir = scratch();
    let out = dir.path().join("sample.pcap");
    let status = wirelat().args(["sample-pcap", "--out"]).arg(&out).status().expect("run wirelat");
    assert!(status.success());
    let generated = std::fs::read(&out).expect("read generated pcap");
    let bundled = std::fs::read(repo_path("data/sample.pcap")).expect("read data/sample.pcap");
    assert!(
        generated == bundled,
        "data/sample.pcap is stale: regenerate it with `wirelat sample-pcap --out data/sample.pcap`"
    );
    let frames = read_frames(&out);
    assert_eq!(frames.len(), wirelat_dataplane::packet::sample::frames().len());
    assert!(read_frames(Path::new(&repo_path("data/empty.pcap"))).is_empty());
}
