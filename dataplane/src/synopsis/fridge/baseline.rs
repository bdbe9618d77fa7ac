//! The naive hash-indexed arrays the paper compares against (spec §6.3), for tests and the
//! reproduction; the appliance never runs them.
//!
//! - [`NaiveOverwrite`] (§2.1): every request overwrites its slot, every match counts 1. This
//!   is a p = 1 fridge without weights: the survivorship-biased estimator.
//! - [`LazyExpiry`] (Chen et al., the paper's reference 6 and its Fig 2/5 baseline): D stages
//!   of M/D slots with independent hashes; a request goes into the first stage whose slot is empty or holds an
//!   entry older than `t_exp`, else it is dropped; a response probes the stages and a match
//!   reports its delay (weight 1) and clears the slot. Chen et al.'s extra 2 s legitimacy cap is left
//!   out (it would only remove delays above 2 s).

use super::set::key_for;
use super::table::{Slot, index_and_sig};
use crate::synopsis::hash::{derive, mix64};

/// Always-overwrite hash-indexed array with unit weights.
#[derive(Clone, Debug)]
pub struct NaiveOverwrite {
    slots: Vec<Slot>,
    key: u64,
}

impl NaiveOverwrite {
    /// `slots` slots (≥ 1), hashes keyed by `seed`.
    pub fn new(slots: u32, seed: u64) -> Self {
        Self { slots: vec![Slot::default(); slots.max(1) as usize], key: key_for(derive(seed, 1)) }
    }

    /// A request.
    pub fn on_request(&mut self, id: u64, ts_ns: u64) {
        let (i, sig) = index_and_sig(mix64(id ^ self.key), self.slots.len() as u64);
        if let Some(s) = self.slots.get_mut(i) {
            *s = Slot { ts_ns, ctr: 0, sig };
        }
    }

    /// A response: the delay if its request is still there.
    pub fn on_response(&mut self, id: u64, ts_ns: u64) -> Option<u64> {
        let (i, sig) = index_and_sig(mix64(id ^ self.key), self.slots.len() as u64);
        let s = self.slots.get_mut(i)?;
        if s.sig != sig {
            return None;
        }
        let d = ts_ns.checked_sub(s.ts_ns);
        *s = Slot::default();
        d
    }
}

/// Lazy-expiry hash-indexed array with `stages` stages.
#[derive(Clone, Debug)]
pub struct LazyExpiry {
    stages: Vec<Vec<Slot>>,
    keys: Vec<u64>,
    t_exp_ns: u64,
}

impl LazyExpiry {
    /// `slots` slots in total split evenly over `stages` stages (each ≥ 1 slot), expiry
    /// threshold `t_exp_ns`.
    pub fn new(slots: u32, stages: u32, t_exp_ns: u64, seed: u64) -> Self {
        let stages = stages.max(1);
        let per = (slots / stages).max(1) as usize;
        Self {
            stages: (0..stages).map(|_| vec![Slot::default(); per]).collect(),
            keys: (0..stages).map(|s| key_for(derive(seed, 16 + u64::from(s)))).collect(),
            t_exp_ns,
        }
    }

    /// A request: written into the first stage whose slot is free or expired, else dropped.
    /// Returns whether it was stored.
    pub fn on_request(&mut self, id: u64, ts_ns: u64) -> bool {
        for (stage, key) in self.stages.iter_mut().zip(&self.keys) {
            let (i, sig) = index_and_sig(mix64(id ^ key), stage.len() as u64);
            if let Some(s) = stage.get_mut(i)
                && (s.sig == 0 || ts_ns.saturating_sub(s.ts_ns) > self.t_exp_ns)
            {
                *s = Slot { ts_ns, ctr: 0, sig };
                return true;
            }
        }
        false
    }

    /// A response: the delay if a stage still holds its request (expired or not).
    pub fn on_response(&mut self, id: u64, ts_ns: u64) -> Option<u64> {
        for (stage, key) in self.stages.iter_mut().zip(&self.keys) {
            let (i, sig) = index_and_sig(mix64(id ^ key), stage.len() as u64);
            if let Some(s) = stage.get_mut(i)
                && s.sig == sig
            {
                let d = ts_ns.checked_sub(s.ts_ns);
                *s = Slot::default();
                return d;
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overwrite_keeps_only_the_newest() {
        let mut n = NaiveOverwrite::new(1, 3);
        n.on_request(1, 10);
        n.on_request(2, 20);
        assert_eq!(n.on_response(1, 30), None);
        assert_eq!(n.on_response(2, 30), Some(10));
        assert_eq!(n.on_response(2, 31), None);
    }

    #[test]
    fn lazy_expiry_drops_while_fresh_and_replaces_when_expired() {
        let mut l = LazyExpiry::new(1, 1, 100, 3);
        assert!(l.on_request(1, 0));
        assert!(!l.on_request(2, 50), "slot busy and not expired: dropped");
        assert_eq!(l.on_response(2, 60), None);
        assert!(l.on_request(3, 150), "expired entry is replaced");
        assert_eq!(l.on_response(1, 160), None);
        assert_eq!(l.on_response(3, 170), Some(20));
        // A second stage takes what the first refuses.
        let mut l = LazyExpiry::new(2, 2, 100, 3);
        assert!(l.on_request(1, 0));
        assert!(l.on_request(2, 1));
        assert!(!l.on_request(4, 2));
        assert_eq!(l.on_response(2, 5), Some(4));
    }
}
