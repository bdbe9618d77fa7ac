//! RDA at the peer: reconciliation with the timestamp look-ups answered by the points over
//! their connections, and late binding over the network.
//!
//! The collector holds neither point's cache, so both sides of [`reconcile`] are remote. One
//! round trip per peeled candidate would be far too slow, so reconciliation runs in rounds:
//! each round runs [`reconcile`] against the answers gathered so far, notes every id it asked
//! about and does not have, and fetches those ids from the points in one batched request per
//! point. A round in which every question had an answer is exactly the reconciliation a
//! local cache would have given (the peeling is deterministic given the answers, and every
//! answer used is the point's true one): that round's report is the result.
//!
//! Late binding (spec §6.4): the decoder chooses m from the two signatures the epochs
//! carried, asks both points to build their banks with that m ([`CacheService::bind`]),
//! reconciles, and retries with 2m while the decode is incomplete and attempts remain.

use super::config::SegmentInfo;
use crate::report::line::{RdaAttempt, RdaProcess};
use crate::wire::{CacheRef, LookupStatus};
use std::cell::RefCell;
use std::collections::HashMap;
use std::time::{Duration, Instant};
use wirelat_dataplane::synopsis::estimate::NoEstimate;
use wirelat_dataplane::synopsis::rda::{
    Banks, LocalCache, MinHashSignature, PeelGuards, Rda, RdaConfig, RdaReport, Side, TimestampSource, late,
    reconcile, sizing, wire as rda_wire,
};
use wirelat_dataplane::synopsis::{Synopsis, SynopsisConfig};

/// Most reconciliation rounds before the look-ups are declared not converging.
pub const MAX_ROUNDS: u32 = 64;
/// Most ids per look-up request (keeps every frame far below the body cap).
const IDS_PER_REQUEST: usize = 100_000;

/// Answers look-ups and binds for the points' retained caches (over the network, or locally
/// for an in-process point).
pub trait CacheService: Send + Sync {
    /// The timestamps of `ids` in the cache `at`.
    fn lookup(
        &self,
        at: CacheRef,
        ids: &[u64],
        deadline: Instant,
    ) -> Result<(LookupStatus, Vec<Option<u64>>), String>;
    /// Banks with `m` buckets per bank built from the cache `at` (`rda::wire::encode_banks`).
    fn bind(&self, at: CacheRef, m: u32, deadline: Instant) -> Result<(LookupStatus, Vec<u8>), String>;
}

/// One segment epoch to reconcile.
pub struct RdaJob {
    /// The segment.
    pub seg: SegmentInfo,
    /// The epoch.
    pub epoch: u64,
    /// The upstream point's value (an empty one when it had no packets).
    pub sender: Rda,
    /// The downstream point's value.
    pub receiver: Rda,
    /// Which sides sent no synopsis (upstream, downstream): they had no packets in the epoch,
    /// so they hold no cache and are not asked (they may have gone away already).
    pub absent: [bool; 2],
    /// Peeling guards.
    pub guards: PeelGuards,
    /// How long the look-ups may take in total.
    pub timeout: Duration,
}

/// What came of a job.
pub struct RdaResult {
    /// The estimate.
    pub report: RdaReport,
    /// How it was reached (rounds, look-ups, late-binding attempts); `None` when no look-up
    /// was made.
    pub process: Option<RdaProcess>,
    /// Why the look-ups failed, if they did (the report then carries no estimate).
    pub failure: Option<String>,
    /// Look-up requests answered, answered without a cache, rounds run.
    pub lookups_ok: u64,
    /// See `lookups_ok`.
    pub lookups_no_cache: u64,
    /// See `lookups_ok`.
    pub rounds: u64,
    /// Points that sent a synopsis with packets yet answered a look-up without a timestamp
    /// cache (lost in a crash, or expired): the reconciliation took their ids as unseen, so
    /// the record is incomplete and its loss was not measured.
    pub missing_caches: Vec<u32>,
}

/// What a point answered so far; records the ids asked for and not yet known.
#[derive(Default)]
struct Answers {
    known: HashMap<u64, Option<u64>>,
    missing: RefCell<Vec<u64>>,
}

