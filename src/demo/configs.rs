//! The configuration files of a demo run: the pre-shared key, the peer's `collector.toml` and
//! the two appliances' `a.toml` and `b.toml`. They are written to the run's directory so an
//! operator can read them as worked examples, and so every process reads its settings exactly
//! as it would in a deployment.
//!
//! The synopsis tables are one text, copied into all three files: the peer refuses a point
//! whose synopsis fingerprints differ from its own.

use std::io::Read;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::Context;

use super::Layout;

/// Identity hash seed of both points (they must agree, or no packet matches).
const IDENTITY_SEED: &str = "0x7769_7265_6c61_7431";

/// The synopses both points run and the peer decodes. Sized for a demo-sized trace (tens of
/// thousands of packets per direction and epoch at most).
const SYNOPSES: &str = r#"
[synopses.fridge]
seed = 1
subsets = { by = "server_port", ports = [443, 80, 53] }
kinds = [
  { kind = "tcp_handshake", fridges = [{ slots = 65536, entry_probability = 1.0 }] },
  { kind = "dns", fridges = [{ slots = 16384, entry_probability = 1.0 }] },
]

[synopses.lda]
banks = [{ rows = 1024, p = 0.5 }, { rows = 1024, p = 0.05 }]
seed = 7

[synopses.lds]
# Sized for coverage (docs/lds.md, "Coverage sizing"): up to 2 000 flows per epoch and
# direction, 5 % of packets lost or across an epoch boundary. One cell per flow and row
# (k = 1) leaves every flow that lost a packet without a mean, and those flows' absence
# biases the aggregate mean wherever loss or crossings go with delay.
expected_flows = 2000
expected_loss = 0.05
mean_flow_packets = 16
max_flow_packets = 1000
seed = 7
flow_capacity = 262144

[synopses.rda]
binding = { mode = "online", buckets_per_bank = 4096 }
cache_capacity = 1048576
seed = 7

[synopses.colate]
counters = 1000003
cells_per_flow = 20
counter_bits = 40
epoch_threshold_ticks = 1000000000000
tick_ns = 1000
origin_ns = @ORIGIN@
seed = 7
packet_counts = true
"#;

/// What the configurations are made of.
pub struct Plan<'a> {
    /// Where the run's files go.
    pub layout: &'a Layout,
    /// Epoch length, ms.
    pub epoch_len_ms: u64,
    /// COLATE's tick origin: just before the trace starts.
    pub colate_origin_ns: u64,
    /// The peer's records file.
    pub records: &'a Path,
    /// `--metrics-linger-s` in ms: `/metrics` on loopback at every process, and how long a
    /// finished point keeps serving its final values. `None`: no endpoint.
    pub metrics_linger_ms: Option<u64>,
    /// `--metrics-lead-s`: the pause between the peer's metrics endpoint and the points' start.
    pub metrics_lead: std::time::Duration,
}

impl Plan<'_> {
    fn synopses(&self) -> String {
        SYNOPSES.replace("@ORIGIN@", &self.colate_origin_ns.to_string())
    }

    /// The collector's configuration file.
    pub fn collector_toml(&self) -> PathBuf {
        self.layout.file("collector.toml")
    }

    /// Point `name`'s configuration file.
    pub fn point_toml(&self, name: &str) -> PathBuf {
        self.layout.file(&format!("{name}.toml"))
    }

    /// Point `name`'s log.
    pub fn log(&self, name: &str) -> PathBuf {
        self.layout.file(&format!("{name}.log"))
    }
}

/// TOML string literal of a path (escaped as TOML requires).
fn quoted(p: &Path) -> String {
    toml::Value::String(p.display().to_string()).to_string()
}

/// Writes a fresh 32-byte pre-shared key in hex, readable by its owner only.
pub fn write_key(path: &Path) -> anyhow::Result<()> {
    let mut key = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut key))
        .context("reading /dev/urandom for the demo's peer key")?;
    let hex: String = key.iter().map(|b| format!("{b:02x}")).collect();
    let _ = std::fs::remove_file(path);
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let mut file = opts.open(path).with_context(|| format!("creating {}", path.display()))?;
    std::io::Write::write_all(&mut file, format!("{hex}\n").as_bytes())
        .with_context(|| format!("writing {}", path.display()))
}

