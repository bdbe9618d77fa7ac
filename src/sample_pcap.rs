//! `wirelat sample-pcap`: writes the sample frames of
//! [`wirelat_dataplane::packet::sample`] as a classic (microsecond) pcap file.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::time::Duration;

use anyhow::Context;
use pcap_file::pcap::{PcapPacket, PcapWriter};
use wirelat_dataplane::packet::sample;

/// Writes the sample (or, with `empty`, a pcap without frames) to `out`.
pub fn write(out: &Path, empty: bool) -> anyhow::Result<()> {
    let file = File::create(out).with_context(|| format!("cannot create {}", out.display()))?;
    let frames = if empty { Vec::new() } else { sample::frames() };
    write_frames(BufWriter::new(file), &frames).with_context(|| format!("cannot write {}", out.display()))?;
    tracing::info!(file = %out.display(), frames = frames.len(), "sample pcap written");
    Ok(())
}

/// Writes `frames` as a pcap stream (link type Ethernet, snap length 65535).
fn write_frames<W: Write>(sink: W, frames: &[sample::SampleFrame]) -> anyhow::Result<()> {
    let mut writer = PcapWriter::new(sink)?;
    for f in frames {
        let packet = PcapPacket::new(Duration::from_nanos(f.ts_ns), f.orig_len, &f.data);
        writer.write_packet(&packet)?;
    }
    writer.into_writer().flush()?;
    Ok(())
}
