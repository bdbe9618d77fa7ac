//! Epochs on the data path: each worker's ring of synopsis buffers and the lock-free hand-over
//! to the control thread.
//!
//! An epoch is the half-open window [k·E, (k+1)·E) of the packet timestamp, so both measurement
//! points and a replayed trace agree on it without talking. A worker fills one buffer per epoch
//! and switches by itself when a packet's timestamp (or, when idle, its clock) crosses the
//! boundary: one compare per packet against a cached boundary.
//!
//! Hand-over, per worker, through two bounded lock-free queues (crossbeam `ArrayQueue`) that move
//! boxed buffers without copying or allocating:
//!
//! ```text
//!  worker ── full: (epoch, buffer) ──► control  merges shards of an epoch, then resets the
//!  worker ◄────── free: buffer ─────── control  buffer and gives it back
//! ```
//!
//! The worker publishes the epoch it is in (a cache-padded atomic, stored after it pushed the
//! previous buffer); the control thread merges epoch k once every worker is past k. If no free
//! buffer is waiting at a boundary (the control thread fell behind) the worker does not wait: it
//! skips measuring that epoch, forwards as always, counts the overrun and reports the skipped
//! epoch so the harvest marks it incomplete.
//!
//! Nothing here allocates, locks or blocks on the worker side after construction.

use crate::synopsis::MergeError;
use crossbeam::queue::ArrayQueue;
use crossbeam::utils::CachePadded;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// A set of per-epoch synopsis buffers, as one worker fills it.
pub trait EpochBuffer: Send + 'static {
    /// Back to empty, keeping allocations (done by the control thread, off the data path).
    fn reset(&mut self);
    /// Adds another worker's shard of the same epoch (exact once settled).
    fn merge_from(&mut self, other: &Self) -> Result<(), MergeError>;
    /// Finishes what the merges deferred ([`crate::synopsis::Synopsis::settle`]): called once
    /// every shard of the epoch is merged, before the epoch is published.
    fn settle(&mut self) {}
    /// Adds every worker's shard of the epoch and settles: equal to `merge_from` of each in
    /// order, then `settle` (the default), but a buffer may read all shards at once
    /// ([`crate::synopsis::Synopsis::merge_all`]). After an error the value is partly merged
    /// (not necessarily as far as the ordered merges would have got): reset it.
    fn merge_all(&mut self, others: &[&Self]) -> Result<(), MergeError> {
        for o in others {
            self.merge_from(o)?;
        }
        self.settle();
        Ok(())
    }
    /// Starts the part of the harvest other threads may share (RDA's filing, on the workers:
    /// [`crate::pipeline::filing`]): `self`, the accumulator, takes what it needs from `shards`
    /// and posts the work. True when something was lent; then [`Self::take_back`] is due, with
    /// the same shards in the same order, before [`Self::drain_all`]. The default lends nothing.
    fn lend(&mut self, _shards: &mut [&mut Self]) -> Result<bool, MergeError> {
        Ok(false)
    }
    /// True when every part of what [`Self::lend`] posted has been taken by a helper, so
    /// [`Self::take_back`] waits at most for the parts in progress.
    fn lent_taken(&self) -> bool {
        true
    }
    /// Finishes what [`Self::lend`] started (doing itself what no helper took); the drain that
    /// follows leaves it as it is.
    fn take_back(&mut self, _shards: &mut [&mut Self]) {}
    /// The harvest's step: `self` becomes the settled merge of `shards` (dropping what it held)
    /// and every shard is left reset, also after an error, ready to go back to its worker.
    /// Equal to `reset`, `merge_all`, then `reset` of each shard (the default); a buffer may
    /// zero each shard as it reads it ([`crate::synopsis::Synopsis::drain_all`]).
    fn drain_all(&mut self, shards: &mut [&mut Self]) -> Result<(), MergeError> {
        self.reset();
        let read: Vec<&Self> = shards.iter().map(|s| &**s).collect();
        let merged = self.merge_all(&read);
        for s in shards.iter_mut() {
            s.reset();
        }
        merged
    }
}

