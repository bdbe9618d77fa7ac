//! COLATE's permanent storage: one append-only archive file per observation point holding its
//! closed counter epochs, and the store that answers per-flow queries between two points.
//!
//! The control thread owns an [`EpochAccumulator`](wirelat_dataplane::synopsis::colate::EpochAccumulator)
//! per point. It feeds it each harvested window and appends every epoch that comes back with
//! [`ArchiveWriter::append`]. Later, possibly years later (the paper's use case), a
//! [`ColateStore`] opens the archives of the points involved and answers
//! [`ColateStore::query_flow`]. The encoding is the synopsis module's
//! ([`CounterEpoch::encode`]); this module only frames, checksums and does the I/O.
//!
//! ```text
//! file   = header record*
//! header = "WLCOLATE" | version u8 | point u32 | window_len_ns u64 | fingerprint u64
//!          | packet_identity u64 | config_len u16 | config (postcard) | xxh3 of all the above u64
//!          (version 2: the same without packet_identity; still read and appended to)
//! record = body_len u32 | xxh3(body) u64 | body (CounterEpoch encoding)
//! ```
//!
//! All integers are little-endian. Reading never panics: a bad magic, version, checksum,
//! config, oversized or truncated record is a typed [`ArchiveError`] with the file and offset.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use thiserror::Error;
use wirelat_dataplane::packet::PacketConfig;
use wirelat_dataplane::synopsis::codec::DecodeError;
use wirelat_dataplane::synopsis::colate::{
    ColateConfig, CounterEpoch, EpochMeta, FlowLatencyReport, LatencyFloor, QueryError, QueryOptions,
    Segment, StorageStats, epochs_overlapping, select_aligned,
};
use wirelat_dataplane::synopsis::{ConfigError, SynopsisConfig};
use xxhash_rust::xxh3::xxh3_64;

mod store;

pub use store::{ColateStore, FlowQuery};

/// The first bytes of every archive.
pub const MAGIC: &[u8; 8] = b"WLCOLATE";
/// The format version this build writes and reads. 2 since `FlowKey::hash` hashes the key
/// padded to 40 bytes: an archive's cells were placed by its build's flow hash, so a version-1
/// archive queried with this build's hashes would read the wrong cells; it is refused instead.
/// 3 since the header records the point's packet identity settings (`packet_identity`).
pub const VERSION: u8 = 3;
/// The previous format, still read (and appended to): its header lacks `packet_identity`,
/// which is then unknown and taken as matching any. Its cells use this build's flow hash.
pub const VERSION_WITHOUT_IDENTITY: u8 = 2;
/// Bytes of a version-3 header before its config: magic, version, point, window, fingerprint,
/// packet identity, config length (version 2: the same without the packet identity).
const FIXED_HEADER_BYTES: usize = 8 + 1 + 4 + 8 + 8 + 8 + 2;
/// Largest config encoding accepted in a header.
const MAX_CONFIG_BYTES: usize = 1024;
/// Bytes of a record's frame before its body.
const FRAME_BYTES: usize = 12;
/// Bytes of an epoch encoding before its packed cells (see `CounterEpoch::encode_into`).
const EPOCH_FIXED_BYTES: usize = 4 + 8 * 4 + 1 + 8 * 6 + 2;

