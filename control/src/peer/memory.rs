//! What the collector's memory is bounded by, and the check at start that refuses a
//! configuration whose bound does not fit the machine.
//!
//! The collector holds synopses only while they are in flight; what it keeps for longer is
//! small and bounded by configuration. The bound (README, "Collector memory"):
//!
//! ```text
//! M ≈ max_pending_bytes                              waiting groups (their synopses' bytes¹)
//!   + ENGINE_INBOX × S_max                           decoded synopses queued for the engine
//!   + RDA_IN_FLIGHT × 2 × S_rda                      reconciliations (both sides each)
//!   + segments × 2 × S_colate   (with archive_dir)   open COLATE counter epochs
//!   + dedupe_epochs × groups per epoch × 64 B        group keys remembered for de-duplication
//!   + connections × 2 × max_body_bytes               frames being read (64 + 16 connections)
//! ```
//!
//! where `S_x` is the encoded size of a full synopsis of kind x under `[synopses.*]` (the
//! decoded form holds the same tables). The last term is a worst case that real points do not
//! reach (a frame is as large as its synopsis); the check uses `S_max` for it instead.
//!
//! ¹ A waiting synopsis counts its encoding's length, or for COLATE its decoded vector
//! (`estimate::held_bytes`): a sparse COLATE body is far smaller than what it decodes to.
//! `S_colate` is the dense layout's length, the largest a COLATE body can be.

use super::config::PeerConfig;
use crate::synopses::SynopsesConfig;
use wirelat_dataplane::synopsis::Synopsis;
use wirelat_dataplane::synopsis::colate::Colate;
use wirelat_dataplane::synopsis::fridge::FridgeSynopsis;
use wirelat_dataplane::synopsis::lda::Lda;
use wirelat_dataplane::synopsis::lds::Lds;
use wirelat_dataplane::synopsis::rda::Rda;

/// Depth of the engine's inbox: each event may carry one decoded synopsis.
pub const ENGINE_INBOX: usize = 256;
/// Most RDA reconciliations started and not finished; further ready RDA groups wait.
pub const RDA_IN_FLIGHT: usize = 16;
/// Bytes one remembered group key costs in the de-duplication set (key and tree overhead).
const DEDUPE_KEY_BYTES: u64 = 64;
/// Authenticated connections plus handshake slots (`net`): frames being read.
const CONNECTIONS: u64 = 64 + 16;
/// Bytes of one LDS flow-log entry on the wire (`lds::FlowSet`).
const LDS_FLOW_BYTES: u64 = 46;

/// The terms of the bound, in bytes, each with what it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryEstimate {
    /// (what, bytes).
    pub terms: Vec<(&'static str, u64)>,
}

impl MemoryEstimate {
    /// The sum of the terms.
    pub fn total(&self) -> u64 {
        self.terms.iter().fold(0u64, |a, (_, b)| a.saturating_add(*b))
    }

    /// "total MiB (term MiB, …)".
    pub fn describe(&self) -> String {
        let terms: Vec<String> = self.terms.iter().map(|(w, b)| format!("{w} {} MiB", mib(*b))).collect();
        format!("{} MiB ({})", mib(self.total()), terms.join(", "))
    }
}

fn mib(b: u64) -> u64 {
    b.div_ceil(1 << 20)
}

/// Encoded size of a full synopsis of each enabled kind: (largest, RDA, COLATE).
fn synopsis_bytes(s: &SynopsesConfig) -> (u64, u64, u64) {
    fn size<S: Synopsis>(cfg: Option<&S::Config>) -> u64 {
        cfg.and_then(|c| S::new(c).ok()).map_or(0, |s| s.encode().len() as u64)
    }
    let lds = s.lds.as_ref().map_or(0, |c| {
        size::<Lds>(Some(c)).saturating_add(u64::from(c.flow_capacity).saturating_mul(LDS_FLOW_BYTES))
    });
    let rda = size::<Rda>(s.rda.as_ref());
    // Not the encoding of an empty vector: that is sparse and small, and the bound needs the
    // dense layout a full window ships.
    let colate = s.colate.as_ref().map_or(0, |c| Colate::max_encoded_len(c) as u64);
    let largest = [size::<FridgeSynopsis>(s.fridge.as_ref()), size::<Lda>(s.lda.as_ref()), lds, rda, colate]
        .into_iter()
        .max()
        .unwrap_or(0);
    (largest, rda, colate)
}

