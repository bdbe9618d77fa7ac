//! Where harvested epochs go: the boundary between the runtime (harvest, merge, encode) and the
//! outputs (local JSON lines, the network shipper to the peer).
//!
//! The control thread turns every merged (epoch, synopsis, direction) into one
//! [`EpochMessage`] and hands it to each configured [`EpochSink`]. Sinks run on the control
//! thread: they must not block it for long (a network sink queues and ships from its own
//! thread). Nothing here sees a packet.

use serde::{Serialize, Serializer};
use std::sync::Arc;
use wirelat_dataplane::synopsis::SynopsisKind;
use wirelat_dataplane::synopsis::rda::TimestampCache;

/// An epoch's RDA (id, timestamp) pairs as the publisher hands them to the sinks to retain.
#[derive(Clone, Copy, Debug)]
pub enum RdaPairs<'a> {
    /// The merged cache's sorted run, moved out of the accumulator (traded for a spare buffer,
    /// [`EpochSink::spare_rda_run`]) and shared by every sink that keeps it: none copies it.
    Run(&'a Arc<Vec<(u64, u64)>>),
    /// The merged cache itself (its pairs in the table, or no spare buffer to trade): a sink
    /// that keeps the pairs copies them.
    Cache(&'a TimestampCache),
}

impl RdaPairs<'_> {
    /// Ids held (excluded ones included).
    pub fn len(&self) -> usize {
        match self {
            RdaPairs::Run(run) => run.len(),
            RdaPairs::Cache(cache) => cache.len(),
        }
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Segment number used for single-point synopses (the fridge), which belong to no segment.
pub const LOCAL_SEGMENT: u32 = 0;

/// One synopsis of one epoch of one measurement point, encoded.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EpochMessage {
    /// The point that measured it (`[point] id`).
    pub point: u32,
    /// The segment it belongs to: the configured segment id of the direction the packets
    /// travelled (two-point synopses), or [`LOCAL_SEGMENT`] for the fridge.
    pub segment: u32,
    /// Epoch number k: the window [k·E, (k+1)·E) of the packet timestamp.
    pub epoch: u64,
    /// E, in ns.
    pub epoch_len_ns: u64,
    /// Which synopsis.
    pub kind: SynopsisKind,
    /// Fingerprint of the synopsis configuration (equal at both points of a segment).
    pub fingerprint: u64,
    /// False when some worker skipped this epoch (control overrun): the synopsis misses packets.
    pub complete: bool,
    /// `Synopsis::encode()` of the merged synopsis (header and body).
    #[serde(skip)]
    pub body: Vec<u8>,
    /// Per-epoch counters and, for the fridge, its distributions: what the local JSON-lines
    /// sink prints for this synopsis. Written with its keys sorted at every depth, as when it
    /// was a JSON object ([`sorted_keys`]).
    #[serde(serialize_with = "sorted_keys")]
    pub summary: Summary,
}

/// Serialises `v` through a `serde_json::Value`, whose objects are sorted maps (serde_json is
/// built without `preserve_order`): the summary's keys come out sorted at every depth, as the
/// JSON lines have always had them, whatever the field order of the types inside (the
/// fridge's report among them).
fn sorted_keys<T: Serialize, S: Serializer>(v: &T, s: S) -> Result<S::Ok, S::Error> {
    serde_json::to_value(v).map_err(serde::ser::Error::custom)?.serialize(s)
}

/// The summary of one message (see [`EpochMessage::summary`]).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Summary {
    /// A harvested epoch of one synopsis.
    Harvested(Harvested),
    /// A simulated point's message: no harvest behind it.
    Simulated {
        /// Always true.
        simulated: bool,
    },
}

/// The summary of a harvested epoch: how it was merged and encoded, and the synopsis's own
/// counters.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Harvested {
    /// Worker shards merged into it.
    pub shards: usize,
    /// Length of the encoded body.
    pub body_bytes: usize,
    /// The synopsis's counters.
    #[serde(flatten)]
    pub synopsis: SynopsisSummary,
}

impl Harvested {
    /// The summary of a synopsis merged from `shards` shards; `body_bytes` is filled in when
    /// it is encoded.
    pub fn new(shards: usize, synopsis: SynopsisSummary) -> Self {
        Self { shards, body_bytes: 0, synopsis }
    }
}

