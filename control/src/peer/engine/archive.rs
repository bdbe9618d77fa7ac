//! The peer's COLATE archives: each point's windows of each segment, summed into counter
//! epochs and appended to `<archive_dir>/s<segment>-p<point>.colate` as the groups resolve.

use super::Engine;
use crate::colate_archive::{ArchiveHeader, ArchiveReader, ArchiveWriter};
use crate::report::metrics;
use wirelat_dataplane::synopsis::Synopsis;
use wirelat_dataplane::synopsis::colate::{Colate, EpochAccumulator};

/// A point's COLATE archive on one segment.
pub(super) struct Archive {
    acc: EpochAccumulator,
    writer: ArchiveWriter,
    /// Windows up to here are in the archive (or in its open epoch).
    last_window: Option<u64>,
}

impl Engine {
    /// Adds one point's windows `first..=last` to its archive (empty windows included, so its
    /// epochs cover contiguous windows).
    pub(super) fn archive(
        &mut self,
        segment: u32,
        point: u32,
        first: u64,
        last: u64,
        windows: &[(u64, &Colate)],
        cfg: &wirelat_dataplane::synopsis::colate::ColateConfig,
    ) {
        let Some(dir) = self.cfg.colate.archive_dir.clone() else { return };
        let key = (segment, point);
        if !self.archives.contains_key(&key) {
            let path = dir.join(format!("s{segment}-p{point}.colate"));
            let window_len_ns = self.cfg.collector.epoch_len_ns.unwrap_or(self.epoch_len_ns);
            // The epochs passed the fingerprint check, which covers the collector's packet
            // identity settings: they were measured under these.
            let header = ArchiveHeader {
                point,
                window_len_ns,
                config: cfg.clone(),
                packet_identity: Some(self.cfg.packet.identity_fingerprint()),
            };
            let opened = std::fs::create_dir_all(&dir)
                .map_err(|e| e.to_string())
                .and_then(|()| ArchiveWriter::open_or_create(&path, header).map_err(|e| e.to_string()))
                .and_then(|w| {
                    let last_window =
                        ArchiveReader::open(&path).ok().and_then(|r| r.metas().last().map(|m| m.last_window));
                    EpochAccumulator::new(cfg, point, w.next_seq())
                        .map(|acc| Archive { acc, writer: w, last_window })
                        .map_err(|e| e.to_string())
                });
            match opened {
                Ok(a) => {
                    self.archives.insert(key, a);
                }
                Err(e) => {
                    tracing::error!(path = %path.display(), error = %e, "cannot open the COLATE archive");
                    self.metrics.inc(metrics::PEER_GIVEN_UP, &[("reason", "archive_failed")], 1);
                    return;
                }
            }
        }
        let Some(a) = self.archives.get_mut(&key) else { return };
        let Ok(empty) = Colate::new(cfg) else { return };
        for w in first..=last {
            if a.last_window.is_some_and(|l| w <= l) {
                continue;
            }
            let v = windows.iter().find(|(e, _)| *e == w).map_or(&empty, |(_, c)| *c);
            match a.acc.push_window(w, v) {
                Ok(Some(closed)) => {
                    if let Err(e) = a.writer.append(&closed) {
                        tracing::error!(error = %e, "cannot append to the COLATE archive");
                        self.metrics.inc(metrics::PEER_GIVEN_UP, &[("reason", "archive_failed")], 1);
                    }
                }
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(segment, point, window = w, error = %e, "COLATE window not archived")
                }
            }
            a.last_window = Some(w);
        }
    }

    pub(super) fn close_archives(&mut self) {
        for ((segment, point), a) in &mut self.archives {
            if let Some(e) = a.acc.flush()
                && let Err(err) = a.writer.append(&e)
            {
                tracing::error!(segment, point, error = %err, "cannot flush the COLATE archive");
            }
        }
    }
}
