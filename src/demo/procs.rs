//! The demo's processes: the peer first (its address is read from its log), then both points
//! at once — they must run together, because the peer acknowledges a point's epoch only once
//! the other point's epoch of the same segment has arrived and been estimated, and RDA asks both
//! points for timestamps while they run. When both points have exited (after every epoch was
//! acknowledged), the peer is stopped with SIGTERM, which flushes its records.

use std::fs::File;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use super::configs::{self, Plan};

/// How often children are polled.
const POLL: Duration = Duration::from_millis(50);
/// How long the peer may take to start listening, and to stop after SIGTERM.
const PEER_GRACE: Duration = Duration::from_secs(60);

/// A child process whose output goes to a log file.
struct Proc {
    name: &'static str,
    child: Child,
    log: PathBuf,
}

impl Proc {
    fn spawn(name: &'static str, bin: &Path, args: &[&str], log: PathBuf) -> anyhow::Result<Proc> {
        let out = File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        let err = out.try_clone().with_context(|| format!("opening {}", log.display()))?;
        let child = Command::new(bin)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .spawn()
            .with_context(|| format!("starting {name}: {} {}", bin.display(), args.join(" ")))?;
        Ok(Proc { name, child, log })
    }

    /// The last lines of the log, for error messages.
    fn tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let from = lines.len().saturating_sub(15);
        lines[from..].join("\n")
    }

    fn failure(&self, what: &str) -> anyhow::Error {
        anyhow::anyhow!("{} {what}; the end of {}:\n{}", self.name, self.log.display(), self.tail())
    }

    fn stop_now(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM, then up to `grace` for a clean exit, then SIGKILL.
    fn terminate(&mut self, grace: Duration) -> anyhow::Result<ExitStatus> {
        if let Some(status) = self.child.try_wait()? {
            return Ok(status);
        }
        if let Some(pid) = rustix::process::Pid::from_raw(self.child.id() as i32) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait()? {
                return Ok(status);
            }
            std::thread::sleep(POLL);
        }
        self.stop_now();
        Err(self.failure("did not stop within the grace period after SIGTERM (killed)"))
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        // Never leave a child behind when the demo fails half-way.
        if let Ok(None) = self.child.try_wait() {
            self.stop_now();
        }
    }
}

/// Waits for the peer's `listening on ADDR` line.
fn peer_address(peer: &mut Proc) -> anyhow::Result<SocketAddr> {
    let deadline = Instant::now() + PEER_GRACE;
    loop {
        let text = std::fs::read_to_string(&peer.log).unwrap_or_default();
        if let Some(rest) = text.lines().find_map(|l| l.split("listening on ").nth(1)) {
            let addr = rest.split_whitespace().next().unwrap_or_default();
            return addr
                .parse()
                .with_context(|| format!("the peer's address {addr:?} in {}", peer.log.display()));
        }
        if let Some(status) = peer.child.try_wait()? {
            return Err(peer.failure(&format!("exited before listening ({status})")));
        }
        if Instant::now() >= deadline {
            return Err(peer.failure("did not start listening"));
        }
        std::thread::sleep(POLL);
    }
}

/// Waits for a process's `metrics on URL` log line: the URL of its `/metrics`.
fn metrics_url(p: &mut Proc) -> anyhow::Result<String> {
    let deadline = Instant::now() + PEER_GRACE;
    loop {
        let text = std::fs::read_to_string(&p.log).unwrap_or_default();
        if let Some(rest) = text.lines().find_map(|l| l.split("metrics on ").nth(1)) {
            return Ok(rest.split_whitespace().next().unwrap_or_default().to_owned());
        }
        if let Some(status) = p.child.try_wait()? {
            return Err(p.failure(&format!("exited before serving its metrics ({status})")));
        }
        if Instant::now() >= deadline {
            return Err(p.failure("did not start serving its metrics"));
        }
        std::thread::sleep(POLL);
    }
}