impl TimestampSource for Answers {
    fn lookup(&self, ids: &[u64], out: &mut Vec<Option<u64>>) {
        out.clear();
        for id in ids {
            match self.known.get(id) {
                Some(v) => out.push(*v),
                None => {
                    self.missing.borrow_mut().push(*id);
                    out.push(None);
                }
            }
        }
    }
}

impl Answers {
    fn take_missing(&self) -> Vec<u64> {
        let mut v = std::mem::take(&mut *self.missing.borrow_mut());
        v.sort_unstable();
        v.dedup();
        v.retain(|id| !self.known.contains_key(id));
        v
    }
}

struct Stats {
    ok: u64,
    no_cache: u64,
    /// Points that answered without a cache (absent points included).
    no_cache_points: Vec<u32>,
    rounds: u64,
    ids: u64,
}

fn fetch(
    svc: &dyn CacheService,
    at: CacheRef,
    ids: Vec<u64>,
    into: &mut Answers,
    deadline: Instant,
    st: &mut Stats,
) -> Result<(), String> {
    for chunk in ids.chunks(IDS_PER_REQUEST) {
        let (status, answers) = svc.lookup(at, chunk, deadline)?;
        st.ids += chunk.len() as u64;
        match status {
            LookupStatus::Ok if answers.len() == chunk.len() => {
                st.ok += 1;
                into.known.extend(chunk.iter().copied().zip(answers));
            }
            LookupStatus::Ok => {
                return Err(format!("point {} answered {} of {} ids", at.point, answers.len(), chunk.len()));
            }
            // No cache (the point had no packets in the epoch, or the cache expired): it saw
            // none of these ids as far as it can tell.
            LookupStatus::NoCache => {
                st.no_cache += 1;
                if !st.no_cache_points.contains(&at.point) {
                    st.no_cache_points.push(at.point);
                }
                into.known.extend(chunk.iter().map(|&id| (id, None)));
            }
            LookupStatus::Refused => return Err(format!("point {} refused the look-up", at.point)),
        }
    }
    Ok(())
}

/// [`reconcile`] with both caches remote, in rounds (see the module docs).
fn reconcile_remote(
    sender: &Banks,
    receiver: &Banks,
    svc: &dyn CacheService,
    at: (CacheRef, CacheRef),
    guards: &PeelGuards,
    deadline: Instant,
    st: &mut Stats,
) -> Result<RdaReport, String> {
    let (mut s_ans, mut r_ans) = (Answers::default(), Answers::default());
    for _ in 0..MAX_ROUNDS {
        st.rounds += 1;
        let report =
            reconcile(sender, receiver, LocalCache { side: Side::Sender, cache: &s_ans }, &r_ans, guards);
        let (ms, mr) = (s_ans.take_missing(), r_ans.take_missing());
        if ms.is_empty() && mr.is_empty() {
            return Ok(report);
        }
        fetch(svc, at.0, ms, &mut s_ans, deadline, st)?;
        fetch(svc, at.1, mr, &mut r_ans, deadline, st)?;
    }
    Err(format!("look-ups did not converge in {MAX_ROUNDS} rounds"))
}

fn bound_banks(
    svc: &dyn CacheService,
    cfg: &RdaConfig,
    at: CacheRef,
    m: usize,
    deadline: Instant,
) -> Result<Banks, String> {
    let (status, bytes) = svc.bind(at, m as u32, deadline)?;
    match status {
        LookupStatus::Ok => {
            rda_wire::decode_banks(cfg, &bytes).map_err(|e| format!("point {}'s banks: {e}", at.point))
        }
        LookupStatus::NoCache => Ok(Banks::new(cfg, m)),
        LookupStatus::Refused => Err(format!("point {} refused to build banks with m = {m}", at.point)),
    }
}

/// Answers for the sides without a synopsis locally (no packets, so no cache).
struct SkipAbsent<'a> {
    inner: &'a dyn CacheService,
    absent: Vec<u32>,
}

impl CacheService for SkipAbsent<'_> {
    fn lookup(
        &self,
        at: CacheRef,
        ids: &[u64],
        deadline: Instant,
    ) -> Result<(LookupStatus, Vec<Option<u64>>), String> {
        if self.absent.contains(&at.point) {
            return Ok((LookupStatus::NoCache, Vec::new()));
        }
        self.inner.lookup(at, ids, deadline)
    }

    fn bind(&self, at: CacheRef, m: u32, deadline: Instant) -> Result<(LookupStatus, Vec<u8>), String> {
        if self.absent.contains(&at.point) {
            return Ok((LookupStatus::NoCache, Vec::new()));
        }
        self.inner.bind(at, m, deadline)
    }
}

