//! The peer protocol's messages: a fixed 48-byte header and a typed body, versioned and
//! checksummed. What travels between a measurement point and the peer that estimates.
//!
//! ```text
//! offset size field
//!  0     4    magic "WLAT"
//!  4     1    format version (WIRE_VERSION)
//!  5     1    message type (MessageType)
//!  6     2    flags (bit 0: the epoch is complete)
//!  8     4    point id
//! 12     4    segment id (0: none / the fridge's local segment)
//! 16     8    epoch (or watermark, for Progress)
//! 24     1    synopsis kind byte (0: none)
//! 25     3    reserved, zero
//! 28     4    body length in bytes
//! 32     8    configuration fingerprint of the synopsis (0: none)
//! 40     8    checksum: xxh3-64 of bytes 0..40 followed by the body
//! 48     …    body (layout per message type, below)
//! ```
//!
//! All integers are little-endian. On a connection every frame is followed by a 32-byte
//! HMAC-SHA256 tag (see [`crate::auth`]); spill files store frames without it.
//!
//! Bodies:
//! - `ClientHello`, `ServerHello`: a 32-byte nonce.
//! - `Hello`: watermark u64, packet identity fingerprint u64, n u8 (≤ 5),
//!   n × (kind u8, fingerprint u64).
//! - `Epoch`: epoch_len_ns u64, then the synopsis encoding (`Synopsis::encode`) to the end.
//! - `Ack`: empty (the header names the acknowledged epoch synopsis).
//! - `Progress`: the header's epoch is the watermark (every epoch below it was delivered);
//!   body: n u8, n × (reason u8, count u64): the point's give-up counters.
//! - `LookupRequest`: request id u64, n u32, n × id u64.
//! - `LookupResponse`: request id u64, status u8, n u32, n × (found u8, ts_ns u64).
//! - `BindRequest`: request id u64, m u32.
//! - `BindResponse`: request id u64, status u8, then the banks encoding to the end.
//! - `Reject`: a UTF-8 reason (≤ [`MAX_REASON_BYTES`]).
//!
//! Decoding never panics and never allocates more than the body length, which is checked
//! against the receiver's cap before anything is read. Nothing here does I/O.

use std::fmt;
use thiserror::Error;
use wirelat_dataplane::synopsis::SynopsisKind;
use wirelat_dataplane::synopsis::codec::{DecodeError, Reader, Writer};
use xxhash_rust::xxh3::Xxh3;

mod decode;
mod encode;
mod header;

use decode::array;
pub use encode::encode_epoch;
pub use header::{Header, checksum};

/// The first four bytes of every frame.
pub const MAGIC: [u8; 4] = *b"WLAT";
/// The frame format version this build writes and reads. 2 since a point's hello carries its
/// packet identity fingerprint and the two-point synopses' fingerprints cover it: a version-1
/// point's fingerprints would all read as mismatches, so it is refused by version instead,
/// which says what is wrong. Spill files of version 1 are unreadable to this build and
/// counted as such (`spill_corrupt`) when loaded.
pub const WIRE_VERSION: u8 = 2;
/// Bytes of the fixed header.
pub const HEADER_LEN: usize = 48;
/// Bytes of the header covered by the checksum (all but the checksum itself).
const CHECKED_LEN: usize = 40;
/// Bytes of a connection nonce.
pub const NONCE_LEN: usize = 32;
/// Longest reason a `Reject` carries.
pub const MAX_REASON_BYTES: usize = 1024;
/// Default cap on a body (bytes): larger than any synopsis of a sane configuration.
pub const DEFAULT_MAX_BODY_BYTES: u32 = 64 << 20;
/// Header flag: every worker contributed to this epoch.
pub const FLAG_COMPLETE: u16 = 1;

