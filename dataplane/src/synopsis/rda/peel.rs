//! Reconciliation, part 1: the subtraction RDA (receiver − sender) and the guarded peeling
//! that lists its set difference (spec §4.1–§4.3 with P2, P3, P4 and P31).
//!
//! The paper's Algorithm 1 can loop forever on a falsely pure bucket (P31) and files the two
//! signs under the wrong names (P2). Here: Δ = −1 ⇒ sender-only ("lost"), Δ = +1 ⇒
//! receiver-only ("reordered"); a popped bucket is re-tested for purity; and the spec's
//! mandatory guards are on by default — an id is never extracted twice, every candidate is
//! checked against the decoding point's cache, its buckets in the other banks must be
//! non-empty, and the number of pops is capped (4·k·m + 16). Each guard can be switched off
//! for the ablation only. No I/O; allocates only here, at decode time.

use super::banks::{BankHash, Banks};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;

/// Which point of the segment a packet was seen at, alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    /// The upstream point A.
    Sender,
    /// The downstream point B.
    Receiver,
}

impl Side {
    /// The other point.
    pub fn other(self) -> Side {
        match self {
            Side::Sender => Side::Receiver,
            Side::Receiver => Side::Sender,
        }
    }
}

/// The peeling guards (spec §4.3, §8 P4/P31). All on by default; turning one off is for
/// experiments that show why it is there.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PeelGuards {
    /// Never extract the same id twice (P31, mandatory).
    pub extracted_set: bool,
    /// A sender-only candidate must be in the sender's cache and not in the receiver's, and
    /// vice versa, as far as the decoding point's own cache can tell (P4 a).
    pub validate_with_cache: bool,
    /// The candidate's bucket in every other bank must be non-empty (P4 c).
    pub other_banks_nonempty: bool,
    /// Most buckets popped from the queue; `None` means the spec's 4·k·m + 16.
    pub iteration_cap: Option<u64>,
}

impl Default for PeelGuards {
    fn default() -> Self {
        Self {
            extracted_set: true,
            validate_with_cache: true,
            other_banks_nonempty: true,
            iteration_cap: None,
        }
    }
}

impl PeelGuards {
    /// The paper's Algorithm 1 as printed (no guard at all) except for the iteration cap,
    /// which nothing may switch off.
    pub fn unguarded() -> Self {
        Self {
            extracted_set: false,
            validate_with_cache: false,
            other_banks_nonempty: false,
            iteration_cap: None,
        }
    }
}

/// One bucket of the subtraction RDA: XOR of the ids and count difference (receiver − sender).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SubBucket {
    /// ID_B ⊕ ID_A.
    pub id_xor: u64,
    /// Δ_B − Δ_A.
    pub count: i64,
}

impl SubBucket {
    fn is_empty(&self) -> bool {
        self.id_xor == 0 && self.count == 0
    }
}

/// The subtraction RDA of two points' banks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Difference {
    hash: BankHash,
    cells: Vec<SubBucket>,
}

/// What peeling found.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Peeled {
    /// Ids extracted with Δ = −1: seen only by the sender ("lost", spec §1.3).
    pub sender_only: Vec<u64>,
    /// Ids extracted with Δ = +1: seen only by the receiver ("reordered").
    pub receiver_only: Vec<u64>,
    /// Pure-looking candidates refused by the cache or other-bank guards.
    pub rejected_candidates: u64,
    /// Candidates refused because the id had been extracted already (P31).
    pub repeated_candidates: u64,
    /// Buckets popped from the queue.
    pub pops: u64,
    /// True when the iteration cap stopped peeling with work still queued.
    pub iteration_cap_hit: bool,
    /// Buckets of the subtraction RDA left non-empty.
    pub residual_buckets: u64,
    /// A lower bound on the ids left in the subtraction RDA (max over banks of
    /// Σ max(|Δ|, 2·[Δ = 0 ∧ ID ≠ 0])).
    pub undecoded_lower_bound: u64,
}

impl Peeled {
    /// Ids extracted, both sides.
    pub fn extracted(&self) -> usize {
        self.sender_only.len() + self.receiver_only.len()
    }
}