/// Runs a job to the end (blocking on look-ups).
pub fn run(job: &RdaJob, svc: &dyn CacheService) -> RdaResult {
    let absent: Vec<u32> = [job.seg.upstream, job.seg.downstream]
        .into_iter()
        .zip(job.absent)
        .filter_map(|(p, a)| a.then_some(p))
        .collect();
    let skip = SkipAbsent { inner: svc, absent: absent.clone() };
    let svc: &dyn CacheService = &skip;
    let cfg = job.sender.config().clone();
    let deadline = Instant::now() + job.timeout;
    let at = (
        CacheRef { point: job.seg.upstream, segment: job.seg.id, epoch: job.epoch },
        CacheRef { point: job.seg.downstream, segment: job.seg.id, epoch: job.epoch },
    );
    let mut st = Stats { ok: 0, no_cache: 0, no_cache_points: Vec::new(), rounds: 0, ids: 0 };
    let finish =
        |mut report: RdaReport, process: Option<RdaProcess>, failure: Option<String>, st: &Stats| RdaResult {
            report: {
                report.choose_std_dev(cfg.std_dev);
                report.note_duplicates(job.sender.counters(), job.receiver.counters());
                report
            },
            process,
            failure,
            lookups_ok: st.ok,
            lookups_no_cache: st.no_cache,
            rounds: st.rounds,
            missing_caches: st.no_cache_points.iter().copied().filter(|p| !absent.contains(p)).collect(),
        };
    if cfg.fingerprint() != job.receiver.config().fingerprint() {
        return finish(RdaReport::unavailable(NoEstimate::ConfigMismatch), None, None, &st);
    }
    if !cfg.is_late_binding() {
        let (Some(a), Some(b)) = (job.sender.banks(), job.receiver.banks()) else {
            let r = RdaReport::unavailable(NoEstimate::Other {
                detail: "online RDA values without banks".into(),
            });
            return finish(r, None, None, &st);
        };
        let r = reconcile_remote(a, b, svc, at, &job.guards, deadline, &mut st);
        let process = Some(RdaProcess::Online {
            rounds: st.rounds,
            lookup_requests: st.ok + st.no_cache,
            ids_looked_up: st.ids,
            no_cache: st.no_cache,
        });
        return match r {
            Ok(report) => finish(report, process, None, &st),
            Err(e) => {
                finish(RdaReport::unavailable(NoEstimate::Other { detail: e.clone() }), process, Some(e), &st)
            }
        };
    }
    let sizing = late::choose_buckets(&cfg, &job.sender.signature(), &job.receiver.signature());
    let mut m = sizing.buckets_per_bank;
    let mut attempts = Vec::new();
    let mut last = RdaReport::unavailable(NoEstimate::NoPackets);
    let mut failure = None;
    for attempt in 1u32.. {
        let r = bound_banks(svc, &cfg, at.0, m, deadline)
            .and_then(|a| Ok((a, bound_banks(svc, &cfg, at.1, m, deadline)?)))
            .and_then(|(a, b)| reconcile_remote(&a, &b, svc, at, &job.guards, deadline, &mut st));
        match r {
            Ok(report) => {
                let complete = report.reconciliation.complete;
                attempts.push(RdaAttempt {
                    buckets_per_bank: m,
                    complete,
                    decoded: report.reconciliation.decoded,
                });
                last = report;
                match (complete, sizing::next_attempt(&cfg, m, attempt)) {
                    (false, Some(next)) => m = next,
                    _ => break,
                }
            }
            Err(e) => {
                last = RdaReport::unavailable(NoEstimate::Other { detail: e.clone() });
                failure = Some(e);
                break;
            }
        }
    }
    let process = Some(RdaProcess::LateBinding {
        difference_estimate: sizing.estimate,
        attempts,
        rounds: st.rounds,
        lookup_requests: st.ok + st.no_cache,
        ids_looked_up: st.ids,
        no_cache: st.no_cache,
    });
    finish(last, process, failure, &st)
}

