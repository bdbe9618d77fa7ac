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

/// Bad input found after the configuration parsed (W14): a `[ship]` key file that does not
/// exist, a spill directory that is a file, the collector's unusable listen address. Each is
/// exit code 2 with one sentence naming the key (they were exit code 1, some without the key).
#[test]
fn bad_key_files_spill_paths_and_listen_addresses_are_usage_errors_naming_the_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    std::fs::write(d.join("a.pcap"), b"").expect("pcap");
    std::fs::write(d.join("afile"), b"").expect("file");
    let key = d.join("k");
    std::fs::write(&key, "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff").expect("key");
    let offline = |ship: &str| {
        let config = d.join("p.toml");
        std::fs::write(
            &config,
            format!(
                "[synopses.lda]\nbanks = [{{ rows = 64, p = 1.0 }}]\n[ship]\npeer = \"127.0.0.1:9\"\n{ship}\n"
            ),
        )
        .expect("config");
        let o = wirelat()
            .args(["offline", "--config"])
            .arg(&config)
            .arg("--port0")
            .arg(d.join("a.pcap"))
            .output()
            .expect("run");
        (o.status.code(), String::from_utf8_lossy(&o.stderr).into_owned())
    };
    let (code, stderr) = offline(&format!("key_file = \"{}\"", d.join("missing.key").display()));
    let last = stderr.lines().last().unwrap_or_default().to_owned();
    assert_clear_usage_error(code, &last);
    assert!(last.contains("[ship] key_file"), "{stderr}");
    let (code, stderr) =
        offline(&format!("key_file = \"{}\"\nspill_dir = \"{}\"", key.display(), d.join("afile").display()));
    let last = stderr.lines().last().unwrap_or_default().to_owned();
    assert_clear_usage_error(code, &last);
    assert!(last.contains("[ship] spill_dir"), "{stderr}");
    let collector = d.join("c.toml");
    std::fs::write(
        &collector,
        format!(
            "[collector]\nlisten = \"256.0.0.1:7\"\nkey_file = \"{}\"\nrecords = \"{}\"\n\
             [[point]]\nid = 1\nname = \"a\"\n[synopses.fridge]\n",
            key.display(),
            d.join("r.jsonl").display()
        ),
    )
    .expect("collector config");
    let o = wirelat().args(["collect", "--config"]).arg(&collector).output().expect("collect");
    let stderr = String::from_utf8_lossy(&o.stderr);
    let last = stderr.lines().last().unwrap_or_default().to_owned();
    assert_clear_usage_error(o.status.code(), &last);
    assert!(last.contains("[collector] cannot listen on 256.0.0.1:7"), "{stderr}");
}

/// W14: cores the EAL cannot use and outputs of the wrong kind (a directory where a file goes,
/// a file where a directory goes) are bad input, exit code 2, with one sentence naming the
/// file, line, column and key; they were found only when the EAL started or the output was
/// opened (exit code 1, the EAL's usage text or a repeated OS error).
#[test]
fn unusable_cores_and_outputs_of_the_wrong_kind_are_usage_errors_naming_the_key() {
    let (code, stderr, path) = run_bad(&format!("[workers]\ncores = [4000]\n{VALID_PORTS}"));
    assert_clear_usage_error(code, &stderr);
    assert!(stderr.contains(&format!("{path}:2:9: key `workers.cores`")), "{stderr}");
    assert!(stderr.contains("worker core 4000 is not a CPU this machine lets wirelat use"), "{stderr}");
    let (code, stderr, path) = run_bad(&format!("[eal]\nmain_core = 4000\n{VALID_PORTS}"));
    assert_clear_usage_error(code, &stderr);
    assert!(stderr.contains(&format!("{path}:2:1: key `eal.main_core`")), "{stderr}");
    let (code, stderr, _) = run_bad(&format!("[workers]\ncount = 127\n{VALID_PORTS}"));
    assert_clear_usage_error(code, &stderr);
    assert!(stderr.contains("key `workers.count`") && stderr.contains("127 workers need"), "{stderr}");

    let dir = tempfile::tempdir().expect("tempdir");
    let d = dir.path();
    std::fs::write(d.join("a.pcap"), b"").expect("pcap");
    std::fs::write(d.join("afile"), b"").expect("file");
    std::fs::create_dir(d.join("adir")).expect("dir");
    let offline = |output: &str| {
        let config = d.join("p.toml");
        std::fs::write(
            &config,
            format!("[synopses.lda]\nbanks = [{{ rows = 64, p = 1.0 }}]\n[output]\n{output}\n"),
        )
        .expect("config");
        let o = wirelat()
            .args(["offline", "--config"])
            .arg(&config)
            .arg("--port0")
            .arg(d.join("a.pcap"))
            .output()
            .expect("run");
        (o.status.code(), String::from_utf8_lossy(&o.stderr).into_owned(), config.display().to_string())
    };
    for (line, key, says) in [
        (format!("json = \"{}\"", d.join("adir").display()), "output.json", "is a directory"),
        (format!("dump_dir = \"{}\"", d.join("afile").display()), "output.dump_dir", "is a file"),
        (format!("colate_archive = \"{}\"", d.join("afile").display()), "output.colate_archive", "is a file"),
    ] {
        let (code, stderr, path) = offline(&line);
        let last = stderr.lines().last().unwrap_or_default().to_owned();
        assert_clear_usage_error(code, &last);
        assert!(last.contains(&format!("{path}:4:1: key `{key}`")) && last.contains(says), "{stderr}");
    }
    let key = d.join("k");
    std::fs::write(&key, "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff").expect("key");
    let collect = |extra: &str, records: &Path| {
        let config = d.join("c.toml");
        std::fs::write(
            &config,
            format!(
                "[collector]\nlisten = \"127.0.0.1:0\"\nkey_file = \"{}\"\nrecords = \"{}\"\n{extra}\
                 [[point]]\nid = 1\nname = \"a\"\n[synopses.fridge]\n",
                key.display(),
                records.display()
            ),
        )
        .expect("collector config");
        let o = wirelat().args(["collect", "--config"]).arg(&config).output().expect("collect");
        (o.status.code(), String::from_utf8_lossy(&o.stderr).into_owned())
    };
    let (code, stderr) = collect("", &d.join("adir"));
    let last = stderr.lines().last().unwrap_or_default().to_owned();
    assert_clear_usage_error(code, &last);
    assert!(last.contains("key `collector.records`") && last.contains("is a directory"), "{stderr}");
    let (code, stderr) =
        collect(&format!("[colate]\narchive_dir = \"{}\"\n", d.join("afile").display()), &d.join("r.jsonl"));
    let last = stderr.lines().last().unwrap_or_default().to_owned();
    assert_clear_usage_error(code, &last);
    assert!(last.contains("key `colate.archive_dir`") && last.contains("is a file"), "{stderr}");
}

