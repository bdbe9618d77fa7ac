//! The collector's TOML file (`wirelat collect --config collector.toml`): where it listens,
//! its key, where records go, which points and segments exist, and the `[synopses.*]` tables
//! the points use (the same tables, so every fingerprint can be checked).
//!
//! ```toml
//! [collector]
//! listen = "0.0.0.0:7700"
//! key_file = "/etc/wirelat/peer.key"
//! records = "/var/lib/wirelat/records.jsonl"
//! metrics_listen = "127.0.0.1:9700"
//! [[point]]
//! id = 1
//! name = "a"
//! [[point]]
//! id = 2
//! name = "b"
//! [[segment]]
//! id = 1
//! upstream = 1
//! downstream = 2
//! [synopses.lda]
//! banks = [{ rows = 512, p = 0.01 }]
//! ```
//!
//! Unknown keys are errors; errors name the file, line and column (parse errors) or the key.

use crate::synopses::SynopsesConfig;
use serde::Deserialize;
use std::path::{Path, PathBuf};
use thiserror::Error;
use wirelat_dataplane::packet::PacketConfig;
use wirelat_dataplane::synopsis::SynopsisKind;
use wirelat_dataplane::synopsis::colate::Repetitions;
use wirelat_dataplane::synopsis::rda::PeelGuards;
use wirelat_records::{Direction, Point};

/// A collector configuration that failed to load.
#[derive(Debug, Error)]
pub enum PeerConfigError {
    /// The file could not be read.
    #[error("cannot read config file {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Not valid TOML, or not the schema.
    #[error("{}:{line}:{column}: {message}", path.display())]
    Parse {
        /// The file.
        path: PathBuf,
        /// 1-based line (0 unknown).
        line: usize,
        /// 1-based column (0 unknown).
        column: usize,
        /// What is wrong.
        message: String,
    },
    /// A value is out of range or inconsistent.
    #[error("{}: key `{key}`: {message}", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The offending key.
        key: String,
        /// What is wrong.
        message: String,
    },
}

/// Most epochs one group may span (`[colate] windows`, `[report] fridge_epochs`): the engine
/// visits each epoch of a group, and holds its synopses until the group resolves.
pub const MAX_GROUP_EPOCHS: u64 = 10_000;
/// Most `[[point]]` tables: each point holds a connection, a watermark and RDA caches at the
/// collector, and its id labels metric series, so the count is bounded like every other number.
pub const MAX_POINTS: usize = 1024;
/// Most groups `max_pending_groups` may allow.
pub const MAX_PENDING_GROUPS: u64 = 10_000_000;

/// The whole collector configuration.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeerConfig {
    /// `[collector]`.
    pub collector: CollectorSection,
    /// `[report]`.
    #[serde(default)]
    pub report: ReportSection,
    /// `[rda]`.
    #[serde(default)]
    pub rda: RdaSection,
    /// `[colate]`.
    #[serde(default)]
    pub colate: ColateSection,
    /// `[[point]]`: the measurement points.
    #[serde(rename = "point", default)]
    pub points: Vec<PointConfig>,
    /// `[[segment]]`: the directed segments between them.
    #[serde(rename = "segment", default)]
    pub segments: Vec<SegmentConfig>,
    /// `[synopses.*]`: exactly the points' tables.
    #[serde(default)]
    pub synopses: SynopsesConfig,
    /// `[packet]`: the points' packet layer. Its identity settings (`identity_seed`,
    /// `payload_prefix_bytes`) enter every two-point fingerprint the collector checks, so they
    /// must equal the points'; the classifiers are accepted (the same table can be pasted) and
    /// validated, but not used.
    #[serde(default)]
    pub packet: PacketConfig,
}

/// `[collector]`.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CollectorSection {
    /// Address to accept points on (`host:port`; port 0 picks one, logged at start).
    pub listen: String,
    /// The pre-shared key (hex), the same file as the points'.
    pub key_file: PathBuf,
    /// JSON-lines output; `-` is stdout (then nothing is de-duplicated across restarts).
    pub records: String,
    /// The commit log that makes emission idempotent across restarts; default
    /// `<records>.commit`.
    #[serde(default)]
    pub commit_log: Option<PathBuf>,
    /// Prometheus text endpoint (`host:port`), off when absent.
    #[serde(default)]
    pub metrics_listen: Option<String>,
    /// E in ns, when the collector should enforce it; otherwise the first point sets it.
    #[serde(default)]
    pub epoch_len_ns: Option<u64>,
    /// Largest frame body accepted.
    #[serde(default = "default_max_body")]
    pub max_body_bytes: u32,
    /// Handshake timeout.
    #[serde(default = "default_handshake_ms")]
    pub handshake_timeout_ms: u64,
    /// How long an RDA reconciliation waits for a point's look-up answers (including a
    /// reconnect) before it reports the look-up as failed.
    #[serde(default = "default_lookup_ms")]
    pub lookup_timeout_ms: u64,
    /// Most groups waiting for a point; beyond it the oldest is given up (counted, logged).
    #[serde(default = "default_max_pending")]
    pub max_pending_groups: usize,
    /// Most encoded synopsis bytes the waiting groups may hold; beyond it the oldest group is
    /// given up (counted, logged). The main term of the collector's memory bound (README).
    #[serde(default = "default_max_pending_bytes")]
    pub max_pending_bytes: u64,
}