/// What a frame is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum MessageType {
    /// Point → peer, first frame: the point's nonce.
    ClientHello = 1,
    /// Peer → point: the peer's nonce (its tag proves the peer knows the key).
    ServerHello = 2,
    /// Point → peer, first authenticated frame: point id, watermark, fingerprints.
    Hello = 3,
    /// Point → peer: one encoded epoch synopsis.
    Epoch = 4,
    /// Peer → point: the named epoch synopsis is consumed; the point may drop it.
    Ack = 5,
    /// Point → peer: every epoch below the watermark has been delivered.
    Progress = 6,
    /// Peer → point: RDA timestamps of these packet ids, please.
    LookupRequest = 7,
    /// Point → peer: the answers.
    LookupResponse = 8,
    /// Peer → point: build late-binding RDA banks with m buckets per bank.
    BindRequest = 9,
    /// Point → peer: the banks.
    BindResponse = 10,
    /// Either way: the connection is refused, with a reason; the sender closes it.
    Reject = 11,
}

impl MessageType {
    const ALL: [MessageType; 11] = [
        MessageType::ClientHello,
        MessageType::ServerHello,
        MessageType::Hello,
        MessageType::Epoch,
        MessageType::Ack,
        MessageType::Progress,
        MessageType::LookupRequest,
        MessageType::LookupResponse,
        MessageType::BindRequest,
        MessageType::BindResponse,
        MessageType::Reject,
    ];

    /// The type for a type byte.
    pub fn from_u8(b: u8) -> Option<Self> {
        Self::ALL.into_iter().find(|t| *t as u8 == b)
    }

    /// Lower-case name (logs, metrics labels).
    pub fn name(self) -> &'static str {
        match self {
            MessageType::ClientHello => "client_hello",
            MessageType::ServerHello => "server_hello",
            MessageType::Hello => "hello",
            MessageType::Epoch => "epoch",
            MessageType::Ack => "ack",
            MessageType::Progress => "progress",
            MessageType::LookupRequest => "lookup_request",
            MessageType::LookupResponse => "lookup_response",
            MessageType::BindRequest => "bind_request",
            MessageType::BindResponse => "bind_response",
            MessageType::Reject => "reject",
        }
    }
}

/// Why a frame was refused. Every variant has a short [`WireError::reason`] used as a metrics
/// label.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum WireError {
    /// The frame does not start with "WLAT".
    #[error("bad magic {found:02x?} (not a wirelat frame)")]
    BadMagic {
        /// The first four bytes.
        found: [u8; 4],
    },
    /// A format version this build does not read.
    #[error("unknown wire format version {found} (this build reads {WIRE_VERSION})")]
    UnknownVersion {
        /// The version byte.
        found: u8,
    },
    /// An unknown message type byte.
    #[error("unknown message type {found}")]
    UnknownType {
        /// The type byte.
        found: u8,
    },
    /// An unknown synopsis kind byte.
    #[error("unknown synopsis kind {found}")]
    UnknownKind {
        /// The kind byte.
        found: u8,
    },
    /// Reserved header bytes are not zero.
    #[error("reserved header bytes are not zero")]
    Reserved,
    /// The body is longer than the receiver accepts.
    #[error("body length {len} exceeds the cap of {cap} bytes")]
    Oversized {
        /// Announced length.
        len: u32,
        /// The receiver's cap.
        cap: u32,
    },
    /// The input ends before the announced frame does.
    #[error("truncated frame: {needed} bytes needed, {available} available")]
    Truncated {
        /// Bytes the frame needs.
        needed: usize,
        /// Bytes there are.
        available: usize,
    },
    /// The checksum does not match the header and body.
    #[error("bad checksum (header says {expected:#018x}, content gives {found:#018x})")]
    BadChecksum {
        /// From the header.
        expected: u64,
        /// Computed.
        found: u64,
    },
    /// The body does not fit its message type.
    #[error("malformed {kind} body: {reason}")]
    Body {
        /// The message type.
        kind: &'static str,
        /// What is wrong.
        reason: String,
    },
}