/// Why an archive could not be written or read.
#[derive(Debug, Error)]
pub enum ArchiveError {
    /// The operating system refused.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// The file already exists (`ArchiveWriter::create` never overwrites).
    #[error("{path}: already exists")]
    Exists {
        /// The file.
        path: PathBuf,
    },
    /// The header is not a COLATE archive header, or is damaged.
    #[error("{path}: bad header: {reason}")]
    BadHeader {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The file ends inside a header or record.
    #[error("{path}: truncated at offset {offset}: {needed} bytes needed, {available} left")]
    Truncated {
        /// The file.
        path: PathBuf,
        /// Where the cut record starts.
        offset: u64,
        /// Bytes it needs.
        needed: u64,
        /// Bytes left in the file.
        available: u64,
    },
    /// A record's checksum does not match its body.
    #[error("{path}: record at offset {offset}: checksum mismatch")]
    Checksum {
        /// The file.
        path: PathBuf,
        /// Record offset.
        offset: u64,
    },
    /// A record length exceeds what the archive's configuration allows.
    #[error("{path}: record at offset {offset}: length {len} exceeds the maximum {max}")]
    Oversized {
        /// The file.
        path: PathBuf,
        /// Record offset.
        offset: u64,
        /// Its length.
        len: u64,
        /// The maximum.
        max: u64,
    },
    /// A record's body does not decode, or disagrees with the archive (point, order).
    #[error("{path}: record at offset {offset}: {source}")]
    Record {
        /// The file.
        path: PathBuf,
        /// Record offset.
        offset: u64,
        /// Why.
        source: DecodeError,
    },
    /// An existing archive or an epoch does not match what the caller holds.
    #[error("{path}: {reason}")]
    Mismatch {
        /// The file.
        path: PathBuf,
        /// What differs.
        reason: String,
    },
    /// The configuration is invalid.
    #[error("invalid configuration: {0}")]
    Config(#[from] ConfigError),
    /// No archive for the point was opened.
    #[error("no archive for point {point}")]
    UnknownPoint {
        /// The point.
        point: u32,
    },
    /// The two points' epochs cannot be queried together.
    #[error("query: {0}")]
    Query(#[from] QueryError),
    /// No epoch of either point overlaps the flow's time.
    #[error("no stored epoch overlaps the flow's time at points {sender} and {receiver}")]
    NoOverlap {
        /// The sender point.
        sender: u32,
        /// The receiver point.
        receiver: u32,
    },
}

/// What an archive's header says.
#[derive(Clone, Debug, PartialEq)]
pub struct ArchiveHeader {
    /// The observation point whose epochs the file holds.
    pub point: u32,
    /// The runtime's window length E (ns): epochs are unions of windows [k·E, (k+1)·E).
    pub window_len_ns: u64,
    /// The point's COLATE configuration.
    pub config: ColateConfig,
    /// `PacketConfig::identity_fingerprint` of the point that measured the epochs: the cells
    /// were placed by flow hashes and packet identities of those settings, so archives of two
    /// points are queried together only when it is the same. `None` in a version-2 archive,
    /// written before headers recorded it.
    pub packet_identity: Option<u64>,
}

impl ArchiveHeader {
    /// The version-3 encoding, or version 2's (no packet identity) when it is unknown.
    fn encode(&self) -> Result<Vec<u8>, ArchiveError> {
        self.config.validate()?;
        let cfg = postcard::to_allocvec(&self.config).map_err(|e| ArchiveError::BadHeader {
            path: PathBuf::new(),
            reason: format!("config does not encode: {e}"),
        })?;
        let mut out = Vec::with_capacity(FIXED_HEADER_BYTES + 8 + cfg.len());
        out.extend_from_slice(MAGIC);
        out.push(if self.packet_identity.is_some() { VERSION } else { VERSION_WITHOUT_IDENTITY });
        out.extend_from_slice(&self.point.to_le_bytes());
        out.extend_from_slice(&self.window_len_ns.to_le_bytes());
        out.extend_from_slice(&self.config.fingerprint().to_le_bytes());
        if let Some(identity) = self.packet_identity {
            out.extend_from_slice(&identity.to_le_bytes());
        }
        out.extend_from_slice(&(cfg.len() as u16).to_le_bytes());
        out.extend_from_slice(&cfg);
        let sum = xxh3_64(&out);
        out.extend_from_slice(&sum.to_le_bytes());
        Ok(out)
    }

    /// True when epochs of an archive with this header and of `other` come from the same point
    /// and configuration: everything equal, except that an unknown packet identity (a
    /// version-2 archive) is taken as matching.
    fn same_source(&self, other: &ArchiveHeader) -> bool {
        // Destructured so that a field added to the header must be considered here too.
        let ArchiveHeader { point, window_len_ns, config, packet_identity } = self;
        *point == other.point
            && *window_len_ns == other.window_len_ns
            && *config == other.config
            && identities_agree(*packet_identity, other.packet_identity)
    }

    /// Reads a header from the start of `r`; returns it and its length.
    fn read(r: &mut impl Read, path: &Path, file_len: u64) -> Result<(Self, u64), ArchiveError> {
        let bad = |reason: String| ArchiveError::BadHeader { path: path.to_owned(), reason };
        let mut fixed = [0u8; FIXED_HEADER_BYTES];
        // The magic and version first, so a short file of another kind is named as such, not as
        // truncated, and the version says how long the rest is.
        read_exact_at(r, &mut fixed[..9], path, 0, file_len)?;
        if &fixed[..MAGIC.len()] != MAGIC {
            return Err(bad("not a COLATE archive (magic)".into()));
        }
        let version = fixed[8];
        let fixed_len = match version {
            VERSION => FIXED_HEADER_BYTES,
            VERSION_WITHOUT_IDENTITY => FIXED_HEADER_BYTES - 8,
            v => {
                return Err(bad(format!(
                    "format version {v} (this build reads {VERSION_WITHOUT_IDENTITY} and {VERSION})"
                )));
            }
        };
        let fixed = &mut fixed[..fixed_len];
        read_exact_at(r, &mut fixed[9..], path, 9, file_len.saturating_sub(9))?;
        let point = u32::from_le_bytes(arr(&fixed[9..13]));
        let window_len_ns = u64::from_le_bytes(arr(&fixed[13..21]));
        let fingerprint = u64::from_le_bytes(arr(&fixed[21..29]));
        let packet_identity = (version == VERSION).then(|| u64::from_le_bytes(arr(&fixed[29..37])));
        let cfg_len = u16::from_le_bytes(arr(&fixed[fixed_len - 2..])) as usize;
        if cfg_len > MAX_CONFIG_BYTES {
            return Err(bad(format!("config of {cfg_len} bytes")));
        }
        let mut rest = vec![0u8; cfg_len + 8];
        read_exact_at(r, &mut rest, path, fixed_len as u64, file_len.saturating_sub(fixed_len as u64))?;
        let (cfg_bytes, sum) = rest.split_at(cfg_len);
        let mut all = fixed.to_vec();
        all.extend_from_slice(cfg_bytes);
        if xxh3_64(&all) != u64::from_le_bytes(arr(sum)) {
            return Err(bad("header checksum mismatch".into()));
        }
        let config: ColateConfig =
            postcard::from_bytes(cfg_bytes).map_err(|e| bad(format!("config: {e}")))?;
        config.validate().map_err(|e| bad(format!("config: {e}")))?;
        if config.fingerprint() != fingerprint {
            return Err(bad("config does not match its fingerprint".into()));
        }
        if window_len_ns == 0 {
            return Err(bad("window length 0".into()));
        }
        Ok((Self { point, window_len_ns, config, packet_identity }, (fixed_len + cfg_len + 8) as u64))
    }

    /// The largest record body this configuration can produce (every cell at 64 bits).
    fn max_body(&self) -> u64 {
        let n = self.config.counters as u64;
        EPOCH_FIXED_BYTES as u64 + 8 * n * self.config.stride() as u64
    }
}

/// Two packet identities agree unless both are known and differ.
fn identities_agree(a: Option<u64>, b: Option<u64>) -> bool {
    a.zip(b).is_none_or(|(a, b)| a == b)
}

fn show_identity(id: Option<u64>) -> String {
    id.map_or_else(|| "unknown (version 2)".into(), |v| format!("{v:#018x}"))
}

fn arr<const N: usize>(b: &[u8]) -> [u8; N] {
    let mut a = [0u8; N];
    a.copy_from_slice(&b[..N]);
    a
}

fn read_exact_at(
    r: &mut impl Read,
    buf: &mut [u8],
    path: &Path,
    offset: u64,
    available: u64,
) -> Result<(), ArchiveError> {
    r.read_exact(buf).map_err(|e| {
        if e.kind() == io::ErrorKind::UnexpectedEof {
            ArchiveError::Truncated { path: path.to_owned(), offset, needed: buf.len() as u64, available }
        } else {
            ArchiveError::Io { path: path.to_owned(), source: e }
        }
    })
}

fn io_err(path: &Path) -> impl Fn(io::Error) -> ArchiveError + '_ {
    move |source| ArchiveError::Io { path: path.to_owned(), source }
}

/// One record's place in the file.
#[derive(Clone, Copy, Debug)]
struct Entry {
    meta: EpochMeta,
    body_offset: u64,
    body_len: u32,
}

/// Walks the records after the header, checking frames, checksums and the epochs' point and
/// order; returns the index.
fn scan(
    file: &mut File,
    path: &Path,
    header: &ArchiveHeader,
    start: u64,
    file_len: u64,
) -> Result<Vec<Entry>, ArchiveError> {
    let mut r = io::BufReader::new(file);
    r.seek(SeekFrom::Start(start)).map_err(io_err(path))?;
    let mut offset = start;
    let mut index: Vec<Entry> = Vec::new();
    let max = header.max_body();
    let mut body = Vec::new();
    while offset < file_len {
        let left = file_len - offset;
        let mut frame = [0u8; FRAME_BYTES];
        read_exact_at(&mut r, &mut frame, path, offset, left)?;
        let len = u32::from_le_bytes(arr(&frame[..4])) as u64;
        let sum = u64::from_le_bytes(arr(&frame[4..]));
        if len > max {
            return Err(ArchiveError::Oversized { path: path.to_owned(), offset, len, max });
        }
        if len > left - FRAME_BYTES as u64 {
            return Err(ArchiveError::Truncated {
                path: path.to_owned(),
                offset,
                needed: len + FRAME_BYTES as u64,
                available: left,
            });
        }
        body.resize(len as usize, 0);
        read_exact_at(&mut r, &mut body, path, offset, left)?;
        if xxh3_64(&body) != sum {
            return Err(ArchiveError::Checksum { path: path.to_owned(), offset });
        }
        let rec = |source| ArchiveError::Record { path: path.to_owned(), offset, source };
        let meta = CounterEpoch::decode_meta(&body).map_err(rec)?;
        check_order(header, index.last().map(|e| &e.meta), &meta).map_err(rec)?;
        index.push(Entry { meta, body_offset: offset + FRAME_BYTES as u64, body_len: len as u32 });
        offset += FRAME_BYTES as u64 + len;
    }
    Ok(index)
}

/// An epoch must belong to the archive's point and come after the previous one (sequence and
/// windows increasing).
fn check_order(header: &ArchiveHeader, last: Option<&EpochMeta>, e: &EpochMeta) -> Result<(), DecodeError> {
    if e.point != header.point {
        return Err(DecodeError::Invalid {
            field: "point",
            reason: format!("epoch of point {} in the archive of {}", e.point, header.point),
        });
    }
    if let Some(l) = last
        && (e.seq <= l.seq || e.first_window <= l.last_window)
    {
        return Err(DecodeError::Invalid {
            field: "seq",
            reason: format!(
                "epoch {} (windows from {}) after epoch {} (to {})",
                e.seq, e.first_window, l.seq, l.last_window
            ),
        });
    }
    Ok(())
}

/// What one append cost.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AppendStats {
    /// Bytes written (frame and body).
    pub bytes: u64,
    /// The epoch's storage accounting (bits per packet, actual and nominal n·b).
    pub storage: StorageStats,
}

/// Appends closed epochs of one point to its archive.
#[derive(Debug)]
pub struct ArchiveWriter {
    path: PathBuf,
    file: File,
    header: ArchiveHeader,
    last: Option<EpochMeta>,
    /// Where the next record starts.
    file_len: u64,
    bytes_written: u64,
    packets_written: u64,
}

impl ArchiveWriter {
    /// Creates a new archive (refuses to overwrite an existing file).
    pub fn create(path: impl AsRef<Path>, header: ArchiveHeader) -> Result<Self, ArchiveError> {
        let path = path.as_ref().to_owned();
        let bytes = header.encode()?;
        let mut file = OpenOptions::new().create_new(true).append(true).open(&path).map_err(|e| {
            if e.kind() == io::ErrorKind::AlreadyExists {
                ArchiveError::Exists { path: path.clone() }
            } else {
                io_err(&path)(e)
            }
        })?;
        file.write_all(&bytes).map_err(io_err(&path))?;
        file.sync_data().map_err(io_err(&path))?;
        let file_len = bytes.len() as u64;
        Ok(Self { path, file, header, last: None, file_len, bytes_written: 0, packets_written: 0 })
    }

