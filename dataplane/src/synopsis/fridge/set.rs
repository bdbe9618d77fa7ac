//! A set of fridges measuring one exchange kind (spec §3.1, §4.2): routing of a request to at
//! most one fridge on one uniform coin, the per-fridge slot arrays and counters, and the
//! correction factor of each sample in log form.
//!
//! This is worker-lifetime state (the synopsis's `Carry`): it is never cleared at an epoch
//! boundary, because a clear would be an eviction the weights do not model (spec §7.4).
//! Every decision is a pure function of the pairing id and the configured seed:
//! the routing coin u comes from one keyed hash, slot index and signature from another, so the
//! three are independent (spec §2.2, P5, P9). Never allocates after construction, never panics.

use super::config::{FridgeSpec, WeightMode, validate_fridges};
use super::table::FridgeTable;
use crate::synopsis::ConfigError;
use crate::synopsis::hash::{derive, mix64};

/// Weights with ln c above this are not accumulated but counted (spec P8): c² must stay
/// finite in f64 with room for sums, and a survival probability below e^(−300) is never
/// realised by a real trace.
pub const MAX_LN_WEIGHT: f64 = 300.0;

const TWO_POW_64: f64 = 18_446_744_073_709_551_616.0;

/// The key that makes `mix64(id ^ key_for(seed))` equal to `derive(id, seed)`, with the
/// seed's own mixing done once instead of per packet.
#[inline]
pub fn key_for(seed: u64) -> u64 {
    mix64(seed ^ 0x9e37_79b9_7f4a_7c15)
}

/// One matched response: the paper's report tuple (k, t, c) with c kept as ln c.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    /// Fridge index k within the set.
    pub fridge: u8,
    /// Response time minus request time, ns.
    pub delay_ns: u64,
    /// Insertions (W1) or offered requests (W2) after the request, before the response.
    pub x: u64,
    /// ln c, c = 1/(probability that this pair is reported).
    pub ln_weight: f64,
}

impl Sample {
    /// The correction factor c (may be +∞ when `ln_weight` is huge; see [`MAX_LN_WEIGHT`]).
    pub fn weight(&self) -> f64 {
        self.ln_weight.exp()
    }
}

/// Where a pairing id lives in a set: computed once per packet by [`FridgeSet::locate`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Located {
    /// Fridge index.
    pub fridge: u8,
    /// Slot index in that fridge.
    pub index: u32,
    /// Signature.
    pub sig: u32,
}

/// What a request did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestOutcome {
    /// The coin sent it to no fridge.
    NotSampled,
    /// It was written into fridge `fridge` (overwriting whatever was there).
    Inserted {
        /// Fridge index.
        fridge: u8,
    },
}

/// What a response did.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ResponseOutcome {
    /// Its request's coin sent it to no fridge: no lookup.
    NotSampled,
    /// Routed to `fridge`, but the request is not there (evicted, never seen, or already
    /// answered).
    Unmatched {
        /// Fridge index.
        fridge: u8,
    },
    /// Matched: a sample. The slot is erased.
    Matched(Sample),
    /// Matched, but the response is stamped before its request (clock anomaly): erased,
    /// no sample.
    NegativeDelay {
        /// Fridge index.
        fridge: u8,
    },
}

#[derive(Clone, Copy, Debug, PartialEq)]
struct WeightParams {
    /// p_k as the integer coin realises it.
    p: f64,
    /// −ln p_k with the exact p the integer coin realises.
    ln_inv_p: f64,
    /// −ln(1 − 1/M) (W1) or −ln(1 − p/M) (W2): ln c grows by this per unit of x.
    ln_decay: f64,
}

/// The fridges of one exchange kind, with routing and weights.
#[repr(C, align(64))]
#[derive(Clone, Debug, PartialEq)]
pub struct FridgeSet {
    tables: Vec<FridgeTable>,
    /// Upper bound of u (as a 128-bit number, so 2⁶⁴ is representable) for each fridge: the
    /// request goes to the first fridge whose bound exceeds u.
    bounds: Vec<u128>,
    weights: Vec<WeightParams>,
    slot_key: u64,
    route_key: u64,
    /// One fridge with p = 1: every request enters it and the coin is not computed.
    always_first: bool,
    mode: WeightMode,
    /// Requests offered to the set (W2's x counts these).
    offered: u64,
    last_request_ts_ns: Option<u64>,
}

