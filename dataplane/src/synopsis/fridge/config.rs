//! The fridge's configuration: fridge sets per exchange kind, weight form, combination,
//! histogram binning, subsets and report thresholds. Validation only: nothing here touches a
//! packet.

use super::subset::IpPrefix;
use crate::packet::ExchangeKind;
use crate::synopsis::{ConfigError, SynopsisConfig, SynopsisKind};
use serde::{Deserialize, Serialize};

/// Largest number of slots one fridge may have (per worker shard). Also keeps the 32-bit
/// counters stored in the slots exact: surviving 2³² insertions into a fridge of at most 2²⁶
/// slots has probability below e^(−64).
pub const MAX_SLOTS: u32 = 1 << 26;
/// Most fridges in one kind's set (spec §4.4: the paper uses two).
pub const MAX_FRIDGES_PER_KIND: usize = 8;
/// Most configured subsets (prefixes or ports); the "other" bucket comes on top.
pub const MAX_SUBSETS: usize = 64;
/// Finest histogram resolution.
pub const MAX_BINS_PER_OCTAVE: u32 = 64;
/// Most report thresholds ("fraction of delays above X").
pub const MAX_THRESHOLDS: usize = 8;
/// Upper bound on the per-epoch accumulator memory of one synopsis (histograms), in bytes.
pub const MAX_ACCUMULATOR_BYTES: usize = 64 << 20;

fn err(field: impl Into<String>, reason: impl Into<String>) -> ConfigError {
    ConfigError::new(SynopsisKind::Fridge, field, reason)
}

/// One fridge: a hash-indexed array of `slots` entries that a request enters with
/// `entry_probability` (spec §2.1, "fridge-(M, p)"). `slots` is per worker shard.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FridgeSpec {
    /// M, the number of slots (≥ 2, spec P21).
    pub slots: u32,
    /// p, the probability that a request enters this fridge (0 < p ≤ 1).
    pub entry_probability: f64,
}

/// The fridge set measuring one exchange kind. Each kind has its own fridges, counters and
/// entry probabilities, because request rates and delay scales differ between kinds (a SYN
/// stream and a TCP-data stream would otherwise evict each other's entries).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KindConfig {
    /// The exchange kind measured.
    pub kind: ExchangeKind,
    /// The fridges; a request enters at most one of them (Σp ≤ 1, spec P9).
    pub fridges: Vec<FridgeSpec>,
}

/// What x counts, i.e. which of the two equivalent correction factors is used (spec §3.2, P1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WeightMode {
    /// W1 (default, the prototype's form): x = insertions into this fridge after the request's
    /// own, c = p⁻¹·(1 − 1/M)^(−x).
    #[default]
    Insertions,
    /// W2 (the paper's printed form): x = requests of the kind offered after this one,
    /// c = p⁻¹·(1 − p/M)^(−x).
    Offered,
}

/// How the estimates of several fridges are combined per delay bin (spec §4.3, §4.5, P11).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case", deny_unknown_fields)]
pub enum Combination {
    /// Weights ∝ q_k(t) = p_k·(1 − 1/M_k)^(p_k·λ·t), fixed before the samples are seen (the
    /// "balance heuristic"): unbiased even when traffic is not stationary. Default.
    #[default]
    ModelWeights,
    /// The paper's plug-in inverse-variance weighting with V̂_k = Σc² per bin. Biased under
    /// lulls and at the end of traffic (spec §4.5); kept to reproduce the paper.
    IvwPlugin {
        /// Resolution of the IVW bins; must divide the histogram's bins per octave.
        #[serde(default = "default_bins_per_octave")]
        bins_per_octave: u32,
    },
}

fn default_bins_per_octave() -> u32 {
    4
}

/// 16, not the spec's 4 (P10) [ours]: with each bin's extremes kept, a quantile is never more
/// than a sixteenth of an octave from the samples' own (worst over 17 captures and their pool:
/// 0.035 / 0.080 / 0.017 |log2| at p50 / p95 / p99, against 0.077 / 0.093 / 0.031 at 4; the
/// 0.080 is a capture whose pairs the classifier counts differently; BENCHMARKS.md W12), for
/// 40 bytes a bin (16.7 KB per fridge and subset at 26 octaves).
fn default_histogram_bins_per_octave() -> u32 {
    16
}