/// Maps timestamps to epoch numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EpochClock {
    len_ns: u64,
}

impl EpochClock {
    /// Epochs of `len_ns` nanoseconds; `None` for 0.
    pub fn new(len_ns: u64) -> Option<Self> {
        (len_ns > 0).then_some(Self { len_ns })
    }
    /// Epoch length in ns.
    pub fn len_ns(&self) -> u64 {
        self.len_ns
    }
    /// The epoch holding `ts_ns`.
    #[inline(always)]
    pub fn epoch_of(&self, ts_ns: u64) -> u64 {
        ts_ns / self.len_ns
    }
    /// First ns of epoch `k` (saturating).
    pub fn start_ns(&self, k: u64) -> u64 {
        k.saturating_mul(self.len_ns)
    }
}

/// A filled buffer on its way to the control thread.
pub struct Filled<B> {
    /// The epoch it covers.
    pub epoch: u64,
    /// The worker's shard for that epoch.
    pub buffer: Box<B>,
}

/// Position value meaning "this worker has no clock yet".
const NOT_STARTED: u64 = 0;
/// Position value meaning "this worker has finished".
const FINISHED: u64 = u64::MAX;

/// What one worker and the control thread share.
pub struct EpochLink<B> {
    full: ArrayQueue<Filled<B>>,
    free: ArrayQueue<Box<B>>,
    skipped: ArrayQueue<u64>,
    /// Epoch the worker is in, plus one; [`NOT_STARTED`] or [`FINISHED`].
    position: CachePadded<AtomicU64>,
    overrun_epochs: CachePadded<AtomicU64>,
}

impl<B: EpochBuffer> EpochLink<B> {
    /// A link with `ring` buffers (at least 2) built by `make`, and the writer side for the
    /// worker. All allocation happens here, on the calling thread.
    pub fn new(ring: usize, clock: EpochClock, make: impl Fn() -> B) -> (Arc<Self>, EpochWriter<B>) {
        let (link, pending) = Self::deferred(ring, clock);
        (link, pending.build(make))
    }

    /// A link whose buffers are not built yet: the worker builds them itself with
    /// [`PendingWriter::build`] on its own core, so that it is the first to touch their pages
    /// and the kernel places them on its NUMA node (first-touch policy). The control thread may
    /// hold the link before that: it simply finds nothing to harvest yet.
    pub fn deferred(ring: usize, clock: EpochClock) -> (Arc<Self>, PendingWriter<B>) {
        let ring = ring.max(2);
        let link = Arc::new(Self {
            full: ArrayQueue::new(ring),
            free: ArrayQueue::new(ring),
            skipped: ArrayQueue::new(64),
            position: CachePadded::new(AtomicU64::new(NOT_STARTED)),
            overrun_epochs: CachePadded::new(AtomicU64::new(0)),
        });
        (link.clone(), PendingWriter { link, clock, ring })
    }

    /// The first epoch this worker has not finished: `None` before it has a clock,
    /// `Some(u64::MAX)` once it has finished.
    pub fn watermark(&self) -> Option<u64> {
        match self.position.load(Ordering::Acquire) {
            NOT_STARTED => None,
            FINISHED => Some(u64::MAX),
            p => Some(p - 1),
        }
    }

    /// Takes the next filled buffer, if any.
    pub fn pop_full(&self) -> Option<Filled<B>> {
        self.full.pop()
    }

    /// Gives a (reset) buffer back to the worker. Returns it if the ring is already full,
    /// which only happens if buffers from elsewhere are pushed.
    pub fn push_free(&self, buffer: Box<B>) -> Result<(), Box<B>> {
        self.free.push(buffer)
    }

    /// True when no filled buffer is waiting for the control thread.
    pub fn is_drained(&self) -> bool {
        self.full.is_empty()
    }

    /// Takes the next epoch the worker had to skip, if any.
    pub fn pop_skipped(&self) -> Option<u64> {
        self.skipped.pop()
    }

