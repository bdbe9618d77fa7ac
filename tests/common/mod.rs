//! Helpers for the integration tests: each test starts the real `wirelat` binary (so each EAL
//! lives in its own process) in its own temporary directory.

#![allow(dead_code)] // each test file uses a different subset

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use pcap_file::pcap::{PcapPacket, PcapReader, PcapWriter};

/// Longest any single wirelat run may take in a test before it is killed (and the test fails).
pub const RUN_TIMEOUT: Duration = Duration::from_secs(60);

/// The binary under test.
pub fn wirelat() -> Command {
    Command::new(env!("CARGO_BIN_EXE_wirelat"))
}

/// A scratch directory that is removed when the test ends.
pub fn scratch() -> tempfile::TempDir {
    tempfile::Builder::new().prefix("wirelat-test-").tempdir().expect("create a temporary directory")
}

/// The repository's bundled files (data/, configs/).
pub fn repo_path(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(relative)
}

/// EAL arguments for a test: no NIC, no hugepages, no shared config, and a unique file prefix.
pub fn eal_args_toml(dir: &Path) -> String {
    let prefix = format!(
        "wl{}-{}",
        std::process::id(),
        dir.file_name().and_then(|n| n.to_str()).unwrap_or("x").replace(['.', '-'], "")
    );
    format!(
        r#"args = ["--no-huge", "-m", "512", "--no-pci", "--no-shconf", "--no-telemetry", "--log-level=warning", "--file-prefix={prefix}"]"#
    )
}

/// Runs `wirelat run --config <config>` and waits for it (killing it after [`RUN_TIMEOUT`]).
pub fn run_config(config: &Path) -> Output {
    let child = wirelat()
        .args(["run", "--config"])
        .arg(config)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start wirelat");
    wait_with_timeout(child, RUN_TIMEOUT)
}

/// Waits for `child`, killing it after `timeout`; output pipes are drained concurrently.
pub fn wait_with_timeout(mut child: Child, timeout: Duration) -> Output {
    let mut stdout = child.stdout.take().expect("piped stdout");
    let mut stderr = child.stderr.take().expect("piped stderr");
    let out_reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = stdout.read_to_end(&mut buf);
        buf
    });
    let err_reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = stderr.read_to_end(&mut buf);
        buf
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("poll wirelat") {
            break status;
        }
        if started.elapsed() > timeout {
            let _ = child.kill();
            let _ = child.wait();
            panic!("wirelat did not stop within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: out_reader.join().expect("stdout reader"),
        stderr: err_reader.join().expect("stderr reader"),
    }
}

/// Both output streams as text, for assertion messages.
pub fn describe(output: &Output) -> String {
    format!(
        "status: {:?}\n--- stdout\n{}\n--- stderr\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// The frames (captured bytes) of a pcap file, in file order.
pub fn read_frames(path: &Path) -> Vec<Vec<u8>> {
    let file = File::open(path).unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
    let mut reader = PcapReader::new(BufReader::new(file))
        .unwrap_or_else(|e| panic!("pcap header of {}: {e}", path.display()));
    let mut frames = Vec::new();
    while let Some(packet) = reader.next_packet() {
        let packet = packet.unwrap_or_else(|e| panic!("pcap record of {}: {e}", path.display()));
        frames.push(packet.data.into_owned());
    }
    frames
}

/// Writes `frames` as a pcap file (1 µs apart).
pub fn write_frames(path: &Path, frames: &[Vec<u8>]) {
    let file = File::create(path).unwrap_or_else(|e| panic!("create {}: {e}", path.display()));
    let mut writer = PcapWriter::new(file).expect("pcap header");
    for (i, frame) in frames.iter().enumerate() {
        let packet = PcapPacket::new(Duration::from_micros(1_000_000 + i as u64), frame.len() as u32, frame);
        writer.write_packet(&packet).expect("pcap record");
    }
}

/// Asserts two frame sequences are equal, naming the first difference.
pub fn assert_same_frames(actual: &[Vec<u8>], expected: &[Vec<u8>], what: &str) {
    for (i, (a, e)) in actual.iter().zip(expected).enumerate() {
        assert!(a == e, "{what}: frame {i} differs ({} bytes out, {} bytes in)", a.len(), e.len());
    }
    assert_eq!(actual.len(), expected.len(), "{what}: frame count");
}
