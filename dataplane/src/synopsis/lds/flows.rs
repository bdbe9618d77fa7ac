//! The per-epoch flow log: the set of flow keys a point saw, so the estimator can enumerate
//! flows the sketch itself cannot list (spec §1, §12 P13).
//!
//! A bounded open-addressing set (linear probing over 64-bit flow-hash tags) allocated once at
//! construction: recording a packet's flow never allocates. When the set is full, further
//! flows are not recorded; their packets are counted exactly and the flows themselves by a
//! 4096-bit linear-counting bitmap, so the report can say how many flows the list misses.
//!
//! Flows are identified by their flow hash, exactly as the sketch identifies them (two keys
//! with one 64-bit flow hash share every cell anyway), less its lowest [`GENERATION_BITS`]: a
//! slot's tag carries the epoch generation it was written in there instead, so emptying the
//! set is a counter's step, not a pass over the table ([`FlowSet::clear`]). Two flows of an
//! epoch whose hashes differ only in those bits are listed as one (about n²/2⁵⁹ for n flows:
//! 2·10⁻⁶ an epoch at 10⁶ flows). Never touches the sketch.
//!
//! Each entry also keeps the encapsulation its first recorded packet arrived in (VLAN id, VNI,
//! MPLS label, ...; `packet::Encap`): a flow attribute for the records, outside the flow key,
//! so a flow seen plain at one point and inside a tunnel at the other is still one flow.
//!
//! The harvest **gathers** the workers' sets ([`FlowSet::gather`]): their entries are appended
//! one after another, without the table, which is built again only if the set is written to or
//! probed later. RSS gives each flow of a direction to one queue, so the workers' sets are
//! disjoint and the gathered list is their union, in the order a merge would have listed it; a
//! flow that two workers recorded in one epoch (RSS retargeted mid-epoch) is listed once per
//! worker, and the decoder keeps its first entry, as a merge would have. The merge it replaces
//! read and wrote a random line of a table larger than the caches per flow, most of the
//! control thread's LDS time (BENCHMARKS.md, W17 twenty-seventh session).

use crate::cpu::prefetch;
use crate::packet::{Encap, EncapKind, FlowKey};
use crate::synopsis::codec::{DecodeError, Reader, Writer};
use crate::synopsis::hash;

pub mod share;

/// Bits of the linear-counting bitmap of flows that did not fit.
pub const UNRECORDED_BITMAP_BITS: usize = 4096;
const BITMAP_WORDS: usize = UNRECORDED_BITMAP_BITS / 64;
/// Low bits of a slot's tag that hold the generation it was written in (1..=[`GENERATION_MAX`];
/// 0 never: an all-zero slot was never written).
pub const GENERATION_BITS: u32 = 6;
const GENERATION_MASK: u64 = (1 << GENERATION_BITS) - 1;
/// The last generation before the table is zeroed and generation 1 starts again.
const GENERATION_MAX: u64 = GENERATION_MASK;
/// [`FlowSet::take_from`] copies the whole table when it has fewer slots per flow than this.
/// In sparser tables inserting the flows one by one was faster (BENCHMARKS.md, W17: 17 000
/// flows in 524 288 slots, 31 per flow, took 1.17–1.35 ms copied against 1.12–1.29 inserted);
/// at 9.7 slots per flow the copy won.
const COPY_SLOTS_PER_FLOW: usize = 16;
/// How many flows ahead [`FlowSet::merge`] and [`FlowSet::clear`] hint the home slot they
/// will probe: enough misses in flight to cover a memory latency of a few hundred cycles at a
/// few tens of cycles per insert.
const PROBE_AHEAD: usize = 16;
/// Seed of the bitmap hash.
const BITMAP_SEED: u64 = 0x6c64_735f_6d69_7373;
/// Bytes one recorded flow takes in memory (what the set reserves per flow of its capacity).
pub const ENTRY_BYTES: usize = std::mem::size_of::<FlowEntry>();
/// Smallest encoded entry: IPv4 key (1 + 4 + 4 + 2 + 2 + 1 bytes) + flow hash (8 bytes) +
/// encapsulation (kind 1 + id 4 bytes).
pub const MIN_ENTRY_BYTES: usize = 27;
/// Largest encoded entry: the IPv6 key (1 + 16 + 16 + 2 + 2 + 1 bytes) + flow hash + encapsulation.
pub const MAX_ENTRY_BYTES: usize = 51;

/// A recorded flow: its key and the flow hash the packet layer computed for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FlowEntry {
    /// The directional 5-tuple.
    pub key: FlowKey,
    /// `Observation.flow_hash` of its packets: what the sketch's row hashes derive from.
    pub flow_hash: u64,
    /// The encapsulation the first recorded packet of the flow arrived in at this point
    /// (`Encap::NONE` for a plain frame). A flow whose packets change encapsulation keeps the
    /// first one (per shard; a merge keeps the shard merged first).
    pub encap: Encap,
}

/// The bounded set of flow keys seen in one epoch.
#[derive(Debug)]
pub struct FlowSet {
    capacity: usize,
    /// Open-addressing table of tags, a power of two, load ≤ 3/4: a slot holds a flow of this
    /// epoch when its low [`GENERATION_BITS`] equal `generation`, and then the rest of the tag
    /// is the flow hash's; any other slot is empty (written in an earlier epoch, or never).
    /// No slot holds a generation above `generation`.
    tags: Vec<u64>,
    /// The current epoch's generation, 1..=[`GENERATION_MAX`].
    generation: u64,
    /// Recorded flows in insertion order (capacity reserved up front).
    entries: Vec<FlowEntry>,
    /// Tag of the last recorded flow: consecutive packets of one flow skip the probe.
    last_tag: u64,
    /// False after [`FlowSet::gather`]: `entries` are the gathered sets' lists, which `tags`
    /// does not index and which may list a flow more than once (once per set that held it).
    /// Whatever writes or probes the set indexes it first ([`FlowSet::index`]).
    indexed: bool,
    unrecorded_packets: u64,
    /// Linear-counting bitmap over the flow hashes that did not fit (empty when capacity is 0).
    unrecorded_bitmap: Vec<u64>,
    /// The entries already encoded by the workers ([`share`]), valid until the list changes.
    encoded: EncodedList,
}