/// The collector's memory bound for `cfg`.
pub fn estimate(cfg: &PeerConfig) -> MemoryEstimate {
    let (largest, rda, colate) = synopsis_bytes(&cfg.synopses);
    let segments = cfg.segments.len() as u64;
    let per_epoch = segments * 4 + cfg.points.len() as u64;
    let archives = if cfg.colate.archive_dir.is_some() { segments * 2 * colate } else { 0 };
    MemoryEstimate {
        terms: vec![
            ("max_pending_bytes", cfg.collector.max_pending_bytes),
            ("engine inbox", ENGINE_INBOX as u64 * largest),
            ("RDA reconciliations", RDA_IN_FLIGHT as u64 * 2 * rda),
            ("COLATE archives", archives),
            (
                "de-duplication",
                cfg.report.dedupe_epochs.saturating_mul(per_epoch).saturating_mul(DEDUPE_KEY_BYTES),
            ),
            ("frames being read", CONNECTIONS * largest),
        ],
    }
}

/// MemAvailable + SwapFree from `/proc/meminfo`, in bytes (`None` where it cannot be read).
pub fn available_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let kib = |key: &str| -> Option<u64> {
        text.lines().find_map(|l| l.strip_prefix(key)?.trim().trim_end_matches("kB").trim().parse().ok())
    };
    Some(kib("MemAvailable:")?.saturating_add(kib("SwapFree:").unwrap_or(0)).saturating_mul(1024))
}

/// Refuses `cfg` when its bound exceeds `available` bytes: the sentence names the figures and
/// the keys that set them.
pub fn check(cfg: &PeerConfig, available: Option<u64>) -> Result<MemoryEstimate, String> {
    let e = estimate(cfg);
    match available {
        Some(have) if e.total() > have => Err(format!(
            "the collector may need {} but this machine has {} MiB available (MemAvailable + SwapFree): \
             lower [collector] max_pending_bytes, [report] dedupe_epochs or the [synopses.*] sizes",
            e.describe(),
            mib(have)
        )),
        _ => Ok(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn cfg(extra: &str, synopses: &str) -> PeerConfig {
        let text = format!(
            "[collector]\nlisten = \"127.0.0.1:0\"\nkey_file = \"k\"\nrecords = \"r\"\n{extra}\n\
             [[point]]\nid = 1\nname = \"a\"\n[[point]]\nid = 2\nname = \"b\"\n\
             [[segment]]\nid = 1\nupstream = 1\ndownstream = 2\n{synopses}"
        );
        PeerConfig::parse(&text, Path::new("c.toml")).unwrap()
    }

    const COLATE: &str = "[synopses.colate]\ncounters = 1000003\ncells_per_flow = 20\ncounter_bits = 48\n\
                          epoch_threshold_ticks = 100000000000000\ntick_ns = 1000\n";

    #[test]
    fn the_bound_follows_the_synopsis_sizes_and_the_budgets() {
        let c = cfg("max_pending_bytes = 1048576\n[report]\ndedupe_epochs = 1000", COLATE);
        let e = estimate(&c);
        let colate = Colate::max_encoded_len(c.synopses.colate.as_ref().unwrap()) as u64;
        // One million counters are on the wire at 16 B each (48-bit counter and a tick sum).
        assert!(colate > 1_000_003 * 8, "{colate}");
        let term = |w: &str| e.terms.iter().find(|(x, _)| *x == w).unwrap().1;
        assert_eq!(term("max_pending_bytes"), 1 << 20);
        assert_eq!(term("engine inbox"), 256 * colate);
        assert_eq!(term("frames being read"), 80 * colate);
        assert_eq!(term("RDA reconciliations"), 0);
        assert_eq!(term("de-duplication"), 1000 * (4 + 2) * 64);
        assert_eq!(e.total(), e.terms.iter().map(|(_, b)| b).sum::<u64>());
    }

    #[test]
    fn a_configuration_that_does_not_fit_is_refused_with_the_figures() {
        let c =
            cfg("max_pending_bytes = 1099511627776", "[synopses.lda]\nbanks = [{ rows = 64, p = 1.0 }]\n");
        let err = check(&c, Some(8 << 30)).unwrap_err();
        assert!(err.contains("max_pending_bytes 1048576 MiB") && err.contains("8192 MiB available"), "{err}");
        let small = cfg("", "[synopses.lda]\nbanks = [{ rows = 64, p = 1.0 }]\n");
        assert!(check(&small, Some(8 << 30)).is_ok());
        assert!(check(&c, None).is_ok(), "no figure to compare with: not refused");
    }
}
