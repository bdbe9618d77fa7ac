//! What `wirelat replay` sends and when: the pcaps preloaded into memory (bounded), merged into
//! one schedule on their common clock, and the statistics of how late frames actually left.
//! Pure Rust, no DPDK: the engine turns these offsets into TSC deadlines.
//!
//! Timing rules (the same as MoonGen's `replay-pcap.lua`, where they are defined):
//! - A frame is due `(t − t₀) / rate_multiplier` after the start of its pass, t₀ being the
//!   earliest timestamp over all streams; rate multiplier 0 means "as fast as possible".
//! - A timestamp earlier than its predecessor's in the same file is taken as equal to it (the
//!   frame follows its predecessor at once); such frames are counted.
//! - Pass k + 1 starts one *period* after pass k: the trace's span (last − first timestamp)
//!   plus its mean gap, so a looped trace keeps its average rate across the seam.

use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};

use pcap_file::DataLink;
use pcap_file::pcap::PcapReader;

/// Memory counted per frame on top of its bytes: its span and timestamp (24 B), its schedule
/// slot (16 B) and its deadline in TSC ticks (8 B).
pub const BOOKKEEPING_BYTES_PER_FRAME: u64 = 48;

/// Why the pcaps cannot be loaded; always the user's input, so a usage error.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The file could not be opened or read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The pcap.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Not a classic pcap with Ethernet frames, or corrupt.
    #[error("{}: {detail}", path.display())]
    Format {
        /// The pcap.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// The frames need more memory than allowed.
    #[error(
        "the pcaps need more than {limit} bytes in memory (frame bytes plus {BOOKKEEPING_BYTES_PER_FRAME} bytes \
         per frame; {} alone needs at least {need}): raise max_preload_bytes or replay a shorter pcap",
        path.display()
    )]
    TooBig {
        /// The pcap being read when the limit was crossed.
        path: PathBuf,
        /// Bytes needed so far.
        need: u64,
        /// The limit.
        limit: u64,
    },
    /// No stream has a frame.
    #[error("the pcaps hold no frames to send")]
    Empty,
    /// More than 2³² frames in one pcap, or more than 65 535 pcaps.
    #[error("too many frames or pcaps for one schedule (at most 2^32 frames per pcap and 65535 pcaps)")]
    TooManyFrames,
}

/// One pcap's frames in memory.
#[derive(Debug, Default)]
pub struct StreamFrames {
    /// All frame bytes, back to back.
    bytes: Vec<u8>,
    /// (start, length) of each frame in `bytes`, in file order.
    spans: Vec<(usize, u32)>,
    /// Timestamp of each frame, ns, made non-decreasing.
    ts_ns: Vec<u64>,
    /// Records whose captured length was below their original length (sent as captured).
    pub truncated: u64,
    /// Records with no captured bytes (skipped).
    pub empty: u64,
    /// Records whose timestamp was earlier than their predecessor's.
    pub backwards: u64,
    /// Longest frame, bytes.
    pub max_frame: usize,
    /// Whether the file has nanosecond timestamps.
    pub nanosecond: bool,
}

impl StreamFrames {
    /// Frames loaded.
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// True when no frame was loaded.
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// Bytes of frame `i` (empty if out of range).
    pub fn frame(&self, i: usize) -> &[u8] {
        self.spans.get(i).and_then(|&(start, len)| self.bytes.get(start..start + len as usize)).unwrap_or(&[])
    }

    /// Frames from `frames` with their timestamps (ns), as if read from a file.
    #[cfg(test)]
    pub fn from_frames<'a>(frames: impl IntoIterator<Item = (u64, &'a [u8])>) -> Self {
        let mut s = Self::default();
        for (ts, f) in frames {
            s.push(ts, f, f.len());
        }
        s
    }

    fn push(&mut self, ts_ns: u64, data: &[u8], orig_len: usize) {
        if data.is_empty() {
            self.empty += 1;
            return;
        }
        if data.len() < orig_len {
            self.truncated += 1;
        }
        let ts = match self.ts_ns.last() {
            Some(&prev) if ts_ns < prev => {
                self.backwards += 1;
                prev
            }
            _ => ts_ns,
        };
        self.spans.push((self.bytes.len(), data.len() as u32));
        self.bytes.extend_from_slice(data);
        self.ts_ns.push(ts);
        self.max_frame = self.max_frame.max(data.len());
    }
}

