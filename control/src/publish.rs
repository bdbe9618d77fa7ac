//! From a merged epoch to its outputs: one [`EpochMessage`] per enabled (synopsis, direction),
//! handed to every sink; RDA's timestamp caches retained for the peer's look-ups; COLATE's
//! windows added into counter epochs and, when configured, archived.
//!
//! Runs on the control thread once per epoch, never per packet. Never sees a packet: it works
//! on the [`EpochSynopses`] the harvester merged.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use thiserror::Error;
use tracing::warn;
use wirelat_dataplane::packet::PacketConfig;
use wirelat_dataplane::pipeline::{Direction, EpochSynopses, SynopsisSet};
use wirelat_dataplane::synopsis::colate::{AccumulateError, Colate, EpochAccumulator};
use wirelat_dataplane::synopsis::fridge;
use wirelat_dataplane::synopsis::rda::{Rda, RdaCounters};
use wirelat_dataplane::synopsis::{ConfigError, Synopsis, SynopsisConfig, SynopsisKind};

use crate::colate_archive::{ArchiveError, ArchiveHeader, ArchiveWriter};
use crate::control_side::{self, PublishAt};
use crate::sink::{EpochMessage, EpochSink, Harvested, LOCAL_SEGMENT, RdaPairs, Summary, SynopsisSummary};
use crate::synopses::peer_fingerprint_of;

/// Who measured: the point id and the segment id of each direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PointIds {
    /// `[point] id`.
    pub point: u32,
    /// `[segments] forward`: segment of packets received on port 0.
    pub forward_segment: u32,
    /// `[segments] reverse`: segment of packets received on port 1.
    pub reverse_segment: u32,
}

impl PointIds {
    /// The segment id of direction `d`.
    pub fn segment(&self, d: Direction) -> u32 {
        match d {
            Direction::Forward => self.forward_segment,
            Direction::Reverse => self.reverse_segment,
        }
    }
}