fn default_max_body() -> u32 {
    crate::wire::DEFAULT_MAX_BODY_BYTES
}
fn default_handshake_ms() -> u64 {
    5_000
}
fn default_lookup_ms() -> u64 {
    30_000
}
fn default_max_pending() -> usize {
    100_000
}
fn default_max_pending_bytes() -> u64 {
    1 << 30
}

/// `[report]`: what the records hold.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ReportSection {
    /// Per-flow LDS and COLATE records per segment and epoch (group): the N largest flows.
    pub top_flows: usize,
    /// Fridge records merge this many consecutive epochs.
    pub fridge_epochs: u64,
    /// Keep the group keys of this many epochs behind the slowest point for de-duplication.
    pub dedupe_epochs: u64,
}

impl Default for ReportSection {
    fn default() -> Self {
        Self { top_flows: 100, fridge_epochs: 1, dedupe_epochs: 100_000 }
    }
}

/// `[rda]`: reconciliation options.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RdaSection {
    /// Peeling guards (all on by default).
    pub guards: PeelGuards,
}

/// `[colate]`: how COLATE windows are reported and archived.
#[derive(Clone, Debug, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ColateSection {
    /// Flow records cover this many consecutive windows (epochs), summed at both points.
    pub windows: u64,
    /// Directory of the per-point counter-epoch archives (`s<segment>-p<point>.colate`); off
    /// when absent.
    pub archive_dir: Option<PathBuf>,
    /// Coverage of the intervals.
    pub level: f64,
    /// How the paper's std-dev evaluates its pairings.
    pub repetitions: Repetitions,
    /// The smallest one-way latency any packet can show between the points' clocks (ns): 0
    /// when they agree, −(largest clock offset) otherwise. COLATE's count mean never goes
    /// below it, and a cell whose latency sum does is known to hold different packets at the
    /// two points (swapped) and is left out. Absent (the default): derived from each group's
    /// own single-packet cells (`LatencyFloor::Derived`), which follows a clock offset the
    /// operator does not know; set it only to override that.
    pub latency_floor_ns: Option<i64>,
    /// A flow record is `reliable` when its mean's interval half-width is at most this fraction
    /// of the mean (and the mean was not clipped at the floor).
    pub reliable_half_width: f64,
}

impl Default for ColateSection {
    fn default() -> Self {
        Self {
            windows: 1,
            archive_dir: None,
            level: 0.95,
            repetitions: Repetitions::Exact,
            latency_floor_ns: None,
            reliable_half_width: wirelat_dataplane::synopsis::colate::query::DEFAULT_RELIABLE_HALF_WIDTH,
        }
    }
}

/// One `[[point]]`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PointConfig {
    /// Its `[point] id`.
    pub id: u32,
    /// "a" (client side) or "b" (server side): the name records carry. Several points may
    /// share a name (a collector owning segments of several point pairs); ids tell them apart.
    pub name: Point,
}

/// One `[[segment]]`: packets go from `upstream` to `downstream`.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SegmentConfig {
    /// The segment id both points use for this direction.
    pub id: u32,
    /// The point the packets pass first (the sender).
    pub upstream: u32,
    /// The point they pass second (the receiver).
    pub downstream: u32,
}

/// A segment with what records need.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SegmentInfo {
    /// Its id.
    pub id: u32,
    /// Upstream point id.
    pub upstream: u32,
    /// Downstream point id.
    pub downstream: u32,
    /// Forward when the upstream point is "a".
    pub direction: Direction,
}