impl FridgeSet {
    /// A set of empty fridges; `seed` keys all its hashes.
    pub fn new(fridges: &[FridgeSpec], seed: u64, mode: WeightMode) -> Result<Self, ConfigError> {
        validate_fridges("fridges", fridges)?;
        let mut bounds = Vec::with_capacity(fridges.len());
        let mut weights = Vec::with_capacity(fridges.len());
        let mut cum = 0.0f64;
        let mut prev: u128 = 0;
        for f in fridges {
            cum += f.entry_probability;
            let b = if cum >= 1.0 { 1u128 << 64 } else { (cum * TWO_POW_64) as u128 };
            let b = b.max(prev);
            let p = (b - prev) as f64 / TWO_POW_64;
            let m = f64::from(f.slots);
            let ln_decay = match mode {
                WeightMode::Insertions => -(-1.0 / m).ln_1p(),
                WeightMode::Offered => -(-p / m).ln_1p(),
            };
            weights.push(WeightParams { p, ln_inv_p: -p.ln(), ln_decay });
            bounds.push(b);
            prev = b;
        }
        Ok(Self {
            tables: fridges.iter().map(|f| FridgeTable::new(f.slots)).collect(),
            always_first: bounds.first() == Some(&(1u128 << 64)),
            bounds,
            weights,
            slot_key: key_for(derive(seed, 1)),
            route_key: key_for(derive(seed, 2)),
            mode,
            offered: 0,
            last_request_ts_ns: None,
        })
    }

    /// Number of fridges.
    pub fn len(&self) -> usize {
        self.tables.len()
    }

    /// Always false (a set has at least one fridge).
    pub fn is_empty(&self) -> bool {
        self.tables.is_empty()
    }

    /// The fridges.
    pub fn tables(&self) -> &[FridgeTable] {
        &self.tables
    }

    /// Requests offered so far.
    pub fn offered(&self) -> u64 {
        self.offered
    }

    /// The entry probability fridge `k` really applies (the configured p rounded to the coin's
    /// 2⁻⁶⁴ grid; exact for dyadic p).
    pub fn entry_probability(&self, k: usize) -> f64 {
        self.weights.get(k).map_or(0.0, |w| w.p)
    }

    /// ln c for x in fridge `k`: ln c = −ln p_k + x·(−ln(1 − 1/M_k)) (W1) or
    /// x·(−ln(1 − p_k/M_k)) (W2).
    #[inline]
    pub fn ln_weight(&self, k: usize, x: u64) -> f64 {
        self.weights.get(k).map_or(f64::INFINITY, |w| w.ln_inv_p + w.ln_decay * x as f64)
    }

    /// The fridge of pairing id `id`, if any.
    #[inline]
    fn route(&self, id: u64) -> Option<usize> {
        if self.always_first {
            return Some(0);
        }
        let u = u128::from(mix64(id ^ self.route_key));
        self.bounds.iter().position(|b| u < *b)
    }

    /// Nanoseconds since the previous request of this set (0 for the first one and when
    /// timestamps go backwards); used to estimate the request rate.
    #[inline]
    fn gap(&mut self, ts_ns: u64) -> u64 {
        let gap = self.last_request_ts_ns.map_or(0, |last| ts_ns.saturating_sub(last));
        self.last_request_ts_ns = Some(ts_ns);
        gap
    }

    /// Where pairing id `id` lives: its fridge, slot index and signature, or `None` when its
    /// coin sends it to no fridge. One routing hash and one slot hash.
    #[inline]
    pub fn locate(&self, id: u64) -> Option<Located> {
        let k = self.route(id)?;
        let t = self.tables.get(k)?;
        let (index, sig) = t.locate(mix64(id ^ self.slot_key));
        Some(Located { fridge: k as u8, index: index as u32, sig })
    }

    /// Address of the slot pairing id `id` maps to, if any (a prefetch hint; never
    /// dereferenced here).
    #[inline(always)]
    pub fn prefetch_target(&self, id: u64) -> Option<*const u8> {
        let loc = self.locate(id)?;
        Some(self.tables.get(usize::from(loc.fridge))?.slot_ptr(loc.index as usize))
    }

    /// A request with pairing id `id` seen at `ts_ns`. Returns what it did and the time since
    /// the previous request.
    #[inline]
    pub fn on_request(&mut self, id: u64, ts_ns: u64) -> (RequestOutcome, u64) {
        let loc = self.locate(id);
        self.request_at(loc, ts_ns)
    }