/// Reads one pcap into memory; `budget` is what may still be used, and is reduced.
pub fn load_pcap(path: &Path, budget: &mut u64, limit: u64) -> Result<StreamFrames, LoadError> {
    let io = |source| LoadError::Io { path: path.to_owned(), source };
    let format = |detail: String| LoadError::Format { path: path.to_owned(), detail };
    let file = File::open(path).map_err(io)?;
    let file_len = file.metadata().map_err(io)?.len();
    // Frames take at least the file minus its 24-byte header (record headers are 16 bytes,
    // bookkeeping more): refuse a file that cannot fit before reading it.
    let floor = file_len.saturating_sub(24);
    if floor > *budget {
        return Err(LoadError::TooBig { path: path.to_owned(), need: floor, limit });
    }
    let mut reader = PcapReader::new(BufReader::new(file)).map_err(|e| {
        format(format!("not a readable pcap ({e}); pcapng files must be converted first, e.g. `editcap -F pcap in.pcapng out.pcap`"))
    })?;
    let header = reader.header();
    if header.datalink != DataLink::ETHERNET {
        return Err(format(format!("link type {:?}: only Ethernet pcaps can be replayed", header.datalink)));
    }
    let mut s = StreamFrames {
        nanosecond: header.ts_resolution == pcap_file::TsResolution::NanoSecond,
        ..StreamFrames::default()
    };
    let mut used = 0u64;
    while let Some(record) = reader.next_packet() {
        let record = record.map_err(|e| format(format!("record {}: {e}", s.len() + s.empty as usize + 1)))?;
        used += record.data.len() as u64 + BOOKKEEPING_BYTES_PER_FRAME;
        if used > *budget {
            return Err(LoadError::TooBig { path: path.to_owned(), need: used, limit });
        }
        let ts = u64::try_from(record.timestamp.as_nanos()).unwrap_or(u64::MAX);
        s.push(ts, &record.data, record.orig_len as usize);
    }
    *budget -= used;
    Ok(s)
}

/// One entry of the merged schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    /// Due time within a pass, ns of trace time (before the rate multiplier).
    pub offset_ns: u64,
    /// Which stream.
    pub stream: u16,
    /// Frame index within the stream.
    pub frame: u32,
}

/// All streams' frames in departure order.
#[derive(Debug)]
pub struct Schedule {
    /// The slots, ordered by (offset, stream, frame).
    pub slots: Vec<Slot>,
    /// Trace time from one pass's start to the next's, ns: span plus mean gap.
    pub period_ns: u64,
    /// Trace time from the first to the last frame, ns.
    pub span_ns: u64,
}

impl Schedule {
    /// Merges the streams on their common clock (t₀ = the earliest timestamp of all).
    pub fn merge(streams: &[StreamFrames]) -> Result<Self, LoadError> {
        let t0 = streams.iter().filter_map(|s| s.ts_ns.first().copied()).min().ok_or(LoadError::Empty)?;
        if streams.len() > usize::from(u16::MAX) || streams.iter().any(|s| s.len() > u32::MAX as usize) {
            return Err(LoadError::TooManyFrames);
        }
        let mut slots: Vec<Slot> = Vec::with_capacity(streams.iter().map(StreamFrames::len).sum());
        for (i, s) in streams.iter().enumerate() {
            for (j, &ts) in s.ts_ns.iter().enumerate() {
                // Checked above: at most u16::MAX streams and u32::MAX frames per stream.
                slots.push(Slot { offset_ns: ts - t0, stream: i as u16, frame: j as u32 });
            }
        }
        // Stable: each stream's own order survives ties.
        slots.sort_by_key(|s| (s.offset_ns, s.stream));
        let span_ns = slots.last().map_or(0, |s| s.offset_ns);
        let gaps = slots.len().saturating_sub(1) as u64;
        let mean_gap = span_ns.checked_div(gaps).unwrap_or(0);
        Ok(Schedule { slots, period_ns: span_ns + mean_gap, span_ns })
    }
}

/// How late frames were handed to the driver, against their due time.
///
/// Log-linear histogram: 8 sub-buckets per power of two, so a reported percentile is an upper
/// bound within 12.5 % of the true value (exact below 8 ns).
#[derive(Debug, Clone)]
pub struct Lateness {
    buckets: Vec<u64>,
    count: u64,
    sum_ns: u128,
    max_ns: u64,
}

const SUB_BUCKETS: u64 = 8;

impl Default for Lateness {
    fn default() -> Self {
        Self { buckets: vec![0; 64 * SUB_BUCKETS as usize], count: 0, sum_ns: 0, max_ns: 0 }
    }
}

impl Lateness {
    fn bucket(x: u64) -> usize {
        if x < SUB_BUCKETS {
            return x as usize;
        }
        let exp = 63 - u64::from(x.leading_zeros()); // >= 3
        let sub = (x >> (exp - 3)) & (SUB_BUCKETS - 1);
        ((exp - 2) * SUB_BUCKETS + sub) as usize
    }

    /// Largest value of bucket `b`.
    fn upper(b: usize) -> u64 {
        let b = b as u64;
        if b < SUB_BUCKETS {
            return b;
        }
        let exp = b / SUB_BUCKETS + 2;
        let sub = b % SUB_BUCKETS;
        let low = (SUB_BUCKETS + sub) << (exp - 3);
        low + ((1u64 << (exp - 3)) - 1)
    }

    /// Records one frame `late_ns` after its due time.
    #[inline]
    pub fn record(&mut self, late_ns: u64) {
        if let Some(b) = self.buckets.get_mut(Self::bucket(late_ns)) {
            *b += 1;
        }
        self.count += 1;
        self.sum_ns += u128::from(late_ns);
        self.max_ns = self.max_ns.max(late_ns);
    }

