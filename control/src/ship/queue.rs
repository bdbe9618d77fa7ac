//! The point's queue of epoch synopses not yet acknowledged by the peer: bounded in memory,
//! optionally spilled to a directory, resent after every reconnect, dropped only on the
//! peer's acknowledgement or a counted give-up.
//!
//! Entries keep their enqueue order; the shipper sends them in that order, at most
//! `[ship] window_bytes` unacknowledged at a time, and announces a progress watermark no
//! higher than the oldest epoch with an entry not yet sent (so the peer never takes an epoch
//! for empty while its synopsis is still on the way). Spill files hold the frame as on
//! the wire without its tag (`p<point>-s<segment>-e<epoch>-k<kind>.wlq`); they are written to
//! a temporary name and renamed, and checked (checksum) when loaded at start-up.

use crate::wire::{DEFAULT_MAX_BODY_BYTES, EpochFrame, GiveUp, Message, MessageKey};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Limits of a queue.
#[derive(Clone, Debug)]
pub struct QueueLimits {
    /// Most entries held in memory.
    pub memory_messages: usize,
    /// Most frame bytes held in memory.
    pub memory_bytes: u64,
    /// Where entries go when memory is full (and every entry with `spill_all`).
    pub spill_dir: Option<PathBuf>,
    /// Most bytes in the spill directory.
    pub spill_bytes: u64,
    /// Write every entry to the spill directory as it is queued (survives a crash).
    pub spill_all: bool,
}

/// Give-up counters by reason.
#[derive(Debug, Default)]
pub struct GiveUpCounters([AtomicU64; GiveUp::ALL.len()]);

impl GiveUpCounters {
    /// Counts one give-up.
    pub fn add(&self, g: GiveUp) {
        if let Some(c) = self.0.get(g as usize) {
            c.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// (reason, count) for every reason.
    pub fn snapshot(&self) -> Vec<(GiveUp, u64)> {
        GiveUp::ALL.into_iter().map(|g| (g, self.get(g))).collect()
    }

    /// One reason's count.
    pub fn get(&self, g: GiveUp) -> u64 {
        self.0.get(g as usize).map_or(0, |c| c.load(Ordering::Relaxed))
    }

    /// Sum over reasons.
    pub fn total(&self) -> u64 {
        GiveUp::ALL.into_iter().map(|g| self.get(g)).sum()
    }
}

struct Entry {
    key: MessageKey,
    frame: Option<Arc<Vec<u8>>>,
    spill: Option<PathBuf>,
    bytes: u64,
    enqueued: Instant,
    sent: bool,
}

/// What the shipper should send next.
pub struct Work {
    /// Frames in enqueue order: (key, frame bytes or the spill file to read them from).
    pub items: Vec<(MessageKey, FrameSource)>,
    /// The watermark to announce after them, when `items` holds every unsent entry.
    pub progress: Option<u64>,
}

/// Where a frame's bytes are.
pub enum FrameSource {
    /// In memory.
    Memory(Arc<Vec<u8>>),
    /// In this spill file only.
    Disk(PathBuf),
}

/// What happened to an offered entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Offer {
    /// Queued (in memory, on disk or both).
    Queued,
    /// An entry with this key is already queued; the new one was dropped.
    Duplicate,
    /// Given up, with this reason.
    GivenUp(GiveUp),
}

/// The queue (not thread-safe by itself; the sink wraps it in a mutex).
pub struct Queue {
    limits: QueueLimits,
    entries: BTreeMap<u64, Entry>,
    by_key: HashMap<MessageKey, u64>,
    next_seq: u64,
    cursor: u64,
    memory_messages: usize,
    memory_bytes: u64,
    spill_bytes: u64,
    watermark: u64,
    announced: Option<u64>,
    /// With `spill_all`: entries kept in memory only because writing them to disk failed
    /// (disk full, spill_bytes reached): a crash of the point would lose them.
    not_crash_safe: u64,
    /// Bytes sent on this connection and not acknowledged yet (what the send window counts).
    in_flight_bytes: u64,
    /// Unsent entries per epoch: the watermark a window-limited shipper may announce is the
    /// oldest of them (entries are not in epoch order after a spill directory was loaded).
    unsent_epochs: BTreeMap<u64, usize>,
    /// When the last acknowledgement came (or the connection started).
    last_ack: Instant,
}

/// How long a full send window waits for an acknowledgement before it lets one more batch
/// go anyway: a group that needs more of this point's synopses than the window holds (a
/// `[report] fridge_epochs` or `[colate] windows` span larger than the window) would
/// otherwise wait forever.
pub const WINDOW_STALL: Duration = Duration::from_secs(1);

impl Queue {
    /// An empty queue.
    pub fn new(limits: QueueLimits) -> Self {
        Self {
            limits,
            entries: BTreeMap::new(),
            by_key: HashMap::new(),
            next_seq: 0,
            cursor: 0,
            memory_messages: 0,
            memory_bytes: 0,
            spill_bytes: 0,
            watermark: 0,
            announced: None,
            not_crash_safe: 0,
            in_flight_bytes: 0,
            unsent_epochs: BTreeMap::new(),
            last_ack: Instant::now(),
        }
    }