pub use crate::control_side::SynopsisSummary;

/// Packets measured per direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct MeasuredBoth {
    /// Forward.
    pub forward: u64,
    /// Reverse.
    pub reverse: u64,
}

/// Receives harvested epochs.
pub trait EpochSink: Send {
    /// Takes one encoded epoch synopsis.
    fn deliver(&mut self, msg: &EpochMessage);

    /// Keeps the RDA ID→timestamp pairs of (`segment`, `epoch`) so the peer can look up the
    /// timestamps of reconciled packets later. Sinks that serve no look-ups drop them.
    fn retain_rda_cache(&mut self, _segment: u32, _epoch: u64, _pairs: RdaPairs<'_>) {}

    /// A buffer with room for at least `min_pairs` pairs, for the publisher to trade for the
    /// sorted run of an epoch of `segment` ([`RdaPairs::Run`]): one that a released cache left.
    /// `None` by default (and from a sink that keeps nothing of `segment`: a run moved for no
    /// keeper would only be freed); then the publisher hands the cache over to be copied.
    fn spare_rda_run(&mut self, _segment: u32, _min_pairs: usize) -> Option<Vec<(u64, u64)>> {
        None
    }

    /// Every epoch below `passed_epoch` has been delivered, or had nothing to deliver: lets the
    /// peer tell an epoch without packets at this point from one still on its way. Optional:
    /// delivering epoch k implies it for k, and `close` implies it for every epoch.
    fn progress(&mut self, _passed_epoch: u64) {}

    /// Called once every worker has finished and the last epoch was delivered: flush, and for a
    /// network sink, wait (bounded) until the peer has acknowledged what can be acknowledged.
    fn close(&mut self) {}

    /// Epoch synopses this sink gave up (they will never reach their destination), by reason;
    /// only reasons with a count above 0. A run that lost any must end with a non-zero exit
    /// and this summary ([`loss_summary`]).
    fn losses(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }

    /// A network sink's counters (for the point's `/metrics`); `None` for local sinks.
    fn ship_counters(&self) -> Option<crate::ship::ShipCounters> {
        None
    }
}

/// One sentence for losses as [`EpochSink::losses`] returns them, `None` when nothing was lost:
/// "N epoch synopses were not delivered (reason n, ...)".
pub fn loss_summary(losses: &[(&'static str, u64)]) -> Option<String> {
    let total: u64 = losses.iter().map(|(_, n)| n).sum();
    (total > 0).then(|| {
        let reasons: Vec<String> =
            losses.iter().filter(|(_, n)| *n > 0).map(|(r, n)| format!("{r} {n}")).collect();
        format!("{total} epoch synopses were not delivered to the peer ({})", reasons.join(", "))
    })
}

/// A sink that passes on only the messages of some segments (a `[[route]]`): RDA caches of the
/// same segments, and progress and close, go through unchanged.
pub struct RouteSink<S> {
    inner: S,
    owns: Box<dyn Fn(u32) -> bool + Send>,
}

impl<S: EpochSink> RouteSink<S> {
    /// `inner`, for the segments `owns` accepts.
    pub fn new(inner: S, owns: impl Fn(u32) -> bool + Send + 'static) -> Self {
        Self { inner, owns: Box::new(owns) }
    }
}

impl<S: EpochSink> EpochSink for RouteSink<S> {
    fn deliver(&mut self, msg: &EpochMessage) {
        if (self.owns)(msg.segment) {
            self.inner.deliver(msg);
        }
    }

    fn retain_rda_cache(&mut self, segment: u32, epoch: u64, pairs: RdaPairs<'_>) {
        if (self.owns)(segment) {
            self.inner.retain_rda_cache(segment, epoch, pairs);
        }
    }

    fn spare_rda_run(&mut self, segment: u32, min_pairs: usize) -> Option<Vec<(u64, u64)>> {
        if (self.owns)(segment) { self.inner.spare_rda_run(segment, min_pairs) } else { None }
    }

    fn progress(&mut self, passed_epoch: u64) {
        self.inner.progress(passed_epoch);
    }

    fn close(&mut self) {
        self.inner.close();
    }

    fn losses(&self) -> Vec<(&'static str, u64)> {
        self.inner.losses()
    }

    fn ship_counters(&self) -> Option<crate::ship::ShipCounters> {
        self.inner.ship_counters()
    }
}