/// The entries of a set as [`FlowSet::encode`] writes them, encoded by the workers in parts
/// ([`share`]): `pieces` of `bytes` in order. Its buffer is kept from epoch to epoch.
#[derive(Debug, Default)]
struct EncodedList {
    bytes: Vec<u8>,
    pieces: Vec<std::ops::Range<usize>>,
    /// True while `pieces` encode exactly `entries`: set by the shared encoding, cleared by
    /// anything that changes the list ([`FlowSet::clear`], [`FlowSet::insert`]).
    valid: bool,
}

impl Clone for FlowSet {
    /// Keeps the full reservation of the entries. A derived clone reserves only the current
    /// length: every buffer of a worker's ring is a clone of one template, so each then grew
    /// its entries by doubling on the hot path (13 reallocations per buffer to 262 144 flows,
    /// counted by the pipeline bench's allocator).
    fn clone(&self) -> Self {
        let mut entries = Vec::with_capacity(self.capacity);
        entries.extend_from_slice(&self.entries);
        Self {
            capacity: self.capacity,
            tags: self.tags.clone(),
            generation: self.generation,
            entries,
            last_tag: self.last_tag,
            indexed: self.indexed,
            unrecorded_packets: self.unrecorded_packets,
            unrecorded_bitmap: self.unrecorded_bitmap.clone(),
            // A clone encodes its entries itself.
            encoded: EncodedList::default(),
        }
    }
}

impl FlowSet {
    /// An empty set for up to `capacity` flows (0: records nothing and costs nothing).
    pub fn new(capacity: u32) -> Self {
        let capacity = capacity as usize;
        let slots = if capacity == 0 { 0 } else { (capacity + capacity / 3 + 1).next_power_of_two() };
        Self {
            capacity,
            tags: vec![0; slots],
            generation: 1,
            entries: Vec::with_capacity(capacity),
            last_tag: 0,
            indexed: true,
            unrecorded_packets: 0,
            unrecorded_bitmap: if capacity == 0 { Vec::new() } else { vec![0; BITMAP_WORDS] },
            encoded: EncodedList::default(),
        }
    }

    /// Most flows the set holds.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Recorded flows: entries of the list, so a gathered set ([`FlowSet::gather`]) counts a
    /// flow once per worker that recorded it (only where RSS moved a flow within an epoch).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when nothing is recorded.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The recorded flows, in the order they were first seen (a gathered set: each set's in
    /// turn, a flow repeated where two sets held it).
    pub fn entries(&self) -> &[FlowEntry] {
        &self.entries
    }

    /// Packets whose flow could not be recorded because the set was full.
    pub fn unrecorded_packets(&self) -> u64 {
        self.unrecorded_packets
    }

    /// Estimated number of distinct flows that did not fit (linear counting over a 4096-bit
    /// bitmap: m·ln(m / empty bits); relative error ≈ √(e^t − t − 1)/(t·√m) at load t).
    /// Saturates at m·ln(m) ≈ 34,000 when every bit is set.
    pub fn unrecorded_flows_estimate(&self) -> f64 {
        if self.unrecorded_bitmap.is_empty() {
            return 0.0;
        }
        let m = UNRECORDED_BITMAP_BITS as f64;
        let set: u32 = self.unrecorded_bitmap.iter().map(|w| w.count_ones()).sum();
        let empty = (UNRECORDED_BITMAP_BITS as u32 - set).max(1) as f64;
        m * (m / empty).ln()
    }

    /// The home slot: the flow hash is already a uniform 64-bit value (seeded xxh3), so its
    /// high bits index the table directly (the sketch's rows use independently mixed streams).
    /// The generation bits are left out, so a flow's home is the same in every epoch.
    #[inline(always)]
    fn slot_of(&self, tag: u64) -> usize {
        hash::reduce(tag & !GENERATION_MASK, self.tags.len() as u64) as usize
    }

    /// What a slot holding the flow with this hash holds in the current epoch.
    #[inline(always)]
    fn tag_of(&self, flow_hash: u64) -> u64 {
        (flow_hash & !GENERATION_MASK) | self.generation
    }

    /// True when a slot with tag `t` holds no flow of the current epoch.
    #[inline(always)]
    fn is_free(&self, t: u64) -> bool {
        free(t, self.generation)
    }

    fn mark_unrecorded(&mut self, tag: u64) {
        let bit = hash::reduce(hash::derive(tag, BITMAP_SEED), UNRECORDED_BITMAP_BITS as u64) as usize;
        if let Some(w) = self.unrecorded_bitmap.get_mut(bit / 64) {
            *w |= 1u64 << (bit % 64);
        }
    }

    /// Inserts `entry` unless present; false if it did not fit.
    fn insert(&mut self, entry: FlowEntry) -> InsertOutcome {
        let tag = self.tag_of(entry.flow_hash);
        let mask = self.tags.len().wrapping_sub(1);
        let mut i = self.slot_of(tag);
        // The table always keeps empty slots (load ≤ 3/4), so the probe ends; the bound on
        // steps only guards against a logic error turning into an endless loop.
        for _ in 0..self.tags.len() {
            let Some(t) = self.tags.get_mut(i) else { break };
            if *t == tag {
                return InsertOutcome::Present;
            }
            if free(*t, self.generation) {
                if self.entries.len() >= self.capacity {
                    return InsertOutcome::Full;
                }
                *t = tag;
                self.entries.push(entry);
                self.encoded.valid = false;
                return InsertOutcome::Added;
            }
            i = (i + 1) & mask;
        }
        InsertOutcome::Full
    }