    /// [`Self::on_request`] for a request already located with [`Self::locate`].
    #[inline]
    pub fn request_at(&mut self, loc: Option<Located>, ts_ns: u64) -> (RequestOutcome, u64) {
        let gap = self.gap(ts_ns);
        self.offered += 1;
        let Some(loc) = loc else { return (RequestOutcome::NotSampled, gap) };
        let offered = self.offered;
        let mode = self.mode;
        let Some(t) = self.tables.get_mut(usize::from(loc.fridge)) else {
            return (RequestOutcome::NotSampled, gap);
        };
        // Count this insertion first, then store the post-increment value (spec §3.3, P2).
        let ins = t.count_insertion();
        let ctr = match mode {
            WeightMode::Insertions => ins,
            WeightMode::Offered => offered,
        };
        t.insert_at(loc.index as usize, loc.sig, ts_ns, ctr);
        (RequestOutcome::Inserted { fridge: loc.fridge }, gap)
    }

    /// A response with pairing id `id` seen at `ts_ns`.
    #[inline]
    pub fn on_response(&mut self, id: u64, ts_ns: u64) -> ResponseOutcome {
        let loc = self.locate(id);
        self.response_at(loc, ts_ns)
    }

    /// [`Self::on_response`] for a response already located with [`Self::locate`].
    #[inline]
    pub fn response_at(&mut self, loc: Option<Located>, ts_ns: u64) -> ResponseOutcome {
        let Some(loc) = loc else { return ResponseOutcome::NotSampled };
        let k = usize::from(loc.fridge);
        let offered = self.offered;
        let mode = self.mode;
        let Some(t) = self.tables.get_mut(k) else { return ResponseOutcome::NotSampled };
        let now = match mode {
            WeightMode::Insertions => t.insertions(),
            WeightMode::Offered => offered,
        };
        let fridge = loc.fridge;
        let Some((req_ts, ctr)) = t.take_at(loc.index as usize, loc.sig) else {
            return ResponseOutcome::Unmatched { fridge };
        };
        if ts_ns < req_ts {
            return ResponseOutcome::NegativeDelay { fridge };
        }
        let x = u64::from((now as u32).wrapping_sub(ctr));
        ResponseOutcome::Matched(Sample {
            fridge,
            delay_ns: ts_ns - req_ts,
            x,
            ln_weight: self.ln_weight(k, x),
        })
    }

    /// The fridge and slot index pairing id `id` maps to, or `None` if its coin sends it to no
    /// fridge (for tests and diagnostics).
    pub fn slot_of(&self, id: u64) -> Option<(usize, usize)> {
        self.locate(id).map(|l| (usize::from(l.fridge), l.index as usize))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(slots: u32, p: f64) -> FridgeSpec {
        FridgeSpec { slots, entry_probability: p }
    }

    #[test]
    fn key_for_matches_derive() {
        for (id, seed) in [(0u64, 0u64), (1, 2), (u64::MAX, 12345)] {
            assert_eq!(mix64(id ^ key_for(seed)), derive(id, seed));
        }
    }

    #[test]
    fn routing_realises_the_entry_probabilities() {
        // Coin fractions over 200k ids: binomial sd √(p(1−p)/n) ≤ 0.0011; allow 5 sd.
        let set = FridgeSet::new(&[spec(16, 0.25), spec(16, 0.0625)], 7, WeightMode::Insertions).unwrap();
        let n = 200_000u64;
        let mut hits = [0u64; 3];
        for id in 0..n {
            hits[set.route(mix64(id)).unwrap_or(2)] += 1;
        }
        for (k, p) in [(0, 0.25), (1, 0.0625), (2, 0.6875)] {
            let f = hits[k] as f64 / n as f64;
            assert!((f - p).abs() < 5.0 * (p * (1.0 - p) / n as f64).sqrt(), "fridge {k}: {f}");
        }
        assert_eq!(set.entry_probability(0), 0.25);
        assert_eq!(set.entry_probability(1), 0.0625);
    }

    #[test]
    fn ln_weight_forms() {
        let w1 = FridgeSet::new(&[spec(2, 0.5)], 1, WeightMode::Insertions).unwrap();
        // W1, M = 2: c = p⁻¹·2^x.
        assert!((w1.ln_weight(0, 3).exp() - 16.0).abs() < 1e-12);
        let w2 = FridgeSet::new(&[spec(2, 0.5)], 1, WeightMode::Offered).unwrap();
        // W2: c = p⁻¹·(1 − p/M)^(−x) = 2·(4/3)^3.
        assert!((w2.ln_weight(0, 3).exp() - 2.0 * (4.0f64 / 3.0).powi(3)).abs() < 1e-12);
    }
}