    /// Epochs this worker could not measure because no free buffer was waiting.
    pub fn overrun_epochs(&self) -> u64 {
        self.overrun_epochs.load(Ordering::Relaxed)
    }
}

/// Counts kept by a worker's [`EpochWriter`] (plain integers: only the worker writes them).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriterCounters {
    /// Epochs handed to the control thread.
    pub epochs_closed: u64,
    /// Epochs not measured because the control thread had not returned a buffer in time.
    pub overrun_epochs: u64,
    /// Packets not measured during such epochs.
    pub skipped_packets: u64,
    /// Packets whose timestamp fell before the current epoch (clock went backwards or a queue
    /// lagged); not measured.
    pub late_packets: u64,
    /// Skipped epochs the control thread could not be told about (its note queue was full).
    pub unreported_skips: u64,
}

/// The worker's side of an [`EpochLink::deferred`] link before its buffers exist.
pub struct PendingWriter<B> {
    link: Arc<EpochLink<B>>,
    clock: EpochClock,
    ring: usize,
}

impl<B: EpochBuffer> PendingWriter<B> {
    /// Builds the link's `ring` buffers with `make` on the calling thread (every allocation of
    /// the worker's ring happens here) and returns the writer.
    pub fn build(self, make: impl Fn() -> B) -> EpochWriter<B> {
        for _ in 1..self.ring {
            // Cannot fail: the queue holds `ring` and we push `ring - 1`.
            let _ = self.link.free.push(Box::new(make()));
        }
        EpochWriter {
            link: self.link,
            clock: self.clock,
            current: Some(Box::new(make())),
            used: false,
            skipping: false,
            epoch: 0,
            start_ns: 0,
            next_ns: 0,
            counters: WriterCounters::default(),
        }
    }
}

/// The worker's side of an [`EpochLink`].
pub struct EpochWriter<B> {
    link: Arc<EpochLink<B>>,
    clock: EpochClock,
    current: Option<Box<B>>,
    used: bool,
    /// The current epoch is overrun: no buffer was free when its first packet came.
    skipping: bool,
    epoch: u64,
    start_ns: u64,
    next_ns: u64,
    counters: WriterCounters,
}

impl<B: EpochBuffer> EpochWriter<B> {
    /// The buffer a packet stamped `ts_ns` goes into, switching epoch first if the packet
    /// crossed the boundary; `None` (counted) if the packet is late or its epoch is skipped.
    #[inline(always)]
    pub fn buffer_for(&mut self, ts_ns: u64) -> Option<&mut B> {
        if ts_ns >= self.next_ns {
            self.advance(ts_ns);
        } else if ts_ns < self.start_ns {
            self.counters.late_packets += 1;
            return None;
        }
        if self.current.is_none() && !self.skipping {
            // An idle tick moved into this epoch without a buffer: the first packet takes one.
            self.acquire();
        }
        match self.current.as_deref_mut() {
            Some(b) => {
                self.used = true;
                Some(b)
            }
            None => {
                self.counters.skipped_packets += 1;
                None
            }
        }
    }

    /// True if a packet stamped `ts_ns` would cross into a new epoch while no free buffer is
    /// waiting, i.e. [`Self::buffer_for`] would count an overrun. Lets a worker that must not lose
    /// measurements (trace replay) wait for the control thread instead.
    #[inline]
    pub fn would_overrun(&self, ts_ns: u64) -> bool {
        let needs_buffer = if ts_ns >= self.next_ns {
            self.used || self.current.is_none()
        } else {
            ts_ns >= self.start_ns && self.current.is_none() && !self.skipping
        };
        needs_buffer && self.link.free.is_empty()
    }

    /// Lets the clock advance without a packet (idle polls), so the control thread is not held
    /// up by a quiet queue. Takes no buffer (the next packet does), so an idle worker never
    /// overruns.
    #[inline]
    pub fn tick(&mut self, now_ns: u64) {
        if now_ns >= self.next_ns {
            self.move_to(now_ns);
        }
    }

    /// The buffer packets of the current epoch go into, without switching epoch (for
    /// prefetch hints); `None` while the epoch is skipped.
    #[inline(always)]
    pub fn current(&self) -> Option<&B> {
        self.current.as_deref()
    }

