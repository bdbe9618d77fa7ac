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

/// Runs `wirelat offline` with `config` on the two port pcaps and `extra` arguments; panics
/// with the output when it fails.
pub fn run_offline(config: &Path, pcaps: &[PathBuf; 2], extra: &[&str]) {
    let output = offline_output(config, pcaps, extra);
    assert!(output.status.success(), "{}", describe(&output));
}

/// `wirelat offline` over both of `pcaps` with `config` and `extra` arguments, whatever its
/// exit status.
pub fn offline_output(config: &Path, pcaps: &[PathBuf; 2], extra: &[&str]) -> std::process::Output {
    wirelat()
        .args(["offline", "--config"])
        .arg(config)
        .arg("--port0")
        .arg(&pcaps[0])
        .arg("--port1")
        .arg(&pcaps[1])
        .args(extra)
        .output()
        .expect("run")
}

/// The files of a dump directory (`[output] dump_dir`): name → bytes.
pub fn read_dump(dir: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .expect("dump")
        .map(|e| {
            let p = e.expect("entry").path();
            (p.file_name().expect("name").to_string_lossy().into_owned(), std::fs::read(&p).expect("read"))
        })
        .collect()
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

/// A running `wirelat collect` (its stderr collected in the background), for the tests that
/// ship epochs to a peer.
pub struct Collector {
    child: Child,
    /// The address it listens on for points.
    pub addr: std::net::SocketAddr,
    log: std::sync::Arc<std::sync::Mutex<String>>,
}

impl Collector {
    /// Starts `wirelat collect --config <config>` and waits until it listens.
    pub fn start(config: &Path) -> Collector {
        let mut cmd = wirelat();
        cmd.args(["collect", "--config"]).arg(config);
        let mut c = Collector::spawn(cmd);
        c.addr = c.wait_for_line("listening on ").parse().expect("the peer's address");
        c
    }

    /// Starts any wirelat command (a point's `run` or `offline` too) with its stderr collected
    /// for [`Self::wait_for_line`] and [`Self::log`]; `addr` is unset.
    pub fn spawn(mut cmd: Command) -> Collector {
        use std::io::BufRead;
        let mut child = cmd
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start wirelat");
        let log = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let (err, into) = (child.stderr.take().expect("stderr"), log.clone());
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(err).lines().map_while(Result::ok) {
                let mut l = into.lock().expect("log");
                l.push_str(&line);
                l.push('\n');
            }
        });
        Collector { child, addr: ([0, 0, 0, 0], 0).into(), log }
    }

    /// Waits (at most [`RUN_TIMEOUT`]) for the process to exit on its own: its status and log.
    pub fn wait_exit(mut self) -> (std::process::ExitStatus, String) {
        let started = Instant::now();
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                std::thread::sleep(Duration::from_millis(200));
                return (status, self.log());
            }
            assert!(started.elapsed() < RUN_TIMEOUT, "wirelat did not exit:\n{}", self.log());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `GET path` on `addr` over HTTP/1.1: the whole response, head and body.
    pub fn http_get(addr: std::net::SocketAddr, path: &str) -> String {
        use std::io::Write;
        let mut s = std::net::TcpStream::connect(addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
        write!(s, "GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").expect("request");
        let mut r = String::new();
        let _ = s.read_to_string(&mut r);
        r
    }

    /// What follows `tag` on the first log line that has it, waiting for it (panics when the
    /// peer exits first or after [`RUN_TIMEOUT`]).
    pub fn wait_for_line(&mut self, tag: &str) -> String {
        let started = Instant::now();
        loop {
            let text = self.log();
            if let Some(rest) = text.lines().find_map(|l| l.split_once(tag).map(|(_, a)| a.trim().to_owned()))
            {
                return rest;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("wirelat collect exited ({status}) before logging {tag:?}:\n{text}");
            }
            assert!(started.elapsed() < RUN_TIMEOUT, "collector never logged {tag:?}:\n{text}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Its stderr so far.
    pub fn log(&self) -> String {
        self.log.lock().expect("log").clone()
    }

    /// Its process id (to signal several processes at once before stopping each).
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL (a crash).
    pub fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM, then its log once it exited cleanly.
    pub fn stop(self) -> String {
        let (status, log) = self.stop_with_status();
        assert!(status.success(), "collector exit {status}:\n{log}");
        log
    }

    /// SIGTERM, then its exit status and log.
    pub fn stop_with_status(mut self) -> (std::process::ExitStatus, String) {
        let _ = Command::new("kill").arg("-TERM").arg(self.child.id().to_string()).status();
        let started = Instant::now();
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                // Let the background reader take the last lines (the exit summary).
                std::thread::sleep(Duration::from_millis(200));
                return (status, self.log());
            }
            if started.elapsed() > RUN_TIMEOUT {
                let _ = self.child.kill();
                panic!("collector did not stop on SIGTERM:\n{}", self.log());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// A test that fails before [`Collector::stop`] must not leave the collector running (it runs
/// until a signal).
impl Drop for Collector {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The `key=value` fields of a log line (values unquoted), e.g. of `… frames=12 late=0`.
pub fn log_fields(line: &str) -> std::collections::BTreeMap<String, String> {
    line.split_whitespace()
        .filter_map(|t| t.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.trim_matches('"').to_owned()))
        .collect()
}

/// The value of the series `series` (name and labels exactly as exposed) in a Prometheus text
/// page, if present.
pub fn series_value(page: &str, series: &str) -> Option<f64> {
    page.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.trim().parse().ok())
}

/// Scrapes `http://addr/metrics` until `wirelat_point_finished 1` (the run's final values),
/// at most [`RUN_TIMEOUT`]; returns the page.
pub fn scrape_final(addr: std::net::SocketAddr) -> String {
    let started = Instant::now();
    loop {
        let page = Collector::http_get(addr, "/metrics");
        if series_value(&page, "wirelat_point_finished") == Some(1.0) {
            return page;
        }
        assert!(started.elapsed() < RUN_TIMEOUT, "the run never marked its metrics final:\n{page}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The cumulative buckets `(le, count)` of the histogram series `name{labels,le=…}` in a
/// Prometheus text page (`labels` as exposed, without braces), in page order.
pub fn histogram_buckets(page: &str, name: &str, labels: &str) -> Vec<(f64, f64)> {
    let prefix = format!("{name}_bucket{{{labels},le=\"");
    page.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix(&prefix)?;
            let (le, value) = rest.split_once("\"} ")?;
            let le = if le == "+Inf" { f64::INFINITY } else { le.parse().ok()? };
            Some((le, value.trim().parse().ok()?))
        })
        .collect()
}

/// `histogram_quantile(q, …)` as Prometheus computes it from cumulative buckets: linear
/// inside the bucket (from 0 in the first), the highest finite bound in `+Inf`.
pub fn histogram_quantile(q: f64, buckets: &[(f64, f64)]) -> Option<f64> {
    let total = buckets.last()?.1;
    if total <= 0.0 {
        return None;
    }
    let rank = q * total;
    let (mut lower, mut below) = (0.0, 0.0);
    for &(le, cum) in buckets {
        if cum >= rank {
            if le.is_infinite() {
                return Some(lower);
            }
            return Some(lower + (le - lower) * (rank - below) / (cum - below));
        }
        (lower, below) = (le, cum);
    }
    Some(lower)
}

/// The pcaps of both points of a trace pair written in `d` (`[a, b]`, each `[port0, port1]`).
pub fn trace_pcaps(d: &Path) -> [[PathBuf; 2]; 2] {
    ["a", "b"].map(|point| [0, 1].map(|port| d.join(format!("{point}_port{port}.pcap"))))
}

/// Both points (ids 1 and 2) measure their own `pcaps` at once and ship to the collector, with
/// `ship_extra` added to `[ship]`; each must exit 0 once the collector has acknowledged
/// everything (it acknowledges an epoch when it has paired it with the other point's, so the
/// points must run together; `close` waits up to 30 s), with every epoch delivered and none
/// given up. Their configs are written in `d`.
pub fn ship_points(
    d: &Path,
    collector: &Collector,
    key: &Path,
    synopses: &str,
    pcaps: &[[PathBuf; 2]; 2],
    ship_extra: &str,
) {
    let points: Vec<Child> = [(1, "a"), (2, "b")]
        .into_iter()
        .zip(pcaps)
        .map(|((id, point), pcaps)| {
            let config = d.join(format!("{point}.toml"));
            std::fs::write(
                &config,
                format!(
                    "[point]\nid = {id}\n[segments]\nforward = 40\nreverse = 41\n[epochs]\nlength_ms = 100\n\
                     [ship]\npeer = \"{}\"\nkey_file = \"{}\"\nbackoff_initial_ms = 20\nclose_timeout_ms = 30000\n\
                     {ship_extra}\n{synopses}",
                    collector.addr,
                    key.display()
                ),
            )
            .expect("point config");
            offline_logged(&config, &pcaps[0], &pcaps[1])
                .args(["--workers", "2"])
                .spawn()
                .expect("start wirelat offline")
        })
        .collect();
    for child in points {
        let output = wait_with_timeout(child, RUN_TIMEOUT);
        assert!(output.status.success(), "{}", describe(&output));
        let log = String::from_utf8_lossy(&output.stderr);
        assert!(log.contains("shipping epochs to the peer"), "{log}");
        // Every epoch reached the peer: 5 or more epochs × 2 directions, none given up.
        let closed =
            log.lines().find(|l| l.contains("network sink closed")).unwrap_or_else(|| panic!("{log}"));
        assert!(closed.contains("given_up=0"), "{closed}");
        let field = |name: &str| -> u64 {
            closed
                .split_whitespace()
                .find_map(|w| w.strip_prefix(name)?.strip_prefix('=')?.parse().ok())
                .unwrap_or_else(|| panic!("{name} in {closed}"))
        };
        assert!(field("delivered") >= 10 && field("acked") == field("delivered"), "{closed}");
    }
}

/// The pre-shared key file of the shipping tests.
pub fn write_key(d: &Path) -> PathBuf {
    let key = d.join("peer.key");
    std::fs::write(&key, "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff").expect("key");
    key
}

/// The collector config of the shipping tests (points 1 and 2, segments 40 and 41), writing
/// its records to `d/records.jsonl`.
pub fn collector_config(d: &Path, key: &Path, synopses: &str) -> PathBuf {
    let collector_toml = d.join("collector.toml");
    std::fs::write(
        &collector_toml,
        format!(
            "[collector]\nlisten = \"127.0.0.1:0\"\nkey_file = \"{}\"\nrecords = \"{}\"\n\
             [[point]]\nid = 1\nname = \"a\"\n[[point]]\nid = 2\nname = \"b\"\n\
             [[segment]]\nid = 40\nupstream = 1\ndownstream = 2\n\
             [[segment]]\nid = 41\nupstream = 2\ndownstream = 1\n{synopses}",
            key.display(),
            d.join("records.jsonl").display()
        ),
    )
    .expect("collector config");
    collector_toml
}

/// Runs `cmd` with `sh -c` (namespace and interface set-up in the root-only tests).
pub fn sh(cmd: &str) -> Output {
    Command::new("sh").args(["-c", cmd]).output().expect("run sh")
}

/// Runs `cmd` with `sh -c`, fails the test with its output unless it succeeds, and returns its
/// standard output.
pub fn must(cmd: &str) -> String {
    let out = sh(cmd);
    assert!(
        out.status.success(),
        "`{cmd}` failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Why a root-only test with these `tools` cannot run here, if it cannot: `why_root` says what
/// needs root.
pub fn missing_root_or_tools(tools: &[&str], why_root: &str) -> Option<String> {
    if must("id -u").trim() != "0" {
        return Some(format!("not root ({why_root})"));
    }
    let missing: Vec<&str> =
        tools.iter().copied().filter(|t| !sh(&format!("command -v {t}")).status.success()).collect();
    (!missing.is_empty()).then(|| format!("missing {missing:?}; run scripts/setup.sh"))
}

/// `wirelat offline --config config --port0 port0 --port1 port1` with its log at info level and
/// both outputs piped, for the shipping tests that read the log's closing counters.
pub fn offline_logged(config: &Path, port0: &Path, port1: &Path) -> Command {
    let mut c = wirelat();
    c.args(["offline", "--config"])
        .arg(config)
        .arg("--port0")
        .arg(port0)
        .arg("--port1")
        .arg(port1)
        .env("RUST_LOG", "info")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}
