//! `[ship]`: the settings of a point's network sink (peer, key, queue and spill limits,
//! backoff, timeouts, RDA cache retention), their defaults and their ranges.

use crate::wire::DEFAULT_MAX_BODY_BYTES;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// `[ship]`: where and how a point ships its epochs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShipConfig {
    /// The peer, `host:port`.
    pub peer: String,
    /// File holding the pre-shared key in hex (see README: key set-up).
    pub key_file: PathBuf,
    /// Most epoch synopses held in memory while unacknowledged.
    #[serde(default = "default_queue_messages")]
    pub queue_messages: usize,
    /// Most bytes held in memory while unacknowledged.
    #[serde(default = "default_queue_bytes")]
    pub queue_bytes: u64,
    /// Directory for what does not fit in memory, and for what is unacknowledged at close (so
    /// a restart resends it). Without it those epochs are given up (and counted).
    #[serde(default)]
    pub spill_dir: Option<PathBuf>,
    /// Most bytes in the spill directory.
    #[serde(default = "default_spill_bytes")]
    pub spill_bytes: u64,
    /// Write every epoch to the spill directory as it is queued, so even a crash of the point
    /// loses nothing that was harvested.
    #[serde(default)]
    pub spill_all: bool,
    /// Give up an epoch the peer has not acknowledged after this long (0: never).
    #[serde(default)]
    pub max_age_ms: u64,
    /// First reconnect delay; doubles per failure up to `backoff_max_ms`.
    #[serde(default = "default_backoff_initial_ms")]
    pub backoff_initial_ms: u64,
    /// Longest reconnect delay.
    #[serde(default = "default_backoff_max_ms")]
    pub backoff_max_ms: u64,
    /// TCP connect and handshake timeout, and the write timeout of a connection.
    #[serde(default = "default_io_timeout_ms")]
    pub io_timeout_ms: u64,
    /// CPU to pin the shipper and connection threads to (keep it off the workers' cores).
    #[serde(default)]
    pub core: Option<usize>,
    /// How long RDA caches are kept for the peer's look-ups.
    #[serde(default = "default_retention_ms")]
    pub rda_retention_ms: u64,
    /// Most bytes of retained RDA caches (the oldest go first).
    #[serde(default = "default_retention_bytes")]
    pub rda_retention_bytes: u64,
    /// How long `close` waits for the peer to acknowledge what is queued.
    #[serde(default = "default_close_timeout_ms")]
    pub close_timeout_ms: u64,
    /// Largest frame body accepted from the peer.
    #[serde(default = "default_max_body")]
    pub max_body_bytes: u32,
    /// Send window: most bytes of epoch synopses sent and not yet acknowledged. The peer
    /// acknowledges only what it committed, so a peer that falls behind slows its points
    /// down here instead of reading (and buffering) without bound: its waiting synopses stay
    /// below the sum of its points' windows, under `max_pending_bytes`, and nothing is shed
    /// and resent. A window that cannot hold a whole group's synopses of this point (a long
    /// `fridge_epochs` or `[colate] windows` span) still moves: after a second without an
    /// acknowledgement one more batch goes.
    #[serde(default = "default_window_bytes")]
    pub window_bytes: u64,
}

fn default_queue_messages() -> usize {
    4096
}
fn default_queue_bytes() -> u64 {
    512 << 20
}
fn default_spill_bytes() -> u64 {
    8 << 30
}
fn default_backoff_initial_ms() -> u64 {
    100
}
fn default_backoff_max_ms() -> u64 {
    5_000
}
fn default_io_timeout_ms() -> u64 {
    5_000
}
fn default_retention_ms() -> u64 {
    300_000
}
fn default_retention_bytes() -> u64 {
    1 << 30
}
fn default_close_timeout_ms() -> u64 {
    10_000
}
fn default_max_body() -> u32 {
    DEFAULT_MAX_BODY_BYTES
}
fn default_window_bytes() -> u64 {
    // 16 MiB: on a LAN many epochs of synopses in flight (throughput is not window-bound),
    // and 64 points fit the collector's default 1 GiB `max_pending_bytes`.
    16 << 20
}

/// Smallest `queue_bytes` and `spill_bytes`: room for at least a few encoded synopses. Below it
/// a point would give up (or, offline, wait on) every epoch.
pub const MIN_QUEUE_BYTES: u64 = 1 << 20;
/// Smallest `max_body_bytes`: the peer's look-up and bind requests must fit.
pub const MIN_BODY_BYTES: u32 = 64 << 10;
/// Longest timeout or delay any `[ship]` `*_ms` key may hold (one day): a larger value is a
/// typo, and `Duration` arithmetic on it could overflow.
pub const MAX_MS: u64 = 86_400_000;
/// Most entries `queue_messages` may hold in memory.
pub const MAX_QUEUE_MESSAGES: usize = 1 << 20;

impl ShipConfig {
    /// Checks every numeric setting against its documented range (README, `[ship]` keys);
    /// the error names the key (so the config loader can point at its line) and says, in one
    /// sentence, its value and the range.
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        let range = |key: &'static str, v: u64, lo: u64, hi: u64| {
            if v < lo || v > hi {
                Err((key, format!("[ship] {key} = {v} is outside {lo}..={hi}")))
            } else {
                Ok(())
            }
        };
        range("queue_messages", self.queue_messages as u64, 1, MAX_QUEUE_MESSAGES as u64)?;
        range("queue_bytes", self.queue_bytes, MIN_QUEUE_BYTES, 1 << 40)?;
        range("spill_bytes", self.spill_bytes, MIN_QUEUE_BYTES, 1 << 50)?;
        range(
            "max_body_bytes",
            u64::from(self.max_body_bytes),
            u64::from(MIN_BODY_BYTES),
            u64::from(u32::MAX),
        )?;
        range("max_age_ms", self.max_age_ms, 0, MAX_MS)?;
        range("backoff_initial_ms", self.backoff_initial_ms, 1, MAX_MS)?;
        range("backoff_max_ms", self.backoff_max_ms, self.backoff_initial_ms, MAX_MS)?;
        range("io_timeout_ms", self.io_timeout_ms, 1, MAX_MS)?;
        range("rda_retention_ms", self.rda_retention_ms, 1, MAX_MS)?;
        range("close_timeout_ms", self.close_timeout_ms, 1, MAX_MS)?;
        range("window_bytes", self.window_bytes, MIN_BODY_BYTES.into(), 1 << 40)?;
        if self.spill_all && self.spill_dir.is_none() {
            return Err(("spill_all", "[ship] spill_all = true needs spill_dir".into()));
        }
        Ok(())
    }

    /// A configuration with every default for `peer` and `key_file`.
    pub fn new(peer: impl Into<String>, key_file: impl Into<PathBuf>) -> Self {
        Self {
            peer: peer.into(),
            key_file: key_file.into(),
            queue_messages: default_queue_messages(),
            queue_bytes: default_queue_bytes(),
            spill_dir: None,
            spill_bytes: default_spill_bytes(),
            spill_all: false,
            max_age_ms: 0,
            backoff_initial_ms: default_backoff_initial_ms(),
            backoff_max_ms: default_backoff_max_ms(),
            io_timeout_ms: default_io_timeout_ms(),
            core: None,
            rda_retention_ms: default_retention_ms(),
            rda_retention_bytes: default_retention_bytes(),
            close_timeout_ms: default_close_timeout_ms(),
            max_body_bytes: default_max_body(),
            window_bytes: default_window_bytes(),
        }
    }
}