    /// Address of the first slot `flow_hash` probes (a prefetch hint; never dereferenced here).
    #[inline(always)]
    pub fn slot_ptr(&self, flow_hash: u64) -> *const u8 {
        self.tags.as_ptr().wrapping_add(self.slot_of(flow_hash)).cast()
    }

    /// Records the flow of one packet, which arrived in `encap`. No allocation.
    #[inline]
    pub fn record(&mut self, key: &FlowKey, flow_hash: u64, encap: Encap) {
        if self.capacity == 0 {
            return;
        }
        if !self.indexed {
            self.index();
        }
        let tag = self.tag_of(flow_hash);
        if tag == self.last_tag {
            return;
        }
        match self.insert(FlowEntry { key: *key, flow_hash, encap }) {
            InsertOutcome::Added | InsertOutcome::Present => self.last_tag = tag,
            InsertOutcome::Full => {
                self.unrecorded_packets += 1;
                self.mark_unrecorded(tag);
            }
        }
    }

    /// True when a flow with this flow hash is recorded.
    pub fn contains(&self, flow_hash: u64) -> bool {
        if self.capacity == 0 {
            return false;
        }
        if !self.indexed {
            let tag = self.tag_of(flow_hash);
            return self.entries.iter().any(|e| self.tag_of(e.flow_hash) == tag);
        }
        let tag = self.tag_of(flow_hash);
        let mask = self.tags.len().wrapping_sub(1);
        let mut i = self.slot_of(tag);
        for _ in 0..self.tags.len() {
            match self.tags.get(i) {
                Some(&t) if t == tag => return true,
                Some(&t) if !self.is_free(t) => i = (i + 1) & mask,
                _ => return false,
            }
        }
        false
    }

    /// Adds another shard's set: the union, up to capacity. Flows that no longer fit are
    /// counted in the unrecorded-flows bitmap (their packet count is unknown here).
    ///
    /// Each insert is a random line of a table larger than L2 (4 MiB at the default
    /// capacity), so the home slot of the flow [`PROBE_AHEAD`] entries on is hinted first:
    /// without it every insert waited for its own miss.
    pub fn merge(&mut self, other: &FlowSet) {
        if !self.indexed {
            self.index();
        }
        for (k, e) in other.entries.iter().enumerate() {
            if let Some(ahead) = other.entries.get(k + PROBE_AHEAD) {
                prefetch(self.slot_ptr(ahead.flow_hash));
            }
            if self.insert(*e) == InsertOutcome::Full {
                self.mark_unrecorded(e.flow_hash | 1);
            }
        }
        self.unrecorded_packets = self.unrecorded_packets.saturating_add(other.unrecorded_packets);
        for (a, b) in self.unrecorded_bitmap.iter_mut().zip(&other.unrecorded_bitmap) {
            *a |= *b;
        }
    }

    /// Backs the entries' whole reservation with memory now ([`crate::synopsis::backing`]):
    /// recording a new flow then takes no page fault.
    pub fn back_reserved(&mut self) {
        let blank = FlowEntry { key: FlowKey::default(), flow_hash: 0, encap: Encap::NONE };
        crate::synopsis::backing::back_spare_capacity(&mut self.entries, blank);
    }

    /// Replaces this set's flows with `other`'s and empties `other`: what [`FlowSet::clear`]
    /// and then [`FlowSet::merge`] of `other` would leave (the harvest's first shard). Where
    /// `other` holds many flows for its table, the table is copied whole, a sequential line per
    /// 8 slots instead of a random probe per flow (and this set's old table is overwritten, not
    /// zeroed first). The copy has the layout the inserts would give: merging into an empty
    /// table inserts `other`'s flows in `other`'s own order.
    pub fn take_from(&mut self, other: &mut FlowSet) {
        let dense = other.indexed && other.entries.len() > other.tags.len() / COPY_SLOTS_PER_FLOW;
        // The table's size follows from the capacity alone (`FlowSet::new`).
        if dense && self.capacity == other.capacity {
            // The copied slots are `other`'s, by its generations (none above its current one).
            self.tags.copy_from_slice(&other.tags);
            self.generation = other.generation;
            self.entries.clear();
            self.entries.extend_from_slice(&other.entries);
            self.encoded.valid = false;
            self.last_tag = 0;
            self.indexed = true;
            self.unrecorded_packets = other.unrecorded_packets;
            self.unrecorded_bitmap.clone_from(&other.unrecorded_bitmap);
        } else {
            self.clear();
            self.merge(other);
        }
        other.clear();
    }

    /// Empties the set, keeping its allocation: the next generation begins, in which every
    /// slot written so far is free; only after [`GENERATION_MAX`] of them is the table zeroed.
    ///
    /// The control thread clears every worker's set in every epoch. Zeroed each time, a table
    /// sized for the point's flows (`flow_capacity`, which each worker's shard has too: RSS may
    /// give one worker most flows) cost the harvest workers × table bytes per epoch, which
    /// grows with the square of the workers (BENCHMARKS.md, W17 twentieth session); finding
    /// the flows' slots again instead cost a random line per flow.
    pub fn clear(&mut self) {
        if self.generation >= GENERATION_MAX {
            self.tags.fill(0);
            self.generation = 1;
        } else {
            self.generation += 1;
        }
        self.entries.clear();
        self.encoded.valid = false;
        self.last_tag = 0;
        self.indexed = true;
        self.unrecorded_packets = 0;
        self.unrecorded_bitmap.fill(0);
    }