impl PeerConfig {
    /// Reads, parses and validates `path`.
    pub fn load(path: &Path) -> Result<Self, PeerConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| PeerConfigError::Read { path: path.to_path_buf(), source })?;
        let cfg = Self::parse(&text, path)?;
        cfg.check_output_paths(path)?;
        Ok(cfg)
    }

    /// The records file and its commit log must not be directories, `[colate] archive_dir`
    /// not a file: each would fail only when opened, as a runtime error with exit code 1.
    fn check_output_paths(&self, path: &Path) -> Result<(), PeerConfigError> {
        let bad = |key: &str, message: String| {
            Err(PeerConfigError::Invalid { path: path.to_path_buf(), key: key.to_owned(), message })
        };
        let records = Path::new(&self.collector.records);
        if self.collector.records != "-" && records.is_dir() {
            return bad(
                "collector.records",
                format!("{} is a directory; records go to a file", records.display()),
            );
        }
        if let Some(log) = self.commit_log_path().filter(|l| l.is_dir()) {
            let key = if self.collector.commit_log.is_some() {
                "collector.commit_log"
            } else {
                "collector.records"
            };
            return bad(key, format!("the commit log {} is a directory; it must be a file", log.display()));
        }
        if let Some(dir) = self.colate.archive_dir.as_ref().filter(|d| d.exists() && !d.is_dir()) {
            return bad(
                "colate.archive_dir",
                format!("{} is a file; it must name a directory", dir.display()),
            );
        }
        Ok(())
    }

    /// Parses and validates `text` (`path` names it in errors).
    pub fn parse(text: &str, path: &Path) -> Result<Self, PeerConfigError> {
        let cfg: PeerConfig = toml::from_str(text).map_err(|e| {
            let (line, column) = e.span().map_or((0, 0), |s| line_col(text, s.start));
            PeerConfigError::Parse {
                path: path.to_path_buf(),
                line,
                column,
                message: e.message().trim().to_owned(),
            }
        })?;
        cfg.validate(path)?;
        crate::synopses::log_derived(text);
        Ok(cfg)
    }

    fn validate(&self, path: &Path) -> Result<(), PeerConfigError> {
        let bad = |key: &str, message: String| {
            Err(PeerConfigError::Invalid { path: path.to_path_buf(), key: key.to_owned(), message })
        };
        if let Err(e) = self.synopses.validate() {
            return bad(&format!("synopses.{}", e.synopsis), e.to_string());
        }
        if let Err(e) = self.packet.validate() {
            return bad(&format!("packet.{}", e.field), e.reason);
        }
        if self.synopses.is_empty() {
            return bad("synopses", "no synopsis is enabled: the collector would have nothing to do".into());
        }
        if self.points.is_empty() || self.points.len() > MAX_POINTS {
            return bad("point", format!("{} points; give 1 to {MAX_POINTS}", self.points.len()));
        }
        // Names are sides ("a" the client side, "b" the server side), not identities: a
        // collector owning segments of several point pairs has several points of each name.
        for (i, p) in self.points.iter().enumerate() {
            if self.points.iter().skip(i + 1).any(|q| q.id == p.id) {
                return bad(&format!("point[{i}]"), format!("point id {} given twice", p.id));
            }
        }
        for (i, s) in self.segments.iter().enumerate() {
            let key = format!("segment[{i}]");
            if s.id == crate::sink::LOCAL_SEGMENT {
                return bad(&key, "segment id 0 is the fridge's local segment".into());
            }
            if self.segments.iter().skip(i + 1).any(|t| t.id == s.id) {
                return bad(&key, format!("segment id {} given twice", s.id));
            }
            if s.upstream == s.downstream {
                return bad(&key, "upstream and downstream are the same point".into());
            }
            for p in [s.upstream, s.downstream] {
                if self.point(p).is_none() {
                    return bad(&key, format!("point {p} is not a [[point]]"));
                }
            }
        }
        let two_point = SynopsisKind::ALL.into_iter().any(|k| k.is_two_point() && self.synopses.enables(k));
        if two_point && self.segments.is_empty() {
            return bad("segment", "two-point synopses are enabled but no [[segment]] is configured".into());
        }
        // Every number has a range: a huge one is a typo that would spin the engine (a COLATE
        // group of u64::MAX windows is iterated window by window) or allocate without bound.
        let c = &self.collector;
        let body = (u64::from(crate::ship::MIN_BODY_BYTES), u64::from(u32::MAX));
        let ms = crate::ship::MAX_MS;
        let ranges: [(&str, u64, (u64, u64)); 10] = [
            ("collector.max_body_bytes", u64::from(c.max_body_bytes), body),
            ("collector.handshake_timeout_ms", c.handshake_timeout_ms, (1, 600_000)),
            ("collector.lookup_timeout_ms", c.lookup_timeout_ms, (1, ms)),
            ("collector.max_pending_groups", c.max_pending_groups as u64, (1, MAX_PENDING_GROUPS)),
            ("collector.max_pending_bytes", c.max_pending_bytes, (1 << 20, 1 << 40)),
            ("collector.epoch_len_ns", c.epoch_len_ns.unwrap_or(1), (1, ms * 1_000_000)),
            ("report.top_flows", self.report.top_flows as u64, (0, 1_000_000)),
            ("report.fridge_epochs", self.report.fridge_epochs, (1, MAX_GROUP_EPOCHS)),
            ("report.dedupe_epochs", self.report.dedupe_epochs, (1, 100_000_000)),
            ("colate.windows", self.colate.windows, (1, MAX_GROUP_EPOCHS)),
        ];
        for (key, v, (lo, hi)) in ranges {
            if v < lo || v > hi {
                return bad(key, format!("{v} is outside {lo}..={hi}"));
            }
        }
        if !(self.colate.level > 0.0 && self.colate.level < 1.0) {
            return bad("colate.level", "must be in (0, 1)".into());
        }
        if !(self.colate.reliable_half_width > 0.0 && self.colate.reliable_half_width.is_finite()) {
            return bad("colate.reliable_half_width", "must be positive and finite".into());
        }
        Ok(())
    }

    /// The point with id `id`.
    pub fn point(&self, id: u32) -> Option<&PointConfig> {
        self.points.iter().find(|p| p.id == id)
    }

    /// The segment with id `id`.
    pub fn segment(&self, id: u32) -> Option<SegmentInfo> {
        let s = self.segments.iter().find(|s| s.id == id)?;
        let direction = match self.point(s.upstream)?.name {
            Point::A => Direction::Forward,
            Point::B => Direction::Reverse,
        };
        Some(SegmentInfo { id: s.id, upstream: s.upstream, downstream: s.downstream, direction })
    }

    /// Every segment.
    pub fn segment_infos(&self) -> Vec<SegmentInfo> {
        self.segments.iter().filter_map(|s| self.segment(s.id)).collect()
    }

    /// The commit log's path (`None` when records go to stdout).
    pub fn commit_log_path(&self) -> Option<PathBuf> {
        if self.collector.records == "-" {
            return None;
        }
        Some(
            self.collector
                .commit_log
                .clone()
                .unwrap_or_else(|| PathBuf::from(format!("{}.commit", self.collector.records))),
        )
    }
}