/// Something the publisher could not do. The control loop logs it and goes on: outputs must
/// never stop the data path.
#[derive(Debug, Error)]
pub enum PublishError {
    /// A synopsis configuration is invalid (caught at start-up in practice).
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The COLATE archive could not be opened or written.
    #[error(transparent)]
    Archive(#[from] ArchiveError),
    /// A COLATE window could not be added (out of order or another configuration).
    #[error("COLATE {direction} window: {source}")]
    Accumulate {
        /// Which direction.
        direction: &'static str,
        /// Why.
        source: AccumulateError,
    },
    /// The archive directory could not be created.
    #[error("cannot create the COLATE archive directory {}: {source}", path.display())]
    ArchiveDir {
        /// The directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// What the publisher has done.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PublishCounters {
    /// Merged epochs published.
    pub epochs: u64,
    /// Messages handed to the sinks (each to every sink).
    pub messages: u64,
    /// Encoded bytes in those messages.
    pub body_bytes: u64,
    /// RDA caches retained.
    pub rda_caches: u64,
    /// RDA epochs (one per direction) in which packets were left out because a worker's cache
    /// was full (`cache_full` above 0): RDA measured only part of their traffic.
    pub rda_cache_full_epochs: u64,
    /// The packets left out in those epochs (their `cache_full`, summed).
    pub rda_cache_full_packets: u64,
    /// COLATE counter epochs closed (built only with `[output] colate_archive`).
    pub colate_epochs: u64,
    /// Of those, written to an archive.
    pub colate_archived: u64,
}

/// COLATE's control-side state of one direction, kept only with an archive: counter epochs
/// exist to be archived, and building them costs several passes over the whole vector per window
/// (the overflow check, the add, the widest sum; a copy when one closes).
struct ColateOutput {
    acc: EpochAccumulator,
    archive: ArchiveWriter,
}

/// Turns merged epochs into messages for the sinks.
pub struct Publisher {
    ids: PointIds,
    epoch_len_ns: u64,
    sinks: Vec<Box<dyn EpochSink>>,
    colate: [Option<ColateOutput>; 2],
    counters: PublishCounters,
    /// The last progress watermark handed to the sinks.
    progress: u64,
    /// The point's packet settings: two-point fingerprints cover its identity settings.
    packet: PacketConfig,
    /// Every published epoch's fridge summed: the whole run's distribution. Summing epochs is
    /// exact (a sample belongs to its response's epoch, the slots are never cleared), so a
    /// point answers for the whole run without a collector.
    pub(crate) whole_run_fridge: Option<fridge::FridgeSynopsis>,
    /// The body buffer [`Publisher::message`] encodes into, kept between messages with the
    /// capacity of the largest body so far. A body allocated per message is megabytes of fresh
    /// pages each time (the allocator maps blocks this large anew and advises them for huge
    /// pages), which the kernel zeroes before the encoder writes them: at eight workers reusing
    /// the buffer took about a third off the publishing time (BENCHMARKS.md, W17 twenty-second
    /// session). The sinks only borrow a message, so the buffer comes back ([`Publisher::recycle`]).
    body_buffer: Vec<u8>,
}

impl Publisher {
    /// A publisher for a point running `set` with packet settings `packet` (they enter the
    /// fingerprint of every two-point message), delivering to `sinks`. With `colate_archive_dir`,
    /// COLATE's windows are gathered into counter epochs and each closed one is appended to
    /// `<dir>/colate-point<P>-segment<S>.archive` (continued if it exists); without it, no
    /// counter epochs are built (the windows still go to the sinks).
    pub fn new(
        ids: PointIds,
        epoch_len_ns: u64,
        set: &SynopsisSet,
        packet: &PacketConfig,
        colate_archive_dir: Option<&Path>,
        sinks: Vec<Box<dyn EpochSink>>,
    ) -> Result<Self, PublishError> {
        let mut colate = [None, None];
        if let (Some(cfg), Some(dir)) = (&set.colate, colate_archive_dir) {
            std::fs::create_dir_all(dir)
                .map_err(|source| PublishError::ArchiveDir { path: dir.to_owned(), source })?;
            for d in Direction::BOTH {
                let archive = ArchiveWriter::open_or_create(
                    colate_archive_path(dir, ids.point, ids.segment(d)),
                    ArchiveHeader {
                        point: ids.point,
                        window_len_ns: epoch_len_ns,
                        config: cfg.clone(),
                        packet_identity: Some(packet.identity_fingerprint()),
                    },
                )?;
                let first_seq = archive.next_seq();
                colate[d as usize] =
                    Some(ColateOutput { acc: EpochAccumulator::new(cfg, ids.point, first_seq)?, archive });
            }
        }
        Ok(Self {
            ids,
            epoch_len_ns,
            sinks,
            colate,
            counters: PublishCounters::default(),
            progress: 0,
            packet: packet.clone(),
            whole_run_fridge: None,
            body_buffer: Vec::new(),
        })
    }

    /// What was published so far.
    pub fn counters(&self) -> PublishCounters {
        self.counters
    }

    /// The fridge's report over every epoch published so far (`None` without a fridge or
    /// before the first epoch).
    pub fn whole_run_fridge(&self) -> Option<fridge::FridgeReport> {
        self.whole_run_fridge.as_ref().map(fridge::estimate)
    }

    /// Publishes merged epoch `epoch` (made of `shards` worker shards; `complete` is false when
    /// a worker skipped it). Takes RDA's caches out of `merged` (it is reset before reuse).
    /// Every message is delivered even if COLATE archiving fails; the first error is returned.
    pub fn publish(
        &mut self,
        epoch: u64,
        merged: &mut EpochSynopses,
        shards: usize,
        complete: bool,
    ) -> Result<(), PublishError> {
        self.counters.epochs += 1;
        control_side::publish_epoch(self, epoch, merged, shards, complete)
    }

    /// The segment id of direction `d` at this point.
    pub(crate) fn segment_of(&self, d: Direction) -> u32 {
        self.ids.segment(d)
    }

    /// Counts an RDA epoch whose workers left packets out for a full cache, and says so in the
    /// log for the 1st, 2nd, 4th, 8th, ... such epoch: a capacity below the traffic is a
    /// configuration to fix, which the epoch's `cache_full` counter alone leaves to whoever reads
    /// the records, while a line per epoch would flood the log for as long as it lasts.
    pub(crate) fn note_rda_cache_full(&mut self, at: &PublishAt, counters: &RdaCounters) {
        if counters.cache_full == 0 {
            return;
        }
        let c = &mut self.counters;
        c.rda_cache_full_epochs += 1;
        c.rda_cache_full_packets = c.rda_cache_full_packets.saturating_add(counters.cache_full);
        if c.rda_cache_full_epochs.is_power_of_two() {
            warn!(
                segment = at.segment,
                epoch = at.epoch,
                left_out = counters.cache_full,
                seen = counters.seen,
                epochs_so_far = c.rda_cache_full_epochs,
                packets_so_far = c.rda_cache_full_packets,
                "RDA's cache was full: packets left out of RDA's estimate (counted as cache_full); \
                 raise [synopses.rda] cache_capacity above the packets one worker sees in an epoch"
            );
        }
    }

    /// Hands RDA's merged (settled) cache of `at`'s epoch and segment to every sink to retain.
    /// When it is a sorted run and a sink has a spare buffer for it, the run is moved out of
    /// `rda` (which files its next epoch into the spare) and shared: no sink copies it.
    /// Otherwise each sink that keeps the pairs copies them from the cache, which stays.
    pub(crate) fn retain_rda_cache(&mut self, at: &PublishAt, rda: &mut Rda) {
        // Moved only where the run fills at least half its buffer (`run_room`): a retained run
        // then holds at most twice its pairs' memory.
        let need = rda.cache().run_room();
        let mut spare = if need > 0 {
            self.sinks.iter_mut().find_map(|s| s.spare_rda_run(at.segment, need))
        } else {
            None
        };
        if spare.as_mut().is_some_and(|buf| rda.swap_run(buf)) {
            let run = Arc::new(spare.take().unwrap_or_default());
            for sink in &mut self.sinks {
                sink.retain_rda_cache(at.segment, at.epoch, RdaPairs::Run(&run));
            }
        } else {
            for sink in &mut self.sinks {
                sink.retain_rda_cache(at.segment, at.epoch, RdaPairs::Cache(rda.cache()));
            }
        }
        self.counters.rda_caches += 1;
    }

    /// Adds one merged COLATE window; returns how many counter epochs it closed.
    pub(crate) fn add_colate_window(
        &mut self,
        d: Direction,
        window: u64,
        v: &Colate,
    ) -> Result<u64, PublishError> {
        let Some(out) = self.colate.get_mut(d as usize).and_then(Option::as_mut) else { return Ok(0) };
        let closed = out
            .acc
            .push_window(window, v)
            .map_err(|source| PublishError::Accumulate { direction: d.name(), source })?;
        match closed {
            Some(epoch) => {
                self.counters.colate_epochs += 1;
                out.archive.append(&epoch)?;
                self.counters.colate_archived += 1;
                Ok(1)
            }
            None => Ok(0),
        }
    }

    /// Encodes `s` and delivers its message to every sink.
    pub(crate) fn deliver<S: Synopsis>(&mut self, at: &PublishAt, s: &S, summary: SynopsisSummary) {
        let msg = self.message(at, s, summary);
        self.send(&msg);
        self.recycle(msg);
    }

    /// The epoch message of one synopsis (encoded, fingerprinted), counted. Its body is the
    /// publisher's body buffer: give the message back with [`Publisher::recycle`] once sent.
    pub(crate) fn message<S: Synopsis>(
        &mut self,
        at: &PublishAt,
        s: &S,
        summary: SynopsisSummary,
    ) -> EpochMessage {
        let body = std::mem::take(&mut self.body_buffer);
        self.message_into(at, s, summary, body)
    }

    /// Keeps a sent message's body as the buffer the next message is encoded into.
    pub(crate) fn recycle(&mut self, msg: EpochMessage) {
        if msg.body.capacity() > self.body_buffer.capacity() {
            self.body_buffer = msg.body;
        }
    }

    /// [`Publisher::message`] with its body encoded into `body` (cleared first, its capacity kept).
    fn message_into<S: Synopsis>(
        &mut self,
        at: &PublishAt,
        s: &S,
        summary: SynopsisSummary,
        mut body: Vec<u8>,
    ) -> EpochMessage {
        let (epoch, segment, complete) = (at.epoch, at.segment, at.complete);
        let mut summary = Harvested::new(at.shards, summary);
        body.clear();
        s.encode_into(&mut body);
        summary.body_bytes = body.len();
        let msg = EpochMessage {
            point: self.ids.point,
            segment,
            epoch,
            epoch_len_ns: self.epoch_len_ns,
            kind: S::Config::KIND,
            fingerprint: peer_fingerprint_of(s, &self.packet),
            complete,
            body,
            summary: Summary::Harvested(summary),
        };
        self.counters.messages += 1;
        self.counters.body_bytes += msg.body.len() as u64;
        msg
    }

    pub(crate) fn send(&mut self, msg: &EpochMessage) {
        for sink in &mut self.sinks {
            sink.deliver(msg);
        }
    }

    /// Tells the sinks that every epoch below `passed_epoch` has been published or had no
    /// packets ([`Harvester::passed`](crate::epoch::Harvester::passed)); only advances.
    pub fn progress(&mut self, passed_epoch: u64) {
        if passed_epoch > self.progress {
            self.progress = passed_epoch;
            for sink in &mut self.sinks {
                sink.progress(passed_epoch);
            }
        }
    }

    /// At the end of a run (every worker finished, every epoch published): closes the open
    /// COLATE counter epochs (archiving them) and closes every sink.
    pub fn finish(&mut self) -> Result<(), PublishError> {
        let mut first_error = None;
        for out in self.colate.iter_mut().flatten() {
            if let Some(epoch) = out.acc.flush() {
                self.counters.colate_epochs += 1;
                match out.archive.append(&epoch) {
                    Ok(_) => self.counters.colate_archived += 1,
                    Err(e) => {
                        warn!(error = %e, "cannot archive the last COLATE counter epoch");
                        first_error.get_or_insert(PublishError::Archive(e));
                    }
                }
            }
        }
        for sink in &mut self.sinks {
            sink.close();
        }
        first_error.map_or(Ok(()), Err)
    }
}

impl Publisher {
    /// What the sinks gave up, by reason, summed over sinks (see [`EpochSink::losses`]).
    pub fn losses(&self) -> Vec<(&'static str, u64)> {
        let mut out: Vec<(&'static str, u64)> = Vec::new();
        for (reason, n) in self.sinks.iter().flat_map(|s| s.losses()) {
            match out.iter_mut().find(|(r, _)| *r == reason) {
                Some((_, total)) => *total += n,
                None => out.push((reason, n)),
            }
        }
        out
    }
}

impl Publisher {
    /// The network sinks' counters, summed (the point's `/metrics`); `None` without one.
    pub fn ship_counters(&self) -> Option<crate::ship::ShipCounters> {
        let mut all = self.sinks.iter().filter_map(|s| s.ship_counters());
        let mut total = all.next()?;
        for c in all {
            total.add(&c);
        }
        Some(total)
    }
}

/// Where the COLATE archive of (`point`, `segment`) lives in `dir`.
pub fn colate_archive_path(dir: &Path, point: u32, segment: u32) -> PathBuf {
    dir.join(format!("colate-point{point}-segment{segment}.archive"))
}

/// The kinds a point publishes, with the segment of each message: a one-point synopsis (the
/// fridge) on [`LOCAL_SEGMENT`], every two-point synopsis on both directions' segments.
pub fn planned_messages(ids: &PointIds, set: &SynopsisSet) -> Vec<(SynopsisKind, u32)> {
    let mut v = Vec::new();
    for k in set.kinds() {
        if !k.is_two_point() {
            v.push((k, LOCAL_SEGMENT));
        } else {
            v.push((k, ids.forward_segment));
            v.push((k, ids.reverse_segment));
        }
    }
    v
}

#[cfg(test)]
mod tests;