impl Difference {
    /// receiver − sender (spec §4.1); `None` when the two banks differ in k, m or seeds.
    pub fn between(sender: &Banks, receiver: &Banks) -> Option<Self> {
        if !sender.same_geometry(receiver) {
            return None;
        }
        let cells = sender
            .buckets()
            .iter()
            .zip(receiver.buckets())
            .map(|(a, b)| SubBucket { id_xor: a.id_xor ^ b.id_xor, count: b.count.wrapping_sub(a.count) })
            .collect();
        Some(Self { hash: *sender.hash(), cells })
    }

    /// The cells, bank after bank.
    pub fn cells(&self) -> &[SubBucket] {
        &self.cells
    }

    /// Pure test of spec §4.2: |Δ| = 1 and bank l's hash of the ID points back to bucket i.
    #[inline]
    fn is_pure(&self, l: usize, i: usize, c: SubBucket) -> bool {
        (c.count == 1 || c.count == -1) && c.id_xor != 0 && self.hash.index(l, c.id_xor) == i
    }

    /// Peels the difference (Algorithm 1 corrected). `accept(id, side)` is the cache check of
    /// guard P4 (a), asked only when `guards.validate_with_cache` is on: it must answer whether
    /// a packet seen only at `side` is consistent with what the decoding point knows.
    pub fn peel(&mut self, guards: &PeelGuards, accept: &mut dyn FnMut(u64, Side) -> bool) -> Peeled {
        let k = self.hash.banks();
        let m = self.hash.buckets_per_bank();
        let cap = guards.iteration_cap.unwrap_or(4 * (k as u64) * (m as u64) + 16);
        let mut out = Peeled::default();
        let mut queue: Vec<u32> = Vec::new();
        for (pos, c) in self.cells.iter().enumerate() {
            if self.is_pure(pos / m, pos % m, *c) {
                queue.push(pos as u32);
            }
        }
        let mut extracted: HashSet<u64> = HashSet::new();
        while out.pops < cap {
            let Some(pos) = queue.pop() else { break };
            out.pops += 1;
            let pos = pos as usize;
            let (l, i) = (pos / m, pos % m);
            let Some(&c) = self.cells.get(pos) else { continue };
            // P3: the bucket may have changed since it was queued.
            if !self.is_pure(l, i, c) {
                continue;
            }
            let id = c.id_xor;
            let sign = c.count;
            let side = if sign < 0 { Side::Sender } else { Side::Receiver };
            if guards.extracted_set && extracted.contains(&id) {
                out.repeated_candidates += 1;
                continue;
            }
            if guards.other_banks_nonempty && !self.other_banks_nonempty(id, l) {
                out.rejected_candidates += 1;
                continue;
            }
            if guards.validate_with_cache && !accept(id, side) {
                out.rejected_candidates += 1;
                continue;
            }
            if guards.extracted_set {
                extracted.insert(id);
            }
            match side {
                Side::Sender => out.sender_only.push(id),
                Side::Receiver => out.receiver_only.push(id),
            }
            for l2 in 0..k {
                let q = self.hash.index(l2, id);
                let p = l2 * m + q;
                if let Some(cell) = self.cells.get_mut(p) {
                    cell.id_xor ^= id;
                    cell.count = cell.count.wrapping_sub(sign);
                    let now = *cell;
                    if self.is_pure(l2, q, now) {
                        queue.push(p as u32);
                    }
                }
            }
        }
        out.iteration_cap_hit = out.pops >= cap && !queue.is_empty();
        out.residual_buckets = self.cells.iter().filter(|c| !c.is_empty()).count() as u64;
        out.undecoded_lower_bound = (0..k)
            .map(|l| {
                self.cells
                    .get(l * m..(l + 1) * m)
                    .unwrap_or(&[])
                    .iter()
                    .map(|c| match c.count {
                        0 if c.id_xor != 0 => 2,
                        n => n.unsigned_abs(),
                    })
                    .fold(0u64, u64::saturating_add)
            })
            .max()
            .unwrap_or(0);
        out
    }

    fn other_banks_nonempty(&self, id: u64, l: usize) -> bool {
        let m = self.hash.buckets_per_bank();
        (0..self.hash.banks())
            .filter(|&l2| l2 != l)
            .all(|l2| self.cells.get(l2 * m + self.hash.index(l2, id)).is_some_and(|c| !c.is_empty()))
    }
}