impl WireError {
    /// A short stable name for counters and logs.
    pub fn reason(&self) -> &'static str {
        match self {
            WireError::BadMagic { .. } => "bad_magic",
            WireError::UnknownVersion { .. } => "unknown_version",
            WireError::UnknownType { .. } => "unknown_type",
            WireError::UnknownKind { .. } => "unknown_kind",
            WireError::Reserved => "reserved_bits",
            WireError::Oversized { .. } => "oversized_length",
            WireError::Truncated { .. } => "truncated",
            WireError::BadChecksum { .. } => "bad_checksum",
            WireError::Body { .. } => "malformed_body",
        }
    }

    fn body(t: MessageType, e: DecodeError) -> Self {
        WireError::Body { kind: t.name(), reason: e.to_string() }
    }
}

/// Identifies one epoch synopsis of one point: what the peer de-duplicates on and what an
/// `Ack` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MessageKey {
    /// The point that measured it.
    pub point: u32,
    /// Its segment.
    pub segment: u32,
    /// Its epoch.
    pub epoch: u64,
    /// Its synopsis.
    pub kind: SynopsisKind,
}

impl MessageKey {
    fn order(&self) -> (u64, u32, u8, u32) {
        (self.epoch, self.segment, self.kind as u8, self.point)
    }
}

/// Epoch order first (then segment, kind, point): the order a point ships in.
impl Ord for MessageKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.order().cmp(&other.order())
    }
}

impl PartialOrd for MessageKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for MessageKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "point {} segment {} epoch {} {}", self.point, self.segment, self.epoch, self.kind)
    }
}

/// One encoded epoch synopsis as shipped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EpochFrame {
    /// Whose, which segment, epoch and synopsis.
    pub key: MessageKey,
    /// Fingerprint of the synopsis configuration.
    pub fingerprint: u64,
    /// False when a worker skipped the epoch.
    pub complete: bool,
    /// E, ns.
    pub epoch_len_ns: u64,
    /// `Synopsis::encode()` bytes.
    pub synopsis: Vec<u8>,
}

/// The point's first authenticated frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hello {
    /// Point id.
    pub point: u32,
    /// Every epoch below this one has been delivered by the point's runtime.
    pub watermark: u64,
    /// The point's packet identity settings (`PacketConfig::identity_fingerprint`). The
    /// two-point fingerprints cover them already; sent apart so a refusal can say which of the
    /// two differs.
    pub packet_identity: u64,
    /// The point's enabled synopses and the fingerprints the peer checks
    /// (`SynopsesConfig::fingerprints`).
    pub fingerprints: Vec<(SynopsisKind, u64)>,
}

/// Whether a look-up or bind could be answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum LookupStatus {
    /// Answered.
    Ok = 0,
    /// The point holds no cache for that segment and epoch (never had one, or it expired).
    NoCache = 1,
    /// The request was malformed for this point (e.g. m out of range).
    Refused = 2,
}

impl LookupStatus {
    fn from_u8(b: u8) -> Option<Self> {
        match b {
            0 => Some(LookupStatus::Ok),
            1 => Some(LookupStatus::NoCache),
            2 => Some(LookupStatus::Refused),
            _ => None,
        }
    }
}

/// Where a look-up or bind request applies: the RDA cache of (point, segment, epoch).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CacheRef {
    /// The point holding it.
    pub point: u32,
    /// Segment.
    pub segment: u32,
    /// Epoch.
    pub epoch: u64,
}

/// A give-up counter a point reports in `Progress` (why an epoch never reached the peer).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum GiveUp {
    /// The in-memory queue was full and no spill directory was configured (or it was full).
    QueueFull = 0,
    /// Writing or reading the spill directory failed.
    SpillFailed = 1,
    /// The epoch waited longer than the configured maximum age.
    TooOld = 2,
    /// The sink was closed before the peer acknowledged it, and it could not be spilled.
    UnackedAtClose = 3,
    /// A spill file was unreadable or corrupt at start-up.
    SpillCorrupt = 4,
    /// A spill file held an epoch synopsis whose fingerprint is not one this run's
    /// configuration produces (a `[synopses.*]` table or the `[packet]` identity settings
    /// changed since it was written): the peer would refuse it, and, resent first on every
    /// connection, it would hold back everything behind it.
    ConfigChanged = 5,
}

