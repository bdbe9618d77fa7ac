//! The measuring pipeline of one worker: frame → packet layer → epoch buffer → every enabled
//! synopsis. DPDK-independent, so the appliance (`wirelat run`, through the DPDK burst hook)
//! and the offline runner (`wirelat offline`, over pcap files) run exactly the same code.
//!
//! Per packet ([`Pipeline::process`], or per burst [`Pipeline::stage`] + [`Pipeline::apply`]):
//! 1. [`packet::inspect`]: skipped frames (ARP, fragments, malformed, ...) are counted and left
//!    alone; measured ones give a [`Measurement`].
//! 2. [`EpochWriter::buffer_for`] picks the buffer of the packet's epoch, switching epoch when
//!    the timestamp crosses a boundary. If no free buffer is waiting, the overrun policy
//!    decides: [`OverrunPolicy::Skip`] (live) counts the epoch as overrun and does not measure
//!    it; [`OverrunPolicy::Wait`] (trace replay, offline) calls the caller's `wait` until the
//!    control thread has returned a buffer, so nothing is lost.
//! 3. Port 0 packets update the forward synopses, port 1 packets the reverse ones; the fridge
//!    sees both, with its worker-lifetime slots in the carry. With a [`DirectionSplit`]
//!    (monitor mode on one port carrying both directions) the direction comes from the
//!    packet's addresses instead, and a packet with none is counted and not applied.
//!
//! Must never: allocate, lock, log or make a syscall per packet (the `wait` callback is the
//! caller's business and runs only when the control thread is behind).

pub mod buffer;
pub mod counters;
pub mod filing;
pub mod split;
pub mod steer;

pub use buffer::{Direction, DirectionSynopses, EpochSynopses, Locations, SynopsisSet, WorkerCarry};
pub use counters::{CounterSnapshot, SharedCounters};
pub use filing::{Boards, FilingCounts, FilingHelper};
pub use split::{DirectionSplit, SplitError, Unsplit};

use serde::{Deserialize, Serialize};

use crate::epoch::EpochWriter;
use crate::packet::{self, Inspection, Measurement, PacketConfig, PacketCounters};

/// Most packets one staged burst holds (the worker's largest rx burst).
pub const MAX_STAGED: usize = 64;

/// What a worker does when an epoch boundary arrives and the control thread has not returned a
/// buffer yet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OverrunPolicy {
    /// Count the overrun and skip measuring that epoch; never stall the data path (live).
    #[default]
    Skip,
    /// Wait for the control thread so that nothing is lost (trace replay, bit-exact tests).
    Wait,
}

/// One measured packet of a staged burst, with where it lands in each synopsis (filled in by
/// [`Pipeline::stage`]; `Default`: not located, the update computes it).
#[derive(Clone, Copy, Debug)]
struct Staged {
    m: Measurement,
    ts_ns: u64,
    /// Its direction when a [`DirectionSplit`] decided it (`None`: the port's).
    dir: Option<Direction>,
    /// [`crate::synopsis::Synopsis::locate`]'s output per synopsis.
    at: Locations,
}

impl Staged {
    #[inline(always)]
    fn new(m: Measurement, ts_ns: u64, dir: Option<Direction>) -> Self {
        Self { m, ts_ns, dir, at: Locations::default() }
    }
}

/// The measured packets of one burst, inspected but not yet applied: lets the worker prefetch
/// the synopses' random memory for the whole burst before the updates touch it. Fixed size, no
/// allocation.
pub struct StagedBurst {
    items: [Staged; MAX_STAGED],
    len: usize,
}

impl Default for StagedBurst {
    fn default() -> Self {
        Self::new()
    }
}

impl StagedBurst {
    /// An empty staging area.
    pub fn new() -> Self {
        Self { items: [Staged::new(Measurement::EMPTY, 0, None); MAX_STAGED], len: 0 }
    }

    /// Forgets the staged packets.
    #[inline(always)]
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// Staged packets.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when nothing is staged.
    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline(always)]
    fn staged(&self) -> &[Staged] {
        self.items.get(..self.len).unwrap_or(&[])
    }
}

