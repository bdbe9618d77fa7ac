//! RDA tests, one submodule per concept: [`oracles`] (the spec's deterministic oracles:
//! hand-built differences, the paper's Fig. 2 and Fig. 4, the endless-loop case of P31, and the
//! estimate's refusals), [`estimates`] (bit-exact means against integer ground truth and seeded
//! statistical checks with tolerances from the spec's formulas), [`admission`] (repeated
//! identities and a full cache), [`shards`] (merge and the worker's logged path),
//! [`late_binding`] and [`encoding`]. Here: the configurations and point builders they share.

use super::StdDevEstimator;
use super::late::{self, run_local};
use super::sim::{self, Seen, Trace, TraceSpec};
use super::*;
use crate::sim::DelayModel;
use crate::synopsis::codec::DecodeError;
use crate::synopsis::estimate::NoEstimate;
use crate::synopsis::{Synopsis, SynopsisConfig};
use std::collections::{HashMap, HashSet};

fn online(k: u32, m: u32, cap: u64) -> RdaConfig {
    RdaConfig::online(k, m, cap)
}

fn point(cfg: &RdaConfig, seen: &[Seen]) -> Rda {
    let mut r = Rda::new(cfg).unwrap();
    for p in seen {
        r.update_raw(p.id, 0, p.ts_ns);
    }
    r
}

/// Online reconciliation decoded at the sender (the paper's roles).
fn run(cfg: &RdaConfig, sender: &[Seen], receiver: &[Seen], guards: &PeelGuards) -> RdaReport {
    let a = point(cfg, sender);
    let b = point(cfg, receiver);
    estimate(&a, &b, LocalCache { side: Side::Sender, cache: a.cache() }, b.cache(), guards)
}

fn seen(id: u64, ts_ns: u64) -> Seen {
    Seen { id, ts_ns }
}

fn sorted(mut v: Vec<u64>) -> Vec<u64> {
    v.sort_unstable();
    v
}

/// The paper's Fig. 2 packets. A sees P1..P6, B sees P1..P4, P6 and the straggler P9; P5 is
/// lost. Bucket contents of the figure: (P1,P2), P3, P4, P5|P9, P6 with T_A = (270, 150, 250,
/// 310, 330), T_B = (420, 260, 390, 760, 450). The figure gives bucket sums only, so P1 and P2
/// are split as 120→190 and 150→230 (any split with these sums gives the same answers).
fn fig2() -> (Vec<Seen>, Vec<Seen>) {
    let a = vec![seen(1, 120), seen(2, 150), seen(3, 150), seen(4, 250), seen(5, 310), seen(6, 330)];
    let b = vec![seen(1, 190), seen(2, 230), seen(3, 260), seen(4, 390), seen(6, 450), seen(9, 760)];
    (a, b)
}

mod admission;
mod encoding;
mod estimates;
mod late_binding;
mod oracles;
mod shards;
