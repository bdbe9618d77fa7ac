//! Late binding end to end (spec §6.4): choose m from the two points' MinHash signatures,
//! build both banks from the caches, reconcile, and on an incomplete decode rebuild with 2m
//! while attempts remain (spec §5.3).
//!
//! [`choose_buckets`] and [`sizing::next_attempt`] are the decisions the decoding point takes;
//! the peer protocol carries signatures, m and banks between the points. [`run_local`] drives
//! the same steps when both points' values are at hand (simulations, tests, offline
//! analysis). No I/O.

use super::estimator::{LocalCache, RdaReport, reconcile};
use super::peel::{PeelGuards, Side};
use super::sizing::{self, DifferenceEstimate, MinHashSignature};
use super::wire::encode_banks;
use super::{Rda, RdaConfig};
use crate::synopsis::estimate::NoEstimate;
use crate::synopsis::{Synopsis, SynopsisConfig};
use serde::{Deserialize, Serialize};

/// The decoding point's choice of m.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Sizing {
    /// The difference estimate it rests on.
    pub estimate: DifferenceEstimate,
    /// m for the first attempt.
    pub buckets_per_bank: usize,
}

/// m for the first attempt from the two points' signatures.
pub fn choose_buckets(cfg: &RdaConfig, sender: &MinHashSignature, receiver: &MinHashSignature) -> Sizing {
    let estimate = sizing::estimate_difference(sender, receiver);
    Sizing { estimate, buckets_per_bank: sizing::buckets_for(cfg, estimate.difference) }
}

/// One build-and-decode round.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attempt {
    /// m of this round.
    pub buckets_per_bank: usize,
    /// Whether reconciliation was complete.
    pub complete: bool,
    /// Ids decoded and repaired.
    pub decoded: u64,
    /// Bytes of the two banks encodings this round ships.
    pub bank_bytes: u64,
}

/// The result of a late-binding run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LateOutcome {
    /// The first choice of m.
    pub sizing: Sizing,
    /// Every round, in order.
    pub attempts: Vec<Attempt>,
    /// The report of the last round.
    pub report: RdaReport,
}

/// Late binding between two points whose caches are both at hand; `decoder` names the point
/// whose cache plays the local role (the paper: the sender).
pub fn run_local(sender: &Rda, receiver: &Rda, decoder: Side, guards: &PeelGuards) -> LateOutcome {
    let cfg = sender.config();
    let sizing = choose_buckets(cfg, &sender.signature(), &receiver.signature());
    let mut outcome =
        LateOutcome { sizing, attempts: Vec::new(), report: RdaReport::unavailable(NoEstimate::NoPackets) };
    if cfg.fingerprint() != receiver.config().fingerprint() {
        outcome.report = RdaReport::unavailable(NoEstimate::ConfigMismatch);
        return outcome;
    }
    let (local, remote) = match decoder {
        Side::Sender => (sender.cache(), receiver.cache()),
        Side::Receiver => (receiver.cache(), sender.cache()),
    };
    let mut m = sizing.buckets_per_bank;
    for attempt in 1u32.. {
        let a = sender.bind(m);
        let b = receiver.bind(m);
        let bank_bytes = (encode_banks(cfg, &a).len() + encode_banks(cfg, &b).len()) as u64;
        let mut report = reconcile(&a, &b, LocalCache { side: decoder, cache: local }, remote, guards);
        report.choose_std_dev(cfg.std_dev);
        report.note_duplicates(sender.counters(), receiver.counters());
        let complete = report.reconciliation.complete;
        outcome.attempts.push(Attempt {
            buckets_per_bank: m,
            complete,
            decoded: report.reconciliation.decoded,
            bank_bytes,
        });
        outcome.report = report;
        match (complete, sizing::next_attempt(cfg, m, attempt)) {
            (false, Some(next)) => m = next,
            _ => break,
        }
    }
    outcome
}
