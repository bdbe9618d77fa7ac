//! Reading and writing classic pcap files with `pcap-file`.
//!
//! Written files are nanosecond pcaps (magic a1b23c4d, little-endian, Ethernet link type) with
//! records in the order given. Reading accepts micro- and nanosecond pcaps of either byte order;
//! records whose captured length exceeds the file's snap length are accepted (pcap-file 2.0
//! would refuse some real captures for that), malformed files give an error, never a panic.

use crate::error::{Result, TraceError};
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapReader, PcapWriter};
use pcap_file::{DataLink, Endianness, TsResolution};
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::Path;
use std::time::Duration;

/// One frame of a pcap with its timestamp in ns since the Unix epoch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// Timestamp, ns since 1970-01-01 UTC.
    pub ts_ns: u64,
    /// The frame bytes as captured.
    pub data: Vec<u8>,
}

/// Writes `records` as a nanosecond pcap to `w`.
pub fn write<'a, W: Write>(
    w: W,
    records: impl IntoIterator<Item = (u64, &'a [u8])>,
    label: &Path,
) -> Result<W> {
    let err = |e: pcap_file::PcapError| TraceError::Pcap { path: label.to_path_buf(), detail: e.to_string() };
    let header = PcapHeader {
        version_major: 2,
        version_minor: 4,
        ts_correction: 0,
        ts_accuracy: 0,
        snaplen: 262_144,
        datalink: DataLink::ETHERNET,
        ts_resolution: TsResolution::NanoSecond,
        endianness: Endianness::Little,
    };
    let mut pw = PcapWriter::with_header(w, header).map_err(err)?;
    for (ts_ns, data) in records {
        let len = u32::try_from(data.len())
            .map_err(|_| TraceError::Pcap { path: label.to_path_buf(), detail: "frame over 4 GiB".into() })?;
        if ts_ns / 1_000_000_000 > u64::from(u32::MAX) {
            return Err(TraceError::Time(format!("{ts_ns} ns is past the pcap range (year 2106)")));
        }
        pw.write_packet(&PcapPacket::new(Duration::from_nanos(ts_ns), len, data)).map_err(err)?;
    }
    Ok(pw.into_writer())
}

/// Writes `records` as a nanosecond pcap file at `path`.
pub fn write_file<'a>(path: &Path, records: impl IntoIterator<Item = (u64, &'a [u8])>) -> Result<()> {
    let f = std::fs::File::create(path).map_err(|e| TraceError::io(path, e))?;
    let mut w = write(BufWriter::new(f), records, path)?;
    w.flush().map_err(|e| TraceError::io(path, e))
}

/// Reads every record of a pcap from `r`.
pub fn read<R: Read>(r: R, label: &Path) -> Result<Vec<Record>> {
    let err = |d: String| TraceError::Pcap { path: label.to_path_buf(), detail: d };
    let mut pr =
        PcapReader::new(r).map_err(|e| err(format!("not a pcap file ({e}); pcapng is not supported")))?;
    let nano = pr.header().ts_resolution == TsResolution::NanoSecond;
    let mut out = Vec::new();
    while let Some(raw) = pr.next_raw_packet() {
        let raw = raw.map_err(|e| err(format!("record {}: {e}", out.len())))?;
        let frac = u64::from(raw.ts_frac);
        let frac_ns = if nano { frac } else { frac * 1000 };
        if frac_ns >= 1_000_000_000 {
            return Err(err(format!("record {}: sub-second part {frac} out of range", out.len())));
        }
        if raw.data.len() != raw.incl_len as usize {
            return Err(err(format!("record {}: truncated", out.len())));
        }
        out.push(Record {
            ts_ns: u64::from(raw.ts_sec) * 1_000_000_000 + frac_ns,
            data: raw.data.into_owned(),
        });
    }
    Ok(out)
}

/// Reads every record of the pcap file at `path`.
pub fn read_file(path: &Path) -> Result<Vec<Record>> {
    let f = std::fs::File::open(path).map_err(|e| TraceError::io(path, e))?;
    read(BufReader::new(f), path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_keeps_nanoseconds() {
        let frames: Vec<(u64, Vec<u8>)> =
            vec![(1_700_000_000_123_456_789, vec![1u8; 60]), (1_700_000_001_000_000_001, vec![2u8; 1514])];
        let buf =
            write(Vec::new(), frames.iter().map(|(t, d)| (*t, d.as_slice())), Path::new("mem")).unwrap();
        // Magic a1b23c4d written little-endian.
        assert_eq!(&buf[0..4], &[0x4d, 0x3c, 0xb2, 0xa1]);
        let back = read(buf.as_slice(), Path::new("mem")).unwrap();
        assert_eq!(back.len(), 2);
        for (r, (t, d)) in back.iter().zip(&frames) {
            assert_eq!(r.ts_ns, *t);
            assert_eq!(&r.data, d);
        }
    }

    #[test]
    fn garbage_is_an_error() {
        assert!(read(&b"not a pcap at all, definitely not"[..], Path::new("mem")).is_err());
        let mut buf = write(Vec::new(), [(5u64, &[0u8; 60][..])], Path::new("mem")).unwrap();
        buf.truncate(buf.len() - 7);
        assert!(read(buf.as_slice(), Path::new("mem")).is_err());
    }
}