#[test]
fn colate_sizing_refusals_are_usage_errors_naming_the_key() {
    const COLATE: &str =
        "[synopses.colate]\ncounters = 1000003\ncounter_bits = 48\nepoch_threshold_ticks = 1000\n";
    for (extra, key) in [
        // cells_per_flow beside the load it would be derived from: one source of truth.
        ("cells_per_flow = 20\nmax_delay_us = 40000\nmax_flow_pps = 1000\n", "cells_per_flow"),
        // No m ≤ 65 536 reaches the target at this load.
        ("max_delay_us = 900000\nmax_flow_pps = 1000000\n", "target_coverage"),
        // The largest delay spans the whole query window.
        ("max_delay_us = 200000\nmax_flow_pps = 1000\nwindow_ms = 100\n", "window_ms"),
        ("max_delay_us = 40000\n", "max_flow_pps"),
    ] {
        let (code, stderr, path) = run_bad(&format!("{COLATE}{extra}{VALID_PORTS}"));
        assert_clear_usage_error(code, &stderr);
        assert!(stderr.contains(&path) && stderr.contains(&format!("colate.{key}")), "{key}: {stderr}");
        assert_eq!(stderr.trim_end().lines().count(), 1, "one sentence: {stderr}");
    }
}

/// A kernel port whose interface does not exist (or has too few rx queues), or whose ring
/// geometry the kernel refuses, is the operator's configuration, found only on this machine:
/// exit code 2 naming the file, line, column and `device` key of that `[[port]]`, like any bad
/// value (it exited 1 before, issue 20).
#[cfg(feature = "dpdk")]
#[test]
fn kernel_ports_on_missing_interfaces_are_usage_errors_naming_the_device_key() {
    for driver in ["net_af_packet", "net_af_xdp"] {
        let (code, stderr, path) = run_bad(&format!(
            "[eal]\n{}\n[[port]]\ndevice = \"{driver}0,iface=lo\"\n[[port]]\ndevice = \"{driver}1,iface=w13-none\"\n",
            eal_args_toml(Path::new("/w13cli"))
        ));
        let last = stderr.lines().last().unwrap_or_default().to_owned();
        assert_clear_usage_error(code, &last);
        assert!(
            last.contains(&format!("{path}:6:10: key `port[1].device`"))
                && last.contains("interface `w13-none` does not exist"),
            "{driver}: {stderr}"
        );
    }
    // Device arguments the kernel would refuse at the driver's probe (a ring block smaller
    // than a frame): refused when the configuration is loaded, named the same way.
    let (code, stderr, path) = run_bad(&format!(
        "[eal]\n{}\n[[port]]\ndevice = \"net_af_packet0,iface=lo,blocksz=1024\"\n[[port]]\ndevice = \"net_ring1\"\n",
        eal_args_toml(Path::new("/w13cli"))
    ));
    let last = stderr.lines().last().unwrap_or_default().to_owned();
    assert_clear_usage_error(code, &last);
    assert!(
        last.contains(&format!("{path}:4:10: key `port[0].device`"))
            && last.contains("blocksz=1024, framesz=9216")
            && last.contains("the kernel takes a ring only with"),
        "{stderr}"
    );
}