/// Writes `collector.toml`: listening on a free loopback port (printed at start), point A
/// (id 1) and B (id 2), segment 1 forward (A → B) and 2 reverse (B → A), every flow reported,
/// the fridge over the whole run.
pub fn write_collector(plan: &Plan) -> anyhow::Result<()> {
    let key = plan.layout.file("peer.key");
    let text = format!(
        r#"# wirelat demo: the peer. Written by `wirelat demo`.
[collector]
listen = "127.0.0.1:0"
key_file = {key}
records = {records}
epoch_len_ns = {epoch_ns}
{metrics}
[report]
top_flows = 1000000
fridge_epochs = 10000

[colate]
windows = 1
# latency_floor_ns is left out: the collector derives the floor from each query group's
# single-packet cells, so B's clock offset need not be known (docs/colate.md).

[[point]]
id = 1
name = "a"

[[point]]
id = 2
name = "b"

[[segment]]
id = 1
upstream = 1
downstream = 2

[[segment]]
id = 2
upstream = 2
downstream = 1

# The points' identity settings: they enter every two-point fingerprint checked here.
[packet]
identity_seed = {seed}
payload_prefix_bytes = 32
{synopses}"#,
        seed = IDENTITY_SEED,
        key = quoted(&key),
        records = quoted(plan.records),
        epoch_ns = plan.epoch_len_ms * 1_000_000,
        metrics = if plan.metrics_linger_ms.is_some() { "metrics_listen = \"127.0.0.1:0\"\n" } else { "" },
        synopses = plan.synopses(),
    );
    let path = plan.collector_toml();
    std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))
}

/// Writes point `name`'s (`"a"` or `"b"`) appliance configuration: its two taps' pcaps in on
/// ports 0 and 1 (pcap virtual devices, trace clock), forwarded frames out to
/// `<name>_out<port>.pcap`, epochs shipped to the peer at `peer`.
pub fn write_point(plan: &Plan, name: &str, peer: SocketAddr) -> anyhow::Result<()> {
    let (id, core) = if name == "a" { (1, 1) } else { (2, 0) };
    let dir = &plan.layout.dir;
    let rx = |port: u8| quoted(&plan.layout.pair.join(format!("{name}_port{port}.pcap")));
    let tx = |port: u8| quoted(&dir.join(format!("{name}_out{port}.pcap")));
    // Device strings are quoted TOML strings; the inner "key=value" syntax is DPDK's.
    let device = |port: u8| {
        let rx = rx(port);
        let tx = tx(port);
        format!("\"net_pcap{port},rx_pcap={},tx_pcap={}\"", rx.trim_matches('"'), tx.trim_matches('"'))
    };
    let text = format!(
        r#"# wirelat demo: point {upper}. Written by `wirelat demo`.
[eal]
args = ["--no-huge", "-m", "512", "--no-pci", "--no-shconf", "--file-prefix=wirelat-demo-{pid}-{name}",
        "--no-telemetry", "--log-level=warning"]

[workers]
count = 1
cores = [{core}]

[stats]
interval_ms = 1000

[stop]
idle_ms = 500
{metrics}
[point]
id = {id}

[segments]
forward = 1
reverse = 2

[epochs]
length_ms = {epoch_ms}
ring = 4
overrun = "wait"

[clock]
source = "trace"

[packet]
identity_seed = {seed}
payload_prefix_bytes = 32

[packet.classify]
tcp_handshake = true
dns = true

[output]
json = {json}

[ship]
peer = "{peer}"
key_file = {key}
close_timeout_ms = 300000
{synopses}
[[port]]
device = {dev0}

[[port]]
device = {dev1}
"#,
        upper = name.to_uppercase(),
        pid = std::process::id(),
        epoch_ms = plan.epoch_len_ms,
        seed = IDENTITY_SEED,
        json = quoted(&dir.join(format!("{name}.epochs.jsonl"))),
        key = quoted(&plan.layout.file("peer.key")),
        synopses = plan.synopses(),
        dev0 = device(0),
        dev1 = device(1),
        metrics = plan
            .metrics_linger_ms
            .map(|ms| format!("\n[metrics]\nlisten = \"127.0.0.1:0\"\nlinger_ms = {ms}\n"))
            .unwrap_or_default(),
    );
    let path = plan.point_toml(name);
    std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))
}