    /// Entries not yet acknowledged.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when every entry was acknowledged.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// With `spill_all`: entries queued in memory only because writing them to the spill
    /// directory failed (so a crash of the point would have lost them), since start.
    pub fn not_crash_safe(&self) -> u64 {
        self.not_crash_safe
    }

    /// Entries held only on disk.
    pub fn spilled(&self) -> usize {
        self.entries.values().filter(|e| e.frame.is_none()).count()
    }

    /// Raises the watermark (every epoch below it was delivered).
    pub fn advance_watermark(&mut self, w: u64) {
        self.watermark = self.watermark.max(w);
    }

    /// The current watermark.
    pub fn watermark(&self) -> u64 {
        self.watermark
    }

    /// What a new connection may claim before resending: every epoch below it was delivered
    /// *and* acknowledged or given up (the watermark, lowered to the oldest unacknowledged
    /// entry, which is about to be sent again).
    pub fn safe_watermark(&self) -> u64 {
        self.entries.values().map(|e| e.key.epoch).min().map_or(self.watermark, |e| e.min(self.watermark))
    }

    fn memory_has_room(&self, bytes: u64) -> bool {
        self.memory_messages < self.limits.memory_messages
            && self.memory_bytes.saturating_add(bytes) <= self.limits.memory_bytes
    }

    /// True when an entry of `bytes` would be queued now (in memory or in the spill
    /// directory) rather than given up as `queue_full`.
    pub fn has_room(&self, bytes: u64) -> bool {
        self.memory_has_room(bytes)
            || (self.limits.spill_dir.is_some()
                && self.spill_bytes.saturating_add(bytes) <= self.limits.spill_bytes)
    }

    fn spill_path(dir: &Path, key: &MessageKey) -> PathBuf {
        dir.join(format!("p{}-s{}-e{}-k{}.wlq", key.point, key.segment, key.epoch, key.kind as u8))
    }

    fn write_spill(&mut self, key: &MessageKey, frame: &[u8]) -> Result<Option<PathBuf>, GiveUp> {
        let Some(dir) = self.limits.spill_dir.clone() else { return Ok(None) };
        let bytes = frame.len() as u64;
        if self.spill_bytes.saturating_add(bytes) > self.limits.spill_bytes {
            return Err(GiveUp::QueueFull);
        }
        let path = Self::spill_path(&dir, key);
        let tmp = path.with_extension("tmp");
        let written = std::fs::write(&tmp, frame).and_then(|()| std::fs::rename(&tmp, &path));
        match written {
            Ok(()) => {
                self.spill_bytes += bytes;
                Ok(Some(path))
            }
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                tracing::warn!(dir = %dir.display(), error = %e, "cannot spill an epoch synopsis");
                Err(GiveUp::SpillFailed)
            }
        }
    }