/// One worker's pipeline: packet layer, epoch ring and synopses.
pub struct Pipeline {
    packet: PacketConfig,
    packets: PacketCounters,
    writer: EpochWriter<EpochSynopses>,
    carry: WorkerCarry,
    policy: OverrunPolicy,
    untimed: u64,
    waits: u64,
    split: Option<DirectionSplit>,
    /// Measured packets without a direction, [neither, both] inside.
    unsplit: [u64; 2],
    /// This worker's share of RDA's filing ([`filing`]), when its buffers have a board.
    filing: Option<FilingHelper>,
}

impl Pipeline {
    /// A pipeline writing into `writer` (see [`crate::epoch::EpochLink::new`]); `carry` is the
    /// one-point synopses' worker-lifetime state ([`SynopsisSet::new_carry`]).
    ///
    /// The packet layer does only what the enabled synopses read (BENCHMARKS.md, W17
    /// twenty-fifth session):
    /// - without a one-point synopsis (the fridge) the request/response classifiers are off:
    ///   nothing else reads what they find, and on 64-byte SYN/UDP traffic the TCP one alone
    ///   was 8 % of the packet layer's time;
    /// - without a two-point synopsis the flow hash and the packet identity are not computed
    ///   ([`PacketConfig::hashes`]): the fridge pairs by its own exchange ids.
    pub fn new(
        mut packet: PacketConfig,
        writer: EpochWriter<EpochSynopses>,
        carry: WorkerCarry,
        policy: OverrunPolicy,
    ) -> Self {
        if !carry.reads_exchanges() {
            packet.classify = packet.classify.off();
        }
        // The ring's buffers share one set of synopses; the first is there from construction.
        if writer.current().is_some_and(|b| !b.measures_two_points()) {
            packet.hashes = false;
        }
        // Made here, on the worker's own thread (the sorter is its memory).
        let filing = writer.current().and_then(FilingHelper::for_buffer);
        Self {
            filing,
            packet,
            packets: PacketCounters::default(),
            writer,
            carry,
            policy,
            untimed: 0,
            waits: 0,
            split: None,
            unsplit: [0; 2],
        }
    }

    /// Files at most one chunk of the RDA filing the control thread shared, if any
    /// ([`filing`]); true when it did. On idle polls, or while waiting for a buffer: one chunk
    /// is about 1/64 of an epoch's filing.
    #[inline]
    pub fn help_filing(&mut self) -> bool {
        self.filing.as_mut().is_some_and(FilingHelper::help)
    }

    /// Chunks of RDA's shared filing this worker left to the control thread for want of room.
    pub fn filing_declined(&self) -> u64 {
        self.filing.as_ref().map_or(0, |f| f.declined)
    }

    /// Takes each packet's direction from `split` (monitor mode on one port carrying both
    /// directions) instead of the port it was received on.
    pub fn with_split(mut self, split: Option<DirectionSplit>) -> Self {
        self.split = split;
        self
    }

    /// The split's direction for `m` (`Some(None)`: no split, the port's), or `None` when it
    /// has none (counted).
    #[inline(always)]
    fn split_direction(&mut self, m: &Measurement) -> Option<Option<Direction>> {
        let Some(split) = &self.split else { return Some(None) };
        match split.direction(&m.flow) {
            Ok(d) => Some(Some(d)),
            Err(u) => {
                self.unsplit[usize::from(u == Unsplit::Both)] += 1;
                None
            }
        }
    }

    /// Inspects and measures one frame received on `port` (0 or 1) at `ts_ns`. `wait` is called
    /// (policy `wait` only) while no buffer is free for the packet's epoch; it returns false to
    /// give up waiting (the epoch is then counted as overrun).
    #[inline]
    pub fn process(&mut self, port: usize, frame: &[u8], ts_ns: u64, wait: &mut impl FnMut() -> bool) {
        if let Inspection::Measured(m) = packet::inspect(frame, &self.packet, &mut self.packets)
            && let Some(dir) = self.split_direction(&m)
        {
            self.apply_one(Direction::of_port(port), &Staged::new(m, ts_ns, dir), &mut |_| wait());
        }
    }

