//! Harvesting epochs from the workers: the control thread's side of
//! [`wirelat_dataplane::epoch`].
//!
//! Each call to [`Harvester::poll`] drains every worker's filled buffers and keeps them per epoch
//! and worker until every worker has left the epoch behind; then it merges that epoch's shards
//! into one accumulator **in worker order** (so a run's merged bytes do not depend on which
//! worker finished first: LDS's flow log lists flows in merge order, and the fridge's float sums
//! depend on it with three or more workers), leaving every worker buffer reset as it goes
//! (`EpochBuffer::drain_all`), emits it and gives the buffers back. Epochs are emitted in epoch
//! order. An epoch any worker had to skip is emitted marked incomplete. Runs per epoch, never
//! per packet.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};
use wirelat_dataplane::epoch::{EpochBuffer, EpochLink};
use wirelat_dataplane::synopsis::MergeError;

/// One merged epoch, as handed to the sink.
pub struct Harvested<'a, B> {
    /// The epoch number (window [k·E, (k+1)·E)).
    pub epoch: u64,
    /// The merged synopses of every worker that saw packets in it (mutable so the consumer can
    /// move parts out, e.g. RDA's timestamp cache; the next epoch's drain replaces whatever
    /// the accumulator then holds).
    pub merged: &'a mut B,
    /// How many worker shards were merged.
    pub shards: usize,
    /// False if some worker skipped this epoch (control overrun): its synopses miss packets.
    pub complete: bool,
}

/// Totals of what the harvester did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HarvestCounters {
    /// Epochs emitted.
    pub epochs: u64,
    /// Of those, epochs marked incomplete.
    pub incomplete_epochs: u64,
    /// Worker shards merged.
    pub shards: u64,
}

/// How long a harvest waits by default for the workers to take the filing it lent them
/// ([`Harvester::with_patience`]).
pub const DEFAULT_PATIENCE: Duration = Duration::from_millis(20);

/// An epoch whose shards lent part of their merge to the workers ([`EpochBuffer::lend`]).
struct Lent<B> {
    epoch: u64,
    shards: Vec<Option<Box<B>>>,
    acc: Box<B>,
    since: Instant,
}

/// Merges the shards of every worker, epoch by epoch.
pub struct Harvester<B> {
    links: Vec<Arc<EpochLink<B>>>,
    /// Per epoch, each worker's shard (index = worker).
    pending: BTreeMap<u64, Vec<Option<Box<B>>>>,
    skipped: BTreeSet<u64>,
    spare: Vec<Box<B>>,
    make: Box<dyn Fn() -> B + Send>,
    counters: HarvestCounters,
    /// The watermark of the last complete poll: every epoch below it was emitted.
    passed: Option<u64>,
    /// The epoch whose merge the workers are helping with, if any: it is emitted (and every
    /// epoch after it waits) once they took every part, after `patience`, or once every worker
    /// has finished.
    lent: Option<Lent<B>>,
    patience: Duration,
    /// Whether helpers go on after every worker finished (offline's emulated workers): else an
    /// epoch harvested then is not lent, and one lent is taken back at once.
    helpers_after_finish: bool,
}

impl<B: EpochBuffer> Harvester<B> {
    /// A harvester over the workers' links; `make` builds empty accumulators.
    ///
    /// The first accumulator is built here, not at the first epoch's harvest: building one
    /// allocates and first-touches every table (tens of MiB with the default sizes, about
    /// 40 ms on the Xeon VM of BENCHMARKS.md), which is better paid before traffic than while
    /// the workers' epoch rings fill. It is also built on the thread that harvests, as before.
    pub fn new(links: Vec<Arc<EpochLink<B>>>, make: impl Fn() -> B + Send + 'static) -> Self {
        Self {
            links,
            pending: BTreeMap::new(),
            skipped: BTreeSet::new(),
            spare: vec![Box::new(make())],
            make: Box::new(make),
            counters: HarvestCounters::default(),
            passed: None,
            lent: None,
            patience: DEFAULT_PATIENCE,
            helpers_after_finish: false,
        }
    }

    /// Lends epochs to the helpers also after every worker finished (see [`Self::poll`]): for
    /// callers whose helpers are not the workers' loops (`wirelat offline`).
    pub fn with_helpers_after_finish(mut self) -> Self {
        self.helpers_after_finish = true;
        self
    }