/// 1-based line and column of byte `offset` in `text`.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = text.get(..offset.min(text.len())).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = r#"
[collector]
listen = "127.0.0.1:0"
key_file = "k"
records = "out.jsonl"

[[point]]
id = 1
name = "a"
[[point]]
id = 2
name = "b"

[[segment]]
id = 10
upstream = 1
downstream = 2
[[segment]]
id = 11
upstream = 2
downstream = 1

[synopses.lda]
banks = [{ rows = 64, p = 1.0 }]
seed = 7
"#;

    fn parse(text: &str) -> Result<PeerConfig, PeerConfigError> {
        PeerConfig::parse(text, Path::new("c.toml"))
    }

    #[test]
    fn a_two_point_collector_parses_with_defaults() {
        let c = parse(BASE).unwrap();
        assert_eq!(c.segment(10).unwrap().direction, Direction::Forward);
        assert_eq!(c.segment(11).unwrap().direction, Direction::Reverse);
        assert_eq!(c.report.top_flows, 100);
        assert_eq!(c.commit_log_path(), Some(PathBuf::from("out.jsonl.commit")));
        assert!(c.synopses.enables(SynopsisKind::Lda));
        assert_eq!(c.packet, PacketConfig::default());
    }

    #[test]
    fn the_shipped_collector_config_is_valid() {
        let text = include_str!("../../../configs/collector.toml");
        let c = parse(text).unwrap();
        assert_eq!(c.segment_infos().len(), 2);
        assert_eq!(c.synopses.fingerprints(&c.packet).len(), 5);
    }

    #[test]
    fn a_collector_takes_the_points_of_several_pairs() {
        let four = format!(
            "{BASE}[[point]]\nid = 3\nname = \"a\"\n[[point]]\nid = 4\nname = \"b\"\n\
             [[segment]]\nid = 20\nupstream = 3\ndownstream = 4\n[[segment]]\nid = 21\nupstream = 4\ndownstream = 3\n"
        );
        let c = parse(&four).unwrap();
        assert_eq!(c.points.len(), 4);
        assert_eq!(c.segment(20).unwrap().direction, Direction::Forward);
        assert_eq!(c.segment(21).unwrap().direction, Direction::Reverse);
        let e = parse(&four.replace("id = 4\nname", "id = 3\nname")).unwrap_err();
        assert!(e.to_string().contains("point id 3 given twice"), "{e}");
        let many: String =
            (0..=MAX_POINTS).map(|i| format!("[[point]]\nid = {}\nname = \"a\"\n", i + 100)).collect();
        let e = parse(&format!("{BASE}{many}")).unwrap_err();
        assert!(e.to_string().contains("key `point`"), "{e}");
    }

    #[test]
    fn mistakes_are_named() {
        let e = parse(&BASE.replace("upstream = 2", "upstream = 3")).unwrap_err();
        assert!(e.to_string().contains("segment[1]") && e.to_string().contains("point 3"), "{e}");
        let e = parse(&BASE.replace("listen =", "bogus = 1\nlisten =")).unwrap_err();
        assert!(matches!(e, PeerConfigError::Parse { line: 3, .. }), "{e}");
        let e = parse(&BASE.replace("name = \"b\"", "name = \"c\"")).unwrap_err();
        assert!(e.to_string().contains("c.toml:"), "{e}");
        let e = parse(&BASE.replace("id = 11", "id = 10")).unwrap_err();
        assert!(e.to_string().contains("given twice"), "{e}");
        let e = parse(&BASE.replace("rows = 64", "rows = 3")).unwrap_err();
        assert!(e.to_string().contains("synopses.lda"), "{e}");
        let no_segments = BASE.split("[[segment]]").next().unwrap().to_owned()
            + "[synopses.lda]\nbanks = [{ rows = 64, p = 1.0 }]\n";
        assert!(parse(&no_segments).unwrap_err().to_string().contains("no [[segment]]"));
        let e = parse(&format!("{BASE}[colate]\nreliable_half_width = 0.0\n")).unwrap_err();
        assert!(e.to_string().contains("colate.reliable_half_width"), "{e}");
        let c = parse(&format!("{BASE}[colate]\nlatency_floor_ns = -20000\n")).unwrap();
        assert_eq!(c.colate.latency_floor_ns, Some(-20_000));
        assert_eq!(parse(BASE).unwrap().colate.latency_floor_ns, None, "derived unless given");
        let e = parse(&format!("{BASE}[packet]\npayload_prefix_bytes = 7\n")).unwrap_err();
        assert!(e.to_string().contains("packet.payload_prefix_bytes"), "{e}");
        let e = parse(&format!("{BASE}[packet]\nidentity_sed = 7\n")).unwrap_err();
        assert!(matches!(e, PeerConfigError::Parse { .. }), "{e}");
    }

    #[test]
    fn every_number_is_bounded() {
        let cases = [
            ("[colate]\nwindows = 18446744073709551615\n", "colate.windows"),
            ("[report]\nfridge_epochs = 18446744073709551615\n", "report.fridge_epochs"),
            ("[report]\ndedupe_epochs = 0\n", "report.dedupe_epochs"),
            ("[report]\ntop_flows = 18446744073709551615\n", "report.top_flows"),
        ];
        for (table, key) in cases {
            let e = parse(&format!("{BASE}{table}")).unwrap_err().to_string();
            assert!(e.contains(key) && e.contains("is outside"), "{table}: {e}");
        }
        let collector = [
            ("max_body_bytes = 0", "collector.max_body_bytes"),
            ("handshake_timeout_ms = 0", "collector.handshake_timeout_ms"),
            ("lookup_timeout_ms = 18446744073709551615", "collector.lookup_timeout_ms"),
            ("max_pending_groups = 0", "collector.max_pending_groups"),
            ("max_pending_bytes = 1000", "collector.max_pending_bytes"),
            ("epoch_len_ns = 0", "collector.epoch_len_ns"),
        ];
        for (line, key) in collector {
            let e =
                parse(&BASE.replace("records = \"out.jsonl\"", &format!("records = \"out.jsonl\"\n{line}")))
                    .unwrap_err()
                    .to_string();
            assert!(e.contains(key) && e.contains("is outside"), "{line}: {e}");
        }
        parse(&format!("{BASE}[colate]\nwindows = 10000\n")).expect("the largest windows accepted");
    }

    #[test]
    fn the_packet_table_sets_the_identity_the_fingerprints_cover() {
        let c = parse(&format!(
            "{BASE}[packet]\nidentity_seed = 5\npayload_prefix_bytes = 16\n[packet.classify]\ntcp_data = true\n"
        ))
        .unwrap();
        assert_eq!((c.packet.identity_seed, c.packet.payload_prefix_bytes), (5, 16));
        let default = parse(BASE).unwrap();
        assert_ne!(
            c.synopses.fingerprint_of(SynopsisKind::Lda, &c.packet),
            default.synopses.fingerprint_of(SynopsisKind::Lda, &default.packet)
        );
    }
}