    /// Opens an archive to append to, creating it if missing. An existing file must carry
    /// `header` and be intact (every record is checked); appending continues after its last
    /// epoch, whose sequence number [`ArchiveWriter::next_seq`] reports.
    pub fn open_or_create(path: impl AsRef<Path>, header: ArchiveHeader) -> Result<Self, ArchiveError> {
        let path = path.as_ref().to_owned();
        if !path.exists() {
            return Self::create(&path, header);
        }
        let reader = ArchiveReader::open(&path)?;
        if !reader.header.same_source(&header) {
            return Err(ArchiveError::Mismatch {
                path,
                reason: format!(
                    "archive holds point {} (fingerprint {:#018x}, packet identity {}, window {} ns), \
                     not point {} ({:#018x}, {}, {} ns)",
                    reader.header.point,
                    reader.header.config.fingerprint(),
                    show_identity(reader.header.packet_identity),
                    reader.header.window_len_ns,
                    header.point,
                    header.config.fingerprint(),
                    show_identity(header.packet_identity),
                    header.window_len_ns
                ),
            });
        }
        let file = OpenOptions::new().append(true).open(&path).map_err(io_err(&path))?;
        Ok(Self {
            path,
            file,
            header,
            last: reader.index.last().map(|e| e.meta),
            file_len: reader.file_len,
            bytes_written: 0,
            packets_written: 0,
        })
    }