/// An empty epoch value of `cfg` for a point that had no packets: online banks of the
/// configured m, or (late binding) no banks and an empty signature.
pub fn empty_value(cfg: &RdaConfig) -> Result<Rda, String> {
    // A decoded value carries no cache; build the smallest one by decoding an empty encoding
    // of this configuration, so no cache of the configured capacity is allocated.
    let mut small = cfg.clone();
    small.cache_capacity = 1;
    let v = Rda::new(&small).map_err(|e| e.to_string())?;
    Rda::decode(cfg, &v.encode()).map_err(|e| e.to_string())
}

/// The signature an empty value of `cfg` carries (tests).
pub fn empty_signature(cfg: &RdaConfig) -> MinHashSignature {
    MinHashSignature::from_ids(std::iter::empty(), sizing::signature_len(cfg), cfg.minhash_seed())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;
    use wirelat_dataplane::synopsis::rda::{self, TimestampCache, banks_from_cache};

    /// Answers from two in-memory caches, counting requests.
    struct Local {
        caches: HashMap<u32, TimestampCache>,
        cfg: RdaConfig,
        requests: Mutex<u64>,
    }

    impl CacheService for Local {
        fn lookup(
            &self,
            at: CacheRef,
            ids: &[u64],
            _: Instant,
        ) -> Result<(LookupStatus, Vec<Option<u64>>), String> {
            *self.requests.lock().unwrap() += 1;
            let Some(c) = self.caches.get(&at.point) else { return Ok((LookupStatus::NoCache, vec![])) };
            Ok((LookupStatus::Ok, ids.iter().map(|&id| c.get(id)).collect()))
        }
        fn bind(&self, at: CacheRef, m: u32, _: Instant) -> Result<(LookupStatus, Vec<u8>), String> {
            let Some(c) = self.caches.get(&at.point) else { return Ok((LookupStatus::NoCache, vec![])) };
            Ok((
                LookupStatus::Ok,
                rda_wire::encode_banks(&self.cfg, &banks_from_cache(&self.cfg, c, m as usize)),
            ))
        }
    }

    /// Two points' values: n packets, `lost` of them lost, `late` reordered out of the epoch.
    fn points(cfg: &RdaConfig, n: u64, lost: u64, extra: u64) -> (Rda, Rda) {
        let mut a = Rda::new(cfg).unwrap();
        let mut b = Rda::new(cfg).unwrap();
        for i in 0..n {
            let id = wirelat_dataplane::synopsis::hash::mix64(i + 1);
            a.update_raw(id, 0, 1_000 + i * 10);
            if i >= lost {
                b.update_raw(id, 0, 1_000 + i * 10 + 500 + (i % 7) * 30);
            }
        }
        for j in 0..extra {
            b.update_raw(wirelat_dataplane::synopsis::hash::mix64(1 << 40 | j), 0, 5_000 + j);
        }
        (a, b)
    }

    fn seg() -> SegmentInfo {
        SegmentInfo { id: 1, upstream: 1, downstream: 2, direction: wirelat_records::Direction::Forward }
    }

    fn job(cfg: &RdaConfig, a: &Rda, b: &Rda) -> RdaJob {
        RdaJob {
            seg: seg(),
            epoch: 0,
            sender: Rda::decode(cfg, &a.encode()).unwrap(),
            receiver: Rda::decode(cfg, &b.encode()).unwrap(),
            absent: [false, false],
            guards: PeelGuards::default(),
            timeout: Duration::from_secs(5),
        }
    }

    #[test]
    fn remote_rounds_give_exactly_the_local_reconciliation() {
        let cfg = RdaConfig::online(2, 512, 1 << 14);
        let (a, b) = points(&cfg, 3_000, 150, 40);
        let direct = rda::estimate(
            &a,
            &b,
            LocalCache { side: Side::Sender, cache: a.cache() },
            b.cache(),
            &PeelGuards::default(),
        );
        // k = 2 peeling can stall on a cycle; what matters is equality with the local run, and
        // that it did real work: 150 lost and 40 extra ids, nearly all decoded.
        assert!(direct.reconciliation.decoded >= 180, "{:?}", direct.reconciliation);
        let svc = Local {
            caches: HashMap::from([(1, a.cache().clone()), (2, b.cache().clone())]),
            cfg: cfg.clone(),
            requests: Mutex::new(0),
        };
        let r = run(&job(&cfg, &a, &b), &svc);
        assert_eq!(r.failure, None);
        assert_eq!(r.report, direct);
        assert!(r.rounds >= 2 && r.rounds < u64::from(MAX_ROUNDS), "rounds {}", r.rounds);
        // Batched: far fewer requests than the 190 ids decoded.
        assert!(*svc.requests.lock().unwrap() < 2 * r.rounds, "{}", *svc.requests.lock().unwrap());
    }

    #[test]
    fn late_binding_over_the_service_equals_the_library_run() {
        let cfg = RdaConfig::late_binding(2, 1 << 14);
        let (a, b) = points(&cfg, 4_000, 300, 20);
        let local = late::run_local(&a, &b, Side::Sender, &PeelGuards::default());
        let svc = Local {
            caches: HashMap::from([(1, a.cache().clone()), (2, b.cache().clone())]),
            cfg: cfg.clone(),
            requests: Mutex::new(0),
        };
        let r = run(&job(&cfg, &a, &b), &svc);
        assert_eq!(r.failure, None);
        assert_eq!(r.report, local.report);
        let Some(RdaProcess::LateBinding { attempts, .. }) = &r.process else { panic!("{:?}", r.process) };
        assert_eq!(attempts.len(), local.attempts.len());
    }

    #[test]
    fn a_present_point_without_its_cache_is_reported_missing_and_an_absent_one_is_not() {
        let cfg = RdaConfig::online(2, 512, 1 << 14);
        let (a, b) = points(&cfg, 2_000, 100, 0);
        // Point 1 (the sender) sent its synopsis, then crashed and lost its retained caches.
        let svc = Local {
            caches: HashMap::from([(2, b.cache().clone())]),
            cfg: cfg.clone(),
            requests: Mutex::new(0),
        };
        let r = run(&job(&cfg, &a, &b), &svc);
        assert_eq!(r.failure, None);
        assert_eq!(r.missing_caches, vec![1]);
        // Both caches there: nothing missing.
        let svc = Local {
            caches: HashMap::from([(1, a.cache().clone()), (2, b.cache().clone())]),
            cfg: cfg.clone(),
            requests: Mutex::new(0),
        };
        assert!(run(&job(&cfg, &a, &b), &svc).missing_caches.is_empty());
        // A point with no packets has no cache by design: not missing.
        let empty = empty_value(&cfg).unwrap();
        let mut j = job(&cfg, &a, &empty);
        j.receiver = empty;
        j.absent = [false, true];
        let svc = Local {
            caches: HashMap::from([(1, a.cache().clone())]),
            cfg: cfg.clone(),
            requests: Mutex::new(0),
        };
        assert!(run(&j, &svc).missing_caches.is_empty());
    }

    #[test]
    fn an_absent_receiver_is_full_loss_and_a_failing_service_is_reported() {
        let cfg = RdaConfig::online(2, 512, 1 << 14);
        let (a, _) = points(&cfg, 200, 0, 0);
        let empty = empty_value(&cfg).unwrap();
        let svc = Local {
            caches: HashMap::from([(1, a.cache().clone())]),
            cfg: cfg.clone(),
            requests: Mutex::new(0),
        };
        let mut j = job(&cfg, &a, &empty);
        j.receiver = empty;
        j.absent = [false, true];
        let r = run(&j, &svc);
        assert_eq!(r.failure, None);
        // Every decoded id is a lost one (the receiver saw nothing); k = 2 may leave a few.
        assert!(r.report.reconciliation.lost.len() >= 190, "{:?}", r.report.reconciliation);
        assert!(r.report.reconciliation.reordered.is_empty());
        assert!(r.report.mean_ns.is_err(), "nothing arrived: no delay");
        struct Down;
        impl CacheService for Down {
            fn lookup(
                &self,
                _: CacheRef,
                _: &[u64],
                _: Instant,
            ) -> Result<(LookupStatus, Vec<Option<u64>>), String> {
                Err("point 1 is not connected".into())
            }
            fn bind(&self, _: CacheRef, _: u32, _: Instant) -> Result<(LookupStatus, Vec<u8>), String> {
                Err("no".into())
            }
        }
        let r = run(&j, &Down);
        assert!(r.failure.unwrap().contains("not connected"));
        assert!(r.report.mean_ns.is_err());
        assert_eq!(empty_signature(&cfg).set_size, 0);
    }
}