impl GiveUp {
    /// Every reason.
    pub const ALL: [GiveUp; 6] = [
        GiveUp::QueueFull,
        GiveUp::SpillFailed,
        GiveUp::TooOld,
        GiveUp::UnackedAtClose,
        GiveUp::SpillCorrupt,
        GiveUp::ConfigChanged,
    ];

    /// The reason for a byte.
    pub fn from_u8(b: u8) -> Option<Self> {
        Self::ALL.into_iter().find(|g| *g as u8 == b)
    }

    /// Metrics label.
    pub fn name(self) -> &'static str {
        match self {
            GiveUp::QueueFull => "queue_full",
            GiveUp::SpillFailed => "spill_failed",
            GiveUp::TooOld => "too_old",
            GiveUp::UnackedAtClose => "unacked_at_close",
            GiveUp::SpillCorrupt => "spill_corrupt",
            GiveUp::ConfigChanged => "config_changed",
        }
    }
}

/// Every message of the protocol.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    /// Handshake, point side.
    ClientHello {
        /// The point's nonce.
        nonce: [u8; NONCE_LEN],
    },
    /// Handshake, peer side.
    ServerHello {
        /// The peer's nonce.
        nonce: [u8; NONCE_LEN],
    },
    /// The point introduces itself.
    Hello(Hello),
    /// An epoch synopsis.
    Epoch(EpochFrame),
    /// The peer consumed an epoch synopsis.
    Ack(MessageKey),
    /// The point has delivered every epoch below `watermark`.
    Progress {
        /// The point.
        point: u32,
        /// First epoch not yet fully delivered.
        watermark: u64,
        /// The point's give-up counters so far.
        given_up: Vec<(GiveUp, u64)>,
    },
    /// Timestamps of RDA packet ids, please.
    LookupRequest {
        /// Matches the response.
        request_id: u64,
        /// Whose cache.
        cache: CacheRef,
        /// The ids.
        ids: Vec<u64>,
    },
    /// The answers, in request order.
    LookupResponse {
        /// The request's id.
        request_id: u64,
        /// Whether the cache was there.
        status: LookupStatus,
        /// One entry per requested id.
        timestamps: Vec<Option<u64>>,
    },
    /// Build late-binding RDA banks with `buckets_per_bank` buckets per bank.
    BindRequest {
        /// Matches the response.
        request_id: u64,
        /// Whose cache.
        cache: CacheRef,
        /// m.
        buckets_per_bank: u32,
    },
    /// The banks (`rda::wire::encode_banks`), empty unless `status` is Ok.
    BindResponse {
        /// The request's id.
        request_id: u64,
        /// Whether the cache was there.
        status: LookupStatus,
        /// The encoding.
        banks: Vec<u8>,
    },
    /// The sender refuses the connection.
    Reject {
        /// Why.
        reason: String,
    },
}

impl Message {
    /// Its type.
    pub fn msg_type(&self) -> MessageType {
        match self {
            Message::ClientHello { .. } => MessageType::ClientHello,
            Message::ServerHello { .. } => MessageType::ServerHello,
            Message::Hello(_) => MessageType::Hello,
            Message::Epoch(_) => MessageType::Epoch,
            Message::Ack(_) => MessageType::Ack,
            Message::Progress { .. } => MessageType::Progress,
            Message::LookupRequest { .. } => MessageType::LookupRequest,
            Message::LookupResponse { .. } => MessageType::LookupResponse,
            Message::BindRequest { .. } => MessageType::BindRequest,
            Message::BindResponse { .. } => MessageType::BindResponse,
            Message::Reject { .. } => MessageType::Reject,
        }
    }
}

/// At most [`MAX_REASON_BYTES`] of `reason`, cut at a character boundary.
fn cut_reason(reason: &str) -> &str {
    let mut end = reason.len().min(MAX_REASON_BYTES);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    reason.get(..end).unwrap_or_default()
}

#[cfg(test)]
mod tests;