    /// Frames recorded.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Mean lateness, ns (0 without frames).
    pub fn mean_ns(&self) -> f64 {
        if self.count == 0 { 0.0 } else { self.sum_ns as f64 / self.count as f64 }
    }

    /// Largest lateness, ns.
    pub fn max_ns(&self) -> u64 {
        self.max_ns
    }

    /// An upper bound on the q-quantile (nearest rank), ns; never above the maximum.
    pub fn quantile_ns(&self, q: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.count as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (b, n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return Self::upper(b).min(self.max_ns);
            }
        }
        self.max_ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(ts: &[u64]) -> StreamFrames {
        let data: Vec<Vec<u8>> = ts.iter().map(|t| vec![*t as u8; 60]).collect();
        StreamFrames::from_frames(ts.iter().copied().zip(data.iter().map(Vec::as_slice)))
    }

    #[test]
    fn streams_merge_on_their_common_clock() {
        let a = frames(&[1_000, 3_000, 5_000]);
        let b = frames(&[2_000, 3_000]);
        let s = Schedule::merge(&[a, b]).unwrap_or_else(|e| panic!("{e}"));
        let order: Vec<(u64, u16, u32)> = s.slots.iter().map(|x| (x.offset_ns, x.stream, x.frame)).collect();
        assert_eq!(order, vec![(0, 0, 0), (1_000, 1, 0), (2_000, 0, 1), (2_000, 1, 1), (4_000, 0, 2)]);
        // Span 4 µs over 4 gaps: mean gap 1 µs, period 5 µs.
        assert_eq!((s.span_ns, s.period_ns), (4_000, 5_000));
    }

    #[test]
    fn backward_timestamps_follow_their_predecessor_and_empty_records_are_skipped() {
        let mut s =
            StreamFrames::from_frames([(10, &[1u8][..]), (5, &[2u8][..]), (20, &[][..]), (30, &[3u8][..])]);
        assert_eq!((s.len(), s.backwards, s.empty), (3, 1, 1));
        assert_eq!(s.ts_ns, vec![10, 10, 30]);
        assert_eq!(s.frame(1), &[2u8]);
        assert!(s.frame(9).is_empty());
        s.push(40, &[1, 2], 100);
        assert_eq!(s.truncated, 1);
        assert!(matches!(Schedule::merge(&[StreamFrames::default()]), Err(LoadError::Empty)));
        // One frame: no gap, period 0 (passes follow each other at once).
        let one = Schedule::merge(&[frames(&[7])]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((one.span_ns, one.period_ns), (0, 0));
    }

    #[test]
    fn lateness_quantiles_are_upper_bounds_within_an_eighth() {
        let mut l = Lateness::default();
        for x in 1..=10_000u64 {
            l.record(x * 100);
        }
        assert_eq!(l.count(), 10_000);
        assert_eq!(l.max_ns(), 1_000_000);
        assert!((l.mean_ns() - 500_050.0).abs() < 1e-6);
        for q in [0.5, 0.9, 0.99] {
            let exact = (q * 10_000.0) as u64 * 100;
            let got = l.quantile_ns(q);
            // Bucket width is 1/8 of its lower edge: the bound is within 12.5 % above.
            assert!(got >= exact && got as f64 <= exact as f64 * 1.125, "q {q}: {got} vs {exact}");
        }
        for x in [0u64, 1, 7, 8, 9, 15, 16, 1 << 40, u64::MAX] {
            let b = Lateness::bucket(x);
            assert!(Lateness::upper(b) >= x, "{x}");
            assert!(b == 0 || Lateness::upper(b - 1) < x, "{x}");
        }
    }

    #[test]
    fn oversized_pcaps_are_refused_before_and_while_reading() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("x.pcap");
        let file = File::create(&path).unwrap_or_else(|e| panic!("{e}"));
        let mut w = pcap_file::pcap::PcapWriter::new(file).unwrap_or_else(|e| panic!("{e}"));
        let frame = [0u8; 100];
        for i in 0..10u64 {
            let p = pcap_file::pcap::PcapPacket::new(std::time::Duration::from_micros(i), 100, &frame);
            w.write_packet(&p).unwrap_or_else(|e| panic!("{e}"));
        }
        drop(w);
        // 10 frames need 10 * (100 + 48) = 1480 bytes; the file is 24 + 10 * 116 = 1184.
        let mut budget = 1480;
        let s = load_pcap(&path, &mut budget, 1480).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((s.len(), budget, s.nanosecond), (10, 0, false));
        assert_eq!(s.ts_ns[9], 9_000);
        let mut budget = 1479;
        assert!(matches!(load_pcap(&path, &mut budget, 1479), Err(LoadError::TooBig { .. })));
        let mut budget = 100;
        assert!(matches!(load_pcap(&path, &mut budget, 100), Err(LoadError::TooBig { need: 1160, .. })));
        std::fs::write(&path, b"not a pcap at all, really not").unwrap_or_else(|e| panic!("{e}"));
        let mut budget = 1 << 20;
        assert!(matches!(load_pcap(&path, &mut budget, 1 << 20), Err(LoadError::Format { .. })));
    }
}