    /// Queues the frame of `key`.
    pub fn offer(&mut self, key: MessageKey, frame: Vec<u8>) -> Offer {
        if self.by_key.contains_key(&key) {
            return Offer::Duplicate;
        }
        let bytes = frame.len() as u64;
        let in_memory = self.memory_has_room(bytes);
        let spill = if self.limits.spill_all || !in_memory {
            match self.write_spill(&key, &frame) {
                Ok(p) => p,
                Err(g) if !in_memory => return Offer::GivenUp(g),
                // Spilling everything failed, but memory has room: keep it there, and count that
                // this one would not survive a crash.
                Err(_) => {
                    self.not_crash_safe += 1;
                    None
                }
            }
        } else {
            None
        };
        if !in_memory && spill.is_none() {
            return Offer::GivenUp(GiveUp::QueueFull);
        }
        let frame = in_memory.then(|| Arc::new(frame));
        if frame.is_some() {
            self.memory_messages += 1;
            self.memory_bytes += bytes;
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        self.entries.insert(seq, Entry { key, frame, spill, bytes, enqueued: Instant::now(), sent: false });
        self.by_key.insert(key, seq);
        *self.unsent_epochs.entry(key.epoch).or_default() += 1;
        Offer::Queued
    }

    fn remove_seq(&mut self, seq: u64) -> Option<Entry> {
        let e = self.entries.remove(&seq)?;
        self.by_key.remove(&e.key);
        if e.sent {
            self.in_flight_bytes = self.in_flight_bytes.saturating_sub(e.bytes);
        } else {
            self.unsent_removed(e.key.epoch);
        }
        if e.frame.is_some() {
            self.memory_messages -= 1;
            self.memory_bytes -= e.bytes;
        }
        if let Some(p) = &e.spill {
            let _ = std::fs::remove_file(p);
            self.spill_bytes = self.spill_bytes.saturating_sub(e.bytes);
        }
        Some(e)
    }

    /// The peer consumed `key`: drop it (and its spill file). False if it was not queued.
    pub fn ack(&mut self, key: &MessageKey) -> bool {
        self.last_ack = Instant::now();
        match self.by_key.get(key).copied() {
            Some(seq) => self.remove_seq(seq).is_some(),
            None => false,
        }
    }

    /// A new connection: everything unacknowledged is sent again. Returns how many of those
    /// were sent on an earlier connection (the resends: what was queued while no connection
    /// was up goes out for the first time).
    pub fn mark_all_unsent(&mut self) -> u64 {
        self.unsent_epochs.clear();
        let mut sent_before = 0;
        for e in self.entries.values_mut() {
            sent_before += u64::from(e.sent);
            e.sent = false;
            *self.unsent_epochs.entry(e.key.epoch).or_default() += 1;
        }
        self.cursor = 0;
        self.announced = None;
        self.in_flight_bytes = 0;
        self.last_ack = Instant::now();
        sent_before
    }

    fn unsent_removed(&mut self, epoch: u64) {
        if let Some(n) = self.unsent_epochs.get_mut(&epoch) {
            *n -= 1;
            if *n == 0 {
                self.unsent_epochs.remove(&epoch);
            }
        }
    }

    /// Bytes sent on this connection and not acknowledged yet.
    pub fn in_flight_bytes(&self) -> u64 {
        self.in_flight_bytes
    }

    /// True when the send window (`window` bytes unacknowledged) lets an entry of `bytes` go:
    /// always when nothing is in flight, and when no acknowledgement came for
    /// [`WINDOW_STALL`] (see there).
    fn window_open(&self, window: u64, bytes: u64) -> bool {
        self.in_flight_bytes == 0
            || self.in_flight_bytes.saturating_add(bytes) <= window
            || self.last_ack.elapsed() >= WINDOW_STALL
    }

    /// The watermark that may be announced now: every epoch below it was sent (or
    /// acknowledged), so the peer may take what it did not receive below it for empty.
    fn announceable(&self) -> u64 {
        self.unsent_epochs.keys().next().map_or(self.watermark, |&e| e.min(self.watermark))
    }

    /// The progress to announce: the announceable watermark when it is new on this connection
    /// (a full send window holds entries back: then the watermark stops at the oldest of them
    /// rather than not being announced at all, which would keep the peer's groups waiting for
    /// this point while their acknowledgements are what the window waits for).
    fn new_progress(&self) -> Option<u64> {
        let w = self.announceable();
        self.announced.is_none_or(|a| w > a).then_some(w)
    }

    /// Up to `max` unsent entries in order (marked sent) within the send `window` (bytes sent
    /// and not acknowledged), and the watermark to announce after them when it moved.
    pub fn next_work(&mut self, max: usize, window: u64) -> Work {
        let mut items = Vec::new();
        let stalled = self.last_ack.elapsed() >= WINDOW_STALL;
        let mut sent_epochs = Vec::new();
        for (&seq, e) in self.entries.range_mut(self.cursor..) {
            if e.sent {
                continue;
            }
            let open = self.in_flight_bytes == 0
                || self.in_flight_bytes.saturating_add(e.bytes) <= window
                || (stalled && items.len() < max);
            if items.len() == max || !open {
                break;
            }
            e.sent = true;
            self.in_flight_bytes += e.bytes;
            sent_epochs.push(e.key.epoch);
            self.cursor = seq + 1;
            let src = match (&e.frame, &e.spill) {
                (Some(f), _) => FrameSource::Memory(f.clone()),
                (None, Some(p)) => FrameSource::Disk(p.clone()),
                // Every entry is in memory or on disk (offer refuses the rest).
                (None, None) => continue,
            };
            items.push((e.key, src));
        }
        if stalled && !items.is_empty() {
            // The stall valve let a batch go: the next one waits for an acknowledgement again.
            self.last_ack = Instant::now();
        }
        for epoch in sent_epochs {
            self.unsent_removed(epoch);
        }
        let progress = self.new_progress();
        if progress.is_some() {
            self.announced = progress;
        }
        Work { items, progress }
    }

    /// True when something may be sent within the send `window`, or a new watermark
    /// announced.
    pub fn has_work(&self, window: u64) -> bool {
        self.entries
            .range(self.cursor..)
            .find(|(_, e)| !e.sent)
            .is_some_and(|(_, e)| self.window_open(window, e.bytes))
            || self.new_progress().is_some()
    }

    /// A frame read back from disk failed: give the entry up.
    pub fn give_up(&mut self, key: &MessageKey) -> bool {
        match self.by_key.get(key).copied() {
            Some(seq) => {
                if let Some(e) = self.entries.get(&seq)
                    && let Some(p) = &e.spill
                {
                    let _ = std::fs::remove_file(p);
                }
                self.remove_seq(seq).is_some()
            }
            None => false,
        }
    }

    /// Removes entries queued longer than `max_age` ago; returns their keys.
    pub fn expire(&mut self, max_age: Duration) -> Vec<MessageKey> {
        let now = Instant::now();
        let old: Vec<u64> = self
            .entries
            .iter()
            .filter(|(_, e)| now.duration_since(e.enqueued) > max_age)
            .map(|(&s, _)| s)
            .collect();
        old.into_iter().filter_map(|s| self.remove_seq(s)).map(|e| e.key).collect()
    }

    /// At close: writes every memory-only entry to the spill directory so the next start
    /// resends it. Returns the keys that could not be kept (no directory, or writing failed).
    pub fn spill_remaining(&mut self) -> Vec<MessageKey> {
        let seqs: Vec<u64> = self.entries.keys().copied().collect();
        let mut lost = Vec::new();
        for seq in seqs {
            let Some(e) = self.entries.get(&seq) else { continue };
            if e.spill.is_some() {
                continue;
            }
            let (key, frame) = (e.key, e.frame.clone());
            let Some(frame) = frame else { continue };
            match self.write_spill(&key, &frame) {
                Ok(Some(p)) => {
                    if let Some(e) = self.entries.get_mut(&seq) {
                        e.spill = Some(p);
                    }
                }
                _ => {
                    lost.push(key);
                    let _ = self.remove_seq(seq);
                }
            }
        }
        lost
    }

    /// Loads the spill directory (at start-up), in epoch order, keeping this `point`'s epoch
    /// synopses that `keep` accepts. Every other file is moved to [`SET_ASIDE_DIR`] under a
    /// name that ends in the reason (never sent: a file of another point would be refused by
    /// the peer and, resent first on every connection, hold back everything behind it).
    pub fn load_spill(&mut self, point: u32, max_body: u32, keep: impl Fn(&EpochFrame) -> bool) -> SpillLoad {
        let mut out = SpillLoad::default();
        let Some(dir) = self.limits.spill_dir.clone() else { return out };
        let Ok(read) = std::fs::read_dir(&dir) else { return out };
        let ours = format!("p{point}-");
        let mut found: Vec<(MessageKey, PathBuf, u64)> = Vec::new();
        for entry in read.flatten() {
            let path = entry.path();
            match path.extension().and_then(|e| e.to_str()) {
                Some("wlq") => {}
                Some("tmp") => {
                    // A write cut short by a crash: never renamed, never acknowledged as queued.
                    let _ = std::fs::remove_file(&path);
                    continue;
                }
                _ => continue,
            }
            let named_ours = path.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with(&ours));
            let bytes = std::fs::read(&path).ok();
            let aside = match bytes
                .as_deref()
                .map(|b| Message::decode(b, max_body.max(DEFAULT_MAX_BODY_BYTES)))
            {
                Some(Ok(Message::Epoch(e))) if e.key.point != point || !named_ours => SetAside::ForeignPoint,
                Some(Ok(Message::Epoch(e))) if keep(&e) => {
                    found.push((e.key, path, bytes.map_or(0, |b| b.len() as u64)));
                    continue;
                }
                Some(Ok(Message::Epoch(_))) => SetAside::ConfigChanged,
                _ => SetAside::Corrupt,
            };
            let moved = set_aside(&dir, &path, aside);
            out.set_aside.push((aside, moved));
        }
        found.sort_by_key(|(k, _, _)| *k);
        out.loaded = found.len();
        for (key, path, bytes) in found {
            if self.by_key.contains_key(&key) {
                continue;
            }
            let seq = self.next_seq;
            self.next_seq += 1;
            self.spill_bytes += bytes;
            self.entries.insert(
                seq,
                Entry { key, frame: None, spill: Some(path), bytes, enqueued: Instant::now(), sent: false },
            );
            self.by_key.insert(key, seq);
        }
        out
    }
}