    /// The epoch this worker is in (meaningful once it has seen a clock).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// This worker's counters.
    pub fn counters(&self) -> WriterCounters {
        self.counters
    }

    /// Hands over the last buffer and tells the control thread this worker is done.
    pub fn finish(&mut self) {
        self.close_current();
        self.link.position.store(FINISHED, Ordering::Release);
    }

    /// Moves to the epoch of `ts_ns` with a buffer for it (or counts the overrun).
    #[cold]
    #[inline(never)]
    fn advance(&mut self, ts_ns: u64) {
        self.move_to(ts_ns);
        if self.current.is_none() {
            self.acquire();
        }
    }

    /// Takes a free buffer for the current epoch, or counts the epoch as overrun.
    #[cold]
    fn acquire(&mut self) {
        match self.link.free.pop() {
            Some(b) => self.current = Some(b),
            None => {
                self.skipping = true;
                self.counters.overrun_epochs += 1;
                self.link.overrun_epochs.fetch_add(1, Ordering::Relaxed);
                if self.link.skipped.push(self.epoch).is_err() {
                    self.counters.unreported_skips += 1;
                }
            }
        }
    }

    /// Hands over the current buffer if it was used and moves to the epoch of `ts_ns`, without
    /// taking a buffer.
    #[cold]
    #[inline(never)]
    fn move_to(&mut self, ts_ns: u64) {
        let k = self.clock.epoch_of(ts_ns);
        let started = self.link.position.load(Ordering::Relaxed) != NOT_STARTED;
        if started {
            self.close_current();
        }
        self.skipping = false;
        self.epoch = k;
        self.start_ns = self.clock.start_ns(k);
        self.next_ns = self.clock.start_ns(k.saturating_add(1));
        // Published after the previous buffer was pushed: a control thread that sees this
        // position also sees that buffer in the full queue.
        self.link.position.store(k.saturating_add(1).min(FINISHED - 1), Ordering::Release);
    }

    fn close_current(&mut self) {
        if self.used {
            if let Some(buffer) = self.current.take() {
                self.counters.epochs_closed += 1;
                // Cannot fail: the full queue has room for every buffer of the ring.
                if let Err(f) = self.link.full.push(Filled { epoch: self.epoch, buffer }) {
                    self.current = Some(f.buffer);
                }
            }
            self.used = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default, Debug, PartialEq)]
    struct Sum(u64, u64);
    impl EpochBuffer for Sum {
        fn reset(&mut self) {
            *self = Sum::default();
        }
        fn merge_from(&mut self, o: &Self) -> Result<(), MergeError> {
            self.0 += o.0;
            self.1 += o.1;
            Ok(())
        }
    }