    /// Replaces this set's flows with the union of `sets`' and empties them, without indexing
    /// the union: each set's entries are appended in turn, the counters added and the bitmaps
    /// joined (see the [module docs](self)). False, and nothing changed, when a set has another
    /// capacity or their entries together outnumber this set's capacity: then a flow may not
    /// fit, which only inserting them one by one decides ([`FlowSet::take_from`] and
    /// [`FlowSet::merge`] then). With every set disjoint the result equals those, entries in the
    /// same order.
    pub fn gather(&mut self, sets: &mut [&mut FlowSet]) -> bool {
        let total = sets.iter().try_fold(0usize, |n, s| {
            (s.capacity == self.capacity).then(|| n.saturating_add(s.entries.len()))
        });
        if total.is_none_or(|n| n > self.capacity) {
            return false;
        }
        self.clear();
        for s in sets.iter_mut() {
            self.entries.extend_from_slice(&s.entries);
            self.unrecorded_packets = self.unrecorded_packets.saturating_add(s.unrecorded_packets);
            for (a, b) in self.unrecorded_bitmap.iter_mut().zip(&s.unrecorded_bitmap) {
                *a |= *b;
            }
            s.clear();
        }
        // A single set's list is distinct already, but its table stays with it: only the
        // empty list is indexed.
        self.indexed = self.entries.is_empty();
        true
    }

    /// Indexes a gathered list in place: the table is rebuilt from the entries, in order, and
    /// a flow listed again is dropped (its first entry kept, as a merge would have). Nothing
    /// can fail to fit: a gathered list never outnumbers the capacity.
    #[cold]
    #[inline(never)]
    fn index(&mut self) {
        let mut entries = std::mem::take(&mut self.entries);
        let (packets, bitmap) = (self.unrecorded_packets, std::mem::take(&mut self.unrecorded_bitmap));
        self.clear();
        self.unrecorded_packets = packets;
        self.unrecorded_bitmap = bitmap;
        let mut kept = 0;
        for k in 0..entries.len() {
            let Some(&e) = entries.get(k) else { break };
            if self.claim(e.flow_hash) {
                if let Some(slot) = entries.get_mut(kept) {
                    *slot = e;
                }
                kept += 1;
            }
        }
        entries.truncate(kept);
        self.entries = entries;
        self.indexed = true;
    }

    /// Writes `flow_hash`'s tag into its slot: false when the flow is there already (or, never
    /// for an indexed gathered list, the table has no free slot).
    fn claim(&mut self, flow_hash: u64) -> bool {
        let tag = self.tag_of(flow_hash);
        let mask = self.tags.len().wrapping_sub(1);
        let mut i = self.slot_of(tag);
        for _ in 0..self.tags.len() {
            let Some(t) = self.tags.get_mut(i) else { break };
            if *t == tag {
                return false;
            }
            if free(*t, self.generation) {
                *t = tag;
                return true;
            }
            i = (i + 1) & mask;
        }
        false
    }

    /// Writes the set: count (u32, ≤ capacity), unrecorded packets (u64), the bitmap words
    /// (only when capacity > 0), then each entry: ip_version (u8), source and destination
    /// address (4 bytes each for IPv4, 16 for IPv6), ports (u16 each), protocol (u8), flow hash
    /// (u64), encapsulation kind (u8, `EncapKind` discriminant) and id (u32).
    pub fn encode(&self, w: &mut Writer<'_>) {
        w.u32(self.entries.len() as u32);
        w.u64(self.unrecorded_packets);
        for word in &self.unrecorded_bitmap {
            w.u64(*word);
        }
        if self.encoded.valid {
            // The workers encoded the list already (`share`): their parts in order.
            for piece in &self.encoded.pieces {
                w.bytes(self.encoded.bytes.get(piece.clone()).unwrap_or_default());
            }
            return;
        }
        let mut buf = [0u8; MAX_ENTRY_BYTES];
        for e in &self.entries {
            let n = encode_entry(e, &mut buf);
            w.bytes(buf.get(..n).unwrap_or_default());
        }
    }

    /// Reads a set written by [`FlowSet::encode`] for a point configured with `capacity`. The
    /// count is checked against the capacity and the remaining input before anything is read;
    /// the only allocation is the capacity-sized table.
    pub fn decode(capacity: u32, r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let count = r.u32()? as usize;
        if count > capacity as usize {
            return Err(DecodeError::Invalid {
                field: "lds.flows.count",
                reason: format!("{count} flows exceed the configured capacity {capacity}"),
            });
        }
        let unrecorded_packets = r.u64()?;
        let words = if capacity == 0 { 0 } else { BITMAP_WORDS };
        r.require(words * 8 + count.saturating_mul(MIN_ENTRY_BYTES))?;
        let mut set = FlowSet::new(capacity);
        set.unrecorded_packets = unrecorded_packets;
        for word in set.unrecorded_bitmap.iter_mut() {
            *word = r.u64()?;
        }
        for _ in 0..count {
            let version = r.u8()?;
            let mut key = FlowKey { ip_version: version, ..FlowKey::default() };
            match version {
                4 => {
                    key.src_addr = v4_mapped(r.bytes(4)?);
                    key.dst_addr = v4_mapped(r.bytes(4)?);
                }
                6 => {
                    key.src_addr.copy_from_slice(r.bytes(16)?);
                    key.dst_addr.copy_from_slice(r.bytes(16)?);
                }
                v => {
                    return Err(DecodeError::Invalid {
                        field: "lds.flows.ip_version",
                        reason: format!("{v} is neither 4 nor 6"),
                    });
                }
            }
            key.src_port = r.u16()?;
            key.dst_port = r.u16()?;
            key.protocol = r.u8()?;
            let flow_hash = r.u64()?;
            let kind = r.u8()?;
            let kind = EncapKind::from_u8(kind).ok_or_else(|| DecodeError::Invalid {
                field: "lds.flows.encap",
                reason: format!("{kind} is not an encapsulation kind"),
            })?;
            let encap = Encap::new(kind, r.u32()?);
            match set.insert(FlowEntry { key, flow_hash, encap }) {
                // A gathered list names a flow once per worker that recorded it: the first
                // entry stands, as a merge of the workers' sets would have kept it.
                InsertOutcome::Added | InsertOutcome::Present => {}
                InsertOutcome::Full => {
                    return Err(DecodeError::Invalid {
                        field: "lds.flows.count",
                        reason: "more flows than the table holds".into(),
                    });
                }
            }
        }
        Ok(set)
    }
}