/// The subdirectory of a spill directory where files that must not be sent are moved.
pub const SET_ASIDE_DIR: &str = "set-aside";

/// Why a spill file was set aside at start-up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetAside {
    /// Unreadable, or not an epoch synopsis frame of this build's wire version.
    Corrupt,
    /// Written under another configuration: its fingerprint is not one this run produces.
    ConfigChanged,
    /// Another point's epoch synopsis (a shared directory, or a changed `[point] id`).
    ForeignPoint,
}

impl SetAside {
    /// The reason, as it ends the set-aside file's name and in logs.
    pub fn name(self) -> &'static str {
        match self {
            SetAside::Corrupt => "corrupt",
            SetAside::ConfigChanged => "config_changed",
            SetAside::ForeignPoint => "foreign_point",
        }
    }
}

/// Moves `path` to `<dir>/set-aside/<name>.<reason>`; returns where it went, or where it was if
/// it could not be moved (it is then removed, so it is never sent).
fn set_aside(dir: &Path, path: &Path, why: SetAside) -> PathBuf {
    let target_dir = dir.join(SET_ASIDE_DIR);
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let target = target_dir.join(format!("{name}.{}", why.name()));
    match std::fs::create_dir_all(&target_dir).and_then(|()| std::fs::rename(path, &target)) {
        Ok(()) => target,
        Err(e) => {
            tracing::warn!(file = %path.display(), error = %e, "cannot set a spill file aside; removing it");
            let _ = std::fs::remove_file(path);
            path.to_owned()
        }
    }
}

/// What [`Queue::load_spill`] found.
#[derive(Debug, Default)]
pub struct SpillLoad {
    /// Epoch synopses loaded (to be resent).
    pub loaded: usize,
    /// Files not loaded, with the reason and where they were moved.
    pub set_aside: Vec<(SetAside, PathBuf)>,
}

#[cfg(test)]
mod tests;