/// The per-epoch log-binned histograms. Bin 0 holds delays below `min_delay_ns`; then
/// `octaves × bins_per_octave` bins of equal log width; the last bin holds everything from
/// `min_delay_ns·2^octaves` up.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HistogramConfig {
    /// Lower edge of the first regular bin, in ns; a power of two.
    #[serde(default = "default_min_delay_ns")]
    pub min_delay_ns: u64,
    /// Octaves covered by regular bins.
    #[serde(default = "default_octaves")]
    pub octaves: u32,
    /// Bins per octave (default 16; the spec's P10 says 4).
    #[serde(default = "default_histogram_bins_per_octave")]
    pub bins_per_octave: u32,
}

fn default_min_delay_ns() -> u64 {
    1024
}
fn default_octaves() -> u32 {
    26
}

impl Default for HistogramConfig {
    fn default() -> Self {
        Self {
            min_delay_ns: default_min_delay_ns(),
            octaves: default_octaves(),
            bins_per_octave: default_histogram_bins_per_octave(),
        }
    }
}

impl HistogramConfig {
    /// Number of bins including the underflow and overflow bins.
    pub fn bin_count(&self) -> usize {
        self.octaves as usize * self.bins_per_octave as usize + 2
    }
}

/// How samples are split into per-subset histograms (SLA checks are per customer). The subset
/// is decided from the response's 5-tuple: its destination is the client (the requester), its
/// source port the server port. Samples matching no subset go to the "other" bucket.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "by", rename_all = "snake_case", deny_unknown_fields)]
pub enum SubsetRule {
    /// One histogram per kind.
    #[default]
    None,
    /// By customer prefix on the client side (longest match; IPv4 and IPv6 prefixes).
    ClientPrefix {
        /// The prefixes, e.g. "192.0.2.0/24", "2001:db8::/32".
        prefixes: Vec<IpPrefix>,
    },
    /// By the server's port.
    ServerPort {
        /// The ports.
        ports: Vec<u16>,
    },
    /// By the response's innermost encapsulation identifier (per customer VLAN, per tenant
    /// VNI, per bearer TEID, ...; see `packet::encap`), written "kind:id": `vlan:10`,
    /// `mpls:2000`, `pppoe:7`, `gre:1`, `vni:5001`, `teid:305419896`. The response's, like
    /// the other rules: with asymmetric tagging, the tag the answer carries.
    Encap {
        /// The identifiers.
        ids: Vec<crate::packet::Encap>,
    },
}

impl SubsetRule {
    /// Number of configured subsets (without the "other" bucket).
    pub fn len(&self) -> usize {
        match self {
            SubsetRule::None => 0,
            SubsetRule::ClientPrefix { prefixes } => prefixes.len(),
            SubsetRule::ServerPort { ports } => ports.len(),
            SubsetRule::Encap { ids } => ids.len(),
        }
    }

    /// True when no subset is configured.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The fridge synopsis configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FridgeConfig {
    /// Hash seed for slot index, signature and routing coin (spec P5: set a fresh one per
    /// deployment; the default is fixed so configs are reproducible).
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// One fridge set per measured exchange kind; kinds not listed are ignored (counted).
    #[serde(default = "default_kinds")]
    pub kinds: Vec<KindConfig>,
    /// Correction-factor form.
    #[serde(default)]
    pub weight: WeightMode,
    /// Combination of several fridges of a kind.
    #[serde(default)]
    pub combination: Combination,
    /// Histogram binning.
    #[serde(default)]
    pub histogram: HistogramConfig,
    /// Per-subset histograms.
    #[serde(default)]
    pub subsets: SubsetRule,
    /// Thresholds (ns) for which the report gives the fraction of delays above them.
    #[serde(default)]
    pub report_thresholds_ns: Vec<u64>,
}

fn default_seed() -> u64 {
    0x0f71_d6e5_eed0_0001
}

fn default_kinds() -> Vec<KindConfig> {
    let one = vec![FridgeSpec { slots: 1 << 16, entry_probability: 1.0 }];
    vec![
        KindConfig { kind: ExchangeKind::TcpHandshake, fridges: one.clone() },
        KindConfig { kind: ExchangeKind::Dns, fridges: one },
    ]
}

impl Default for FridgeConfig {
    fn default() -> Self {
        Self {
            seed: default_seed(),
            kinds: default_kinds(),
            weight: WeightMode::default(),
            combination: Combination::default(),
            histogram: HistogramConfig::default(),
            subsets: SubsetRule::default(),
            report_thresholds_ns: Vec::new(),
        }
    }
}