    fn drain(link: &EpochLink<Sum>) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        while let Some(f) = link.pop_full() {
            out.push((f.epoch, f.buffer.0));
            let mut b = f.buffer;
            b.reset();
            assert!(link.push_free(b).is_ok());
        }
        out
    }

    #[test]
    fn packets_land_in_the_epoch_of_their_timestamp() {
        let (link, mut w) = EpochLink::new(3, EpochClock::new(100).unwrap(), Sum::default);
        assert_eq!(link.watermark(), None);
        for ts in [5, 50, 99, 100, 150, 420] {
            w.buffer_for(ts).unwrap().0 += 1;
        }
        assert_eq!(link.watermark(), Some(4));
        assert_eq!(drain(&link), vec![(0, 3), (1, 2)]);
        // A late packet is counted, not measured.
        assert!(w.buffer_for(399).is_none());
        assert_eq!(w.counters().late_packets, 1);
        w.finish();
        assert_eq!(link.watermark(), Some(u64::MAX));
        assert_eq!(drain(&link), vec![(4, 1)]);
    }

    #[test]
    fn a_deferred_link_has_its_buffers_built_by_the_worker_thread() {
        let (link, pending) = EpochLink::deferred(3, EpochClock::new(100).unwrap());
        // The control side may hold the link before the worker built anything.
        assert!(link.pop_full().is_none() && link.free.is_empty());
        let builders = std::sync::Mutex::new(Vec::new());
        let worker = std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    let mut w = pending.build(|| {
                        builders.lock().unwrap().push(std::thread::current().id());
                        Sum::default()
                    });
                    for ts in [5, 150] {
                        w.buffer_for(ts).unwrap().0 += 1;
                    }
                    w.finish();
                    std::thread::current().id()
                })
                .join()
                .unwrap()
        });
        // Every buffer of the ring (three), and none on this thread.
        assert_eq!(builders.into_inner().unwrap(), vec![worker; 3]);
        assert_eq!(drain(&link), vec![(0, 1), (1, 1)]);
    }

    #[test]
    fn idle_ticks_advance_without_handing_over_empty_buffers() {
        let (link, mut w) = EpochLink::new(2, EpochClock::new(10).unwrap(), Sum::default);
        w.tick(35);
        assert_eq!(link.watermark(), Some(3));
        w.buffer_for(36).unwrap().0 += 1;
        w.tick(1000);
        assert_eq!(link.watermark(), Some(100));
        assert_eq!(drain(&link), vec![(3, 1)]);
    }

    #[test]
    fn a_slow_control_thread_causes_counted_overruns_not_stalls() {
        let (link, mut w) = EpochLink::new(2, EpochClock::new(10).unwrap(), Sum::default);
        // Nobody drains: epoch 0 fills the first buffer, epoch 1 the second, epoch 2 finds no
        // free buffer.
        assert!(!w.would_overrun(1));
        for ts in [1, 11, 21, 22] {
            if let Some(b) = w.buffer_for(ts) {
                b.0 += 1;
            }
        }
        let c = w.counters();
        assert_eq!(c.overrun_epochs, 1);
        assert_eq!(c.skipped_packets, 2);
        assert_eq!(link.overrun_epochs(), 1);
        assert_eq!(link.pop_skipped(), Some(2));
        assert!(w.would_overrun(31));
        // Epoch 3 gets a buffer again once control catches up.
        assert_eq!(drain(&link), vec![(0, 1), (1, 1)]);
        w.buffer_for(35).unwrap().0 += 1;
        assert_eq!(w.epoch(), 3);
        assert_eq!(w.counters().overrun_epochs, 1);
    }

    #[test]
    fn idle_ticks_take_no_buffer_so_an_idle_worker_never_overruns() {
        let (link, mut w) = EpochLink::new(2, EpochClock::new(10).unwrap(), Sum::default);
        // Two epochs with packets use both buffers; nobody harvests.
        w.buffer_for(1).unwrap().0 += 1;
        w.buffer_for(11).unwrap().0 += 1;
        // Idle ticks through many epochs: no buffer needed, nothing counted.
        w.tick(25);
        w.tick(95);
        assert_eq!(w.counters().overrun_epochs, 0);
        assert_eq!(link.watermark(), Some(9));
        // A packet in the ticked-to epoch needs a buffer: with none free it would overrun...
        assert!(w.would_overrun(96));
        // ...until the control thread returns one.
        assert_eq!(drain(&link), vec![(0, 1), (1, 1)]);
        assert!(!w.would_overrun(96));
        w.buffer_for(96).unwrap().0 += 1;
        assert_eq!(w.counters().overrun_epochs, 0);
        w.finish();
        assert_eq!(drain(&link), vec![(9, 1)]);
        // Without a free buffer, the first packet of a ticked-to epoch counts one overrun.
        let (_link2, mut w2) = EpochLink::new(2, EpochClock::new(10).unwrap(), Sum::default);
        w2.buffer_for(1).unwrap().0 += 1;
        w2.buffer_for(11).unwrap().0 += 1;
        w2.tick(30);
        assert!(w2.buffer_for(31).is_none());
        assert!(w2.buffer_for(32).is_none());
        let c = w2.counters();
        assert_eq!((c.overrun_epochs, c.skipped_packets), (1, 2));
    }
}