    /// The sequence number the next epoch should carry (start the accumulator with it).
    pub fn next_seq(&self) -> u64 {
        self.last.map_or(0, |l| l.seq + 1)
    }

    /// Appends one closed epoch. It must be of this archive's point and configuration and come
    /// after the last stored one.
    pub fn append(&mut self, epoch: &CounterEpoch) -> Result<AppendStats, ArchiveError> {
        use wirelat_dataplane::synopsis::Synopsis;
        if epoch.data.config() != &self.header.config {
            return Err(ArchiveError::Mismatch {
                path: self.path.clone(),
                reason: format!(
                    "epoch configuration {:#018x} is not the archive's {:#018x}",
                    epoch.data.config().fingerprint(),
                    self.header.config.fingerprint()
                ),
            });
        }
        let meta = epoch.meta();
        check_order(&self.header, self.last.as_ref(), &meta).map_err(|source| ArchiveError::Record {
            path: self.path.clone(),
            offset: self.file_len,
            source,
        })?;
        let body = epoch.encode();
        let mut rec = Vec::with_capacity(FRAME_BYTES + body.len());
        rec.extend_from_slice(&(body.len() as u32).to_le_bytes());
        rec.extend_from_slice(&xxh3_64(&body).to_le_bytes());
        rec.extend_from_slice(&body);
        // One write of the whole record: a crash leaves at most a truncated tail, which the
        // reader reports as such.
        self.file.write_all(&rec).map_err(io_err(&self.path))?;
        self.last = Some(meta);
        self.file_len += rec.len() as u64;
        self.bytes_written += rec.len() as u64;
        self.packets_written += meta.packets;
        Ok(AppendStats { bytes: rec.len() as u64, storage: epoch.storage() })
    }

