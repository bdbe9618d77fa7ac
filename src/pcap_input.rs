//! Checks on the pcap files DPDK's pcap device will replay, made before the EAL starts, because
//! the device cannot tell the forwarder what it reads: it ignores the link type (a raw-IP
//! capture would be forwarded as Ethernet frames and every packet skipped unmeasured: such files
//! are refused), and it hands over a record cut by the capture's snap length as a whole frame of
//! the cut length (and writes it out so: the run warns how many, never silently).

use std::fs::File;
use std::io::BufReader;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use pcap_file::DataLink;
use pcap_file::pcap::PcapReader;

/// The `rx_pcap=` files of a `net_pcap` device string (none for other devices).
#[cfg_attr(not(feature = "dpdk"), allow(dead_code))]
pub fn rx_pcap_files(device: &str) -> Vec<PathBuf> {
    let mut parts = device.trim().split(',');
    let is_pcap = parts.next().is_some_and(|head| head.trim().starts_with("net_pcap"));
    if !is_pcap {
        return Vec::new();
    }
    parts
        .filter_map(|kv| kv.split_once('='))
        .filter(|(k, _)| k.trim() == "rx_pcap")
        .map(|(_, v)| PathBuf::from(v.trim()))
        .collect()
}

/// Refuses a capture whose link type is not Ethernet: the appliance and the offline runner
/// parse Ethernet frames only.
pub fn require_ethernet(datalink: DataLink, path: &Path) -> anyhow::Result<()> {
    if datalink != DataLink::ETHERNET {
        bail!(
            "{}: link type {datalink:?} is not Ethernet; wirelat parses Ethernet frames only \
             (convert the capture first, e.g. `tcprewrite --dlt=enet --enet-dmac=... --enet-smac=...`)",
            path.display()
        );
    }
    Ok(())
}

/// What [`check_replay_file`] found in a file the pcap device will replay.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReplayInput {
    /// Records in the file.
    pub records: u64,
    /// Records cut by the capture's snap length (stored length below the wire length).
    pub cut_records: u64,
    /// Index of the first cut record.
    pub first_cut: Option<u64>,
}

#[cfg_attr(not(feature = "dpdk"), allow(dead_code))]
/// Checks a file the pcap device will replay: it must be Ethernet (refused otherwise), and its
/// records cut by the snap length are counted, because the device forwards each as a whole
/// frame of the cut length (the caller says so loudly; the parser then counts them as
/// truncated, as `offline` does).
pub fn check_replay_file(path: &Path) -> anyhow::Result<ReplayInput> {
    let f = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let mut reader = PcapReader::new(BufReader::new(f)).map_err(|e| {
        anyhow::anyhow!("{} is not a pcap file ({e}); DPDK's pcap device reads pcap only", path.display())
    })?;
    require_ethernet(reader.header().datalink, path)?;
    let mut found = ReplayInput::default();
    while let Some(raw) = reader.next_raw_packet() {
        let raw = raw.map_err(|e| anyhow::anyhow!("{}: record {}: {e}", path.display(), found.records))?;
        if raw.orig_len > raw.incl_len {
            found.first_cut.get_or_insert(found.records);
            found.cut_records += 1;
        }
        found.records += 1;
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
    use std::borrow::Cow;
    use std::time::Duration;

    fn write(path: &Path, datalink: DataLink, records: &[(usize, u32)]) {
        let header = PcapHeader { datalink, snaplen: 128, ..Default::default() };
        let mut w = PcapWriter::with_header(File::create(path).unwrap(), header).unwrap();
        for &(incl, orig) in records {
            let data = vec![0u8; incl];
            w.write_packet(&PcapPacket { timestamp: Duration::ZERO, orig_len: orig, data: Cow::Owned(data) })
                .unwrap();
        }
    }

    #[test]
    fn finds_the_rx_files_of_pcap_devices_only() {
        assert_eq!(
            rx_pcap_files("net_pcap0, rx_pcap=a.pcap,tx_pcap=b.pcap,rx_pcap=c.pcap"),
            [PathBuf::from("a.pcap"), PathBuf::from("c.pcap")]
        );
        assert!(rx_pcap_files("net_ring0,rx_pcap=a.pcap").is_empty());
    }

    #[test]
    fn refuses_raw_ip_and_cut_records_and_accepts_whole_ethernet() {
        let dir = std::env::temp_dir().join(format!("w13-pcap-input-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ok = dir.join("ok.pcap");
        write(&ok, DataLink::ETHERNET, &[(60, 60), (100, 100)]);
        assert_eq!(
            check_replay_file(&ok).unwrap(),
            ReplayInput { records: 2, cut_records: 0, first_cut: None }
        );

        let raw = dir.join("raw.pcap");
        write(&raw, DataLink::RAW, &[(60, 60)]);
        let e = check_replay_file(&raw).unwrap_err().to_string();
        assert!(e.contains("not Ethernet"), "{e}");

        let cut = dir.join("cut.pcap");
        write(&cut, DataLink::ETHERNET, &[(60, 60), (128, 1500), (60, 60), (100, 200)]);
        let found = check_replay_file(&cut).unwrap();
        assert_eq!(found, ReplayInput { records: 4, cut_records: 2, first_cut: Some(1) });
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