/// True when a slot with tag `t` holds no flow of `generation` (a function of the two, so that
/// [`FlowSet::insert`] can ask while it holds the slot mutably).
#[inline(always)]
fn free(t: u64, generation: u64) -> bool {
    t & GENERATION_MASK != generation
}

/// Writes one entry as [`FlowSet::encode`] lays it out into the front of `out`; its length.
#[inline]
fn encode_entry(e: &FlowEntry, out: &mut [u8; MAX_ENTRY_BYTES]) -> usize {
    if e.key.ip_version == 4 { encode_entry_with::<4>(e, out) } else { encode_entry_with::<16>(e, out) }
}

/// [`encode_entry`] for addresses of `A` bytes (4 or 16). Every range is a constant within the
/// 51-byte array (1 + 2·16 + 2 + 2 + 1 + 8 + 1 + 4), so nothing is checked at run time: writing
/// through a bounds-checked cursor cost 10.6 ns per entry against 7.9 (BENCHMARKS.md, W17
/// thirtieth session).
#[inline(always)]
fn encode_entry_with<const A: usize>(e: &FlowEntry, out: &mut [u8; MAX_ENTRY_BYTES]) -> usize {
    let k = &e.key;
    out[0] = k.ip_version;
    out[1..1 + A].copy_from_slice(&k.src_addr[16 - A..]);
    out[1 + A..1 + 2 * A].copy_from_slice(&k.dst_addr[16 - A..]);
    let at = 1 + 2 * A;
    out[at..at + 2].copy_from_slice(&k.src_port.to_le_bytes());
    out[at + 2..at + 4].copy_from_slice(&k.dst_port.to_le_bytes());
    out[at + 4] = k.protocol;
    out[at + 5..at + 13].copy_from_slice(&e.flow_hash.to_le_bytes());
    out[at + 13] = e.encap.kind as u8;
    out[at + 14..at + 18].copy_from_slice(&e.encap.id.to_le_bytes());
    at + 18
}