/// Runs the peer and both points to completion.
///
/// `tap_frames` gives the frames of each tap's pcap (`a_port0`, …): after the run, each point
/// must have received all of them.
pub fn run_deployment(
    bin: &Path,
    plan: &Plan,
    timeout: Duration,
    tap_frames: &dyn Fn(&str) -> Option<u64>,
) -> anyhow::Result<()> {
    let collector_toml = plan.collector_toml();
    let mut peer = Proc::spawn(
        "the peer (wirelat collect)",
        bin,
        &["collect", "--config", &collector_toml.display().to_string()],
        plan.log("collector"),
    )?;
    let addr = peer_address(&mut peer)?;
    println!("demo: peer listening on {addr} (log {})", peer.log.display());
    if plan.metrics_linger_ms.is_some() {
        println!("demo: metrics of the peer on {}", metrics_url(&mut peer)?);
        if !plan.metrics_lead.is_zero() {
            println!("demo: starting the points in {} s (--metrics-lead-s)", plan.metrics_lead.as_secs());
            std::thread::sleep(plan.metrics_lead);
        }
    }

    let mut points = Vec::new();
    for (name, label) in [("a", "point A (wirelat run)"), ("b", "point B (wirelat run)")] {
        configs::write_point(plan, name, addr)?;
        let toml = plan.point_toml(name).display().to_string();
        points.push(Proc::spawn(label, bin, &["run", "--config", &toml], plan.log(name))?);
    }
    println!(
        "demo: points A and B replaying their taps through DPDK's pcap device (logs {}, {})",
        points[0].log.display(),
        points[1].log.display()
    );
    if plan.metrics_linger_ms.is_some() {
        for (p, name) in points.iter_mut().zip(["A", "B"]) {
            println!("demo: metrics of point {name} on {}", metrics_url(p)?);
        }
    }

    let deadline = Instant::now() + timeout;
    let mut done = [false, false];
    while !done.iter().all(|d| *d) {
        for (i, p) in points.iter_mut().enumerate() {
            if done[i] {
                continue;
            }
            if let Some(status) = p.child.try_wait()? {
                if !status.success() {
                    return Err(p.failure(&format!("failed ({status})")));
                }
                done[i] = true;
            }
        }
        if let Some(status) = peer.child.try_wait()? {
            return Err(peer.failure(&format!("exited while the points were running ({status})")));
        }
        if Instant::now() >= deadline {
            bail!(
                "the points did not finish within {} s (logs in {})",
                timeout.as_secs(),
                plan.layout.dir.display()
            );
        }
        std::thread::sleep(POLL);
    }
    let status = peer.terminate(PEER_GRACE)?;
    if !status.success() {
        return Err(peer.failure(&format!("stopped with {status}")));
    }
    for (p, name) in points.iter().zip(["a", "b"]) {
        check_replayed(p, name, tap_frames)?;
    }
    Ok(())
}

/// The frames port `port` received, from the last `port <p>: rx <n> …` line of a point's output.
fn final_rx(text: &str, port: u8) -> Option<u64> {
    let prefix = format!("port {port}: rx ");
    text.lines()
        .rev()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
}

/// Fails unless point `name` received every frame of both its taps, as its final port counters
/// (`port <p>: rx <n> …` in its log) say: a replay that stopped early would otherwise be scored
/// on a truth that covers frames the points never saw.
fn check_replayed(p: &Proc, name: &str, tap_frames: &dyn Fn(&str) -> Option<u64>) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(&p.log).with_context(|| format!("reading {}", p.log.display()))?;
    for port in 0..2u8 {
        let tap = format!("{name}_port{port}");
        let Some(want) = tap_frames(&tap) else { bail!("the truth lists no tap {tap}") };
        let got = final_rx(&text, port)
            .ok_or_else(|| p.failure(&format!("printed no final counters for port {port}")))?;
        if got != want {
            return Err(p.failure(&format!("received {got} of the {want} frames of {tap}")));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::final_rx;

    #[test]
    fn final_rx_reads_the_last_counters_line_of_a_port() {
        let log = "2026-11-29T19:38:04Z  INFO port counters port=0 rx=224\n\
                   port 0: rx 800 tx 672 tx_retries 0\n\
                   port 1: rx 672 tx 800 tx_retries 0\n\
                   port 0: rx 948 tx 836 tx_retries 0\n";
        assert_eq!(final_rx(log, 0), Some(948));
        assert_eq!(final_rx(log, 1), Some(672));
        assert_eq!(final_rx("port 0: rx many\n", 0), None);
        assert_eq!(final_rx("", 1), None);
    }
}