impl FridgeConfig {
    /// A configuration measuring one kind with the given fridges, other fields default.
    pub fn single_kind(kind: ExchangeKind, fridges: Vec<FridgeSpec>) -> Self {
        Self { kinds: vec![KindConfig { kind, fridges }], ..Self::default() }
    }

    /// Bytes of per-epoch histogram memory this configuration needs.
    pub fn accumulator_bytes(&self) -> usize {
        let per_fridge = self.histogram.bin_count() * std::mem::size_of::<super::accum::BinStats>();
        let subsets = self.subsets.len() + 1;
        self.kinds.iter().map(|k| k.fridges.len().saturating_mul(subsets).saturating_mul(per_fridge)).sum()
    }
}

/// Checks one fridge set (also used by the tuning helpers and the simulation runners).
pub fn validate_fridges(field: &str, fridges: &[FridgeSpec]) -> Result<(), ConfigError> {
    if fridges.is_empty() {
        return Err(err(field, "at least one fridge is needed"));
    }
    if fridges.len() > MAX_FRIDGES_PER_KIND {
        return Err(err(field, format!("at most {MAX_FRIDGES_PER_KIND} fridges per kind")));
    }
    let mut sum = 0.0;
    for (i, f) in fridges.iter().enumerate() {
        if f.slots < 2 {
            return Err(err(
                format!("{field}[{i}].slots"),
                "a fridge needs at least 2 slots: with M = 1 a survivor's weight cannot account for \
                 evictions (spec P21)",
            ));
        }
        if f.slots > MAX_SLOTS {
            return Err(err(format!("{field}[{i}].slots"), format!("at most {MAX_SLOTS} slots")));
        }
        let p = f.entry_probability;
        if !(p.is_finite() && p > 0.0 && p <= 1.0) {
            return Err(err(format!("{field}[{i}].entry_probability"), format!("{p} is not in (0, 1]")));
        }
        sum += p;
    }
    if sum > 1.0 + 1e-9 {
        return Err(err(
            field,
            format!("entry probabilities sum to {sum} > 1: a request may enter at most one fridge (spec P9)"),
        ));
    }
    Ok(())
}

impl SynopsisConfig for FridgeConfig {
    const KIND: SynopsisKind = SynopsisKind::Fridge;
    type Written = Self;

    fn from_written(written: Self) -> Result<Self, ConfigError> {
        Ok(written)
    }

    fn validate(&self) -> Result<(), ConfigError> {
        if self.kinds.is_empty() {
            return Err(err("kinds", "at least one exchange kind must be measured"));
        }
        for (i, k) in self.kinds.iter().enumerate() {
            if self.kinds[..i].iter().any(|o| o.kind == k.kind) {
                return Err(err(format!("kinds[{i}].kind"), format!("{:?} is listed twice", k.kind)));
            }
            validate_fridges(&format!("kinds[{i}].fridges"), &k.fridges)?;
        }
        let h = &self.histogram;
        if !h.min_delay_ns.is_power_of_two() {
            return Err(err("histogram.min_delay_ns", format!("{} is not a power of two", h.min_delay_ns)));
        }
        if h.octaves == 0 || h.min_delay_ns.trailing_zeros() + h.octaves > 63 {
            return Err(err(
                "histogram.octaves",
                format!("{} octaves from {} ns do not fit in 2^63 ns", h.octaves, h.min_delay_ns),
            ));
        }
        if h.bins_per_octave == 0 || h.bins_per_octave > MAX_BINS_PER_OCTAVE {
            return Err(err("histogram.bins_per_octave", format!("must be in 1..={MAX_BINS_PER_OCTAVE}")));
        }
        if let Combination::IvwPlugin { bins_per_octave } = self.combination
            && (bins_per_octave == 0 || !h.bins_per_octave.is_multiple_of(bins_per_octave))
        {
            return Err(err(
                "combination.bins_per_octave",
                format!("{bins_per_octave} must divide histogram.bins_per_octave = {}", h.bins_per_octave),
            ));
        }
        match &self.subsets {
            SubsetRule::None => {}
            SubsetRule::ClientPrefix { prefixes } => distinct_subsets("prefixes", prefixes)?,
            SubsetRule::ServerPort { ports } => distinct_subsets("ports", ports)?,
            SubsetRule::Encap { ids } => distinct_subsets("ids", ids)?,
        }
        if self.report_thresholds_ns.len() > MAX_THRESHOLDS {
            return Err(err("report_thresholds_ns", format!("at most {MAX_THRESHOLDS} thresholds")));
        }
        if self.report_thresholds_ns.contains(&0) {
            return Err(err("report_thresholds_ns", "thresholds must be positive"));
        }
        let bytes = self.accumulator_bytes();
        if bytes > MAX_ACCUMULATOR_BYTES {
            return Err(err(
                "subsets",
                format!(
                    "kinds × fridges × (subsets + 1) × bins need {bytes} bytes of histograms per epoch \
                     (limit {MAX_ACCUMULATOR_BYTES})"
                ),
            ));
        }
        Ok(())
    }
}