    /// Inspects one frame of a burst received on `port`; if it is measured (skips are counted),
    /// stages it and locates it in every synopsis ([`crate::synopsis::Synopsis::locate`]),
    /// keeping the locations for [`Pipeline::apply`] and calling `hint` with the addresses they
    /// name in the current epoch's buffer, which the caller prefetches (never read here).
    ///
    /// Located as it is staged, a packet's lines load while the next frames are inspected: the
    /// packet layer is bound by instructions and the updates by cache misses, so the two
    /// overlap. Located in a separate pass after the whole burst, the hints of 32 packets
    /// queued behind the few misses a core keeps in flight, after the inspection had used none:
    /// 3–6 % fewer packets per second at 64 B and 3 % on the mixed trace with all five
    /// synopses on the EPYC (BENCHMARKS.md, W17 fifteenth session). The locations depend only
    /// on the synopses' configuration, which every buffer of the ring shares, so they stay
    /// right if the burst crosses an epoch boundary.
    #[inline]
    pub fn stage(
        &mut self,
        staged: &mut StagedBurst,
        frame: &[u8],
        ts_ns: u64,
        port: usize,
        hint: &mut impl FnMut(*const u8),
    ) {
        if let Inspection::Measured(m) = packet::inspect(frame, &self.packet, &mut self.packets)
            && let Some(dir) = self.split_direction(&m)
            && let Some(slot) = staged.items.get_mut(staged.len)
        {
            *slot = Staged::new(m, ts_ns, dir);
            staged.len += 1;
            if let Some(buf) = self.writer.current() {
                let Staged { m, ts_ns, dir, at } = slot;
                let d = dir.unwrap_or(Direction::of_port(port));
                buf.locate(d, &self.carry, &m.observation(*ts_ns), at, hint);
            }
        }
    }

    /// Counts a frame that had no usable timestamp (not inspected, not measured).
    #[inline]
    pub fn count_untimed(&mut self) {
        self.untimed += 1;
    }

    /// Applies the staged packets of a burst received on `port`, in order. With policy `wait`,
    /// a packet whose epoch has no free buffer calls `wait` with its time until one is free or
    /// `wait` returns false (the packet's epoch is then counted as overrun).
    #[inline]
    pub fn apply(&mut self, port: usize, staged: &StagedBurst, wait: &mut impl FnMut(u64) -> bool) {
        let d = Direction::of_port(port);
        for s in staged.staged() {
            self.apply_one(d, s, wait);
        }
    }

    #[inline(always)]
    fn apply_one(&mut self, port_dir: Direction, s: &Staged, wait: &mut impl FnMut(u64) -> bool) {
        let d = s.dir.unwrap_or(port_dir);
        if self.policy == OverrunPolicy::Wait && self.writer.would_overrun(s.ts_ns) {
            self.wait_for_buffer(s.ts_ns, wait);
        }
        let Some(buf) = self.writer.buffer_for(s.ts_ns) else { return };
        buf.apply(d, &mut self.carry, &s.at, &s.m.observation(s.ts_ns));
    }

    #[cold]
    #[inline(never)]
    fn wait_for_buffer(&mut self, ts_ns: u64, wait: &mut impl FnMut(u64) -> bool) {
        self.waits += 1;
        while self.writer.would_overrun(ts_ns) {
            // The buffer it waits for may be one the harvest lent to the workers' filing.
            if self.help_filing() {
                continue;
            }
            if !wait(ts_ns) {
                return;
            }
        }
    }

    /// Lets the epoch clock advance without a packet (idle polls).
    #[inline]
    pub fn tick(&mut self, now_ns: u64) {
        self.writer.tick(now_ns);
    }

    /// Hands the last buffer to the control thread and marks this worker finished.
    pub fn finish(&mut self) {
        self.writer.finish();
    }

    /// Everything counted so far, as a plain snapshot.
    pub fn snapshot(&self) -> CounterSnapshot {
        let p = &self.packets;
        let w = self.writer.counters();
        CounterSnapshot {
            frames: p.total().wrapping_add(self.untimed),
            measured: p.measured,
            arp: p.arp,
            unknown_ethertype: p.unknown_ethertype,
            fragment: p.fragment,
            truncated: p.truncated,
            malformed: p.malformed,
            encapsulation: p.encap_skipped(),
            untimed: self.untimed,
            late: w.late_packets,
            overrun_epochs: w.overrun_epochs,
            overrun_packets: w.skipped_packets,
            waits: self.waits,
            split_neither: self.unsplit[0],
            split_both: self.unsplit[1],
        }
    }

    /// Publishes the counters for the control thread (plain relaxed stores; a few per call, so
    /// call it per burst or less often, never per packet).
    pub fn publish(&self, shared: &SharedCounters) {
        shared.publish(&self.snapshot());
    }
}

#[cfg(test)]
mod tests;