    /// Bits written per packet recorded since this writer was opened.
    pub fn bits_per_packet(&self) -> f64 {
        if self.packets_written == 0 {
            0.0
        } else {
            8.0 * self.bytes_written as f64 / self.packets_written as f64
        }
    }
}

/// An archive opened for reading: the header and an index of its epochs; epochs are read on
/// demand.
#[derive(Debug)]
pub struct ArchiveReader {
    path: PathBuf,
    header: ArchiveHeader,
    index: Vec<Entry>,
    file_len: u64,
}

impl ArchiveReader {
    /// Opens and checks a whole archive: header, every frame, checksum, and the epochs' order.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, ArchiveError> {
        let path = path.as_ref().to_owned();
        let mut file = File::open(&path).map_err(io_err(&path))?;
        let file_len = file.metadata().map_err(io_err(&path))?.len();
        let (header, start) = {
            let mut r = io::BufReader::new(&mut file);
            ArchiveHeader::read(&mut r, &path, file_len)?
        };
        let index = scan(&mut file, &path, &header, start, file_len)?;
        Ok(Self { path, header, index, file_len })
    }

    /// The header.
    pub fn header(&self) -> &ArchiveHeader {
        &self.header
    }

    /// The stored epochs' index entries, in file order.
    pub fn metas(&self) -> Vec<EpochMeta> {
        self.index.iter().map(|e| e.meta).collect()
    }

    /// Reads and decodes epoch `i` (checksum re-checked).
    pub fn epoch(&self, i: usize) -> Result<CounterEpoch, ArchiveError> {
        let e = self.index.get(i).ok_or_else(|| ArchiveError::Mismatch {
            path: self.path.clone(),
            reason: format!("no epoch {i}"),
        })?;
        let mut file = File::open(&self.path).map_err(io_err(&self.path))?;
        file.seek(SeekFrom::Start(e.body_offset - FRAME_BYTES as u64)).map_err(io_err(&self.path))?;
        let mut frame = [0u8; FRAME_BYTES];
        let offset = e.body_offset - FRAME_BYTES as u64;
        read_exact_at(&mut file, &mut frame, &self.path, offset, self.file_len.saturating_sub(offset))?;
        let mut body = vec![0u8; e.body_len as usize];
        read_exact_at(&mut file, &mut body, &self.path, offset, self.file_len.saturating_sub(e.body_offset))?;
        if xxh3_64(&body) != u64::from_le_bytes(arr(&frame[4..]))
            || u32::from_le_bytes(arr(&frame[..4])) != e.body_len
        {
            return Err(ArchiveError::Checksum { path: self.path.clone(), offset });
        }
        CounterEpoch::decode(&self.header.config, &body).map_err(|source| ArchiveError::Record {
            path: self.path.clone(),
            offset,
            source,
        })
    }

    /// Bytes of the file, packets recorded in its epochs and stored bits per packet.
    pub fn storage(&self) -> (u64, u64, f64) {
        let packets: u64 = self.index.iter().map(|e| e.meta.packets).sum();
        let bpp = if packets == 0 { 0.0 } else { 8.0 * self.file_len as f64 / packets as f64 };
        (self.file_len, packets, bpp)
    }
}

#[cfg(test)]
mod tests;