/// Checks a subset list: 1 to [`MAX_SUBSETS`] entries, none listed twice.
fn distinct_subsets<T: PartialEq + std::fmt::Display>(field: &str, items: &[T]) -> Result<(), ConfigError> {
    if items.is_empty() || items.len() > MAX_SUBSETS {
        return Err(err(format!("subsets.{field}"), format!("give 1..={MAX_SUBSETS} {field}")));
    }
    for (i, p) in items.iter().enumerate() {
        if items[..i].contains(p) {
            return Err(err(format!("subsets.{field}[{i}]"), format!("{p} is listed twice")));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_valid() {
        FridgeConfig::default().validate().unwrap();
    }

    #[test]
    fn one_slot_is_refused() {
        let cfg = FridgeConfig::single_kind(
            ExchangeKind::Dns,
            vec![FridgeSpec { slots: 1, entry_probability: 1.0 }],
        );
        let e = cfg.validate().unwrap_err();
        assert_eq!(e.field, "kinds[0].fridges[0].slots");
        assert!(e.reason.contains("P21"), "{e}");
    }

    #[test]
    fn bad_values_are_refused() {
        let bad = |f: &dyn Fn(&mut FridgeConfig)| {
            let mut c = FridgeConfig::default();
            f(&mut c);
            c.validate().unwrap_err()
        };
        bad(&|c| c.kinds[0].fridges[0].entry_probability = 0.0);
        bad(&|c| c.kinds[0].fridges[0].entry_probability = f64::NAN);
        bad(&|c| c.kinds[0].fridges[0].slots = MAX_SLOTS + 1);
        bad(&|c| {
            c.kinds[0].fridges = vec![
                FridgeSpec { slots: 8, entry_probability: 0.75 },
                FridgeSpec { slots: 8, entry_probability: 0.5 },
            ]
        });
        bad(&|c| c.kinds[1].kind = ExchangeKind::TcpHandshake);
        bad(&|c| c.kinds.clear());
        bad(&|c| c.histogram.min_delay_ns = 1000);
        bad(&|c| c.histogram.octaves = 60);
        bad(&|c| c.histogram.bins_per_octave = 0);
        bad(&|c| c.combination = Combination::IvwPlugin { bins_per_octave: 3 });
        bad(&|c| c.subsets = SubsetRule::ServerPort { ports: vec![53, 53] });
        bad(&|c| c.subsets = SubsetRule::ServerPort { ports: (0..65).collect() });
        bad(&|c| c.report_thresholds_ns = vec![0]);
        // Σp = 1 exactly is fine (spec §9 item 7).
        let mut c = FridgeConfig::default();
        c.kinds[0].fridges = vec![
            FridgeSpec { slots: 8, entry_probability: 0.5 },
            FridgeSpec { slots: 8, entry_probability: 0.5 },
        ];
        c.validate().unwrap();
    }

    #[test]
    fn serde_defaults_and_unknown_fields() {
        let c: FridgeConfig = serde_json::from_str("{}").unwrap();
        assert_eq!(c, FridgeConfig::default());
        assert!(serde_json::from_str::<FridgeConfig>(r#"{"sede": 1}"#).is_err());
        let c: FridgeConfig = serde_json::from_str(
            r#"{"kinds":[{"kind":"dns","fridges":[{"slots":4096,"entry_probability":0.25},
                 {"slots":4096,"entry_probability":0.0078125}]}],
                "weight":"offered","combination":{"mode":"ivw_plugin"},
                "subsets":{"by":"client_prefix","prefixes":["192.0.2.0/24","2001:db8::/32"]}}"#,
        )
        .unwrap();
        c.validate().unwrap();
        assert_eq!(c.combination, Combination::IvwPlugin { bins_per_octave: 4 });
        assert_eq!(c.subsets.len(), 2);
        assert_ne!(c.fingerprint(), FridgeConfig::default().fingerprint());
    }
}