    /// The accumulators not in use (every one, between polls, but an epoch's lent to the
    /// helpers): what their shared filings did is kept in them.
    pub fn accumulators(&self) -> impl Iterator<Item = &B> + '_ {
        self.spare.iter().map(|b| &**b)
    }

    /// Waits at most `patience` for the workers to take what an epoch's merge lent them
    /// before the control thread does the rest itself.
    pub fn with_patience(mut self, patience: Duration) -> Self {
        self.patience = patience;
        self
    }

    /// Collects what the workers handed over and emits every epoch all of them have passed.
    /// Returns the number of epochs emitted.
    pub fn poll(&mut self, mut emit: impl FnMut(Harvested<'_, B>)) -> Result<usize, MergeError> {
        // Positions first, queues second: a worker pushes its buffer before it publishes the
        // new position, so every buffer of an epoch below the watermark is already queued.
        let watermark = self.watermark();
        let workers = self.links.len();
        for (w, link) in self.links.iter().enumerate() {
            while let Some(filled) = link.pop_full() {
                let shards =
                    self.pending.entry(filled.epoch).or_insert_with(|| (0..workers).map(|_| None).collect());
                match shards.get_mut(w) {
                    Some(slot @ None) => *slot = Some(filled.buffer),
                    // A worker hands over one buffer per epoch; should a second come, add it.
                    Some(Some(held)) => {
                        held.merge_from(&filled.buffer)?;
                        let mut b = filled.buffer;
                        b.reset();
                        let _ = link.push_free(b);
                    }
                    None => {}
                }
            }
            while let Some(k) = link.pop_skipped() {
                self.skipped.insert(k);
            }
        }
        let Some(watermark) = watermark else { return Ok(0) };
        let finished = watermark == u64::MAX;
        let mut emitted = 0;
        loop {
            if let Some(lent) = self.lent.take() {
                let ready = lent.acc.lent_taken()
                    || (finished && !self.helpers_after_finish)
                    || lent.since.elapsed() >= self.patience;
                if !ready {
                    self.lent = Some(lent);
                    break;
                }
                let Lent { epoch, mut shards, mut acc, .. } = lent;
                let mut held: Vec<&mut B> = shards.iter_mut().flatten().map(|b| &mut **b).collect();
                acc.take_back(&mut held);
                self.emit_epoch(epoch, shards, acc, &mut emit)?;
                emitted += 1;
                continue;
            }
            let Some(entry) = self.pending.first_entry() else { break };
            if *entry.key() >= watermark {
                break;
            }
            let (epoch, mut shards) = entry.remove_entry();
            let mut acc = self.spare.pop().unwrap_or_else(|| Box::new((self.make)()));
            let mut held: Vec<&mut B> = shards.iter_mut().flatten().map(|b| &mut **b).collect();
            // An error here (shards of different configurations) is the drain's to report; a
            // lend that failed lent nothing, and `take_back` then does nothing either.
            let helped = !finished || self.helpers_after_finish;
            match helped.then(|| acc.lend(&mut held)) {
                Some(Ok(true)) => {
                    self.lent = Some(Lent { epoch, shards, acc, since: Instant::now() });
                    continue;
                }
                Some(Err(_)) => acc.take_back(&mut held),
                _ => {}
            }
            self.emit_epoch(epoch, shards, acc, &mut emit)?;
            emitted += 1;
        }
        // An epoch lent to the helpers, and those after it, are below the watermark but not
        // emitted yet: the progress the peer hears must not pass them, and their skip notes
        // stay. Skip notes for epochs that had no packets at all are dropped once passed.
        let held = self.lent.as_ref().map(|l| l.epoch).into_iter().chain(self.pending.keys().next().copied());
        let passed = held.fold(watermark, u64::min);
        self.skipped.retain(|k| *k >= passed);
        self.passed = Some(passed);
        Ok(emitted)
    }

    /// Merges one epoch's shards into `acc` (what `lend` started is finished already), gives
    /// the shards back to their workers, and emits it.
    fn emit_epoch(
        &mut self,
        epoch: u64,
        mut shards: Vec<Option<Box<B>>>,
        mut acc: Box<B>,
        emit: &mut impl FnMut(Harvested<'_, B>),
    ) -> Result<(), MergeError> {
        let (merged_shards, result) = {
            let mut held: Vec<&mut B> = shards.iter_mut().flatten().map(|b| &mut **b).collect();
            // All shards at once, left reset: RDA sorts every worker's log where it lies
            // instead of copying each into the accumulator first, COLATE reads and zeroes
            // each worker's vector in one pass, and the accumulator needs no reset.
            (held.len(), acc.drain_all(&mut held))
        };
        for (link, shard) in self.links.iter().zip(shards) {
            let Some(buffer) = shard else { continue };
            // The worker's ring has room for every buffer it owns.
            let _ = link.push_free(buffer);
        }
        if let Err(e) = result {
            self.spare.push(acc);
            return Err(e);
        }
        let complete = !self.skipped.remove(&epoch);
        emit(Harvested { epoch, merged: &mut *acc, shards: merged_shards, complete });
        self.counters.epochs += 1;
        self.counters.shards += merged_shards as u64;
        if !complete {
            self.counters.incomplete_epochs += 1;
        }
        self.spare.push(acc);
        Ok(())
    }

    /// True once every worker has finished and everything was emitted.
    pub fn done(&self) -> bool {
        // Finished first: a worker hands over its last buffer before it publishes that.
        self.watermark() == Some(u64::MAX)
            && self.links.iter().all(|l| l.is_drained())
            && self.pending.is_empty()
            && self.lent.is_none()
    }

    /// Every epoch below this one has been emitted by a poll, or had no packets on any worker
    /// (`None` before the first poll that saw every worker's clock; `u64::MAX` once all finished).
    /// What a sink reports to the peer as progress, so an epoch without packets at this point
    /// can be told from one still on its way.
    pub fn passed(&self) -> Option<u64> {
        self.passed
    }

    /// What the harvester has done so far.
    pub fn counters(&self) -> HarvestCounters {
        self.counters
    }

    /// Epochs the workers skipped because buffers came back too late, summed over workers.
    pub fn overrun_epochs(&self) -> u64 {
        self.links.iter().map(|l| l.overrun_epochs()).sum()
    }

    /// The first epoch some worker has not finished (`None` until all have a clock).
    fn watermark(&self) -> Option<u64> {
        let mut min = u64::MAX;
        for l in &self.links {
            min = min.min(l.watermark()?);
        }
        Some(min)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wirelat_dataplane::epoch::EpochClock;

    /// A buffer that sums packet values: merging shards must equal one sum over all packets.
    #[derive(Default, Debug, PartialEq, Clone)]
    struct Sum {
        packets: u64,
        total: u64,
    }
    impl EpochBuffer for Sum {
        fn reset(&mut self) {
            *self = Sum::default();
        }
        fn merge_from(&mut self, o: &Self) -> Result<(), MergeError> {
            self.packets += o.packets;
            self.total += o.total;
            Ok(())
        }
    }

    #[test]
    fn shards_merge_in_worker_order_whatever_order_they_arrive_in_then_settle_once() {
        /// Remembers the order shards were merged in, and marks each settle with `SETTLED`.
        #[derive(Default, Debug, Clone, PartialEq)]
        struct Order(Vec<u64>);
        const SETTLED: u64 = 99;
        impl EpochBuffer for Order {
            fn reset(&mut self) {
                self.0.clear();
            }
            fn merge_from(&mut self, o: &Self) -> Result<(), MergeError> {
                self.0.extend_from_slice(&o.0);
                Ok(())
            }
            fn settle(&mut self) {
                self.0.push(SETTLED);
            }
        }
        let clock = EpochClock::new(10).unwrap();
        let (l0, mut w0) = EpochLink::new(3, clock, Order::default);
        let (l1, mut w1) = EpochLink::new(3, clock, Order::default);
        let mut h = Harvester::new(vec![l0, l1], Order::default);
        let mut seen = Vec::new();
        // Worker 1 hands over epoch 0 first; worker 0 is still in it.
        w1.buffer_for(1).unwrap().0.push(1);
        w0.buffer_for(2).unwrap().0.push(0);
        w1.buffer_for(15).unwrap().0.push(1);
        assert_eq!(h.passed(), None, "no poll yet");
        h.poll(|e| seen.push((e.epoch, e.merged.0.clone()))).unwrap();
        assert!(seen.is_empty(), "worker 0 has not left epoch 0");
        assert_eq!(h.passed(), Some(0), "worker 0 is still in epoch 0");
        w0.finish();
        w1.finish();
        assert!(!h.done(), "the last buffers are not harvested yet");
        h.poll(|e| seen.push((e.epoch, e.merged.0.clone()))).unwrap();
        // Settled once per epoch, after its last shard and before it is emitted.
        assert_eq!(seen, vec![(0, vec![0, 1, SETTLED]), (1, vec![1, SETTLED])]);
        assert!(h.done());
        assert_eq!(h.passed(), Some(u64::MAX), "every worker finished");
    }

    #[test]
    fn concurrent_workers_merge_exactly_epoch_by_epoch() {
        let clock = EpochClock::new(1_000).unwrap();
        let workers = 3;
        let packets: u64 = 200_000;
        let mut links = Vec::new();
        let mut handles = Vec::new();
        for w in 0..workers {
            let (link, mut writer) = EpochLink::new(4, clock, Sum::default);
            links.push(link);
            handles.push(std::thread::spawn(move || {
                // Worker w sees every `workers`-th packet; timestamps rise by 7 ns per packet.
                for i in (w..packets).step_by(workers as usize) {
                    // Wait for the harvester instead of skipping, so this test checks exactness;
                    // the overrun path is tested on its own.
                    while writer.would_overrun(i * 7) {
                        std::thread::yield_now();
                    }
                    let b = writer.buffer_for(i * 7).expect("a buffer is free");
                    b.packets += 1;
                    b.total += i;
                }
                writer.finish();
                writer.counters()
            }));
        }
        let mut h = Harvester::new(links, Sum::default);
        let mut got = BTreeMap::new();
        while !h.done() {
            std::thread::yield_now();
            h.poll(|e| {
                assert!(e.complete);
                assert!(got.insert(e.epoch, e.merged.clone()).is_none());
            })
            .unwrap();
        }
        for t in handles {
            let c = t.join().unwrap();
            assert_eq!(c.late_packets, 0);
        }
        // Offline truth: epoch of packet i is (7 i) / 1000.
        let mut want: BTreeMap<u64, Sum> = BTreeMap::new();
        for i in 0..packets {
            let e = want.entry(i * 7 / 1_000).or_default();
            e.packets += 1;
            e.total += i;
        }
        assert_eq!(got, want);
        assert_eq!(h.counters().epochs, want.len() as u64);
    }

    #[test]
    fn the_first_accumulator_is_built_with_the_harvester_and_reused_for_every_epoch() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let made = Arc::new(AtomicUsize::new(0));
        let count = Arc::clone(&made);
        let clock = EpochClock::new(10).unwrap();
        let (link, mut w) = EpochLink::new(3, clock, Sum::default);
        let mut h = Harvester::new(vec![link], move || {
            count.fetch_add(1, Ordering::Relaxed);
            Sum::default()
        });
        assert_eq!(made.load(Ordering::Relaxed), 1, "built before any epoch is harvested");
        for ts in [1, 11, 21, 31] {
            w.buffer_for(ts).unwrap().packets += 1;
            h.poll(|_| {}).unwrap();
        }
        w.finish();
        let mut epochs = 0;
        h.poll(|_| epochs += 1).unwrap();
        assert_eq!(h.counters().epochs, 4);
        assert!(epochs > 0 && h.done());
        assert_eq!(made.load(Ordering::Relaxed), 1, "no epoch built another");
    }

    #[test]
    fn skipped_epochs_are_marked_incomplete() {
        let clock = EpochClock::new(10).unwrap();
        let (l1, mut w1) = EpochLink::new(2, clock, Sum::default);
        let (l2, mut w2) = EpochLink::new(2, clock, Sum::default);
        let mut h = Harvester::new(vec![l1, l2], Sum::default);
        // Worker 1 runs ahead through three epochs with nobody harvesting: epoch 2 is skipped.
        for ts in [1, 11, 21] {
            if let Some(b) = w1.buffer_for(ts) {
                b.packets += 1;
            }
        }
        w2.buffer_for(2).unwrap().packets += 1;
        w2.buffer_for(22).unwrap().packets += 1;
        w1.finish();
        w2.finish();
        let mut seen = Vec::new();
        h.poll(|e| seen.push((e.epoch, e.merged.packets, e.shards, e.complete))).unwrap();
        assert_eq!(seen, vec![(0, 2, 2, true), (1, 1, 1, true), (2, 1, 1, false)]);
        assert_eq!(h.counters().incomplete_epochs, 1);
        assert_eq!(h.overrun_epochs(), 1);
        assert!(h.done());
    }

    /// A buffer that lends its merge to helpers: `taken` says when they took it all.
    #[derive(Default, Debug, Clone)]
    struct Lending {
        sum: Sum,
        taken: Arc<std::sync::atomic::AtomicBool>,
        lent: bool,
        taken_back: bool,
    }
    impl EpochBuffer for Lending {
        fn reset(&mut self) {
            self.sum.reset();
            self.lent = false;
            self.taken_back = false;
        }
        fn merge_from(&mut self, o: &Self) -> Result<(), MergeError> {
            self.sum.merge_from(&o.sum)
        }
        fn lend(&mut self, _shards: &mut [&mut Self]) -> Result<bool, MergeError> {
            self.lent = true;
            Ok(true)
        }
        fn lent_taken(&self) -> bool {
            self.taken.load(std::sync::atomic::Ordering::Relaxed)
        }
        fn take_back(&mut self, _shards: &mut [&mut Self]) {
            self.taken_back = true;
        }
        fn drain_all(&mut self, shards: &mut [&mut Self]) -> Result<(), MergeError> {
            let kept = self.taken_back;
            self.sum.reset();
            for s in shards.iter_mut() {
                self.sum.merge_from(&s.sum)?;
                s.reset();
            }
            self.taken_back = kept;
            Ok(())
        }
    }

    /// The flag saying the helpers took everything, and a maker of buffers that read it.
    fn lending() -> (Arc<std::sync::atomic::AtomicBool>, impl Fn() -> Lending + Clone + Send + 'static) {
        let taken = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = taken.clone();
        (taken, move || Lending { taken: flag.clone(), ..Lending::default() })
    }

    #[test]
    fn a_lent_epoch_waits_for_its_helpers_holds_the_progress_back_and_is_taken_back_before_the_drain() {
        let clock = EpochClock::new(10).unwrap();
        let (taken, make) = lending();
        let (link, mut w) = EpochLink::new(4, clock, make.clone());
        let mut h = Harvester::new(vec![link], make).with_patience(Duration::from_secs(3600));
        for ts in [1, 2, 11, 21] {
            w.buffer_for(ts).unwrap().sum.packets += 1;
        }
        let mut seen = Vec::new();
        // Epochs 0 and 1 are closed: 0 is lent, and nothing passes it while it waits.
        h.poll(|e| seen.push(e.epoch)).unwrap();
        h.poll(|e| seen.push(e.epoch)).unwrap();
        assert!(seen.is_empty());
        assert_eq!(h.passed(), Some(0), "the progress stops at the lent epoch");
        taken.store(true, std::sync::atomic::Ordering::Relaxed);
        let mut merged = Vec::new();
        h.poll(|e| {
            assert!(e.merged.taken_back, "taken back before the drain, and the drain kept it");
            merged.push((e.epoch, e.merged.sum.packets));
            // The flags describe one epoch (the accumulator is reused).
            (e.merged.lent, e.merged.taken_back) = (false, false);
        })
        .unwrap();
        // Epoch 0 is emitted, epoch 1 lent (and already taken: emitted in the same poll).
        assert_eq!(merged, vec![(0, 2), (1, 1)]);
        assert_eq!(h.passed(), Some(2));
        // Once the worker finished, an epoch is not lent (nobody would help) and the last
        // one is emitted at once even though its helpers never took it.
        taken.store(false, std::sync::atomic::Ordering::Relaxed);
        w.finish();
        h.poll(|e| {
            assert!(!e.merged.lent && !e.merged.taken_back, "not lent after every worker finished");
            merged.push((e.epoch, e.merged.sum.packets));
        })
        .unwrap();
        assert_eq!(merged.last(), Some(&(2, 1)));
        assert!(h.done());
    }

    #[test]
    fn an_epoch_behind_a_lent_one_keeps_its_skip_note() {
        let clock = EpochClock::new(10).unwrap();
        let (taken, make) = lending();
        let (l1, mut w1) = EpochLink::new(2, clock, make.clone());
        let (l2, mut w2) = EpochLink::new(2, clock, make.clone());
        let mut h = Harvester::new(vec![l1, l2], make).with_patience(Duration::from_secs(3600));
        // Worker 1 fills epochs 0 and 1 and has no buffer for 2 (skipped); worker 2 has packets
        // in epochs 0 and 2.
        for ts in [1, 11, 21, 31] {
            if let Some(b) = w1.buffer_for(ts) {
                b.sum.packets += 1;
            }
        }
        for ts in [2, 22, 32] {
            if let Some(b) = w2.buffer_for(ts) {
                b.sum.packets += 1;
            }
        }
        let mut seen = Vec::new();
        h.poll(|e| seen.push((e.epoch, e.complete))).unwrap();
        assert!(seen.is_empty(), "epoch 0 is lent");
        taken.store(true, std::sync::atomic::Ordering::Relaxed);
        h.poll(|e| seen.push((e.epoch, e.complete))).unwrap();
        assert_eq!(seen, vec![(0, true), (1, true), (2, false)], "epoch 2 lacks worker 1's packets");
        w1.finish();
        w2.finish();
        while !h.done() {
            h.poll(|e| seen.push((e.epoch, e.complete))).unwrap();
        }
    }
}