fn v4_mapped(b: &[u8]) -> [u8; 16] {
    let mut a = [0u8; 16];
    a[10] = 0xff;
    a[11] = 0xff;
    a[12..].copy_from_slice(b);
    a
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum InsertOutcome {
    Added,
    Present,
    Full,
}

/// Two sets are equal when they hold the same flows and counters, whatever their table layout
/// (which depends on insertion order), and whether or not they were gathered: a gathered list
/// counts as its flows' first entries.
impl PartialEq for FlowSet {
    fn eq(&self, other: &Self) -> bool {
        if self.capacity != other.capacity
            || self.unrecorded_packets != other.unrecorded_packets
            || self.unrecorded_bitmap != other.unrecorded_bitmap
        {
            return false;
        }
        let distinct = |s: &FlowSet| {
            let mut seen = std::collections::HashSet::new();
            let mut v: Vec<FlowEntry> =
                s.entries.iter().filter(|e| seen.insert(s.tag_of(e.flow_hash))).copied().collect();
            v.sort_unstable();
            v
        };
        distinct(self) == distinct(other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::IpAddr;

    #[test]
    fn a_clone_keeps_the_reservation_so_recording_never_reallocates() {
        let template = FlowSet::new(300);
        let mut c = template.clone();
        let before = c.entries.as_ptr();
        for i in 0..300u32 {
            c.record(&key(i), u64::from(i).wrapping_mul(0x9e37_79b9_7f4a_7c15), Encap::NONE);
        }
        assert_eq!(c.len(), 300);
        assert_eq!(c.entries.as_ptr(), before, "recording into a clone reallocated its entries");
        assert_eq!(c.clone().entries.capacity(), 300);
    }

    fn key(i: u32) -> FlowKey {
        let src: IpAddr = if i.is_multiple_of(3) {
            IpAddr::V6(std::net::Ipv6Addr::from(u128::from(i) << 64 | 1))
        } else {
            IpAddr::V4(std::net::Ipv4Addr::from(0x0a00_0000 | i))
        };
        let dst: IpAddr =
            if i.is_multiple_of(3) { "2001:db8::2".parse().unwrap() } else { "192.168.0.1".parse().unwrap() };
        FlowKey::new(src, dst, (i % 65_000) as u16, 443, 6)
    }

    /// Slots holding a flow of the current epoch.
    fn occupied(s: &FlowSet) -> usize {
        s.tags.iter().filter(|&&t| !s.is_free(t)).count()
    }

    /// Clearing frees every slot, whatever the flows and however long their probe chains
    /// (here every flow hash has the same home slot): the flows are gone and new ones go
    /// where they would in an empty table.
    #[test]
    fn clear_frees_every_slot() {
        for flows in [0u32, 1, 40, 256, 257, 9000] {
            let mut s = FlowSet::new(12_000);
            assert_eq!(s.tags.len(), 1 << 14);
            for i in 0..flows {
                let e = entry(i);
                // Small hashes all map to slot 0 (`reduce` keeps the high bits).
                s.record(&e.key, u64::from(i + 1) << GENERATION_BITS, e.encap);
            }
            assert_eq!((s.len(), occupied(&s)), (flows as usize, flows as usize));
            s.clear();
            assert_eq!(occupied(&s), 0, "{flows} flows: a slot kept its flow");
            assert!((0..flows).all(|i| !s.contains(u64::from(i + 1) << GENERATION_BITS)));
            assert_eq!(s, FlowSet::new(12_000));
            let e = entry(7);
            s.record(&e.key, e.flow_hash, e.encap);
            assert!(s.contains(e.flow_hash) && s.len() == 1);
        }
    }

    /// Over more epochs than there are generations (the table is zeroed when they run out),
    /// with flows whose slots are reused from epoch to epoch: each epoch's set holds exactly
    /// its own flows, and a flow of an earlier epoch is never found again, neither in the
    /// slot it left nor past it in a probe chain.
    #[test]
    fn generations_forget_every_earlier_epoch_and_wrap_around() {
        let mut s = FlowSet::new(64);
        assert_eq!(s.tags.len(), 128);
        for epoch in 0..3 * GENERATION_MAX as u32 + 5 {
            // A third of the hashes share one home slot: chains that cross earlier epochs'
            // tags; the rest move through the table from epoch to epoch.
            let flows: Vec<u64> = (0..48u32)
                .map(|i| {
                    if i % 3 == 0 {
                        u64::from(epoch * 48 + i + 1) << GENERATION_BITS
                    } else {
                        entry(epoch * 48 + i).flow_hash
                    }
                })
                .collect();
            for (i, &h) in flows.iter().enumerate() {
                s.record(&key(i as u32), h, Encap::NONE);
            }
            assert_eq!((s.len(), occupied(&s)), (48, 48), "epoch {epoch}");
            assert!(flows.iter().all(|&h| s.contains(h)), "epoch {epoch}");
            if epoch > 0 {
                let before = (0..48u32).map(|i| {
                    if i % 3 == 0 {
                        u64::from((epoch - 1) * 48 + i + 1) << GENERATION_BITS
                    } else {
                        entry((epoch - 1) * 48 + i).flow_hash
                    }
                });
                for h in before {
                    assert!(!s.contains(h) || flows.contains(&h), "epoch {epoch}: an earlier flow came back");
                }
            }
            s.clear();
            assert!(flows.iter().all(|&h| !s.contains(h)), "epoch {epoch}: cleared");
            assert!(
                s.tags.iter().all(|&t| t & GENERATION_MASK <= s.generation),
                "no slot from a later generation"
            );
        }
    }

    #[test]
    fn take_from_equals_clear_then_merge_and_keeps_a_probeable_layout() {
        // 16 384 slots: up to 1 024 flows are inserted, more are copied; 12 500 of 12 000 also
        // overflows. Half the hashes share slot 0, one long probe chain.
        for flows in [0u32, 3, 256, 1_024, 1_025, 5_000, 12_500] {
            // The two sets at different generations, each with earlier epochs' tags in its table.
            let mut other = FlowSet::new(12_000);
            for g in 0..3 {
                for i in 0..200 {
                    let e = entry(i + 60_000 + g * 1_000);
                    other.record(&e.key, e.flow_hash, e.encap);
                }
                other.clear();
            }
            for i in 0..flows {
                let e = entry(i);
                let h = if i % 2 == 0 { u64::from(i + 1) << GENERATION_BITS } else { e.flow_hash };
                other.record(&e.key, h, e.encap);
            }
            let mut stale = FlowSet::new(12_000);
            for _ in 0..5 {
                let e = entry(70_000);
                stale.record(&e.key, e.flow_hash, e.encap);
                stale.clear();
            }
            for i in 0..300 {
                let e = entry(i + 50_000);
                stale.record(&e.key, e.flow_hash, e.encap);
            }
            let mut expected = stale.clone();
            expected.clear();
            expected.merge(&other);
            let kept = other.clone();
            stale.take_from(&mut other);
            assert_eq!(stale, expected, "{flows} flows");
            assert_eq!(other, FlowSet::new(12_000), "{flows} flows: the source is emptied");
            assert_eq!(occupied(&other), 0, "{flows} flows: the source's table is free");
            assert!(
                kept.entries.iter().all(|e| !other.contains(e.flow_hash)),
                "{flows} flows: gone from the source"
            );
            assert!(kept.entries.iter().all(|e| stale.contains(e.flow_hash)), "{flows} flows: found");
            assert!(!stale.contains(entry(50_001).flow_hash), "{flows} flows: the old flows are gone");
            assert_eq!(occupied(&stale), stale.len(), "{flows} flows: one slot per flow");
            stale.clear();
            assert_eq!(occupied(&stale), 0, "{flows} flows: the copy clears");
        }
    }

    fn entry(i: u32) -> FlowEntry {
        let k = key(i);
        let encap = if i.is_multiple_of(4) { Encap::NONE } else { Encap::new(EncapKind::Vxlan, 5000 + i) };
        FlowEntry { key: k, flow_hash: k.hash(7), encap }
    }

    #[test]
    fn records_each_flow_once_and_counts_overflow() {
        let mut s = FlowSet::new(100);
        for round in 0..3 {
            for i in 0..150 {
                let e = entry(i);
                s.record(&e.key, e.flow_hash, e.encap);
                if round == 0 && i < 100 {
                    assert_eq!(s.len(), i as usize + 1);
                }
            }
        }
        assert_eq!(s.len(), 100);
        assert_eq!(s.unrecorded_packets(), 150);
        // 50 flows into 4096 bits: linear counting is within a few flows.
        let est = s.unrecorded_flows_estimate();
        assert!((est - 50.0).abs() < 5.0, "{est}");
        for i in 0..100 {
            assert!(s.contains(entry(i).flow_hash));
        }
        assert!(!s.contains(entry(120).flow_hash));
        assert_eq!(s.entries()[0], entry(0));
    }

    #[test]
    fn each_flow_keeps_the_encapsulation_of_its_first_packet_through_encoding() {
        let mut s = FlowSet::new(16);
        let (k, h) = (key(1), key(1).hash(7));
        let vni = Encap::new(EncapKind::Vxlan, 5001);
        s.record(&k, h, vni);
        s.record(&key(2), key(2).hash(7), Encap::NONE);
        // Later packets in another encapsulation (a re-tagged path) change nothing.
        s.record(&k, h, Encap::new(EncapKind::Vlan, 7));
        let mut out = Vec::new();
        s.encode(&mut Writer::new(&mut out));
        let back = FlowSet::decode(16, &mut Reader::new(&out)).unwrap();
        let encaps: Vec<Encap> = back.entries().iter().map(|e| e.encap).collect();
        assert_eq!(encaps, [vni, Encap::NONE]);
        // Every kind survives the encoding with its full id.
        let mut all = FlowSet::new(16);
        let kinds = [
            EncapKind::Vlan,
            EncapKind::Mpls,
            EncapKind::Pppoe,
            EncapKind::Gre,
            EncapKind::Vxlan,
            EncapKind::Gtpu,
        ];
        for (i, kind) in kinds.into_iter().enumerate() {
            let k = key(10 + i as u32);
            all.record(&k, k.hash(7), Encap::new(kind, u32::MAX - i as u32));
        }
        let mut out = Vec::new();
        all.encode(&mut Writer::new(&mut out));
        let back = FlowSet::decode(16, &mut Reader::new(&out)).unwrap();
        assert_eq!(back.entries(), all.entries());
    }

    #[test]
    fn zero_capacity_records_nothing() {
        let mut s = FlowSet::new(0);
        let e = entry(1);
        s.record(&e.key, e.flow_hash, e.encap);
        assert!(s.is_empty());
        assert_eq!(s.unrecorded_packets(), 0);
        assert_eq!(s.unrecorded_flows_estimate(), 0.0);
        assert!(!s.contains(e.flow_hash));
        let mut out = Vec::new();
        s.encode(&mut Writer::new(&mut out));
        assert_eq!(out.len(), 12);
        assert_eq!(FlowSet::decode(0, &mut Reader::new(&out)).unwrap(), s);
    }

    #[test]
    fn merge_is_the_union() {
        let mut all = FlowSet::new(1000);
        let mut a = FlowSet::new(1000);
        let mut b = FlowSet::new(1000);
        for i in 0..600 {
            let e = entry(i);
            all.record(&e.key, e.flow_hash, e.encap);
            if i % 2 == 0 { &mut a } else { &mut b }.record(&e.key, e.flow_hash, e.encap);
            if i % 5 == 0 {
                b.record(&e.key, e.flow_hash, e.encap);
            }
        }
        a.merge(&b);
        assert_eq!(a, all);
        // Beyond capacity the union is cut and the rest is counted as unrecorded flows.
        let mut small = FlowSet::new(400);
        small.merge(&all);
        assert_eq!(small.len(), 400);
        assert!((small.unrecorded_flows_estimate() - 200.0).abs() < 15.0);
        small.clear();
        assert!(small.is_empty());
        assert_eq!(small, FlowSet::new(400));
    }

    #[test]
    fn encoding_round_trips_and_refuses_bad_input() {
        let mut s = FlowSet::new(64);
        for i in 0..80 {
            let e = entry(i);
            s.record(&e.key, e.flow_hash, e.encap);
        }
        let mut out = Vec::new();
        s.encode(&mut Writer::new(&mut out));
        let mut r = Reader::new(&out);
        assert_eq!(FlowSet::decode(64, &mut r).unwrap(), s);
        r.finish().unwrap();
        // Every truncation fails cleanly.
        for cut in 0..out.len() {
            let mut r = Reader::new(&out[..cut]);
            assert!(FlowSet::decode(64, &mut r).is_err(), "cut {cut}");
        }
        // A count above the receiver's capacity is refused before anything is read.
        assert!(matches!(
            FlowSet::decode(63, &mut Reader::new(&out)),
            Err(DecodeError::Invalid { field: "lds.flows.count", .. })
        ));
        // A huge count with little input is refused without allocating for it.
        let mut lie = Vec::new();
        let mut w = Writer::new(&mut lie);
        w.u32(1 << 24);
        w.u64(0);
        assert!(matches!(
            FlowSet::decode(1 << 24, &mut Reader::new(&lie)),
            Err(DecodeError::Truncated { .. })
        ));
        // A bad address family is refused.
        let header = 4 + 8 + BITMAP_WORDS * 8;
        let mut bad = out.clone();
        bad[header] = 5;
        assert!(matches!(
            FlowSet::decode(64, &mut Reader::new(&bad)),
            Err(DecodeError::Invalid { field: "lds.flows.ip_version", .. })
        ));
        // The first entry is entry(0), IPv6: its encapsulation kind follows 46 bytes of key
        // and flow hash.
        let mut bad = out.clone();
        bad[header + 46] = 99;
        assert!(matches!(
            FlowSet::decode(64, &mut Reader::new(&bad)),
            Err(DecodeError::Invalid { field: "lds.flows.encap", .. })
        ));
        // A flow listed twice (as a gathered set lists one that two workers recorded) is one
        // flow, its first entry kept.
        let mut two = FlowSet::new(4);
        two.record(&entry(1).key, entry(1).flow_hash, entry(1).encap);
        let mut buf = Vec::new();
        two.encode(&mut Writer::new(&mut buf));
        let mut again = buf[header..].to_vec();
        let last = again.len() - 1;
        again[last] ^= 1;
        buf[0] = 2;
        buf.extend_from_slice(&again);
        let decoded = FlowSet::decode(4, &mut Reader::new(&buf)).unwrap();
        assert_eq!(decoded, two);
        assert_eq!(decoded.entries(), two.entries());
    }

    fn set_of(capacity: u32, flows: impl IntoIterator<Item = u32>, tweak: u32) -> FlowSet {
        let mut s = FlowSet::new(capacity);
        for i in flows {
            let mut e = entry(i);
            e.encap.id = e.encap.id.wrapping_add(tweak);
            s.record(&e.key, e.flow_hash, e.encap);
        }
        s
    }

    /// [`FlowSet::gather`] of owned sets.
    fn gather(acc: &mut FlowSet, sets: &mut [FlowSet]) -> bool {
        let mut refs: Vec<&mut FlowSet> = sets.iter_mut().collect();
        acc.gather(&mut refs)
    }

    /// What the harvest did before gathering: the first set taken, the others merged.
    fn merged(sets: &mut [FlowSet], capacity: u32) -> FlowSet {
        let mut acc = FlowSet::new(capacity);
        let (first, rest) = sets.split_first_mut().unwrap();
        acc.take_from(first);
        for s in rest {
            acc.merge(s);
            s.clear();
        }
        acc
    }

    #[test]
    fn gathering_disjoint_sets_lists_what_merging_lists_in_its_order() {
        let make = || vec![set_of(300, 0..100, 0), set_of(300, 100..180, 0), set_of(300, 180..181, 0)];
        let mut by_merge = make();
        let want = merged(&mut by_merge, 300);
        let mut sets = make();
        let mut acc = set_of(300, 500..520, 0);
        assert!(gather(&mut acc, &mut sets));
        assert!(sets.iter().all(FlowSet::is_empty));
        assert_eq!(acc, want);
        assert_eq!(acc.entries(), want.entries());
        assert_eq!(acc.len(), 181);
        // Encoded alike, byte for byte.
        let (mut a, mut b) = (Vec::new(), Vec::new());
        acc.encode(&mut Writer::new(&mut a));
        want.encode(&mut Writer::new(&mut b));
        assert_eq!(a, b);
        // Probing and writing a gathered set index it first.
        assert!(acc.contains(entry(150).flow_hash));
        assert!(!acc.contains(entry(500).flow_hash));
        let e = entry(150);
        acc.record(&e.key, e.flow_hash, e.encap);
        let e = entry(600);
        acc.record(&e.key, e.flow_hash, e.encap);
        assert_eq!(acc.len(), 182);
        assert!(acc.contains(entry(600).flow_hash) && acc.contains(entry(3).flow_hash));
    }

    #[test]
    fn a_flow_in_two_gathered_sets_is_one_flow_with_the_first_set_s_entry() {
        let make = || vec![set_of(64, 0..30, 0), set_of(64, 20..40, 7)];
        let want = merged(&mut make(), 64);
        let mut sets = make();
        let mut acc = FlowSet::new(64);
        assert!(gather(&mut acc, &mut sets));
        // Listed once per set until something indexes it; equal all the same.
        assert_eq!(acc.len(), 50);
        assert_eq!(acc, want);
        let mut body = Vec::new();
        acc.encode(&mut Writer::new(&mut body));
        let decoded = FlowSet::decode(64, &mut Reader::new(&body)).unwrap();
        assert_eq!(decoded.entries(), want.entries());
        // Merging into it indexes it: the repeats go, the first entries stay.
        acc.merge(&FlowSet::new(64));
        assert_eq!(acc.entries(), want.entries());
        assert_eq!(acc.len(), 40);
    }

    #[test]
    fn gathering_refuses_what_might_not_fit_and_keeps_the_counters() {
        // Together more entries than the capacity: refused, nothing touched.
        let mut sets = vec![set_of(64, 0..40, 0), set_of(64, 40..80, 0)];
        let before = sets.clone();
        let mut acc = set_of(64, 0..3, 0);
        assert!(!gather(&mut acc, &mut sets));
        assert_eq!(sets, before);
        assert_eq!(acc.len(), 3);
        // Another capacity: refused.
        let mut odd = [set_of(32, 0..4, 0)];
        assert!(!gather(&mut acc, &mut odd));
        // A full set's counters and bitmap are kept, as a merge keeps them.
        let make = || vec![set_of(16, 0..30, 0), set_of(16, 0..0, 0)];
        let want = merged(&mut make(), 16);
        let mut sets = make();
        let mut acc = FlowSet::new(16);
        assert!(gather(&mut acc, &mut sets));
        assert_eq!(acc.unrecorded_packets(), want.unrecorded_packets());
        assert!(acc.unrecorded_packets() > 0);
        assert_eq!(acc.unrecorded_flows_estimate(), want.unrecorded_flows_estimate());
        assert_eq!(acc, want);
        assert_eq!(acc.len(), 16);
        // Gathering nothing leaves an empty, indexed set.
        assert!(acc.gather(&mut []));
        assert!(acc.is_empty());
        assert!(!acc.contains(entry(1).flow_hash));
    }
}
